//! Prometheus metrics end to end: the service runs in process against a real
//! nats-server with `--metrics-addr`, answers a few requests (successes and
//! refusals), and `GET /metrics` reports them, agreeing with `$SRV.STATS`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::edges_common;

use std::collections::BTreeMap;
use std::net::SocketAddr;

use abi_discovery::config::Config;
use abi_proto::discovery::v1 as pb;
use abi_test_support::{NatsServer, unique_name};
use abi_wire::discovery::Operation;
use async_nats::HeaderMap;
use clap::Parser as _;
use edges_common::*;
use prost::Message as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// One scrape: the status line, the content type and the body.
struct Scrape {
    status: String,
    content_type: String,
    body: String,
}

/// `GET /metrics` with a bare HTTP/1.1 request (the response has a length).
async fn get_metrics(addr: SocketAddr) -> std::io::Result<Scrape> {
    let mut stream = TcpStream::connect(addr).await?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await?;
    let raw = String::from_utf8(raw).expect("the response is text");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a header block");
    let mut lines = head.lines();
    let status = lines.next().unwrap_or_default().to_owned();
    let header = |name: &str| {
        head.lines()
            .filter_map(|line| line.split_once(':'))
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .map(|(_, value)| value.trim().to_owned())
    };
    assert_eq!(header("transfer-encoding"), None, "a plain body: {head}");
    let length: usize = header("content-length").unwrap().parse().unwrap();
    assert_eq!(body.len(), length, "the whole body arrived");
    Ok(Scrape {
        status,
        content_type: header("content-type").unwrap_or_default(),
        body: body.to_owned(),
    })
}

/// The samples of a text exposition: `name{labels}` to value (labels as written).
fn samples(body: &str) -> BTreeMap<String, f64> {
    body.lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("`series value`");
            (series.to_owned(), value.parse().expect("a number"))
        })
        .collect()
}

/// The value of `series`, failing with the whole body when it is missing.
fn value(all: &BTreeMap<String, f64>, series: &str, body: &str) -> f64 {
    *all.get(series)
        .unwrap_or_else(|| panic!("{series} missing from:\n{body}"))
}

/// `run` in this process with metrics on `addr`.
struct Service {
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), abi_discovery::run::RunError>>,
    metrics: SocketAddr,
}

impl Service {
    /// Starts the service with metrics on a free port and waits until the metrics
    /// answer. Another process may grab the port between our probe and the bind;
    /// then `run` fails at once and we try another one.
    async fn start(url: &str, project: &str) -> Self {
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let metrics: SocketAddr = ([127, 0, 0, 1], port).into();
            let addr = metrics.to_string();
            let args = [
                "abi-discovery",
                "--nats-url",
                url,
                "--project",
                project,
                "--jwt-secret",
                SECRET,
                "--metrics-addr",
                &addr,
            ];
            let valid = Config::try_parse_from(args).unwrap().validate().unwrap();
            let shutdown = CancellationToken::new();
            let task = tokio::spawn(abi_discovery::run::run(valid, shutdown.clone()));
            let up = abi_test_support::wait_until(CALL_TIMEOUT, || async {
                task.is_finished() || get_metrics(metrics).await.is_ok()
            })
            .await;
            assert!(up.is_ok(), "the metrics answer within {CALL_TIMEOUT:?}");
            if !task.is_finished() {
                return Self {
                    shutdown,
                    task,
                    metrics,
                };
            }
            let error = task.await.unwrap().expect_err("run ended early");
            eprintln!("metrics port {port} was taken, trying another: {error:#}");
        }
        panic!("no free port for the metrics in 5 attempts");
    }

    async fn stop(self) -> Result<(), abi_discovery::run::RunError> {
        self.shutdown.cancel();
        tokio::time::timeout(CALL_TIMEOUT, self.task)
            .await
            .expect("the service stops within the deadline")
            .unwrap()
    }
}

#[tokio::test]
async fn metrics_count_requests_like_srv_stats() {
    let server = NatsServer::start().await;
    let project = unique_name("metrics");
    let service = Service::start(&server.url(), &project).await;
    let rpc = Rpc::connect(&server.url(), &project).await;
    // An owner announces itself once its endpoints serve; waiting this way sends
    // no discovery request, so every count below is the test's own.
    wait_for_owners(&rpc.client, 1).await;

    let research = module_token("research");
    let other = module_token("other");
    let registered: pb::RegisterResponse = rpc
        .call(
            Operation::Register,
            Some(&research),
            &register_request("research", "r1"),
        )
        .await;
    assert_eq!(registered.error, None);
    let renewed: pb::RenewResponse = rpc
        .call(
            Operation::Renew,
            Some(&research),
            &requests::renew_request("r1", true),
        )
        .await;
    assert_eq!(renewed.instance.unwrap().status, "READY");
    let starting: pb::RegisterResponse = rpc
        .call(
            Operation::Register,
            Some(&other),
            &register_request("other", "o1"),
        )
        .await;
    assert_eq!(starting.instance.unwrap().status, "STARTING");
    // Refusals: at the edge (no token) and by the rules.
    let anonymous: pb::RegisterResponse = rpc
        .call(Operation::Register, None, &register_request("other", "o2"))
        .await;
    assert_eq!(anonymous.error.unwrap().code, "UNAUTHENTICATED");
    let ghost: pb::RenewResponse = rpc
        .call(
            Operation::Renew,
            Some(&research),
            &requests::renew_request("ghost", false),
        )
        .await;
    assert_eq!(ghost.error.unwrap().code, "LEASE_EXPIRED");
    let lookup = |module_id: &str| pb::GetModuleRequest {
        module_id: module_id.into(),
        contract_major: 1,
        ..Default::default()
    };
    let found: pb::GetModuleResponse = rpc
        .call(Operation::GetModule, Some(&other), &lookup("research"))
        .await;
    assert_eq!(found.instances.len(), 1);
    let missing: pb::GetModuleResponse = rpc
        .call(Operation::GetModule, Some(&other), &lookup("nobody"))
        .await;
    assert_eq!(missing.error.unwrap().code, "MODULE_NOT_FOUND");
    // And one request nobody can answer: no reply subject.
    let mut headers = HeaderMap::new();
    headers.insert(abi_auth::AUTH_HEADER, research.as_str());
    rpc.client
        .publish_with_headers(
            abi_wire::discovery::operation(&rpc.project, Operation::Register),
            headers,
            register_request("research", "r9").encode_to_vec().into(),
        )
        .await
        .unwrap();
    rpc.client.flush().await.unwrap();

    // Replies are sent after counting, so only the dropped request needs a wait.
    let dropped = "abi_discovery_requests_dropped_total";
    abi_test_support::wait_until(CALL_TIMEOUT, || async {
        let scrape = get_metrics(service.metrics).await.unwrap();
        samples(&scrape.body).get(dropped) == Some(&1.0)
    })
    .await
    .expect("the dropped request is counted");

    let scrape = get_metrics(service.metrics).await.unwrap();
    assert_eq!(scrape.status, "HTTP/1.1 200 OK");
    assert_eq!(
        scrape.content_type,
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let body = &scrape.body;
    let all = samples(body);
    let get = |series: &str| value(&all, series, body);
    let requests = |op: &str, code: &str| {
        get(&format!(
            "abi_discovery_requests_total{{operation=\"{op}\",code=\"{code}\"}}"
        ))
    };
    assert_eq!(requests("register", "OK"), 2.0);
    assert_eq!(requests("register", "UNAUTHENTICATED"), 1.0);
    assert_eq!(requests("renew", "OK"), 1.0);
    assert_eq!(requests("renew", "LEASE_EXPIRED"), 1.0);
    assert_eq!(requests("get_module", "OK"), 1.0);
    assert_eq!(requests("get_module", "MODULE_NOT_FOUND"), 1.0);
    assert_eq!(requests("evict", "OK"), 0.0);
    assert_eq!(get(dropped), 1.0);
    let duration = |op: &str, part: &str| {
        get(&format!(
            "abi_discovery_request_duration_seconds_{part}{{operation=\"{op}\"}}"
        ))
    };
    assert_eq!(duration("register", "count"), 3.0);
    assert_eq!(
        get("abi_discovery_request_duration_seconds_bucket{operation=\"register\",le=\"+Inf\"}"),
        3.0
    );
    assert!(duration("register", "sum") > 0.0);
    assert_eq!(duration("evict", "count"), 0.0);

    // Four mutations reached the writer one at a time; three were written.
    assert_eq!(get("abi_discovery_writer_batch_size_count"), 4.0);
    assert_eq!(get("abi_discovery_writer_batch_size_sum"), 4.0);
    assert_eq!(get("abi_discovery_writer_batch_size_bucket{le=\"1\"}"), 4.0);
    assert_eq!(get("abi_discovery_writer_commits_total"), 3.0);
    assert_eq!(get("abi_discovery_cas_conflicts_total"), 0.0);
    assert_eq!(get("abi_discovery_cas_retries_total"), 0.0);
    assert_eq!(get("abi_discovery_registry_busy_total"), 0.0);
    let stored = snapshot_bytes(&rpc.client, &project).await;
    assert_eq!(get("abi_discovery_snapshot_bytes"), stored.len() as f64);

    let live = |status: &str| {
        get(&format!(
            "abi_discovery_live_instances{{status=\"{status}\"}}"
        ))
    };
    assert_eq!(live("READY"), 1.0);
    assert_eq!(live("STARTING"), 1.0);
    for status in ["STAGED", "DEGRADED", "DRAINING"] {
        assert_eq!(live(status), 0.0, "{status}");
    }

    // `$SRV.STATS` reports the same counts, from the same counters.
    let reply = rpc
        .client
        .request("$SRV.STATS.abi-discovery", "".into())
        .await
        .unwrap();
    let stats: serde_json::Value = serde_json::from_slice(&reply.payload).unwrap();
    for endpoint in stats["endpoints"].as_array().unwrap() {
        let op = endpoint["name"].as_str().unwrap();
        let prefix = format!("abi_discovery_requests_total{{operation=\"{op}\",");
        let (mut total, mut errors) = (0.0, 0.0);
        for (series, count) in all.range(prefix.clone()..) {
            if !series.starts_with(&prefix) {
                break;
            }
            total += count;
            if !series.ends_with("code=\"OK\"}") {
                errors += count;
            }
        }
        assert_eq!(endpoint["num_requests"].as_f64().unwrap(), total, "{op}");
        assert_eq!(endpoint["num_errors"].as_f64().unwrap(), errors, "{op}");
        assert_eq!(
            endpoint["data"]["dropped_without_reply_total"].as_f64(),
            Some(get(dropped))
        );
    }
    let register = stats["endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "register")
        .unwrap();
    assert_eq!(register["num_requests"], 3);

    let metrics = service.metrics;
    service.stop().await.unwrap();
    assert!(
        get_metrics(metrics).await.is_err(),
        "the metrics stop with the service"
    );
}

#[tokio::test]
async fn a_metrics_address_in_use_fails_the_start() {
    let server = NatsServer::start().await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let project = unique_name("metrics");
    let args = [
        "abi-discovery",
        "--nats-url",
        &server.url(),
        "--project",
        &project,
        "--jwt-secret",
        SECRET,
        "--metrics-addr",
        &addr,
    ];
    let valid = Config::try_parse_from(args).unwrap().validate().unwrap();
    let ended = tokio::time::timeout(
        CALL_TIMEOUT,
        abi_discovery::run::run(valid, CancellationToken::new()),
    )
    .await
    .expect("run gives up at once");
    let error = format!("{:#}", ended.expect_err("the port is taken"));
    assert!(error.contains("ABI_METRICS_ADDR"), "{error}");
}
