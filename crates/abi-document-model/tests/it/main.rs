//! The integration tests of `abi-document-model`, in one test binary.

mod golden;
