//! The jobs view: every job and workflow live instances declare, once per
//! (module, contract major, name), with its triggers and their next ticks.
//! Pure: the clock and the times the `every` schedules were stored are
//! arguments.

use std::collections::BTreeMap;

use abi_registry::overview::{major_of, module_of};
use abi_registry::pb;
use abi_sdk::jobs::Trigger;
use jiff::Timestamp;
use serde::Serialize;

use super::schedule::{self, TICKS_SHOWN};

/// A declared job or workflow.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct JobRow {
    /// The module declaring it.
    pub module_id: String,
    /// Its contract major.
    pub contract_major: u32,
    /// Its name.
    pub name: String,
    /// `job` or `workflow`.
    pub kind: String,
    /// Its description.
    pub description: String,
    /// Runs at once per instance.
    pub max_concurrency: u32,
    /// Attempts per run.
    pub max_attempts: u32,
    /// Seconds an attempt may take (0: no limit).
    pub timeout_seconds: f64,
    /// Its triggers.
    pub triggers: Vec<TriggerRow>,
    /// Live instances declaring it.
    pub instances: usize,
}

/// A trigger and when it fires next.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct TriggerRow {
    /// `cron`, `every` or `event`.
    pub kind: String,
    /// The expression, interval or subject.
    pub spec: String,
    /// The cron's time zone (empty: UTC).
    pub time_zone: String,
    /// The next ticks (ISO 8601, UTC), for schedules.
    pub next: Vec<String>,
    /// Why the next ticks cannot be told, if so.
    pub note: String,
}

/// Where an `every` schedule's stored time is asked for: (module, job,
/// schedule index among the job's cron and every triggers).
pub type StoredAt<'a> = &'a dyn Fn(&str, &str, usize) -> Option<Timestamp>;

/// The declared jobs of `live`'s instances, by module, major and name,
/// with the next ticks after `now`.
pub fn jobs_view(live: &pb::RegistryState, now: Timestamp, stored_at: StoredAt<'_>) -> Vec<JobRow> {
    let mut rows: BTreeMap<(String, u32, String), JobRow> = BTreeMap::new();
    for instance in live.records.iter().filter_map(|r| r.instance.as_ref()) {
        let module_id = module_of(instance);
        for job in instance.descriptor.iter().flat_map(|d| &d.jobs) {
            let key = (module_id.to_owned(), major_of(instance), job.name.clone());
            rows.entry(key)
                .or_insert_with(|| job_row(module_id, major_of(instance), job, now, stored_at))
                .instances += 1;
        }
    }
    rows.into_values().collect()
}

fn job_row(
    module_id: &str,
    contract_major: u32,
    job: &pb::JobDescriptor,
    now: Timestamp,
    stored_at: StoredAt<'_>,
) -> JobRow {
    let mut schedule_index = 0;
    let triggers = job
        .triggers
        .iter()
        .map(|t| {
            let mut row = TriggerRow {
                kind: t.kind.clone(),
                spec: t.spec.clone(),
                time_zone: t.time_zone.clone(),
                ..TriggerRow::default()
            };
            let ticks = match Trigger::from_pb(t) {
                Ok(Trigger::Cron {
                    expression,
                    time_zone,
                    ..
                }) => {
                    schedule_index += 1;
                    Some(schedule::cron_ticks(
                        &expression,
                        &time_zone,
                        now,
                        TICKS_SHOWN,
                    ))
                }
                Ok(Trigger::Every { interval, .. }) => {
                    let stored = stored_at(module_id, &job.name, schedule_index);
                    schedule_index += 1;
                    Some(schedule::every_ticks(&interval, stored, now, TICKS_SHOWN))
                }
                Ok(Trigger::OnEvent { .. }) => None,
                Err(err) => {
                    row.note = err.to_string();
                    None
                }
            };
            match ticks {
                Some(Ok(ticks)) => row.next = ticks.iter().map(ToString::to_string).collect(),
                Some(Err(err)) => row.note = err.to_string(),
                None => {}
            }
            row
        })
        .collect();
    JobRow {
        module_id: module_id.to_owned(),
        contract_major,
        name: job.name.clone(),
        kind: if job.kind.is_empty() {
            abi_wire::jobs::PLAIN_KIND.to_owned()
        } else {
            job.kind.clone()
        },
        description: job.description.clone(),
        max_concurrency: job.max_concurrency,
        max_attempts: job.max_attempts,
        timeout_seconds: job.timeout_seconds,
        triggers,
        instances: 0,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use abi_sdk::jobs::JobSpec;

    fn instance(id: &str, jobs: Vec<pb::JobDescriptor>) -> pb::RegistryRecord {
        pb::RegistryRecord {
            instance: Some(pb::Instance {
                instance_id: id.into(),
                descriptor: Some(pb::ModuleDescriptor {
                    module_id: "billing".into(),
                    contract_major: 1,
                    jobs,
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn each_job_once_with_its_next_ticks() {
        let job = JobSpec::new("ingest")
            .unwrap()
            .trigger(Trigger::cron("0 0 6 * * *", "UTC", None).unwrap())
            .unwrap()
            .trigger(Trigger::every("1m", None).unwrap())
            .unwrap()
            .trigger(Trigger::on_event("evt.x.>", None).unwrap())
            .unwrap()
            .to_descriptor();
        let live = pb::RegistryState {
            records: vec![
                instance("i-1", vec![job.clone()]),
                instance("i-2", vec![job]),
            ],
        };
        let now: Timestamp = "2026-12-05T10:00:30Z".parse().unwrap();
        let stored = |module: &str, name: &str, index: usize| {
            assert_eq!((module, name, index), ("billing", "ingest", 1));
            Some("2026-12-05T10:00:00Z".parse().unwrap())
        };
        let rows = jobs_view(&live, now, &stored);
        assert_eq!(rows.len(), 1);
        let row = &rows[0];
        assert_eq!((row.name.as_str(), row.instances), ("ingest", 2));
        assert_eq!(row.kind, abi_wire::jobs::PLAIN_KIND);
        assert_eq!(row.triggers[0].next[0], "2026-12-06T06:00:00Z");
        assert_eq!(
            row.triggers[1].next,
            [
                "2026-12-05T10:01:00Z",
                "2026-12-05T10:02:00Z",
                "2026-12-05T10:03:00Z"
            ]
        );
        assert!(row.triggers[2].next.is_empty() && row.triggers[2].note.is_empty());
        let unpublished = jobs_view(&live, now, &|_, _, _| None);
        assert_eq!(
            unpublished[0].triggers[1].note,
            "the schedule is not published"
        );
    }
}
