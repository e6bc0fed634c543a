//! `abictl agents [module]`: the agents live instances declare, one row per
//! module, contract major and agent, with its capabilities and the
//! instances serving it and their statuses (a submit goes only to READY ones).

use serde_json::json;

use super::{Ctx, declared, instance_list, list_all};
use crate::connect;
use crate::output::{Table, or_dash, print_json};

/// Prints the declared agents of every module, or of `module`.
///
/// # Errors
///
/// The discovery service refused or is unreachable.
///
/// # Cancel safety
///
/// Cancel safe: it only lists instances; the table is printed after the last await.
pub async fn run(cx: Ctx<'_>, module: Option<&str>) -> anyhow::Result<()> {
    let client = connect::client(cx.global, cx.env).await?;
    let instances = list_all(&client).await?;
    let agents = declared(&instances, module, |d| &d.agents, |agent| &agent.name);
    if cx.global.json {
        let out: Vec<_> = agents
            .iter()
            .map(|((module, major, _), (agent, served))| {
                json!({
                    "module": module,
                    "contract_major": major,
                    "name": agent.name,
                    "description": agent.description,
                    "agent_contract_major": agent.contract_major,
                    "capabilities": agent.capabilities,
                    "instances": served.iter().map(|(id, status)| json!({
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
    for ((module, major, _), (agent, served)) in &agents {
        table.row(vec![
            module.clone(),
            major.to_string(),
            agent.name.clone(),
            or_dash(&agent.capabilities.join(",")),
            or_dash(&agent.description),
            instance_list(served),
        ]);
    }
    print!("{}", table.render(cx.style));
    Ok(())
}
