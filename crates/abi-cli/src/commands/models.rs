//! `abictl models [module]`: the chat models live instances declare, one row
//! per module, contract major and model, with the instances serving it and
//! their statuses (a chat goes only to READY ones).

use serde_json::json;

use super::{Ctx, declared, instance_list, list_all};
use crate::connect;
use crate::output::{Table, or_dash, print_json};

/// Prints the declared chat models of every module, or of `module`.
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
    let models = declared(&instances, module, |d| &d.models, |model| &model.name);
    if cx.global.json {
        let out: Vec<_> = models
            .iter()
            .map(|((module, major, _), (model, served))| {
                json!({
                    "module": module,
                    "contract_major": major,
                    "name": model.name,
                    "kind": model.kind,
                    "description": model.description,
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
        "MODEL",
        "KIND",
        "DESCRIPTION",
        "INSTANCES",
    ]);
    for ((module, major, _), (model, served)) in &models {
        table.row(vec![
            module.clone(),
            major.to_string(),
            model.name.clone(),
            or_dash(&model.kind),
            or_dash(&model.description),
            instance_list(served),
        ]);
    }
    print!("{}", table.render(cx.style));
    Ok(())
}
