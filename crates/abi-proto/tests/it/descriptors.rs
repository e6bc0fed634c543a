//! Our `.proto` files against the reference's, message by message and field
//! by field: names, numbers, labels, types, type names, oneofs and proto3
//! `optional`, as the reference's generated modules (`naas_abi_proto` 0.2.0)
//! carry them in their serialized descriptors. Comments, options, JSON names
//! and import paths may differ; nothing that reaches the wire may.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use prost::Message as _;
use prost_types::{DescriptorProto, EnumDescriptorProto, FileDescriptorProto};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn python() -> PathBuf {
    std::env::var_os("ABI_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".venv/bin/python"))
}

/// The reference's descriptor of `module` (e.g. `document.v1.document_pb2`).
fn reference(module: &str) -> FileDescriptorProto {
    let script = format!(
        "import sys; from naas_abi_proto.{module} import DESCRIPTOR; sys.stdout.write(DESCRIPTOR.serialized_pb.hex())"
    );
    let out = Command::new(python())
        .args(["-c", &script])
        .output()
        .expect("run the venv Python (./scripts/setup.sh)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = hex::decode(out.stdout).expect("hex");
    FileDescriptorProto::decode(bytes.as_slice()).expect("a FileDescriptorProto")
}

/// Our descriptor of `file` (relative to `proto/`).
fn ours(file: &str) -> FileDescriptorProto {
    let root = workspace_root().join("proto");
    let set = protox::compile([root.join(file)], [&root]).expect("our proto compiles");
    set.file
        .into_iter()
        .find(|f| f.name() == file)
        .expect("the compiled file")
}

/// What reaches the wire, as comparable text lines.
fn shape(file: &FileDescriptorProto) -> Vec<String> {
    let mut lines = vec![format!("package {}", file.package())];
    for message in &file.message_type {
        message_shape(message, "", &mut lines);
    }
    for e in &file.enum_type {
        enum_shape(e, "", &mut lines);
    }
    lines
}

fn message_shape(message: &DescriptorProto, prefix: &str, lines: &mut Vec<String>) {
    let name = format!("{prefix}{}", message.name());
    lines.push(format!("message {name}"));
    for field in &message.field {
        let oneof = field
            .oneof_index
            .filter(|_| !field.proto3_optional())
            .map(|i| message.oneof_decl[i as usize].name().to_owned())
            .unwrap_or_default();
        lines.push(format!(
            "  {name}.{} = {} {:?} {:?} {} oneof={oneof} optional={}",
            field.name(),
            field.number(),
            field.label(),
            field.r#type(),
            field.type_name(),
            field.proto3_optional()
        ));
    }
    for nested in &message.nested_type {
        // Map entries are generated; their shape is the key and value fields.
        message_shape(nested, &format!("{name}."), lines);
    }
    for e in &message.enum_type {
        enum_shape(e, &format!("{name}."), lines);
    }
}

fn enum_shape(e: &EnumDescriptorProto, prefix: &str, lines: &mut Vec<String>) {
    lines.push(format!("enum {prefix}{}", e.name()));
    for value in &e.value {
        lines.push(format!("  {} = {}", value.name(), value.number()));
    }
}

fn assert_same(our_file: &str, reference_module: &str) {
    let ours = shape(&ours(our_file));
    let theirs = shape(&reference(reference_module));
    assert_eq!(
        ours, theirs,
        "{our_file} differs from naas_abi_proto.{reference_module}"
    );
    assert!(ours.len() > 5, "{our_file}: nothing compared");
}

#[test]
fn common_matches_the_reference_field_by_field() {
    assert_same("abi/common/v1/common.proto", "common.v1.common_pb2");
}

#[test]
fn discovery_matches_the_reference_field_by_field() {
    assert_same(
        "abi/discovery/v1/discovery.proto",
        "discovery.v1.discovery_pb2",
    );
}

#[test]
fn document_matches_the_reference_field_by_field() {
    assert_same("abi/document/v1/document.proto", "document.v1.document_pb2");
}

#[test]
fn agent_matches_the_reference_field_by_field() {
    assert_same("abi/agent/v1/agent.proto", "agent.v1.agent_pb2");
}

#[test]
fn model_registry_matches_the_reference_field_by_field() {
    assert_same(
        "abi/model_registry/v1/model_registry.proto",
        "model_registry.v1.model_registry_pb2",
    );
}

#[test]
fn transfer_matches_the_reference_field_by_field() {
    assert_same("abi/transfer/v1/transfer.proto", "transfer.v1.transfer_pb2");
}

#[test]
fn app_matches_the_reference_field_by_field() {
    assert_same("abi/app/v1/app.proto", "app.v1.app_pb2");
}

#[test]
fn the_comparison_sees_a_renumbered_field() {
    let mut file = ours("abi/document/v1/document.proto");
    let before = shape(&file);
    let put = file
        .message_type
        .iter_mut()
        .find(|m| m.name() == "PutRequest")
        .unwrap();
    put.field
        .iter_mut()
        .find(|f| f.name() == "if_version")
        .unwrap()
        .number = Some(7);
    assert_ne!(shape(&file), before);
}
