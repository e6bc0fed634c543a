//! `abi-bench agents --smoke` end to end: a real nats-server, the real
//! `abi-discovery` and `abi-documents` binaries, the raw floor and our
//! module (ModelHost and AgentHost under the runner) as processes of this
//! binary, and the Python reference's module under its `run_module`, a few
//! calls each. A correctness check of the tables only: no timing is asserted.

use crate::common::{SmokeRun, is_latency, is_number};

const COLUMNS: [&str; 3] = [
    "raw request-reply floor",
    "ours (Rust ModelHost, AgentHost)",
    "reference (Python ModelHost, AgentHost)",
];

#[test]
fn smoke_run_measures_every_call_kind_on_every_target() {
    let run = SmokeRun::run("agents", &COLUMNS);
    let stdout = &run.stdout;
    let rows = &run.rows;
    let row = |prefix: &str| run.row(prefix);
    // The floor measures only request-reply; the hosts only chats and invokes.
    let (floor, hosts) = (1..2, 2..4);
    for (kind, measured_by) in [
        ("raw request-reply", floor.clone()),
        ("chat invoke", hosts.clone()),
        ("agent invoke, submit to result", hosts.clone()),
    ] {
        let latency = row(&format!("{kind}, one at a time"));
        let rate = row(&format!("{kind}, throughput with 64 callers"));
        let cpu = row(&format!("CPU per call, {kind} at 64 callers"));
        for i in 1..=COLUMNS.len() {
            if measured_by.contains(&i) {
                assert!(is_latency(&latency[i]), "{kind} latency: {latency:?}");
                assert!(
                    is_number(&rate[i]) && rate[i] != "0",
                    "{kind} throughput: {rate:?}"
                );
                let parts: Vec<&str> = cpu[i].split(" / ").collect();
                assert!(
                    parts.len() == 5 && parts.iter().all(|p| is_number(p)),
                    "five processes' CPU per call: {cpu:?}"
                );
            } else {
                for r in [latency, rate, cpu] {
                    assert_eq!(r[i], "—", "{kind} is not measured there: {r:?}");
                }
            }
        }
    }
    for label in [
        "host process CPU",
        "host process peak RSS",
        "abi-documents CPU",
        "abi-discovery CPU",
        "nats-server CPU",
    ] {
        let r = row(label);
        assert!(r[1..].iter().all(|c| is_number(c)), "{label}: {r:?}");
    }
    // Both hosts keep the reference's records; the reference writes them one
    // per request, ours in batches; a chat makes none.
    let requests = row("service requests per call, agent invoke");
    assert!(requests[1] == "—", "{requests:?}");
    for cell in &requests[2..] {
        assert!(
            cell.starts_with("documents ") && cell.contains("; discovery"),
            "documents and discovery requests per invoke: {requests:?}"
        );
    }
    // Per invoke, ours: no discovery request but the caller's once-a-second
    // instance list; two batches (the record and the claim; the events,
    // result, outcome and the claim's release) and one get, the submit's
    // (the caller takes the result from the pushed events, no Status). The
    // reference's host keeps its 11 puts and asks discovery on every submit
    // (our caller drives both).
    let (ours, reference) = (&requests[2], &requests[3]);
    assert_eq!(count(ours, "batch "), Some(2.0), "{requests:?}");
    assert_eq!(count(ours, "put "), None, "{requests:?}");
    assert_eq!(count(ours, "documents "), Some(3.0), "{requests:?}");
    assert_eq!(count(reference, "put "), Some(11.0), "{requests:?}");
    assert!(
        count(ours, "get ").is_some_and(|g| g < 2.0),
        "no Status read after a pushed success: {requests:?}"
    );
    assert!(
        count(ours, "; discovery ").is_some_and(|d| d < 0.5) && !ours.contains("authorize_agent"),
        "the submit's grant and route are cached: {requests:?}"
    );
    assert_eq!(
        count(reference, "authorize_agent "),
        Some(1.0),
        "{requests:?}"
    );
    let requests = row("service requests per call, chat invoke");
    assert!(
        requests[2..].iter().all(|c| c.starts_with("documents 0;")),
        "a chat touches no document: {requests:?}"
    );
    let failed = row("failed calls by code");
    assert_eq!(&failed[1..], ["0", "0", "0"], "every call succeeded");
    assert_eq!(rows.len(), 17, "no other rows:\n{stdout}");

    let verdicts = &run.verdicts;
    assert_eq!(verdicts[0], ["target", "measured", "verdict"]);
    assert_eq!(verdicts.len(), 2 + 2, "two targets:\n{stdout}");
    for verdict in &verdicts[2..] {
        assert!(
            verdict[2] == "**met**" || verdict[2] == "**missed**",
            "every target judged: {verdict:?}"
        );
    }
}

/// The number after `label` in a requests cell (`documents 3.00 (batch 2.00,
/// get 1.00); discovery 0.05 (...)`).
fn count(cell: &str, label: &str) -> Option<f64> {
    let at = cell.find(label)? + label.len();
    let rest = &cell[at..];
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// A served target stops on SIGTERM even with its nats-server gone: its last
/// flush gives up instead of waiting for a reconnect that never comes.
#[tokio::test]
async fn served_floor_stops_on_sigterm_with_its_server_gone() {
    use tokio::io::AsyncBufReadExt as _;

    let mut nats = abi_test_support::NatsServer::start().await;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_abi-bench"))
        .args(["agents", "--serve", "raw", &nats.url()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start abi-bench agents --serve raw");
    let mut lines = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let ready = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.expect("read stdout") {
            if line.trim() == "ready" {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(ready, Ok(true), "the floor never printed ready");

    nats.stop();
    let pid = child.id().expect("pid").to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("run kill");
    assert!(sent.success(), "kill -TERM {pid}");
    let exited = tokio::time::timeout(std::time::Duration::from_secs(8), child.wait()).await;
    let status = exited
        .expect("still running 8 s after SIGTERM with its server gone")
        .expect("wait for the floor");
    assert!(status.success(), "the floor exited with {status}");
}
