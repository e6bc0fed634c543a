//! `abictl decode`: a raw snapshot on stdin, decoded.

use std::io::Read as _;

use serde_json::json;

use super::Ctx;
use crate::error::Failure;
use crate::output::print_json;
use crate::snapshot::{self, now_epoch, records_json};

/// Decodes the bytes on stdin (e.g. `nats kv get ... registry --raw`).
///
/// # Errors
///
/// Stdin unreadable or not a snapshot (exit 2).
pub fn run(cx: Ctx<'_>) -> anyhow::Result<()> {
    let mut bytes = Vec::new();
    std::io::stdin()
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::usage(format!("cannot read stdin: {e}")))?;
    let state = snapshot::decode(&bytes)?;
    if cx.global.json {
        print_json(&json!({
            "size_bytes": bytes.len(),
            "records": records_json(&state),
        }));
        return Ok(());
    }
    println!(
        "size {} bytes  records {}",
        bytes.len(),
        state.records.len()
    );
    print!(
        "{}",
        super::dump::records_table(&state, now_epoch(), cx.style)
    );
    Ok(())
}
