//! `abictl get <module>`: one module's instances and descriptors.

use abi_sdk::pb;

use super::{Ctx, list_all, major_of, module_of};
use crate::connect;
use crate::output::{Style, print_json};
use crate::snapshot::now_epoch;

/// Shows one module's instances and what each generation declares.
///
/// # Errors
///
/// The service call failed (`MODULE_NOT_FOUND`, `INCOMPATIBLE_MODULE`, ...).
///
/// # Cancel safety
///
/// Cancel safe: it only reads the registry; nothing is printed before the last await.
pub async fn run(cx: Ctx<'_>, module: &str, major: Option<u32>) -> anyhow::Result<()> {
    let client = connect::client(cx.global, cx.env).await?;
    let instances = match major {
        Some(major) => client.get_module(module, major).await?,
        None => {
            let all: Vec<_> = list_all(&client)
                .await?
                .into_iter()
                .filter(|i| module_of(i) == module)
                .collect();
            if all.is_empty() {
                // Ask the service, so the error is its own (MODULE_NOT_FOUND).
                client.get_module(module, 1).await?
            } else {
                all
            }
        }
    };
    if cx.global.json {
        print_json(&serde_json::to_value(&instances)?);
        return Ok(());
    }
    print!("{}", render(&instances, now_epoch(), cx.style));
    Ok(())
}

/// The instances table, then each distinct descriptor once.
pub fn render(instances: &[pb::Instance], now: f64, style: Style) -> String {
    let mut out = super::ls::table(instances, now).render(style);
    let mut seen: Vec<&pb::ModuleDescriptor> = Vec::new();
    for i in instances {
        let Some(d) = &i.descriptor else { continue };
        if seen.contains(&d) {
            continue;
        }
        seen.push(d);
        out.push_str(&format!(
            "\n{} {} (contract major {}), rollout {}\n",
            d.module_id,
            d.package_version,
            major_of(i),
            if i.rollout_id.is_empty() {
                "-"
            } else {
                &i.rollout_id
            }
        ));
        for dep in &d.dependencies {
            out.push_str(&format!(
                "  depends on  {} (major {})\n",
                dep.module_id, dep.contract_major
            ));
        }
        for a in &d.agents {
            out.push_str(&format!(
                "  agent       {} [{}] {}\n",
                a.name,
                a.capabilities.join(", "),
                a.description
            ));
        }
        for j in &d.jobs {
            let triggers: Vec<String> = j
                .triggers
                .iter()
                .map(|t| format!("{} {}", t.kind, t.spec))
                .collect();
            out.push_str(&format!(
                "  job         {} [{}] {}\n",
                j.name,
                triggers.join("; "),
                j.description
            ));
        }
        for m in &d.models {
            out.push_str(&format!(
                "  model       {} ({}) {}\n",
                m.name, m.kind, m.description
            ));
        }
        for a in &d.apps {
            out.push_str(&format!(
                "  app         {} ({}) {}\n",
                a.name, a.entry, a.title
            ));
        }
    }
    out
}
