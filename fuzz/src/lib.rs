//! The fuzz harness for `abi-discovery`'s request handler. The check itself is
//! in `check.rs`, shared with `crates/abi-discovery/tests/fuzz_regression.rs`.

pub mod check;

/// Runs one input on a current-thread runtime made once per thread.
pub fn run(input: &[u8]) {
    thread_local! {
        static RUNTIME: tokio::runtime::Runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => panic!("tokio runtime: {e}"),
        };
    }
    RUNTIME.with(|rt| rt.block_on(check::run(input)));
}
