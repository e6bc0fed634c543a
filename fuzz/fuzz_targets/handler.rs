//! Fuzz target: arbitrary steps (raw payloads and generated requests, with
//! valid and invalid tokens) through `Handler` over the in-memory store. See
//! `fuzz/src/check.rs` for the input format and what is checked.
//!
//! With the `libfuzzer` feature (default) this is a libFuzzer target; without
//! it, `handler <file or dir>...` replays inputs and `handler --random N`
//! runs N pseudo-random inputs, saving the ones that fail.

#![cfg_attr(feature = "libfuzzer", no_main)]

#[cfg(feature = "libfuzzer")]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    abi_fuzz::run(data);
});

#[cfg(not(feature = "libfuzzer"))]
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--random") {
        let n: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1000);
        // xorshift: reproducible without a dependency.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        for i in 0..n {
            let len = 3 + (i % 200) as usize;
            let input: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            let result = std::panic::catch_unwind(|| abi_fuzz::run(&input));
            if result.is_err() {
                let path = format!("crash-random-{i}");
                let _ = std::fs::write(&path, &input);
                eprintln!("input {i} failed; saved to {path}");
                std::process::exit(1);
            }
        }
        eprintln!("{n} random inputs passed");
        return;
    }
    let mut files = Vec::new();
    for arg in &args {
        let path = std::path::Path::new(arg);
        match std::fs::read_dir(path) {
            Ok(entries) => files.extend(entries.filter_map(|e| e.ok()).map(|e| e.path())),
            Err(_) => files.push(path.to_path_buf()),
        }
    }
    for file in &files {
        match std::fs::read(file) {
            Ok(data) => abi_fuzz::run(&data),
            Err(e) => eprintln!("skip {}: {e}", file.display()),
        }
    }
    eprintln!("{} inputs replayed", files.len());
}
