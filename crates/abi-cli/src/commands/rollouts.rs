//! `abictl rollouts`: per module, which generation serves, which are staged
//! or draining, and what a staged rollout still waits for.
//!
//! The cohort of a rollout (`rollout_modules`) and whether an instance is
//! initialized live only in the stored snapshot, so this reads the KV key and
//! recomputes statuses with the registry's own rules ([`abi_registry::view`]).

use std::collections::BTreeSet;

use abi_registry::overview;
use serde_json::json;

use super::Ctx;
use crate::connect;
use crate::output::{Table, print_json};
use crate::snapshot::{self, now_epoch};

/// Prints the rollout table (or JSON).
///
/// # Errors
///
/// The snapshot cannot be read.
///
/// # Cancel safety
///
/// Cancel safe: it only reads the snapshot; nothing is printed before the last read returned.
pub async fn run(cx: Ctx<'_>) -> anyhow::Result<()> {
    let nats = connect::nats(cx.global).await?;
    let stored = snapshot::read(nats, cx.global).await?;
    let live = abi_registry::view(&stored.state, now_epoch());
    let summary = overview::generations(&live);
    let join = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>();
    if cx.global.json {
        let modules: Vec<_> = summary
            .iter()
            .map(|(m, g)| {
                json!({
                    "module_id": m,
                    "serving": join(&g.serving),
                    "staged": join(&g.staged),
                    "draining": join(&g.draining),
                    "waiting_for": waits_text(&g.waiting),
                })
            })
            .collect();
        print_json(&json!({ "revision": stored.revision, "modules": modules }));
        return Ok(());
    }
    let mut table = Table::new(&["MODULE", "SERVING", "STAGED", "DRAINING", "WAITING FOR"]);
    let dash = |v: Vec<String>| {
        if v.is_empty() {
            "-".into()
        } else {
            v.join(",")
        }
    };
    for (m, g) in &summary {
        let waiting: Vec<String> = g
            .waiting
            .iter()
            .map(|(r, w)| {
                if w.is_empty() {
                    format!("{r}: nothing (cutting over)")
                } else {
                    let w: Vec<String> = w.iter().map(ToString::to_string).collect();
                    format!("{r}: {}", w.join(", "))
                }
            })
            .collect();
        table.row(vec![
            m.clone(),
            dash(join(&g.serving)),
            dash(join(&g.staged)),
            dash(join(&g.draining)),
            dash(waiting),
        ]);
    }
    print!("{}", table.render(cx.style));
    Ok(())
}

/// Per staged rollout, its waits as text (`b (not registered)`).
fn waits_text(
    waiting: &std::collections::BTreeMap<String, Vec<overview::Wait>>,
) -> std::collections::BTreeMap<&str, Vec<String>> {
    waiting
        .iter()
        .map(|(r, w)| (r.as_str(), w.iter().map(ToString::to_string).collect()))
        .collect()
}
