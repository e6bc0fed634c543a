//! The `abi-discovery` binary (being written).
fn main() {}
