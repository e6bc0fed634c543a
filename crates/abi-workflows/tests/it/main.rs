//! The integration tests of `abi-workflows`, in one binary.

mod journal_differential;
