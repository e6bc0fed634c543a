//! `abictl pause`, `resume`, `purge`: an operator's controls of one job
//! (`abi_sdk::jobs::JobClient`): stop and start its schedules, drop the
//! triggers waiting on the stream. The job must be declared by a
//! registered instance (its schedules come from that declaration).

use serde_json::json;

use super::Ctx;
use super::runs::declared_job;
use crate::connect;
use crate::error::Failure;
use crate::output::print_json;

/// Pauses `module`'s `job`'s schedules.
///
/// # Errors
///
/// The job is not declared (exit 1) or the stream refused.
///
/// # Cancel safety
///
/// Not cancel safe: as `JobClient::pause_schedules`, a dropped call may have stored the pause
/// marker and kept the schedules; run it again.
pub async fn pause(cx: Ctx<'_>, module: &str, job: &str) -> anyhow::Result<()> {
    let client = connect::client(cx.global, cx.env).await?;
    let job_client = declared_job(&client, module, job).await?;
    job_client.pause_schedules().await?;
    if cx.global.json {
        print_json(&json!({"job": job, "paused": true}));
    } else {
        println!(
            "paused the schedules of {module} {job} (`abictl resume {module} {job}` starts them)"
        );
    }
    Ok(())
}

/// Resumes `module`'s `job`'s schedules as declared.
///
/// # Errors
///
/// The job is not declared (exit 1) or the stream refused.
///
/// # Cancel safety
///
/// Not cancel safe: as `JobClient::resume_schedules`, a dropped call may have removed the marker
/// before publishing the schedules again; run it again.
pub async fn resume(cx: Ctx<'_>, module: &str, job: &str) -> anyhow::Result<()> {
    let client = connect::client(cx.global, cx.env).await?;
    let job_client = declared_job(&client, module, job).await?;
    let schedules = job_client.resume_schedules().await?;
    if cx.global.json {
        print_json(&json!({"job": job, "paused": false, "schedules": schedules}));
    } else if schedules == 0 {
        println!("{module} {job} declares no schedule; nothing to resume");
    } else {
        println!("resumed {schedules} schedule(s) of {module} {job}");
    }
    Ok(())
}

/// Removes the queued triggers of `module`'s `job` (not taken by a host);
/// without `yes`, only says how many there are (exit 2).
///
/// # Errors
///
/// No `--yes` (exit 2), the job is not declared (exit 1), or the stream
/// refused.
///
/// # Cancel safety
///
/// Not cancel safe: with `yes`, a dropped call may have removed some queued triggers, the count
/// never printed; without it, it only counts.
pub async fn purge(cx: Ctx<'_>, module: &str, job: &str, yes: bool) -> anyhow::Result<()> {
    let client = connect::client(cx.global, cx.env).await?;
    let job_client = declared_job(&client, module, job).await?;
    if !yes {
        let queued = job_client.queued_triggers().await?;
        return Err(Failure::usage(format!(
            "{module} {job} has {queued} queued trigger(s) no host has taken; nothing purged"
        ))
        .hint(format!("`abictl purge {module} {job} --yes` removes them"))
        .into());
    }
    let purged = job_client.purge_queued().await?;
    if cx.global.json {
        print_json(&json!({"job": job, "purged": purged}));
    } else {
        println!("purged {purged} trigger(s) of {module} {job}");
    }
    Ok(())
}
