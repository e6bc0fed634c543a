//! [`JobRun`]: a handle on one triggered run: read its record, wait for it
//! to end, ask its host to cancel it.

use std::time::Duration;

use abi_wire::jobs;
use futures::StreamExt as _;
use tokio::time::{Instant, sleep_until, timeout_at};

use tracing::debug;

use super::JobClient;
use crate::record::RunRecord;
use abi_sdk_core::{CallError, CallErrorKind, Error, kind_display};

mod expired;

/// How often [`JobRun::wait`] reads the record when no completion notice
/// arrives. Notices are at-most-once (core NATS), so the poll stays; it can
/// be slower than the reference's 0.5 s because a notice ends most waits.
pub const DEFAULT_WAIT_POLL_INTERVAL: Duration = Duration::from_secs(2);

/// Why [`JobRun::wait`] returned without a terminal record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WaitErrorKind {
    /// The deadline passed; the run goes on (or never started).
    TimedOut,
    /// Reading the record failed (see the source [`CallError`]).
    Status,
    /// Subscribing to completion notices failed.
    Transport,
}

kind_display!(WaitErrorKind {
    TimedOut => "timed out",
    Status => "run record unreadable",
    Transport => "transport error",
});

/// A failed [`JobRun::wait`].
pub type WaitError = Error<WaitErrorKind>;

/// Why a cancel was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CancelErrorKind {
    /// The NATS connection failed or did not flush in time.
    Transport,
}

kind_display!(CancelErrorKind {
    Transport => "transport error",
});

/// A failed [`JobRun::cancel`].
pub type CancelError = Error<CancelErrorKind>;

/// One run of a job: the trigger stored at one stream sequence.
#[derive(Clone, Debug)]
pub struct JobRun {
    client: JobClient,
    run_id: String,
    duplicate: bool,
    /// Whether this handle comes from a stored trigger ([`JobClient::trigger`]),
    /// not from a run id alone.
    triggered: bool,
}

impl JobRun {
    pub(crate) fn new(client: JobClient, run_id: String, duplicate: bool, triggered: bool) -> Self {
        Self {
            client,
            run_id,
            duplicate,
            triggered,
        }
    }

    /// The run id, `<job>:<stream sequence>`.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Whether the trigger repeated an idempotency key within the stream's
    /// duplicate window: nothing new was stored and this is the first
    /// trigger's run.
    pub fn duplicate(&self) -> bool {
        self.duplicate
    }

    /// The job this run belongs to.
    pub fn job(&self) -> &JobClient {
        &self.client
    }

    /// The run's record, read from the module's namespace; the `QUEUED`
    /// placeholder until a host took the trigger (the reference's
    /// `JobRun.status()`).
    ///
    /// Better than the reference: without a record, the trigger is looked
    /// up on the stream (by its sequence, `STREAM.MSG.GET`). For a run this
    /// handle triggered, a trigger gone (its `Nats-TTL` passed before any
    /// host took it) means no host will ever run it, and the run ends
    /// `FAILED` with [`abi_wire::jobs::EXPIRED_UNRUN_ERROR`], attempt 0: a
    /// record written create-only, so Python callers (whose `wait` knows
    /// only the five terminal statuses) see the same end. A handle from a
    /// run id alone ([`JobClient::run`]) never writes: without a record and
    /// a stored trigger of this job at its sequence, the run is unknown.
    ///
    /// # Errors
    ///
    /// `RunNotFound` for a handle from a run id with no record and no
    /// trigger of this job stored at its sequence (a future sequence, a
    /// schedule message's, another job's, or a trigger that left the
    /// stream); document service failures other than `DocumentNotFound` (a
    /// missing collection, too, means no host wrote a record yet). A stream
    /// that cannot be read leaves the run `QUEUED`.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it reads, and its one write (a triggered handle's
    /// expired record) is create-only.
    pub async fn status(&self) -> Result<RunRecord, CallError> {
        let inner = &self.client.inner;
        // At most twice: a host may write the record while we look.
        for _ in 0..2 {
            match self.read().await? {
                Some(record) => return Ok(record),
                None => match expired::check(inner, &self.run_id, self.triggered).await {
                    Ok(expired::Unrun::Queued) => break,
                    Ok(expired::Unrun::Expired(record)) => return Ok(record),
                    Ok(expired::Unrun::Raced) => {}
                    Ok(expired::Unrun::Unknown) => {
                        return Err(CallError::new(
                            CallErrorKind::RunNotFound,
                            format!(
                                "no run {} of job {} of {}: no record, and no trigger of the job stored at its sequence",
                                self.run_id, inner.job, inner.module_id
                            ),
                        ));
                    }
                    Err(e) => {
                        debug!(run_id = %self.run_id, error = %e, "trigger not looked up");
                        break;
                    }
                },
            }
        }
        Ok(RunRecord::queued(&self.run_id, &inner.job))
    }

    /// The stored record, `None` when there is none.
    async fn read(&self) -> Result<Option<RunRecord>, CallError> {
        let inner = &self.client.inner;
        let collection = jobs::runs_collection(&inner.project);
        match inner.documents.get(&collection, &self.run_id).await {
            Ok(doc) => Ok(Some(RunRecord::from_data(
                &self.run_id,
                &inner.job,
                doc.version,
                doc.data,
            ))),
            Err(e)
                if matches!(
                    e.kind(),
                    CallErrorKind::DocumentNotFound | CallErrorKind::CollectionNotFound
                ) =>
            {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Waits until the run ends, at most `timeout`, polling every
    /// [`DEFAULT_WAIT_POLL_INTERVAL`].
    ///
    /// # Errors
    ///
    /// As [`JobRun::wait_with`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn wait(&self, timeout: Duration) -> Result<RunRecord, WaitError> {
        self.wait_with(timeout, DEFAULT_WAIT_POLL_INTERVAL).await
    }

    /// Waits until the run ends, at most `timeout`: wakes on the job's
    /// completion notice, and reads the record every `poll_interval` in case
    /// a notice was lost. Unlike the reference there is always a deadline,
    /// and a trigger that expired unrun ends the wait (see
    /// [`JobRun::status`]).
    ///
    /// # Errors
    ///
    /// `TimedOut` past the deadline, `Status` when reading the record fails,
    /// `Transport` when the notice subscription cannot be made.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads and subscribes.
    pub async fn wait_with(
        &self,
        timeout: Duration,
        poll_interval: Duration,
    ) -> Result<RunRecord, WaitError> {
        let deadline = Instant::now() + timeout;
        let inner = &self.client.inner;
        let timed_out = || {
            WaitError::new(
                WaitErrorKind::TimedOut,
                format!("run {} not finished after {timeout:?}", self.run_id),
            )
        };
        // Subscribed (and the SUB flushed) before the first read, so a notice
        // sent between that read and the first poll is not missed.
        let mut notices = timeout_at(deadline, async {
            let sub = inner.nats.subscribe(inner.subjects.done()).await?;
            inner.nats.flush().await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(sub)
        })
        .await
        .map_err(|_| timed_out())?
        .map_err(|e| {
            WaitError::new(WaitErrorKind::Transport, "cannot subscribe to notices").with_source(e)
        })?;
        loop {
            let record = timeout_at(deadline, self.status())
                .await
                .map_err(|_| timed_out())?
                .map_err(|e| {
                    WaitError::new(WaitErrorKind::Status, e.message().to_owned()).with_source(e)
                })?;
            if record.is_terminal() {
                return Ok(record);
            }
            let next_poll = Instant::now() + poll_interval;
            // Until a notice of this run, the next poll, or the deadline.
            loop {
                tokio::select! {
                    () = sleep_until(deadline) => return Err(timed_out()),
                    () = sleep_until(next_poll) => break,
                    notice = notices.next() => match notice {
                        Some(msg) if is_notice_of(&msg.payload, &self.run_id) => break,
                        Some(_) => {}
                        // The subscription ended (connection closed): keep polling.
                        None => {
                            sleep_until(next_poll.min(deadline)).await;
                            break;
                        }
                    },
                }
            }
        }
    }

    /// Asks the module's hosts to cancel the run (the bare run id, core
    /// NATS, on the module's cancel subject), signed with the caller's
    /// token in `Nats-Auth-Token` as other calls are. Our hosts refuse a
    /// cancel whose token the document service does not accept; the
    /// reference's hosts ignore the header. Cooperative; our hosts also
    /// cancel queued and retrying runs, the reference's only running ones.
    ///
    /// # Errors
    ///
    /// `Transport` when the publish or its flush fails.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe; a cancelled call may or may not have sent the cancel.
    pub async fn cancel(&self) -> Result<(), CancelError> {
        let inner = &self.client.inner;
        let mut headers = async_nats::HeaderMap::new();
        match inner.token.token() {
            Ok(token) => headers.insert(abi_wire::auth::AUTH_HEADER, token.as_str()),
            // Sent unsigned, as the reference's caller sends every cancel.
            Err(e) => debug!(run_id = %self.run_id, error = %e, "cancel sent without a token"),
        }
        let sent = async {
            inner
                .nats
                .publish_with_headers(inner.subjects.cancel(), headers, self.run_id.clone().into())
                .await?;
            inner.nats.flush().await?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        };
        tokio::time::timeout(inner.trigger_timeout, sent)
            .await
            .map_err(|_| {
                CancelError::new(CancelErrorKind::Transport, "cancel not flushed in time")
            })?
            .map_err(|e| {
                CancelError::new(CancelErrorKind::Transport, "cancel not sent").with_source(e)
            })
    }
}

/// Whether a completion notice (`{"run_id": ..., "status": ...}`) is about
/// `run_id`. Malformed notices are ignored: the poll still ends the wait.
fn is_notice_of(payload: &[u8], run_id: &str) -> bool {
    serde_json::from_slice::<serde_json::Value>(payload)
        .ok()
        .and_then(|v| {
            v.get("run_id")
                .and_then(|r| r.as_str().map(|r| r == run_id))
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_match_by_run_id_only() {
        assert!(is_notice_of(
            br#"{"run_id": "ingest:4", "status": "SUCCEEDED"}"#,
            "ingest:4"
        ));
        assert!(!is_notice_of(br#"{"run_id": "ingest:40"}"#, "ingest:4"));
        assert!(!is_notice_of(b"not json", "ingest:4"));
    }
}
