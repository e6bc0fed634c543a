//! The console in a real browser: Debian's Chromium, driven through its
//! chromedriver (WebDriver), against a real nats-server, the discovery and
//! document services and real module processes. Each view is loaded and
//! checked in the DOM; the pages follow a module starting and stopping, a
//! rollout cutting over and runs being triggered without a reload. A
//! screenshot of each view goes to `target/console-screenshots/`, and the
//! first paint with 250 instances and 10,000 job runs is measured there
//! (`first-paint.json`; a figure, not asserted: timing is for abi-bench).
//!
//! No browser, no pass: without Chromium and chromedriver these tests fail,
//! saying how to install them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use abi_sdk::documents::Data;
use abi_sdk::{DocumentClient, TokenSource};
use abi_sdk_e2e::{ModuleProc, SECRET, World};
use abi_test_support::{WireClient, requests, workspace_root};
use abi_wire::discovery::Operation;
use fantoccini::{Client, ClientBuilder, Locator};
use futures::StreamExt as _;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use super::console_fixture::{ConsoleUnderTest, DEADLINE, job_module, stop_process};
use super::jobs_fixture::Documents;

const JOBS: &str = "acme.jobs";
const ROLL: &str = "acme.roll";

/// Where a browser binary may be, first found wins (`ABI_CHROMIUM` first).
const CHROMIUM: [&str; 3] = [
    "/usr/bin/chromium",
    "/usr/bin/chromium-browser",
    "/usr/bin/google-chrome",
];
const CHROMEDRIVER: [&str; 2] = ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"];

fn find(env: &str, candidates: &[&str], what: &str) -> PathBuf {
    if let Ok(path) = std::env::var(env) {
        return PathBuf::from(path);
    }
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!(
                "no {what}: the console's browser test needs Debian's chromium and \
                 chromium-driver (`apt-get install chromium chromium-driver`, which \
                 scripts/setup.sh runs as root), or {env} naming the binary"
            )
        })
}

/// A headless Chromium session through a chromedriver of its own.
struct Browser {
    client: Client,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    async fn start() -> Self {
        let chromium = find("ABI_CHROMIUM", &CHROMIUM, "Chromium");
        let chromedriver = find("ABI_CHROMEDRIVER", &CHROMEDRIVER, "chromedriver");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // Its own process group: Chromium runs as chromedriver's child, and
        // the whole group goes when the test ends, passed or not.
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .expect("chromedriver starts");
        let profile = tempfile::tempdir().unwrap();
        // Headless, no sandbox (CI runs as root), and none of the
        // background connections a closed network refuses.
        let args = [
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-quic",
            "--no-first-run",
            "--window-size=1400,1000",
            &format!("--user-data-dir={}", profile.path().display()),
        ];
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            json!({"binary": chromium, "args": args}),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let url = format!("http://127.0.0.1:{port}");
        let deadline = tokio::time::Instant::now() + DEADLINE;
        // chromedriver takes a moment to listen.
        let client = loop {
            match ClientBuilder::new(connector.clone())
                .capabilities(capabilities.clone())
                .connect(&url)
                .await
            {
                Ok(client) => break client,
                Err(err) if tokio::time::Instant::now() < deadline => {
                    let _ = err;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(err) => panic!("no WebDriver session from chromedriver: {err}"),
            }
        };
        Self {
            client,
            driver,
            _profile: profile,
        }
    }

    async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap();
    }

    /// Waits until `css` names an element; it then.
    async fn wait_for(&self, css: &str) -> fantoccini::elements::Element {
        self.client
            .wait()
            .at_most(DEADLINE)
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css} never showed: {e}"))
    }

    /// Waits until the JavaScript expression is true.
    async fn wait_true(&self, expression: &str) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            if self.eval(expression).await == Value::Bool(true) {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "never true: {expression}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The value of a JavaScript expression in the page.
    async fn eval(&self, expression: &str) -> Value {
        let script = format!("return ({expression});");
        self.client.execute(&script, vec![]).await.unwrap()
    }

    async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        let dir = shots();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), png).unwrap();
    }

    async fn close(self) {
        self.client.clone().close().await.unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(pid) = self.driver.id() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", "--", &format!("-{pid}")])
                .status();
        }
    }
}

fn shots() -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace_root().join("target"));
    target.join("console-screenshots")
}

/// A CSS selector for `module`'s instance rows with `extra` attributes.
fn rows_of(module: &str, extra: &str) -> String {
    format!(r#"section[data-module="{module}"] tr[data-instance]{extra}"#)
}

fn rollout_env(world: &World, rollout: &str) -> Vec<(String, String)> {
    let mut env = world.module_env(ROLL);
    env.push(("ABI_ROLLOUT_ID".into(), rollout.into()));
    env.push(("ABI_ROLLOUT_MODULES".into(), ROLL.into()));
    env
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_view_follows_modules_a_rollout_and_runs_live_in_a_browser() {
    let world = World::start(5.0).await;
    let documents = Documents::start(&world.nats.url(), &world.project, SECRET).await;
    let console = ConsoleUnderTest::start(&world, true).await;
    let browser = Browser::start().await;

    // The modules view is open before the module starts: it appears, live.
    browser.goto(&console.url("/")).await;
    browser.wait_for(r#"#live[data-state="open"]"#).await;
    let mut jobs = job_module(&world, JOBS, false, &[]);
    browser
        .wait_for(&rows_of(JOBS, r#"[data-status="READY"]"#))
        .await;
    browser
        .wait_for(r#"svg#graph g[data-node="acme.jobs"]"#)
        .await;
    browser.screenshot("modules.png").await;

    // A rollout: v1 serves; v2 starts and cuts over; v1 drains and leaves.
    let mut v1 = ModuleProc::spawn(ROLL, &rollout_env(&world, "v1"));
    browser
        .wait_for(&rows_of(ROLL, r#"[data-generation="serving"]"#))
        .await;
    let mut v2 = ModuleProc::spawn(ROLL, &rollout_env(&world, "v2"));
    let v2_serving = format!(
        r#"Array.from(document.querySelectorAll('{}')).some(r => r.children[3].textContent === "v2")"#,
        rows_of(ROLL, r#"[data-generation="serving"]"#)
    );
    browser.wait_true(&v2_serving).await;
    browser.screenshot("rollout.png").await;
    v1.wait().await;
    let v1_gone = format!(
        r#"!Array.from(document.querySelectorAll('{}')).some(r => r.children[3].textContent === "v1")"#,
        rows_of(ROLL, "")
    );
    browser.wait_true(&v1_gone).await;
    // The last instance stops: the module leaves the page.
    v2.signal("TERM");
    v2.wait().await;
    browser
        .wait_true(&format!(
            r#"!document.querySelector('section[data-module="{ROLL}"]')"#
        ))
        .await;

    // Jobs: the list, then a run triggered from the page, then one
    // triggered elsewhere while the page is open.
    browser.goto(&console.url("/jobs")).await;
    browser.wait_for(r#"tr[data-job="acme.jobs/ingest"]"#).await;
    browser.screenshot("jobs.png").await;
    browser
        .goto(&console.url(&format!("/jobs/{JOBS}/ingest")))
        .await;
    let payload = browser.wait_for("#payload").await;
    payload.send_keys(r#"{"n": 7}"#).await.unwrap();
    browser.wait_for("#trigger").await.click().await.unwrap();
    browser
        .wait_for(r#"tr[data-run][data-status="SUCCEEDED"]"#)
        .await;
    let (_, body) = console
        .post(&format!("/api/jobs/{JOBS}/ingest/trigger"), r#"{"n": 8}"#)
        .await;
    let second = body["run_id"].as_str().unwrap().to_owned();
    browser
        .wait_for(&format!(
            r#"tr[data-run="{second}"][data-status="SUCCEEDED"]"#
        ))
        .await;
    browser.screenshot("job.png").await;
    // The run's page, through its link.
    browser
        .wait_for(&format!(r#"tr[data-run="{second}"] a"#))
        .await
        .click()
        .await
        .unwrap();
    browser.wait_for(r#"#run[data-status="SUCCEEDED"]"#).await;
    let result = browser
        .eval("document.querySelectorAll('pre')[1].textContent")
        .await;
    assert!(result.as_str().unwrap().contains("\"n\": 8"), "{result}");
    browser.screenshot("run.png").await;

    // A workflow run's step timeline.
    let (_, body) = console
        .post(&format!("/api/jobs/{JOBS}/flow/trigger"), "{}")
        .await;
    let flow = body["run_id"].as_str().unwrap().to_owned();
    browser
        .goto(&console.url(&format!("/runs/{JOBS}/{flow}")))
        .await;
    browser
        .wait_for(r#"#steps tr[data-step="second"][data-status="SUCCEEDED"]"#)
        .await;
    browser.screenshot("workflow.png").await;

    // Agents and models, and search.
    browser.goto(&console.url("/agents")).await;
    browser.wait_for("#chats").await;
    browser.screenshot("agents.png").await;
    browser
        .goto(&console.url(&format!("/search?q={second}")))
        .await;
    browser
        .wait_for(&format!(r#"tr[data-hit="/runs/{JOBS}/{second}"]"#))
        .await;
    browser.screenshot("search.png").await;

    browser.close().await;
    stop_process(&mut jobs).await;
    console.stop().await;
    documents.stop().await;
}

/// How many instances and runs the first paint is measured with.
const INSTANCES: usize = 250;
const RUNS: usize = 10_000;

async fn register_many(world: &World) {
    let nats = async_nats::connect(world.nats.url()).await.unwrap();
    let wire = WireClient::new(nats, &world.project).with_timeout(DEADLINE);
    let wire = &wire;
    futures::stream::iter(0..INSTANCES)
        .for_each_concurrent(16, |n| async move {
            let module = format!("fleet.m{:02}", n % 25);
            let instance = format!("fleet-m{:02}-{n:03}", n % 25);
            let descriptor = abi_sdk::pb::ModuleDescriptor {
                module_id: module.clone(),
                contract_major: 1,
                package_version: "1.0.0".into(),
                ..Default::default()
            };
            let token = requests::module_token(SECRET, &module);
            let reply: abi_sdk::pb::RegisterResponse = wire
                .call(
                    Operation::Register,
                    Some(&token),
                    &requests::register_request(descriptor, &instance),
                )
                .await;
            assert!(reply.error.is_none(), "{:?}", reply.error);
        })
        .await;
}

async fn record_many_runs(world: &World) {
    let nats = async_nats::connect(world.nats.url()).await.unwrap();
    let token = TokenSource::issued(requests::service_token(SECRET, "api"));
    let docs = DocumentClient::new(nats, token, JOBS);
    let collection = abi_wire::jobs::runs_collection(&world.project);
    let docs = &docs;
    let collection = &collection;
    futures::stream::iter(1..=RUNS)
        .for_each_concurrent(64, |n| async move {
            let run_id = abi_wire::jobs::run_id("ingest", n as u64);
            let status = if n % 17 == 0 {
                abi_wire::jobs::RunStatus::Failed
            } else {
                abi_wire::jobs::RunStatus::Succeeded
            };
            let record = json!({
                "run_id": run_id, "job": "ingest", "module_id": JOBS, "status": status.as_str(),
                "attempt": 1, "max_attempts": 1, "sequence": n, "payload": {"n": n},
                "started_at": "2026-12-05T10:00:00+00:00", "finished_at": "2026-12-05T10:00:01+00:00",
                "error": if n % 17 == 0 { "boom" } else { "" }, "trigger": {"kind": "manual"},
            });
            let data: Data = abi_sdk::documents::data_from_json(record.as_object().unwrap());
            docs.put(collection, &run_id, data, None).await.unwrap();
        })
        .await;
}

/// Loads `url` in a fresh tab and returns when the page first drew data,
/// in ms from navigation start.
async fn first_paint(browser: &Browser, url: &str, ready: &str) -> u64 {
    browser.goto("about:blank").await;
    browser.goto(url).await;
    browser.wait_for(ready).await;
    browser.wait_true("!!document.body.dataset.painted").await;
    browser
        .eval("Number(document.body.dataset.painted)")
        .await
        .as_u64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_paint_with_250_instances_and_10000_runs_is_measured_in_a_browser() {
    let world = World::start(120.0).await;
    let documents = Documents::start(&world.nats.url(), &world.project, SECRET).await;
    // The job module creates the runs collection; the runs are written
    // straight to it, as a host would have over time.
    let mut jobs = job_module(&world, JOBS, false, &[]);
    world.wait_status(JOBS, abi_wire::status::READY).await;
    let started = std::time::Instant::now();
    register_many(&world).await;
    record_many_runs(&world).await;
    let filled = started.elapsed();
    let console = ConsoleUnderTest::start(&world, false).await;
    let browser = Browser::start().await;
    let modules = first_paint(
        &browser,
        &console.url("/"),
        "section[data-module=\"fleet.m24\"]",
    )
    .await;
    let count = browser
        .eval("document.querySelectorAll('tr[data-instance]').length")
        .await;
    assert_eq!(count, json!(INSTANCES + 1), "every instance drawn");
    browser.screenshot("modules-250.png").await;
    let runs = first_paint(
        &browser,
        &console.url(&format!("/jobs/{JOBS}/ingest")),
        "#runs-table",
    )
    .await;
    let newest = browser
        .eval("document.querySelector('tr[data-run]').dataset.run")
        .await;
    assert_eq!(
        newest,
        json!(abi_wire::jobs::run_id("ingest", RUNS as u64)),
        "newest first"
    );
    let failed = browser
        .eval("document.querySelectorAll('tr.failed').length")
        .await;
    assert!(failed.as_u64().unwrap() > 0, "failures highlighted");
    browser.screenshot("job-10000.png").await;
    let figures = json!({
        "instances": INSTANCES, "runs": RUNS,
        "first_paint_ms": {"modules": modules, "job_runs": runs},
        "fill_secs": filled.as_secs_f64(),
    });
    write_figures(&shots(), &figures);
    println!("console first paint: {figures}");
    browser.close().await;
    stop_process(&mut jobs).await;
    console.stop().await;
    documents.stop().await;
}

fn write_figures(dir: &Path, figures: &Value) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("first-paint.json"), figures.to_string()).unwrap();
}
