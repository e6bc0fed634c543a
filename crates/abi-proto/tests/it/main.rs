//! The integration tests of `abi-proto`, in one test binary (one link instead of
//! one per file): each former `tests/<name>.rs` is the module `<name>` here.

mod descriptors;
mod golden;
mod golden_agent_model;
