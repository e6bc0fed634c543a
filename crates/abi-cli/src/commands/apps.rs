//! `abictl apps [module]`: the web apps live instances declare, one row per
//! module, contract major and app, with the instances serving it and their
//! statuses (a call goes only to READY ones), and the gateway path
//! (`abictl serve-apps`) that reaches it.

use serde_json::json;

use super::{Ctx, declared, instance_list, list_all};
use crate::connect;
use crate::output::{Table, or_dash, print_json};

/// Prints the declared apps of every module, or of `module`.
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
    let apps = declared(&instances, module, |d| &d.apps, |app| &app.name);
    if cx.global.json {
        let out: Vec<_> = apps
            .iter()
            .map(|((module, major, _), (app, served))| {
                json!({
                    "module": module,
                    "contract_major": major,
                    "name": app.name,
                    "title": app.title,
                    "entry": app.entry,
                    "path": super::serve_apps::mount(module, &app.name),
                    "instances": served.iter().map(|(id, status)| json!({
                        "instance_id": id, "status": status,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        print_json(&json!(out));
        return Ok(());
    }
    let mut table = Table::new(&["MODULE", "MAJOR", "APP", "TITLE", "PATH", "INSTANCES"]);
    for ((module, major, _), (app, served)) in &apps {
        table.row(vec![
            module.clone(),
            major.to_string(),
            app.name.clone(),
            or_dash(&app.title),
            format!("{}/", super::serve_apps::mount(module, &app.name)),
            instance_list(served),
        ]);
    }
    print!("{}", table.render(cx.style));
    Ok(())
}
