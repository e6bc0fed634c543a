//! `abictl evict <instance>`: remove a registration at once (admin only).

use super::{Ctx, module_of};
use crate::connect;
use crate::output::{or_dash, print_json};

/// Evicts one instance and says what was removed.
///
/// # Errors
///
/// `PERMISSION_DENIED` for a non-admin identity, `INSTANCE_NOT_FOUND`, ...
///
/// # Cancel safety
///
/// Not cancel safe: dropped after the request went out, the instance may be evicted with nothing
/// printed about it.
pub async fn run(cx: Ctx<'_>, instance: &str) -> anyhow::Result<()> {
    let client = connect::client(cx.global, cx.env).await?;
    let removed = client.evict(instance).await?;
    if cx.global.json {
        print_json(&serde_json::to_value(&removed)?);
        return Ok(());
    }
    println!(
        "evicted {} (module {}, status {}, rollout {}); its process registers again at its next renewal unless stopped",
        removed.instance_id,
        or_dash(module_of(&removed)),
        or_dash(&removed.status),
        or_dash(&removed.rollout_id),
    );
    Ok(())
}
