//! Retention: the upkeep deletes finished run records past the reference's
//! ages (7 days, SKIPPED after 1 hour) and beyond `max_runs_per_job`;
//! newer records, active runs and other jobs' runs stay.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use abi_sdk::documents::{CollectionSpec, Data, Datetime};
use abi_sdk::jobs::{JobHostOptions, JobRetention, JobSpec};
use abi_test_support::wait_until;
use abi_wire::jobs;

use super::jobs_fixture::{DEADLINE, Setup, fast};

const MODULE: &str = "acme.billing";

fn ago(secs: i64) -> String {
    Datetime::from_unix_micros(Datetime::now().unix_micros() - secs * 1_000_000)
        .unwrap()
        .isoformat()
}

const HOUR: i64 = 3600;
const DAY: i64 = 24 * HOUR;

/// `(sequence, job, status, finished_at)` seeded before the first host starts.
const SEEDED: [(u64, &str, &str, i64); 9] = [
    (1, "ingest", "SUCCEEDED", 8 * DAY),
    (2, "ingest", "FAILED", 8 * DAY),
    (3, "ingest", "SKIPPED", 2 * HOUR),
    (4, "ingest", "SUCCEEDED", 6 * DAY),
    (5, "ingest", "SKIPPED", HOUR / 2),
    (6, "ingest", "FAILED", DAY),
    // Active runs are never pruned, whatever their fields say.
    (7, "ingest", "RUNNING", 30 * DAY),
    (8, "ingest", "RETRYING", 30 * DAY),
    // Not this host's job.
    (9, "other", "SUCCEEDED", 30 * DAY),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_upkeep_prunes_old_finished_runs_and_keeps_the_rest() {
    let setup = Setup::start().await;
    let docs = setup.links(MODULE, "x").documents;
    let collection = jobs::runs_collection(&setup.project);
    docs.ensure_collection(CollectionSpec::new(collection.clone()))
        .await
        .unwrap();
    let id = |job: &str, sequence| jobs::run_id(job, sequence);
    let seed = |sequence, job: &str, status: &str, finished: i64| {
        let mut data = Data::new();
        data.insert("job".into(), job.into());
        data.insert("run_id".into(), id(job, sequence).into());
        data.insert("status".into(), status.into());
        data.insert("finished_at".into(), ago(finished).into());
        let (docs, collection, run_id) = (&docs, &collection, id(job, sequence));
        async move {
            docs.put(collection, &run_id, data, Some(0)).await.unwrap();
        }
    };
    for (sequence, job, status, finished) in SEEDED {
        seed(sequence, job, status, finished).await;
    }
    let present = |job: &'static str, sequence| {
        let (docs, collection) = (&docs, &collection);
        async move {
            docs.try_get(collection, &id(job, sequence))
                .await
                .unwrap()
                .is_some()
        }
    };
    let remaining = || async {
        let mut left = Vec::new();
        for (sequence, job, _, _) in SEEDED {
            if present(job, sequence).await {
                left.push(sequence);
            }
        }
        left
    };

    // The first upkeep pass at start: the reference's default ages.
    let (host, _) = setup
        .host(MODULE, "rust-1", JobSpec::new("ingest").unwrap(), fast())
        .await;
    wait_until(DEADLINE, || async { remaining().await.len() == 6 })
        .await
        .expect("the runs past their age are pruned");
    assert_eq!(remaining().await, [4, 5, 6, 7, 8, 9]);
    assert_eq!(host.prune().await.unwrap(), 0, "nothing more to prune");
    host.close_now().await;

    // Another host keeping 2 finished runs per job: the age first, then the
    // oldest finished runs beyond 2.
    seed(10, "ingest", "CANCELLED", 10 * DAY).await;
    let options = JobHostOptions {
        retention: Some(JobRetention {
            max_runs_per_job: 2,
            ..JobRetention::default()
        }),
        ..fast()
    };
    let (host, _) = setup
        .host(MODULE, "rust-2", JobSpec::new("ingest").unwrap(), options)
        .await;
    wait_until(DEADLINE, || async {
        !present("ingest", 10).await && !present("ingest", 4).await
    })
    .await
    .expect("the old run and the oldest beyond the limit are pruned");
    assert_eq!(remaining().await, [5, 6, 7, 8, 9]);
    assert_eq!(host.prune().await.unwrap(), 0);
    host.close_now().await;

    setup.stop().await;
}
