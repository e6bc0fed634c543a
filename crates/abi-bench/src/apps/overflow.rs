//! Overflowed document puts: a document holding one string of the put size
//! (above the broker's 1 MiB max payload, so the request goes up as an
//! overflow upload and the reply, which carries the document, comes back
//! parked), ours (`abi-documents` and our `DocumentClient`) and the
//! reference's (`tests/interop/document_peer.py serve`: its document
//! service with the overflow host its engine runs, and its client through
//! `python/app_bench_peer.py put`). Each on a nats-server of its own, on a
//! fresh SQLite file: the document subjects carry no project.

use std::path::Path;
use std::time::{Duration, Instant};

use abi_sdk::documents::{CollectionSpec, Data, Value};
use abi_sdk::{DocumentClient, TokenSource};
use abi_test_support::NatsServer;
use anyhow::{Context as _, bail};
use tokio::process::Command;

use super::report::Put;
use super::targets::{self, Target};
use super::{Args, SECRET};
use crate::measure::{self, Samples};
use crate::platform::Binaries;
use crate::service;

/// The identity both clients call as, and the namespace they write.
const NAMESPACE: &str = "bench";
/// The collection the puts write.
const COLLECTION: &str = "blobs";
/// The deadline of a probe while a service starts.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What the document targets need.
#[derive(Debug)]
pub struct Documents<'a> {
    /// Where `abi-documents` is.
    pub bins: &'a Binaries,
    /// The reference's Python.
    pub python: &'a Path,
    /// `python/app_bench_peer.py` (its `put` client).
    pub script: &'a Path,
    /// The run's flags.
    pub args: &'a Args,
}

/// A service token of the bench's identity.
fn token() -> String {
    abi_test_support::requests::service_token(SECRET, NAMESPACE)
}

/// Everything a document target runs on: its own nats-server, a client
/// connection, a scratch directory for its SQLite file.
struct Bus {
    server: NatsServer,
    docs: DocumentClient,
    scratch: tempfile::TempDir,
}

impl Bus {
    async fn start() -> anyhow::Result<Self> {
        let scratch = tempfile::tempdir().context("a scratch directory")?;
        eprintln!("starting a nats-server of its own (temporary store)");
        let server = NatsServer::start().await;
        let nats = async_nats::connect(server.url())
            .await
            .context("connect to nats")?;
        let docs = DocumentClient::new(nats, TokenSource::issued(token()), NAMESPACE);
        Ok(Self {
            server,
            docs,
            scratch,
        })
    }

    fn sqlite(&self, name: &str) -> std::path::PathBuf {
        self.scratch.path().join(name)
    }

    /// Starts the document service `command` and waits until it creates the
    /// collection; its peak RSS counts from there.
    async fn serve(&self, command: Command, what: &str) -> anyhow::Result<Target> {
        let probe = || async {
            let ensured = self.docs.ensure_collection(CollectionSpec::new(COLLECTION));
            matches!(
                tokio::time::timeout(PROBE_TIMEOUT, ensured).await,
                Ok(Ok(_))
            )
        };
        let target = targets::spawn(command, what, probe).await?;
        if let Err(error) = targets::reset_peak(target.pid) {
            eprintln!("  {what}: its peak RSS counts from its start: {error:#}");
        }
        Ok(target)
    }
}

/// A document of one string of `bytes` letters, and its number.
fn document(text: &str, n: usize) -> Data {
    Data::from([
        ("text".to_owned(), Value::String(text.to_owned())),
        (
            "n".to_owned(),
            Value::Int(i64::try_from(n).unwrap_or(i64::MAX)),
        ),
    ])
}

impl Documents<'_> {
    /// Our `abi-documents` and our `DocumentClient`.
    ///
    /// # Errors
    ///
    /// When the binary is missing or the service does not start.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the service and the nats-server are killed on drop.
    pub async fn ours(&self) -> anyhow::Result<Put> {
        let bin = service::sibling_binary(
            "abi-documents",
            self.bins.documents.clone(),
            "--documents-bin",
        )?;
        let bus = Bus::start().await?;
        let mut command = Command::new(&bin);
        // Only what it needs: no setting of a developer's shell changes
        // what is measured.
        command
            .env_clear()
            .env("NATS_URL", bus.server.url())
            .env("ABI_DOCUMENTS_URL", bus.sqlite("ours.sqlite"))
            .env("ABI_JWT_SECRET", SECRET)
            .env("ABI_LOG", "warn");
        let target = bus.serve(command, "abi-documents").await?;
        let bytes = usize::try_from(self.args.put_bytes())?;
        let text: String = (0..bytes)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let put = |n: usize| {
            let (docs, data) = (&bus.docs, document(&text, n));
            async move {
                let start = Instant::now();
                let stored = docs.put(COLLECTION, &format!("d{n}"), data, None).await?;
                let elapsed = start.elapsed();
                anyhow::ensure!(stored.version == 1, "version {}", stored.version);
                Ok(elapsed)
            }
        };
        eprintln!(
            "ours: overflowed puts of {} MiB x{} (one unmeasured first)",
            bytes >> 20,
            self.args.puts()
        );
        let warmup = measure::sequential("put", 1, &put).await;
        let samples = measure::sequential("put", self.args.puts(), |n| put(n + 1)).await;
        let measured = measured(&target, &samples, warmup.errors);
        target.svc.stop().await;
        Ok(measured)
    }

    /// The reference's document service and its Python client.
    ///
    /// # Errors
    ///
    /// When the service does not start or the client's output cannot be read.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: the service, the client and the nats-server are killed
    /// on drop.
    pub async fn reference(&self) -> anyhow::Result<Put> {
        let bus = Bus::start().await?;
        let mut command = Command::new(self.python);
        command
            .arg(service::workspace_root().join("tests/interop/document_peer.py"))
            .args(["serve", &bus.server.url(), SECRET])
            .arg(bus.sqlite("reference.sqlite"));
        let target = bus.serve(command, "reference document service").await?;
        eprintln!(
            "reference: overflowed puts of {} MiB x{} (one unmeasured first)",
            self.args.put_bytes() >> 20,
            self.args.puts()
        );
        let out = Command::new(self.python)
            .arg(self.script)
            .args(["put", &bus.server.url(), &token(), NAMESPACE, COLLECTION])
            .args([self.args.put_bytes(), self.args.puts() as u64].map(|n| n.to_string()))
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .context("run the reference's put client")?;
        if !out.status.success() {
            bail!(
                "the reference's put client failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let seen: serde_json::Value =
            serde_json::from_slice(&out.stdout).context("the put client's JSON")?;
        let samples = Samples {
            latencies: seen["ms"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(serde_json::Value::as_f64)
                .map(|ms| Duration::from_secs_f64(ms / 1e3))
                .collect(),
            errors: seen["failed"].as_u64().unwrap_or(0),
        };
        if let Some(error) = seen["first_error"].as_str() {
            eprintln!("  reference put: first error: {error}");
        }
        let measured = measured(&target, &samples, 0);
        target.svc.stop().await;
        Ok(measured)
    }
}

/// The puts' times, the service's peak RSS since its reset, and the
/// failures (`more` besides the samples').
fn measured(target: &Target, samples: &Samples, more: u64) -> Put {
    let put = Put {
        time: samples.summary(),
        service_peak_mib: measure::peak_rss_mib(target.pid).ok(),
        failures: samples.errors + more,
    };
    if let Some(time) = put.time {
        eprintln!("  p50 {:.0} ms", time.p50.as_secs_f64() * 1e3);
    }
    put
}
