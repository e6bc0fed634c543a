//! `abictl models [module]`: the chat models live instances declare, one row
//! per module, contract major and model, with the instances serving it and
//! their statuses (a chat goes only to READY ones).

use std::collections::BTreeMap;

use abi_sdk::pb;
use serde_json::json;

use super::{Ctx, list_all, major_of, module_of};
use crate::connect;
use crate::output::{Table, or_dash, print_json};

/// One declared model and the instances that declare it.
struct Served {
    model: pb::ModelDescriptor,
    /// `(instance id, status)`, by instance id.
    instances: Vec<(String, String)>,
}

/// Prints the declared chat models of every module, or of `module`.
///
/// # Errors
///
/// The discovery service refused or is unreachable.
pub async fn run(cx: Ctx<'_>, module: Option<&str>) -> anyhow::Result<()> {
    let client = connect::client(cx.global, cx.env).await?;
    let instances = list_all(&client).await?;
    let mut models: BTreeMap<(String, u32, String), Served> = BTreeMap::new();
    for instance in &instances {
        let id = module_of(instance);
        if module.is_some_and(|m| m != id) {
            continue;
        }
        for model in instance.descriptor.iter().flat_map(|d| &d.models) {
            models
                .entry((id.to_owned(), major_of(instance), model.name.clone()))
                .or_insert_with(|| Served {
                    model: model.clone(),
                    instances: Vec::new(),
                })
                .instances
                .push((instance.instance_id.clone(), instance.status.clone()));
        }
    }
    if cx.global.json {
        let out: Vec<_> = models
            .iter()
            .map(|((module, major, _), served)| {
                json!({
                    "module": module,
                    "contract_major": major,
                    "name": served.model.name,
                    "kind": served.model.kind,
                    "description": served.model.description,
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
        "MODEL",
        "KIND",
        "DESCRIPTION",
        "INSTANCES",
    ]);
    for ((module, major, _), served) in &models {
        let instances: Vec<String> = served
            .instances
            .iter()
            .map(|(id, status)| format!("{id} ({status})"))
            .collect();
        table.row(vec![
            module.clone(),
            major.to_string(),
            served.model.name.clone(),
            or_dash(&served.model.kind),
            or_dash(&served.model.description),
            instances.join(", "),
        ]);
    }
    print!("{}", table.render(cx.style));
    Ok(())
}
