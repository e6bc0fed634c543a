//! How the service's SQLite syncs a commit: with `fdatasync`, as a
//! distribution's SQLite does on Linux (`.cargo/config.toml` builds the
//! bundled SQLite with `HAVE_FDATASYNC`), never with `fsync`, which on a
//! journaled file system also commits the journal for the file's new
//! modification time. Read from the C library functions the binary imports:
//! SQLite calls the one it was built with, and nothing else in the service
//! syncs a file.

use object::{Object as _, ObjectSymbol as _};

fn imported_functions() -> Vec<String> {
    let bytes = std::fs::read(env!("CARGO_BIN_EXE_abi-documents")).unwrap();
    let binary = object::File::parse(&*bytes).unwrap();
    binary
        .dynamic_symbols()
        .filter(|symbol| symbol.is_undefined())
        .map(|symbol| symbol.name().unwrap().to_owned())
        .collect()
}

#[test]
fn the_service_syncs_its_commits_with_fdatasync_and_never_fsync() {
    let imports = imported_functions();
    assert!(
        imports.iter().any(|name| name == "fdatasync"),
        "the binary does not import fdatasync: {imports:?}"
    );
    assert!(
        !imports.iter().any(|name| name == "fsync"),
        "the binary imports fsync (SQLite built without HAVE_FDATASYNC?)"
    );
}
