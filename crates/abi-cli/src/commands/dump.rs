//! `abictl dump`: the stored snapshot, decoded.

use abi_sdk::pb;
use abi_wire::discovery::{REGISTRY_KEY, registry_bucket};
use serde_json::json;

use super::Ctx;
use crate::connect;
use crate::output::{Style, Table, expires_in, or_dash, print_json};
use crate::snapshot::{self, now_epoch, records_json};

/// Prints the snapshot with its revision and size (lease hashes left out).
///
/// # Errors
///
/// NATS unreachable, no bucket, or undecodable bytes.
///
/// # Cancel safety
///
/// Cancel safe: it only reads the snapshot; the output is printed after the last await.
pub async fn run(cx: Ctx<'_>) -> anyhow::Result<()> {
    let nats = connect::nats(cx.global).await?;
    let stored = snapshot::read(nats, cx.global).await?;
    let bucket = registry_bucket(&cx.global.project);
    if cx.global.json {
        print_json(&json!({
            "bucket": bucket,
            "key": REGISTRY_KEY,
            "revision": stored.revision,
            "size_bytes": stored.size,
            "records": records_json(&stored.state),
        }));
        return Ok(());
    }
    println!(
        "bucket {bucket}  key {REGISTRY_KEY}  revision {}  size {} bytes  records {}",
        stored.revision,
        stored.size,
        stored.state.records.len()
    );
    print!("{}", records_table(&stored.state, now_epoch(), cx.style));
    Ok(())
}

/// The stored records as a table (statuses as stored at the last write).
pub fn records_table(state: &pb::RegistryState, now: f64, style: Style) -> String {
    let mut table = Table::new(&[
        "MODULE",
        "MAJOR",
        "INSTANCE",
        "STORED STATUS",
        "INIT",
        "DRAIN",
        "ROLLOUT",
        "COHORT",
        "OWNER",
        "EXPIRES IN",
    ]);
    for r in &state.records {
        let i = r.instance.clone().unwrap_or_default();
        table.status_row(
            vec![
                super::module_of(&i).to_owned(),
                super::major_of(&i).to_string(),
                i.instance_id.clone(),
                i.status.clone(),
                r.initialized.to_string(),
                r.draining.to_string(),
                or_dash(&r.rollout_id),
                or_dash(&r.rollout_modules.join(",")),
                or_dash(&r.owner),
                expires_in(i.expires_at, now),
            ],
            3,
        );
    }
    table.render(style)
}
