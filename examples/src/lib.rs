//! The example modules, as a library so that their tests can run them in
//! process (`tests/in_process.rs`, with `abi-testkit`); the binaries in
//! `src/bin` wrap each in a `main` that reads the environment.

pub mod consumer;
pub mod provider;
