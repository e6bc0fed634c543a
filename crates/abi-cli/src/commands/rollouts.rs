//! `abictl rollouts`: per module, which generation serves, which are staged
//! or draining, and what a staged rollout still waits for.
//!
//! The cohort of a rollout (`rollout_modules`) and whether an instance is
//! initialized live only in the stored snapshot, so this reads the KV key and
//! recomputes statuses with the registry's own rules ([`abi_registry::view`]).

use std::collections::{BTreeMap, BTreeSet};

use abi_sdk::pb;
use abi_wire::status;
use serde_json::json;

use super::{Ctx, module_of};
use crate::connect;
use crate::output::{Table, print_json};
use crate::snapshot::{self, now_epoch};

/// The generations of one module id.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Generations {
    /// Rollouts with a READY or DEGRADED instance.
    pub serving: BTreeSet<String>,
    /// Rollouts not serving yet (STAGED, or STARTING).
    pub staged: BTreeSet<String>,
    /// Rollouts leaving (DRAINING).
    pub draining: BTreeSet<String>,
    /// Per staged rollout: the cohort modules it still waits for.
    pub waiting: BTreeMap<String, Vec<String>>,
}

/// Rollout id for display: `-` when an instance is in no rollout.
fn label(rollout: &str) -> String {
    if rollout.is_empty() {
        "-".into()
    } else {
        rollout.into()
    }
}

/// Groups live records (statuses already computed) by module id.
pub fn summarize(state: &pb::RegistryState) -> BTreeMap<String, Generations> {
    let mut out: BTreeMap<String, Generations> = BTreeMap::new();
    let instance = |r: &pb::RegistryRecord| r.instance.clone().unwrap_or_default();
    for r in &state.records {
        let i = instance(r);
        let g = out.entry(module_of(&i).to_owned()).or_default();
        let rollout = label(&i.rollout_id);
        match i.status.as_str() {
            status::READY | status::DEGRADED => g.serving.insert(rollout),
            status::DRAINING => g.draining.insert(rollout),
            _ => g.staged.insert(rollout),
        };
    }
    for (module, g) in &mut out {
        g.staged
            .retain(|r| !g.serving.contains(r) && !g.draining.contains(r));
        for rollout in g.staged.clone() {
            if rollout == "-" {
                continue;
            }
            let in_rollout: Vec<&pb::RegistryRecord> = state
                .records
                .iter()
                .filter(|r| instance(r).rollout_id == rollout)
                .collect();
            let cohort: BTreeSet<&str> = in_rollout
                .iter()
                .filter(|r| module_of(&instance(r)) == module.as_str())
                .flat_map(|r| r.rollout_modules.iter().map(String::as_str))
                .collect();
            let mut waits = Vec::new();
            for m in cohort {
                let mine: Vec<_> = in_rollout
                    .iter()
                    .filter(|r| module_of(&instance(r)) == m)
                    .collect();
                if mine.is_empty() {
                    waits.push(format!("{m} (not registered)"));
                } else if !mine.iter().any(|r| r.initialized) {
                    waits.push(format!("{m} (not initialized)"));
                }
            }
            g.waiting.insert(rollout, waits);
        }
    }
    out
}

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
    let summary = summarize(&live);
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
                    "waiting_for": g.waiting,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(
        module: &str,
        rollout: &str,
        status: &str,
        init: bool,
        cohort: &[&str],
    ) -> pb::RegistryRecord {
        pb::RegistryRecord {
            instance: Some(pb::Instance {
                instance_id: format!("{module}-{rollout}"),
                status: status.into(),
                rollout_id: rollout.into(),
                descriptor: Some(pb::ModuleDescriptor {
                    module_id: module.into(),
                    contract_major: 1,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            initialized: init,
            rollout_id: rollout.into(),
            rollout_modules: cohort.iter().map(|c| (*c).to_owned()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_half_started_rollout_waits_for_the_missing_module() {
        let cohort = ["a", "b"];
        let state = pb::RegistryState {
            records: vec![
                rec("a", "v1", "READY", true, &cohort),
                rec("b", "v1", "READY", true, &cohort),
                rec("a", "v2", "STAGED", true, &cohort),
            ],
        };
        let s = summarize(&state);
        assert_eq!(s["a"].serving, BTreeSet::from(["v1".to_owned()]));
        assert_eq!(s["a"].staged, BTreeSet::from(["v2".to_owned()]));
        assert_eq!(s["a"].waiting["v2"], vec!["b (not registered)".to_owned()]);
        assert!(s["b"].staged.is_empty());
    }
}
