//! A run whose RUNNING record was decided but not stored: the document
//! service (`abi-documents`, a process) cannot grow its write-ahead log
//! past a file-size limit, so the record's commit fails after the service
//! told the host it would store it. The handler, started on that word,
//! runs once; its outcome is written in the record's place once the disk
//! takes writes again, and the run is not run a second time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;

use abi_sdk::jobs::JobSpec;
use abi_test_support::wait_until;
use abi_wire::jobs::JobSubjects;
use serde_json::json;
use tokio::process::{Child, Command};

use super::jobs_fixture::{DEADLINE, SECRET, Setup, fast, wait_documents_serve};
use super::jobs_record_calls::finished;

const MODULE: &str = "acme.claims";

/// Our document service as a process over `dir`, SIGXFSZ ignored (a write
/// past the file-size limit then fails rather than kills it).
fn documents(setup: &Setup, dir: &std::path::Path) -> Child {
    let beside = std::path::Path::new(env!("CARGO_BIN_EXE_job-module"));
    let bin = abi_test_support::workspace_binary(beside, "abi-documents", "abi-documents");
    Command::new("sh")
        .args(["-c", "trap '' XFSZ; exec \"$0\""])
        .arg(bin)
        .env("NATS_URL", setup.server.url())
        .env("ABI_JWT_SECRET", SECRET)
        .env("ABI_DOCUMENTS_DATA_DIR", dir)
        .env("ABI_LOG", "error")
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Sets `child`'s soft file-size limit (`None`: none).
fn limit_file_size(child: &Child, bytes: Option<u64>) {
    let pid = rustix::process::Pid::from_raw(child.id().unwrap() as i32).unwrap();
    let limit = rustix::process::Rlimit {
        current: bytes,
        maximum: None,
    };
    rustix::process::prlimit(Some(pid), rustix::process::Resource::Fsize, limit).unwrap();
}

/// The size of the write-ahead log in `dir`, where the next commit goes.
fn wal_size(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap())
        .find(|entry| entry.file_name().to_string_lossy().ends_with("-wal"))
        .map(|entry| entry.metadata().unwrap().len())
        .expect("a write-ahead log")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_running_record_was_not_stored_runs_once_and_is_recorded_later() {
    let setup = Setup::start_without_documents().await;
    let dir = tempfile::tempdir().unwrap();
    let mut service = documents(&setup, dir.path());
    wait_documents_serve(&setup.client("probe", "none")).await;
    let (host, calls) = setup
        .host(MODULE, "rust-1", JobSpec::new("ingest").unwrap(), fast())
        .await;
    let mut done = setup
        .nats
        .subscribe(JobSubjects::new(&setup.project, MODULE, "ingest").done())
        .await
        .unwrap();
    setup.nats.flush().await.unwrap();
    let job = setup.client(MODULE, "ingest");

    // A run stored as usual: the collection and the log exist.
    let first = job.trigger(json!({}), None).await.unwrap();
    assert!(
        finished(&mut done, first.run_id())
            .await
            .contains("SUCCEEDED")
    );
    assert_eq!(calls.count(), 1);

    // No room for another commit: the next RUNNING record is decided, and
    // its commit fails.
    limit_file_size(&service, Some(wal_size(dir.path())));
    let second = job.trigger(json!({}), None).await.unwrap();
    wait_until(DEADLINE, || async { calls.count() == 2 })
        .await
        .expect("the handler starts on the decision");
    // No record yet: the client reads a stored trigger as QUEUED, version 0.
    let queued = second.status().await.unwrap();
    assert_eq!((queued.status.as_str(), queued.version), ("QUEUED", 0));

    // Room again: the outcome is written, and the run is not run again.
    limit_file_size(&service, None);
    let notice = finished(&mut done, second.run_id()).await;
    assert!(notice.contains("SUCCEEDED"), "{notice}");
    let record = second.status().await.unwrap();
    assert_eq!((record.status.as_str(), record.attempt), ("SUCCEEDED", 1));
    assert_eq!(calls.count(), 2, "the handler ran once per run");

    wait_until(DEADLINE, || async { host.running() == 0 })
        .await
        .unwrap();
    host.close_now().await;
    service.kill().await.unwrap();
    setup.stop().await;
}
