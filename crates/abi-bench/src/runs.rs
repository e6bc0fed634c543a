//! The four targets, run one after the other on one nats-server.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use abi_proto::discovery::v1 as pb;
use abi_test_support::{NatsServer, unique_name};
use anyhow::Context as _;
use async_nats::jetstream::{self, kv};
use async_nats::{Client, HeaderMap};
use bytes::Bytes;
use futures::StreamExt as _;

use crate::measure::{self, Samples};
use crate::report::{self, Column, Op};
use crate::service::{self, Service};
use crate::wire::{self, Member};
use crate::{Args, LEVELS};

/// The project secret the bench signs with (32+ bytes, as HS256 wants).
const SECRET: &str = "abi-bench-secret-0123456789abcdef0123456789";
/// The most live instances (the registry's bound).
const MAX_INSTANCES: usize = 256;
/// Snapshot bytes per instance when no service ran to measure it (about what
/// ours stores for the bench's descriptors).
const ESTIMATED_BYTES_PER_INSTANCE: usize = 200;

/// Runs every target and returns the table.
///
/// # Errors
///
/// When a service cannot be started or the server cannot be reached; failed
/// calls are counted in the table instead.
///
/// # Cancel safety
///
/// Not cancel safe: dropped, the nats-server and the service under test are killed (their `Drop`
/// and `kill_on_drop`) and no table comes out; the echo task, if started, runs on detached.
pub async fn run_all(args: &Args) -> anyhow::Result<String> {
    eprintln!(
        "abi-bench: {} calls per latency cell, {:?} of throughput, {} callers",
        args.iters(),
        args.duration(),
        args.callers
    );
    let bin = service::discovery_binary(args.discovery_bin.clone())?;
    // Not abi_test_support::python(): that one panics when the venv is
    // missing, and `--skip-reference` runs need no Python at all.
    let python = args
        .python
        .clone()
        .unwrap_or_else(|| service::workspace_root().join(".venv/bin/python"));
    let script = args
        .reference_script
        .clone()
        .unwrap_or_else(abi_test_support::reference_owner_script);

    eprintln!("starting nats-server (JetStream, temporary store)");
    let server = NatsServer::start().await;
    let url = server.url();
    let client = async_nats::connect(&url).await.context("connect to nats")?;
    let js = jetstream::new(client.clone());
    let fleet = wire::fleet(SECRET, MAX_INSTANCES)?;
    let mut sizes = BTreeMap::new();

    let mut ours = Column::new("abi-discovery (Rust)");
    let project = unique_name("bench_ours");
    eprintln!("abi-discovery: starting {}", bin.display());
    let svc = service::start_ours(&bin, &url, SECRET, &project, &client, &fleet[0]).await?;
    discovery(&client, &project, &fleet, args, &mut ours, &mut sizes).await;
    finish(svc, &mut ours).await;

    let mut reference = Column::new("reference (Python)");
    if args.skip_reference {
        reference.skipped = true;
    } else {
        let project = unique_name("bench_ref");
        eprintln!("reference: starting {}", script.display());
        let svc = service::start_reference(&python, &script, &url, SECRET, &project).await?;
        let mut unused = BTreeMap::new();
        discovery(&client, &project, &fleet, args, &mut reference, &mut unused).await;
        finish(svc, &mut reference).await;
    }

    let mut echo = Column::new("raw req-reply");
    raw_request_reply(&url, &client, &fleet, args, &mut echo).await?;
    let mut cas = Column::new("raw KV CAS");
    raw_kv_cas(&js, &sizes, args, &mut cas).await?;

    drop(server);
    Ok(report::table(&[echo, cas, ours, reference], args.callers))
}

async fn finish(svc: Service, column: &mut Column) {
    match svc.usage() {
        Ok(usage) => column.usage = Some(usage),
        Err(error) => eprintln!("  {}: no CPU/RSS: {error:#}", column.name),
    }
    svc.stop().await;
}

fn record(column: &mut Column, op: Op, n: usize, samples: &Samples) {
    column.errors += samples.errors;
    if let Some(summary) = samples.summary() {
        column.latency.insert((op, n), summary);
    }
}

/// Fills a discovery service to each level, measures the three operations,
/// then renew throughput at 256.
async fn discovery(
    client: &Client,
    project: &str,
    fleet: &[Member],
    args: &Args,
    column: &mut Column,
    sizes: &mut BTreeMap<usize, usize>,
) {
    let name = column.name;
    let subject = |op: &str| abi_wire::discovery::operation_named(project, op);
    let (register, renew, get) = (subject("register"), subject("renew"), subject("get_module"));
    let iters = args.iters();
    let mut live = 0;
    for n in LEVELS {
        eprintln!("{name}: filling to {n} instances");
        let fills: Vec<_> = futures::stream::iter(&fleet[live..n])
            .map(|m| wire::call::<pb::RegisterResponse>(client, &register, &m.headers, &m.register))
            .buffer_unordered(args.fill_concurrency.max(1))
            .collect()
            .await;
        for fill in fills {
            if let Err(error) = fill {
                if column.errors == 0 {
                    eprintln!("  {name}: fill failed: {error:#}");
                }
                column.errors += 1;
            }
        }
        live = n;
        if let Some(size) = snapshot_size(client, project).await {
            eprintln!("  {name}: snapshot is {size} bytes at {n} instances");
            sizes.insert(n, size);
        }

        eprintln!("{name} @{n}: register, renew, get_module x{iters}");
        let samples = measure::sequential(name, iters, |k| {
            let m = &fleet[k % n];
            wire::call::<pb::RegisterResponse>(client, &register, &m.headers, &m.register)
        })
        .await;
        record(column, Op::Register, n, &samples);
        let samples = measure::sequential(name, iters, |k| {
            let m = &fleet[k % n];
            wire::call::<pb::RenewResponse>(client, &renew, &m.headers, &m.renew)
        })
        .await;
        record(column, Op::Renew, n, &samples);
        // One lookup first so the next ones see an unchanged registry.
        let m = &fleet[0];
        if wire::call::<pb::GetModuleResponse>(client, &get, &m.headers, &m.get_module)
            .await
            .is_err()
        {
            column.errors += 1;
        }
        let samples = measure::sequential(name, iters, |k| {
            let m = &fleet[k % n];
            wire::call::<pb::GetModuleResponse>(client, &get, &m.headers, &m.get_module)
        })
        .await;
        record(column, Op::GetModule, n, &samples);
    }

    eprintln!(
        "{name} @{live}: renew throughput, {} callers for {:?}",
        args.callers,
        args.duration()
    );
    let callers = args.callers.max(1);
    let (rate, errors) = measure::throughput(name, callers, args.duration(), |caller, k| {
        let m = &fleet[(caller + k * callers) % live];
        wire::call::<pb::RenewResponse>(client, &renew, &m.headers, &m.renew)
    })
    .await;
    column.throughput = Some(rate);
    column.errors += errors;
}

/// The size of the project's stored snapshot, if it can be read.
async fn snapshot_size(client: &Client, project: &str) -> Option<usize> {
    abi_test_support::stored_snapshot(client, project)
        .await
        .ok()
        .flatten()
        .map(|b| b.len())
}

/// An echo responder on its own connection, called with each operation's
/// request (and token header) at every level, then 64 concurrent callers.
async fn raw_request_reply<'a>(
    url: &str,
    client: &Client,
    fleet: &'a [Member],
    args: &Args,
    column: &mut Column,
) -> anyhow::Result<()> {
    let name = column.name;
    let responder = async_nats::connect(url).await?;
    let subject = format!("bench.echo.{}", unique_name("rr"));
    let mut sub = responder.subscribe(subject.clone()).await?;
    client.flush().await?;
    responder.flush().await?;
    let echo = tokio::spawn(async move {
        while let Some(msg) = sub.next().await {
            if let Some(reply) = msg.reply {
                // A failed echo shows up as the caller's timeout, counted there.
                let _ = responder.publish(reply, msg.payload).await;
            }
        }
    });
    measure::echo_ready(client, &subject).await?;
    let payload = |m: &'a Member, op: Op| -> &'a Bytes {
        match op {
            Op::Register => &m.register,
            Op::Renew => &m.renew,
            Op::GetModule => &m.get_module,
        }
    };
    for n in LEVELS {
        eprintln!("{name} @{n}: echo x{}", args.iters());
        for op in Op::ALL {
            let samples = measure::sequential(name, args.iters(), |k| {
                let m = &fleet[k % n];
                echo_once(client, &subject, &m.headers, payload(m, op))
            })
            .await;
            record(column, op, n, &samples);
        }
    }
    eprintln!("{name}: throughput, {} callers", args.callers);
    let callers = args.callers.max(1);
    let (rate, errors) = measure::throughput(name, callers, args.duration(), |caller, k| {
        let m = &fleet[(caller + k * callers) % fleet.len()];
        echo_once(client, &subject, &m.headers, &m.renew)
    })
    .await;
    column.throughput = Some(rate);
    column.errors += errors;
    echo.abort();
    Ok(())
}

async fn echo_once(
    client: &Client,
    subject: &str,
    headers: &HeaderMap,
    payload: &Bytes,
) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let reply = client
        .request_with_headers(subject.to_owned(), headers.clone(), payload.clone())
        .await?;
    let elapsed = start.elapsed();
    anyhow::ensure!(reply.payload == *payload, "echo changed the payload");
    Ok(elapsed)
}

/// Compare-and-swap on one key of a fresh bucket, with a value the size of
/// the service's snapshot at each level: the floor of any write. Its
/// throughput has one writer, since one key admits one CAS at a time.
async fn raw_kv_cas(
    js: &jetstream::Context,
    sizes: &BTreeMap<usize, usize>,
    args: &Args,
    column: &mut Column,
) -> anyhow::Result<()> {
    let name = column.name;
    let store = js
        .create_key_value(kv::Config {
            bucket: unique_name("BENCH_KV"),
            history: 1,
            max_value_size: 1 << 20,
            ..Default::default()
        })
        .await
        .context("create the raw KV bucket")?;
    let revision = AtomicU64::new(0);
    let cas = |value: &Bytes| {
        let (store, revision) = (&store, &revision);
        let value = value.clone();
        async move {
            let start = Instant::now();
            let next = store
                .update(
                    abi_wire::discovery::REGISTRY_KEY,
                    value,
                    revision.load(Ordering::Relaxed),
                )
                .await?;
            let elapsed = start.elapsed();
            revision.store(next, Ordering::Relaxed);
            Ok::<_, anyhow::Error>(elapsed)
        }
    };
    let value_at = |n: usize| {
        let size = sizes
            .get(&n)
            .copied()
            .unwrap_or(n * ESTIMATED_BYTES_PER_INSTANCE);
        Bytes::from(vec![b'z'; size])
    };
    for n in LEVELS {
        let value = value_at(n);
        eprintln!(
            "{name} @{n}: CAS of {} bytes x{}",
            value.len(),
            args.iters()
        );
        revision.store(
            store
                .put(abi_wire::discovery::REGISTRY_KEY, value.clone())
                .await?,
            Ordering::Relaxed,
        );
        let samples = measure::sequential(name, args.iters(), |_| cas(&value)).await;
        // Register and renew are both one write of the snapshot.
        record(column, Op::Register, n, &samples);
        column.errors -= samples.errors;
        record(column, Op::Renew, n, &samples);
    }
    let value = value_at(MAX_INSTANCES);
    eprintln!("{name}: throughput, one writer");
    let (rate, errors) = measure::throughput(name, 1, args.duration(), |_, _| cas(&value)).await;
    column.throughput = Some(rate);
    column.errors += errors;
    Ok(())
}
