//! One attempt's handler, supervised to an [`Outcome`]: `+WPI` heartbeats
//! with fenced progress saves, the timeout, caller cancels and the host's
//! hand-back.

use std::time::Duration;

use abi_wire::jobs::{Ack, RunStatus};
use async_nats::jetstream::Message;
use tokio::time::Instant;
use tracing::warn;

use super::ack::reply;
use super::machine::{self, AfterLostClaim};
use super::record::logs;
use super::record::{self, Claimed, Fence, Saved};
use super::recorded::Change;
use super::runs::Control;
use super::{Job, Shared};
use crate::time::now_iso;
use crate::{JobContext, JobErrorKind, StopReason};
use abi_sdk_core::CallError;
use abi_sdk_core::documents::{Stored, Written};

/// Python's `%g` of a timeout in seconds.
fn seconds_g(t: Duration) -> String {
    let s = t.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}", s as u64)
    } else {
        format!("{s}")
    }
}

pub(super) enum Outcome {
    Finished {
        status: RunStatus,
        error: String,
        retryable: bool,
        result: Option<serde_json::Value>,
    },
    HandBack,
    TakenOver,
    /// The RUNNING record, decided, was not stored after all (or its
    /// durable answer never came): the attempt owns no record.
    Unclaimed(CallError),
}

/// Runs the handler to an outcome, heartbeating meanwhile. The handler
/// starts once its RUNNING record is decided; that record's durable answer
/// (`claimed`) is awaited before anything else is written. A record not
/// stored after all stops the handler as a hand-back does; what the
/// attempt does then is [`machine::after_lost_claim`]'s.
#[allow(clippy::too_many_arguments)]
pub(super) async fn supervise(
    shared: &Shared,
    job: &Job,
    msg: &Message,
    cx: &JobContext,
    control: &Control,
    run_id: &str,
    fence: &mut Fence,
    claimed: Claimed,
) -> Outcome {
    let Claimed { mut stored, over } = claimed;
    let mut claim = Claim::Pending;
    let outcome = run(
        shared,
        job,
        msg,
        cx,
        control,
        run_id,
        fence,
        &mut stored,
        &mut claim,
    )
    .await;
    if matches!(claim, Claim::Pending) {
        claim = Claim::settled(stored.await);
    }
    let Claim::Lost(err) = claim else {
        return outcome;
    };
    let finished = matches!(outcome, Outcome::Finished { .. });
    match machine::after_lost_claim(finished) {
        AfterLostClaim::WriteOutcome => {
            warn!(run_id = %run_id, error = %err, "job run's RUNNING record was not stored; writing its outcome in its place");
            // The outcome goes where the RUNNING record would have: over
            // the version the claim was written over (the fenced save reads
            // the record if the claim was stored after all).
            fence.kept.version = over;
            outcome
        }
        AfterLostClaim::Redeliver => Outcome::Unclaimed(err),
    }
}

/// Where an attempt's RUNNING record stands.
enum Claim {
    /// Decided, not yet known to be durable.
    Pending,
    /// Durable.
    Stored,
    /// Not stored after all.
    Lost(CallError),
}

impl Claim {
    fn settled(answer: Result<Written, CallError>) -> Self {
        match answer {
            Ok(_) => Self::Stored,
            Err(err) => Self::Lost(err),
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn run(
    shared: &Shared,
    job: &Job,
    msg: &Message,
    cx: &JobContext,
    control: &Control,
    run_id: &str,
    fence: &mut Fence,
    stored: &mut Stored,
    claim: &mut Claim,
) -> Outcome {
    // The handler runs in its own task, inside the run's span (what it
    // calls continues the run's trace).
    let mut work = tokio::spawn(tracing::Instrument::in_current_span(
        job.handler.call(cx.clone()),
    ));
    let beat = shared.options.heartbeat_interval;
    let mut ticker = tokio::time::interval_at(Instant::now() + beat, beat);
    let far = Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600);
    let deadline = job
        .spec
        .attempt_timeout()
        .map_or(far, |t| Instant::now() + t);
    let mut handback_at = far;
    let (mut cancelled, mut handing_back) = (false, false);
    let joined = loop {
        tokio::select! {
            joined = &mut work => break joined,
            answer = &mut *stored, if matches!(claim, Claim::Pending) => {
                *claim = Claim::settled(answer);
                if matches!(claim, Claim::Lost(_)) && !handing_back {
                    handing_back = true;
                    cx.stop(StopReason::HandBack);
                    handback_at = Instant::now() + shared.options.handback_grace;
                }
            }
            // Nothing is saved before the record is known to be stored.
            _ = ticker.tick(), if matches!(claim, Claim::Stored) => {
                reply(shared, msg, Ack::Progress).await;
                let fields = Change::Heartbeat { logs: logs(cx), at: &now_iso() }.fields();
                match record::save(shared, run_id, &fields, fence).await {
                    Ok(Saved::Written) => {}
                    Ok(Saved::Fenced) => {
                        cx.cancelled().cancel();
                        work.abort();
                        return Outcome::TakenOver;
                    }
                    Err(err) => warn!(run_id = %run_id, error = %err, "job progress not saved; retrying"),
                }
            }
            () = tokio::time::sleep_until(deadline) => {
                cx.stop(StopReason::Timeout);
                work.abort();
                let timeout = job.spec.attempt_timeout().unwrap_or_default();
                return Outcome::Finished {
                    status: RunStatus::TimedOut,
                    error: format!("Timed out after {}s", seconds_g(timeout)),
                    retryable: true,
                    result: None,
                };
            }
            () = control.cancelled.cancelled(), if !cancelled => {
                cancelled = true;
                cx.stop(StopReason::Cancel);
            }
            () = control.handback.cancelled(), if !handing_back => {
                handing_back = true;
                cx.stop(StopReason::HandBack);
                handback_at = Instant::now() + shared.options.handback_grace;
            }
            () = tokio::time::sleep_until(handback_at) => {
                work.abort();
                return Outcome::HandBack;
            }
        }
    };
    let finished = |status, error: String, retryable, result| Outcome::Finished {
        status,
        error,
        retryable,
        result,
    };
    match joined {
        Ok(Ok(value)) if !cancelled => {
            let status = if cx.skipped().is_some() {
                RunStatus::Skipped
            } else {
                RunStatus::Succeeded
            };
            finished(status, String::new(), true, Some(value))
        }
        _ if cancelled => finished(RunStatus::Cancelled, String::new(), true, None),
        _ if handing_back => Outcome::HandBack,
        Ok(Err(err)) => finished(
            RunStatus::Failed,
            err.to_string(),
            err.kind() == JobErrorKind::Retryable,
            None,
        ),
        Ok(Ok(_)) => finished(RunStatus::Cancelled, String::new(), true, None),
        Err(join) if join.is_panic() => finished(
            RunStatus::Failed,
            "Panic: job handler panicked".into(),
            true,
            None,
        ),
        Err(_) => finished(
            RunStatus::Failed,
            "Job task was cancelled".into(),
            true,
            None,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_print_as_percent_g() {
        assert_eq!(seconds_g(Duration::from_secs(600)), "600");
        assert_eq!(seconds_g(Duration::from_millis(300)), "0.3");
        assert_eq!(seconds_g(Duration::from_millis(90_500)), "90.5");
    }
}
