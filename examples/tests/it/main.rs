//! The integration tests of the examples, in one test binary (one link instead of
//! one per file): each former `tests/<name>.rs` is the module `<name>` here.

mod bad_config;
mod in_process;
mod reference_reads;
