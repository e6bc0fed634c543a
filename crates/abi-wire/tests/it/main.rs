//! The integration tests of `abi-wire`, in one test binary.

mod jobs_reference;
mod models_reference;
