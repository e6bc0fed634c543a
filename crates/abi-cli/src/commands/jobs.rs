//! `abictl jobs [module]`: the jobs live instances declare, one row per
//! module, contract major and job (replicas declare identical sets), with
//! their triggers: schedules (`cron`, `every`, with time zone and input)
//! and event subscriptions. `abictl workflows` is the same list, only the
//! jobs of kind `workflow`.

use std::collections::BTreeMap;

use abi_sdk::pb;
use serde_json::json;

use super::{Ctx, list_all, major_of, module_of};
use crate::connect;
use crate::output::{Table, or_dash, print_json};

/// A job's kind, `job` when its descriptor names none.
fn kind_of(job: &pb::JobDescriptor) -> &str {
    if job.kind.is_empty() {
        abi_wire::jobs::PLAIN_KIND
    } else {
        &job.kind
    }
}

/// Prints the declared jobs of every module, or of `module`; with `kind`,
/// only the jobs of that kind (`job` for a descriptor without one).
///
/// # Errors
///
/// The discovery service refused or is unreachable.
///
/// # Cancel safety
///
/// Cancel safe: it only lists instances; the table is printed after the last await.
pub async fn run(cx: Ctx<'_>, module: Option<&str>, kind: Option<&str>) -> anyhow::Result<()> {
    let client = connect::client(cx.global, cx.env).await?;
    let instances = list_all(&client).await?;
    // (module, major, job) -> (descriptor, instance count)
    let mut jobs: BTreeMap<(String, u32, String), (pb::JobDescriptor, usize)> = BTreeMap::new();
    for instance in &instances {
        let id = module_of(instance);
        if module.is_some_and(|m| m != id) {
            continue;
        }
        for job in instance.descriptor.iter().flat_map(|d| &d.jobs) {
            if kind.is_some_and(|k| k != kind_of(job)) {
                continue;
            }
            jobs.entry((id.to_owned(), major_of(instance), job.name.clone()))
                .or_insert_with(|| (job.clone(), 0))
                .1 += 1;
        }
    }
    if cx.global.json {
        let out: Vec<_> = jobs
            .iter()
            .map(|((module, major, _), (job, instances))| {
                json!({
                    "module": module,
                    "contract_major": major,
                    "name": job.name,
                    "kind": kind_of(job),
                    "description": job.description,
                    "triggers": job.triggers.iter().map(|t| json!({
                        "kind": t.kind, "spec": t.spec, "time_zone": t.time_zone,
                        "input": t.input, "filter": t.filter,
                    })).collect::<Vec<_>>(),
                    "max_concurrency": job.max_concurrency,
                    "max_attempts": job.max_attempts,
                    "timeout_seconds": job.timeout_seconds,
                    "input_schema": job.input_schema,
                    "output_schema": job.output_schema,
                    "instances": instances,
                })
            })
            .collect();
        print_json(&json!(out));
        return Ok(());
    }
    let mut table = Table::new(&[
        "MODULE",
        "MAJOR",
        "JOB",
        "KIND",
        "TRIGGERS",
        "CONCURRENCY",
        "ATTEMPTS",
        "TIMEOUT",
        "INSTANCES",
    ]);
    for ((module, major, _), (job, instances)) in &jobs {
        let triggers: Vec<String> = job.triggers.iter().map(trigger_text).collect();
        table.row(vec![
            module.clone(),
            major.to_string(),
            job.name.clone(),
            or_dash(&job.kind),
            or_dash(&triggers.join("; ")),
            job.max_concurrency.to_string(),
            job.max_attempts.to_string(),
            if job.timeout_seconds > 0.0 {
                format!("{}s", job.timeout_seconds)
            } else {
                "-".into()
            },
            instances.to_string(),
        ]);
    }
    print!("{}", table.render(cx.style));
    Ok(())
}

/// `cron 0 0 6 * * * (UTC)`, `every 1h`, `event evt.x.>`, with ` +input`
/// or ` +filter` when the trigger carries one.
fn trigger_text(t: &pb::JobTrigger) -> String {
    let mut text = format!("{} {}", t.kind, t.spec);
    if !t.time_zone.is_empty() {
        text.push_str(&format!(" ({})", t.time_zone));
    }
    if !t.input.is_empty() {
        text.push_str(" +input");
    }
    if !t.filter.is_empty() {
        text.push_str(" +filter");
    }
    text
}
