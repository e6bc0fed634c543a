//! `abictl wait`: block until a module reaches a status, or is gone.

use std::time::Duration;

use abi_sdk::pb;
use tokio::time::Instant;

use super::{Ctx, list_all, module_of};
use crate::connect;
use crate::error::{EXIT_WAIT_TIMEOUT, Failure};

/// How often the registry is asked again: a status changes at most at each
/// write, and a lookup costs the service little.
const POLL_INTERVAL: Duration = Duration::from_millis(250);

/// What to wait for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// At least one instance in this status.
    Status(String),
    /// No instance left.
    Gone,
}

/// Polls until `module` (of `rollout`, if given) reaches `target`.
///
/// # Errors
///
/// Exit 4 when `for_secs` passes first (with what was seen last).
///
/// # Cancel safety
///
/// Cancel safe: it only polls the registry and sleeps; dropping it ends the wait with nothing
/// printed.
pub async fn run(
    cx: Ctx<'_>,
    module: &str,
    rollout: Option<&str>,
    target: Target,
    for_secs: f64,
) -> anyhow::Result<()> {
    let client = connect::client(cx.global, cx.env).await?;
    let deadline = Instant::now() + Duration::from_secs_f64(for_secs.max(0.0));
    loop {
        let last = match list_all(&client).await {
            Ok(all) => {
                let mine: Vec<&pb::Instance> = all
                    .iter()
                    .filter(|i| module_of(i) == module)
                    .filter(|i| rollout.is_none_or(|r| i.rollout_id == r))
                    .collect();
                let statuses: Vec<&str> = mine.iter().map(|i| i.status.as_str()).collect();
                let done = match &target {
                    Target::Gone => mine.is_empty(),
                    Target::Status(s) => statuses.iter().any(|x| x.eq_ignore_ascii_case(s)),
                };
                if done {
                    return Ok(());
                }
                if statuses.is_empty() {
                    "no instance".to_owned()
                } else {
                    statuses.join(",")
                }
            }
            // The service may not serve yet: keep asking until the deadline.
            Err(err) => format!("{err:#}"),
        };
        if Instant::now() + POLL_INTERVAL > deadline {
            let what = match &target {
                Target::Gone => "gone".to_owned(),
                Target::Status(s) => s.clone(),
            };
            return Err(Failure {
                exit: EXIT_WAIT_TIMEOUT,
                message: format!("{module} not {what} within {for_secs}s (last seen: {last})"),
                hint: Some("`abictl ls` and `abictl rollouts` show why".into()),
            }
            .into());
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}
