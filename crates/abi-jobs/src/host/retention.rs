//! Retention of finished run records (the reference's `prune`), run by the
//! upkeep after the reaper: per job, terminal runs other than SKIPPED whose
//! `finished_at` is older than `max_age` go, SKIPPED ones after
//! `skipped_max_age`, then the oldest finished runs beyond
//! `max_runs_per_job`; at most `batch` deletions per pass, each a
//! compare-and-swap on the version read. The queries are the reference's
//! (`finished_at` compared as text with its timestamp format); unlike the
//! reference, the runs are read with a cursor, so a pass is not cut short
//! by a page of 1000 or by records another replica updated meanwhile.
//! QUEUED, RUNNING and RETRYING runs are never touched. Logs live in the
//! record, so they go with it.

use std::time::Duration;

use abi_document_model::{Datetime, FindQuery, OrderBy, Predicate, Value};
use abi_wire::jobs::{self as wire, field};
use futures::StreamExt as _;
use tracing::info;

use super::{Job, JobHostError, Shared};
use abi_sdk_core::CallErrorKind;

/// The largest page the document service serves.
const MAX_PAGE: u64 = abi_document_model::validate::MAX_PAGE_SIZE as u64;

/// How long a host keeps finished run records; the defaults are the
/// reference's `JobRetention` (its `interval` is
/// [`super::JobHostOptions::upkeep_interval`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRetention {
    /// Finished runs (not SKIPPED) older than this go (default 7 days).
    pub max_age: Duration,
    /// Each job keeps at most this many finished runs, the newest (default
    /// 1000; 0 counts as 1, as the reference refuses it).
    pub max_runs_per_job: u64,
    /// SKIPPED runs older than this go (default 1 hour): polls that did
    /// nothing would drown the history.
    pub skipped_max_age: Duration,
    /// At most this many deletions per pass (default 200; 0 counts as 1).
    pub batch: u64,
}

impl Default for JobRetention {
    fn default() -> Self {
        Self {
            max_age: Duration::from_secs(7 * 24 * 3600),
            max_runs_per_job: 1000,
            skipped_max_age: Duration::from_secs(3600),
            batch: 200,
        }
    }
}

/// `(now - age).isoformat()`, the reference's cutoff text.
fn cutoff(now: Datetime, age: Duration) -> String {
    let micros = i64::try_from(age.as_micros()).unwrap_or(i64::MAX);
    Datetime::from_unix_micros(now.unix_micros().saturating_sub(micros))
        .unwrap_or(now)
        .isoformat()
}

fn statuses(list: &[&str]) -> Value {
    Value::List(list.iter().map(|s| Value::from(*s)).collect())
}

/// The two queries of a job's expired runs, at `now`: finished runs other
/// than SKIPPED whose `finished_at` is older than `max_age`, and SKIPPED
/// runs older than `skipped_max_age`. Runs not finished never match.
fn expired(job: &str, retention: &JobRetention, now: Datetime) -> [Vec<Predicate>; 2] {
    let kept: Vec<&str> = wire::TERMINAL_STATUSES
        .iter()
        .copied()
        .filter(|s| *s != wire::SKIPPED)
        .collect();
    let older = |list: &[&str], age: Duration| {
        vec![
            Predicate::new(field::JOB, "eq", job),
            Predicate::new(field::STATUS, "in", statuses(list)),
            Predicate::new(field::FINISHED_AT, "lt", cutoff(now, age)),
        ]
    };
    [
        older(&kept, retention.max_age),
        older(&[wire::SKIPPED], retention.skipped_max_age),
    ]
}

/// The query of a job's finished runs (what `max_runs_per_job` counts).
fn finished(job: &str) -> Vec<Predicate> {
    vec![
        Predicate::new(field::JOB, "eq", job),
        Predicate::new(field::STATUS, "in", statuses(&wire::TERMINAL_STATUSES)),
    ]
}

/// How many of a job's `count` finished runs are beyond what it keeps (0
/// counts as 1, as the reference refuses it).
fn excess(count: i64, retention: &JobRetention) -> u64 {
    u64::try_from(count)
        .unwrap_or(0)
        .saturating_sub(retention.max_runs_per_job.max(1))
}

/// One retention pass over `jobs`; returns how many runs it deleted.
pub(super) async fn prune(
    shared: &Shared,
    jobs: &[Job],
    retention: &JobRetention,
) -> Result<u64, JobHostError> {
    let now = Datetime::now();
    let batch = retention.batch.max(1);
    let mut budget = batch;
    for job in jobs {
        let name = job.spec.name();
        for where_ in expired(name, retention, now) {
            if budget == 0 {
                return Ok(batch);
            }
            budget -= delete(shared, where_, None, budget).await?;
        }
        if budget == 0 {
            return Ok(batch);
        }
        let count = shared
            .links
            .documents
            .count(&shared.collection, finished(name))
            .await?;
        let excess = excess(count, retention);
        if excess > 0 {
            let order = Some(OrderBy::asc(field::FINISHED_AT));
            budget -= delete(shared, finished(name), order, excess.min(budget)).await?;
        }
    }
    let deleted = batch - budget;
    if deleted > 0 {
        info!(deleted, "finished job runs pruned");
    }
    Ok(deleted)
}

/// Deletes up to `limit` records matching `where_` (in `order`), page
/// after page; returns how many it deleted.
async fn delete(
    shared: &Shared,
    where_: Vec<Predicate>,
    order_by: Option<OrderBy>,
    limit: u64,
) -> Result<u64, JobHostError> {
    let query = FindQuery {
        where_,
        order_by,
        limit: i64::try_from(limit.min(MAX_PAGE)).unwrap_or(1),
        ..FindQuery::default()
    };
    let documents = &shared.links.documents;
    let mut found = std::pin::pin!(documents.find_all(&shared.collection, query));
    let mut deleted = 0;
    while deleted < limit {
        let Some(doc) = found.next().await else {
            break;
        };
        let doc = doc?;
        match documents
            .delete(&shared.collection, &doc.id, Some(doc.version))
            .await
        {
            Ok(()) => deleted += 1,
            // Another replica pruned or updated it.
            Err(e)
                if matches!(
                    e.kind(),
                    CallErrorKind::VersionConflict | CallErrorKind::DocumentNotFound
                ) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_cutoff_is_the_references_isoformat() {
        // 2026-09-21T14:13:20.123456+00:00 less 7 days.
        let now = Datetime::from_unix_micros(1_790_000_000_123_456).unwrap();
        let week = JobRetention::default().max_age;
        assert_eq!(cutoff(now, week), "2026-09-14T14:13:20.123456+00:00");
        let whole = Datetime::from_unix_micros(1_790_000_000_000_000).unwrap();
        assert_eq!(
            cutoff(whole, Duration::from_secs(3600)),
            "2026-09-21T13:13:20+00:00"
        );
    }

    #[test]
    fn a_job_keeps_its_newest_finished_runs_and_at_least_one() {
        let keep = |n| JobRetention {
            max_runs_per_job: n,
            ..JobRetention::default()
        };
        let rows = [
            (0, keep(1000), 0),
            (1000, keep(1000), 0),
            (1005, keep(1000), 5),
            (3, keep(0), 2),
            (-1, keep(10), 0),
        ];
        for (count, retention, expected) in rows {
            assert_eq!(excess(count, &retention), expected, "{count} {retention:?}");
        }
    }

    #[test]
    fn expired_runs_are_finished_ones_past_their_age_skipped_ones_sooner() {
        let now = Datetime::from_unix_micros(1_790_000_000_000_000).unwrap();
        let retention = JobRetention::default();
        let [kept, skipped] = expired("ingest", &retention, now);
        let status_list = |where_: &[Predicate]| where_[1].value.clone();
        let not_skipped: Vec<&str> = wire::TERMINAL_STATUSES
            .iter()
            .copied()
            .filter(|s| *s != wire::SKIPPED)
            .collect();
        assert_eq!(status_list(&kept), statuses(&not_skipped));
        assert_eq!(status_list(&skipped), statuses(&[wire::SKIPPED]));
        for where_ in [&kept, &skipped] {
            assert_eq!(where_[0].value, Value::from("ingest"));
            assert_eq!(where_[2].field, field::FINISHED_AT);
            assert_eq!(where_[2].operator, "lt");
        }
        assert_eq!(kept[2].value, Value::from(cutoff(now, retention.max_age)));
        assert_eq!(
            skipped[2].value,
            Value::from(cutoff(now, retention.skipped_max_age))
        );
        for status in [wire::QUEUED, wire::RUNNING, wire::RETRYING] {
            let unfinished = Value::from(status);
            for where_ in [&kept, &skipped, &finished("ingest")] {
                let Value::List(listed) = &where_[1].value else {
                    panic!("a status list")
                };
                assert!(!listed.contains(&unfinished), "{status} is never pruned");
            }
        }
    }
}
