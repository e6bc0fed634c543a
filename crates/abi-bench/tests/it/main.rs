//! The integration tests of `abi-bench`, in one test binary: `abi-bench
//! --smoke` (`quick`), `abi-bench documents --smoke` (`documents`),
//! `abi-bench jobs --smoke` (`jobs`) and `abi-bench agents --smoke`
//! (`agents`) end to end, checking the tables' shape
//! only (no timing is asserted). Shared table readers in `common`.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod agents;
mod apps;
mod common;
mod console;
mod documents;
mod jobs;
mod quick;
