//! The integration tests of `abi-test-support`, in one test binary (one link instead of
//! one per file): each former `tests/<name>.rs` is the module `<name>` here.

mod servers;
