//! `abictl agents [module]`: the agents live instances declare, one row per
//! module, contract major and agent, with its capabilities and the
//! instances serving it and their statuses (a submit goes only to READY ones).

use std::collections::BTreeMap;

use abi_sdk::pb;
use serde_json::json;

use super::{Ctx, list_all, major_of, module_of};
use crate::connect;
use crate::output::{Table, or_dash, print_json};

/// One declared agent and the instances that declare it.
struct Served {
    agent: pb::AgentDescriptor,
    /// `(instance id, status)`, by instance id.
    instances: Vec<(String, String)>,
}

/// Prints the declared agents of every module, or of `module`.
///
/// # Errors
///
/// The discovery service refused or is unreachable.
pub async fn run(cx: Ctx<'_>, module: Option<&str>) -> anyhow::Result<()> {
    let client = connect::client(cx.global, cx.env).await?;
    let instances = list_all(&client).await?;
    let mut agents: BTreeMap<(String, u32, String), Served> = BTreeMap::new();
    for instance in &instances {
        let id = module_of(instance);
        if module.is_some_and(|m| m != id) {
            continue;
        }
        for agent in instance.descriptor.iter().flat_map(|d| &d.agents) {
            agents
                .entry((id.to_owned(), major_of(instance), agent.name.clone()))
                .or_insert_with(|| Served {
                    agent: agent.clone(),
                    instances: Vec::new(),
                })
                .instances
                .push((instance.instance_id.clone(), instance.status.clone()));
        }
    }
    if cx.global.json {
        let out: Vec<_> = agents
            .iter()
            .map(|((module, major, _), served)| {
                json!({
                    "module": module,
                    "contract_major": major,
                    "name": served.agent.name,
                    "description": served.agent.description,
                    "agent_contract_major": served.agent.contract_major,
                    "capabilities": served.agent.capabilities,
                    "instances": served.instances.iter().map(|(id, status)| json!({
                        "instance_id": id, "status": status,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        print_json(&json!(out));
        return Ok(());
    }
    let mut table = Table::new(&[
        "MODULE",
        "MAJOR",
        "AGENT",
        "CAPABILITIES",
        "DESCRIPTION",
        "INSTANCES",
    ]);
    for ((module, major, _), served) in &agents {
        let instances: Vec<String> = served
            .instances
            .iter()
            .map(|(id, status)| format!("{id} ({status})"))
            .collect();
        table.row(vec![
            module.clone(),
            major.to_string(),
            served.agent.name.clone(),
            or_dash(&served.agent.capabilities.join(",")),
            or_dash(&served.agent.description),
            instances.join(", "),
        ]);
    }
    print!("{}", table.render(cx.style));
    Ok(())
}
