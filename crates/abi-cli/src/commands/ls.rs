//! `abictl ls`: every live instance.

use abi_sdk::pb;

use super::{Ctx, list_all, major_of, module_of};
use crate::connect;
use crate::output::{Table, expires_in, or_dash, print_json};
use crate::snapshot::now_epoch;

/// Lists every live instance as a table (or JSON).
///
/// # Errors
///
/// The service call failed.
pub async fn run(cx: Ctx<'_>) -> anyhow::Result<()> {
    let client = connect::client(cx.global, cx.env).await?;
    let instances = list_all(&client).await?;
    if cx.global.json {
        print_json(&serde_json::to_value(&instances)?);
        return Ok(());
    }
    print!("{}", table(&instances, now_epoch()).render(cx.style));
    Ok(())
}

/// The `ls` table of `instances` at `now`.
pub fn table(instances: &[pb::Instance], now: f64) -> Table {
    let mut table = Table::new(&[
        "MODULE",
        "MAJOR",
        "INSTANCE",
        "STATUS",
        "ROLLOUT",
        "VERSION",
        "EXPIRES IN",
    ]);
    for i in instances {
        let version = i
            .descriptor
            .as_ref()
            .map(|d| d.package_version.as_str())
            .unwrap_or("");
        table.status_row(
            vec![
                module_of(i).to_owned(),
                major_of(i).to_string(),
                i.instance_id.clone(),
                i.status.clone(),
                or_dash(&i.rollout_id),
                or_dash(version),
                expires_in(i.expires_at, now),
            ],
            3,
        );
    }
    table
}
