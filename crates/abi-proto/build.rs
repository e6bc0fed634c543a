//! Compiles the workspace's `.proto` files with `protox` (pure Rust), so no
//! system `protoc` is needed, and generates the prost types from them.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let files = [
        root.join("abi/common/v1/common.proto"),
        root.join("abi/discovery/v1/discovery.proto"),
        root.join("abi/document/v1/document.proto"),
        root.join("abi/document/v1/batch.proto"),
        root.join("abi/agent/v1/agent.proto"),
        root.join("abi/model_registry/v1/model_registry.proto"),
        root.join("abi/transfer/v1/transfer.proto"),
        root.join("abi/app/v1/app.proto"),
    ];
    for file in &files {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    let descriptors = protox::compile(&files, [&root])?;
    prost_build::Config::new()
        // Document maps as BTreeMaps: encoded in key order, as the reference
        // writes them deterministically, so bytes compare across languages.
        .btree_map([".abi.document.v1"])
        // Serde lets tools and tests read and write messages as JSON; every
        // field defaults so a JSON object may leave fields out.
        .message_attribute(".", "#[derive(serde::Serialize, serde::Deserialize)]")
        .message_attribute(".", "#[serde(default)]")
        // Oneofs (the document Value) derive serde too, without `default`.
        .enum_attribute(".", "#[derive(serde::Serialize, serde::Deserialize)]")
        .compile_fds(descriptors)?;
    Ok(())
}
