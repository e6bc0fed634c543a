//! Owners on a 3-node JetStream cluster with the registry bucket at 3
//! replicas, as an operator runs them for high availability (issue 9).
//!
//! - Two stores racing compare-and-swaps on the R3 bucket: every loser is a
//!   conflict (nats-server answers 10164 or 10071), never a store failure.
//! - Two `abi-discovery` processes given the cluster's seed list, 16 module
//!   instances registering, renewing, looking up and unregistering over the
//!   wire; the stream leader is killed (-9) and restarted. No error reply
//!   before the fault, none later than 10 s after the node is back, nothing
//!   acknowledged lost; the write outage and the election time are printed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "it/edges_common/mod.rs"]
mod edges_common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use abi_discovery::store::jetstream::{JetStreamStore, JetStreamStoreConfig};
use abi_discovery::store::{CasError, SnapshotStore};
use abi_proto::common::v1::CallError;
use abi_proto::discovery::v1 as pb;
use abi_test_support::{
    NatsCluster, WireCallError, unique_name, wait_for_stream_leader, wait_until,
};
use abi_wire::discovery::{Operation, Project};
use bytes::Bytes;
use edges_common::binary::OwnerProcess;
use edges_common::*;
use tokio::time::Instant;

/// How long a test waits for the cluster to settle after a change.
const SETTLE: Duration = Duration::from_secs(60);

async fn connect_list(urls: &[String]) -> async_nats::Client {
    async_nats::ConnectOptions::new()
        .retain_servers_order()
        .connect(urls)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_writes_on_three_replicas_lose_as_conflicts() {
    let cluster = NatsCluster::start(3).await;
    let project = unique_name("race");
    let cfg = JetStreamStoreConfig {
        project: project.clone(),
        replicas: 3,
        timeout: Duration::from_secs(10),
    };
    // Each store talks through a different node, as two owners would.
    let mut stores = Vec::new();
    for i in 0..2 {
        let client = connect_list(&[cluster.url(i)]).await;
        let context = async_nats::jetstream::new(client);
        stores.push(JetStreamStore::open(&context, &cfg).await.unwrap());
    }
    let (a, b) = (&stores[0], &stores[1]);
    let mut conflicts = 0;
    for round in 0..100u32 {
        let from = a.read().await.unwrap().revision;
        let (ra, rb) = tokio::join!(
            a.compare_and_swap(Bytes::from(format!("a{round}")), from),
            b.compare_and_swap(Bytes::from(format!("b{round}")), from),
        );
        let outcomes = [ra, rb];
        let won = outcomes.iter().filter(|r| r.is_ok()).count();
        for outcome in &outcomes {
            match outcome {
                Ok(_) => {}
                Err(CasError::Conflict) => conflicts += 1,
                Err(CasError::Store(e)) => panic!("round {round}: a lost race failed as {e:?}"),
            }
        }
        assert_eq!(won, 1, "round {round}: exactly one write of a race wins");
    }
    eprintln!("100 racing pairs on an R3 bucket: {conflicts} conflicts, 0 store failures");
}

/// What one call came back with.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Ok,
    /// A wire error code.
    Refused(String),
    /// No reply in time (or no responders).
    NoReply,
}

impl Outcome {
    fn of(error: Option<CallError>) -> Self {
        match error {
            None => Self::Ok,
            Some(e) => Self::Refused(e.code),
        }
    }
}

/// One call as the load saw it.
#[derive(Debug, Clone)]
struct Call {
    done: Instant,
    op: Operation,
    instance: String,
    outcome: Outcome,
}

/// Sends one request with a 5 s deadline (the SDK's request timeout).
async fn call<R: prost::Message + Default>(
    client: &async_nats::Client,
    project: &Project,
    op: Operation,
    token: &str,
    request: &impl prost::Message,
) -> Result<R, ()> {
    match Rpc::new(client.clone(), project.as_str())
        .with_timeout(Duration::from_secs(5))
        .try_call(op, Some(token), request)
        .await
    {
        Ok(reply) => Ok(reply),
        Err(WireCallError::Decode(e)) => panic!("{} reply does not decode: {e}", op.as_str()),
        Err(_) => Err(()),
    }
}

/// One module instance's life under load: register, renew, look up, and
/// now and then unregister and come back under a new instance id.
async fn instance_load(
    client: async_nats::Client,
    project: Project,
    index: usize,
    stop: tokio_util::sync::CancellationToken,
    log: Arc<Mutex<Vec<Call>>>,
) {
    let module = format!("cm{}", index % 4);
    let token = module_token(&module);
    let mut generation = 0;
    let mut registered = false;
    let mut step = 0u64;
    while !stop.is_cancelled() {
        step += 1;
        let instance = format!("i{index}-{generation}");
        let (op, outcome) = if !registered {
            let request = register_request(&module, &instance);
            let reply = call::<pb::RegisterResponse>(
                &client,
                &project,
                Operation::Register,
                &token,
                &request,
            )
            .await;
            let outcome = reply.map_or(Outcome::NoReply, |r| Outcome::of(r.error));
            registered = outcome == Outcome::Ok;
            (Operation::Register, outcome)
        } else if step.is_multiple_of(25) {
            let request = requests::unregister_request(&instance);
            let reply = call::<pb::UnregisterResponse>(
                &client,
                &project,
                Operation::Unregister,
                &token,
                &request,
            )
            .await;
            let outcome = reply.map_or(Outcome::NoReply, |r| Outcome::of(r.error));
            if outcome == Outcome::Ok {
                registered = false;
                generation += 1;
            }
            (Operation::Unregister, outcome)
        } else if step.is_multiple_of(5) {
            let request = pb::GetModuleRequest {
                module_id: module.clone(),
                contract_major: 1,
                ..Default::default()
            };
            let reply = call::<pb::GetModuleResponse>(
                &client,
                &project,
                Operation::GetModule,
                &token,
                &request,
            )
            .await;
            (
                Operation::GetModule,
                reply.map_or(Outcome::NoReply, |r| Outcome::of(r.error)),
            )
        } else {
            let request = requests::renew_request(&instance, true);
            let reply =
                call::<pb::RenewResponse>(&client, &project, Operation::Renew, &token, &request)
                    .await;
            let outcome = reply.map_or(Outcome::NoReply, |r| Outcome::of(r.error));
            if outcome == Outcome::Refused("LEASE_EXPIRED".into()) {
                registered = false;
            }
            (Operation::Renew, outcome)
        };
        log.lock().unwrap().push(Call {
            done: Instant::now(),
            op,
            instance,
            outcome,
        });
        // Pacing: 16 instances at ~40 calls/s each.
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Waits until `log` has `n` more calls than now (the load moved on).
async fn load_moves_on(log: &Mutex<Vec<Call>>, n: usize) {
    let from = log.lock().unwrap().len();
    wait_until(SETTLE, || async { log.lock().unwrap().len() >= from + n })
        .await
        .expect("the load keeps going");
}

fn is_write(op: Operation) -> bool {
    matches!(
        op,
        Operation::Register | Operation::Renew | Operation::Unregister
    )
}

fn secs(from: Instant, to: Instant) -> f64 {
    to.saturating_duration_since(from).as_secs_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_owners_ride_out_a_stream_leader_loss_under_load() {
    let mut cluster = NatsCluster::start(3).await;
    let urls = cluster.urls().join(",");
    let project = unique_name("ha");
    let stream = abi_wire::discovery::registry_stream(&project);
    let env = [("ABI_KV_REPLICAS", "3"), ("ABI_LEASE_SECONDS", "20")];
    let _owner_a = OwnerProcess::start(&urls, &project, &env).await;
    let _owner_b = OwnerProcess::start(&urls, &project, &env).await;
    let observer = connect_list(&cluster.urls()).await;
    wait_for_owners(&observer, 2).await;

    let log = Arc::new(Mutex::new(Vec::<Call>::new()));
    let stop = tokio_util::sync::CancellationToken::new();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for index in 0..16 {
        // Two load connections, each through every node of the seed list.
        let mut order = cluster.urls();
        order.rotate_left(index % 3);
        let client = connect_list(&order).await;
        let project = Project::new(&project).unwrap();
        tasks.push(tokio::spawn(instance_load(
            client,
            project,
            index,
            stop.clone(),
            log.clone(),
        )));
    }

    // Before any fault: a few seconds of ordinary racing between two owners.
    load_moves_on(&log, 1500).await;
    let leader = wait_for_stream_leader(&observer, &stream, None, SETTLE).await;
    let leader_index = cluster.node_index(&leader).unwrap();
    let fault = Instant::now();
    cluster.stop_node(leader_index);
    let new_leader = wait_for_stream_leader(&observer, &stream, Some(&leader), SETTLE).await;
    let elected = Instant::now();
    load_moves_on(&log, 500).await;
    cluster.start_node(leader_index).await;
    let healed = Instant::now();
    // Run on well past the 10 s after the node is back.
    let after_heal = Duration::from_secs(14);
    wait_until(SETTLE, || async { healed.elapsed() >= after_heal })
        .await
        .unwrap();
    stop.cancel();
    for task in tasks {
        task.await.unwrap();
    }
    let calls = log.lock().unwrap().clone();

    // Timeline.
    let errors: Vec<&Call> = calls.iter().filter(|c| c.outcome != Outcome::Ok).collect();
    let before_fault = errors.iter().filter(|c| c.done < fault).count();
    let late: Vec<&&Call> = errors
        .iter()
        .filter(|c| c.done > healed + Duration::from_secs(10))
        .collect();
    let first_write_after = calls
        .iter()
        .filter(|c| is_write(c.op) && c.outcome == Outcome::Ok && c.done > fault)
        // Only writes whose answer could not have been sent before the fault.
        .filter(|c| c.done > fault + Duration::from_millis(50))
        .map(|c| c.done)
        .min()
        .expect("writes resume");
    let last_error = errors.iter().map(|c| c.done).max();
    let mut by_code: BTreeMap<String, usize> = BTreeMap::new();
    for c in &errors {
        let key = match &c.outcome {
            Outcome::Refused(code) => code.clone(),
            _ => "no reply".to_owned(),
        };
        *by_code.entry(key).or_default() += 1;
    }
    eprintln!(
        "leader {leader} killed at {:.2} s; new leader {new_leader} seen after {:.2} s; \
         first write acknowledged {:.2} s after the kill (outage); node back after {:.2} s; \
         calls {}; errors {} ({by_code:?}): {} before the fault, last one {:.2} s after the kill, \
         {} later than 10 s after the node came back",
        secs(started, fault),
        secs(fault, elected),
        secs(fault, first_write_after),
        secs(fault, healed),
        calls.len(),
        errors.len(),
        before_fault,
        last_error.map_or(0.0, |t| secs(fault, t)),
        late.len(),
    );
    assert_eq!(before_fault, 0, "no error while nothing fails: {errors:?}");
    assert!(late.is_empty(), "errors after the fault healed: {late:?}");
    // Unavailability only while the leader is being elected: a call that
    // ended later than its own deadline (5 s) plus one store attempt after
    // the election was sent after it.
    let unavailable_late: Vec<&&Call> = errors
        .iter()
        .filter(|c| c.outcome != Outcome::Refused("REGISTRY_BUSY".into()))
        .filter(|c| c.done > elected + Duration::from_secs(6))
        .collect();
    eprintln!(
        "last unavailability {:.2} s after the new leader was seen",
        errors
            .iter()
            .filter(|c| c.outcome != Outcome::Refused("REGISTRY_BUSY".into()))
            .map(|c| c.done.saturating_duration_since(elected).as_secs_f64())
            .fold(0.0, f64::max)
    );
    assert!(
        unavailable_late.is_empty(),
        "unavailable outside the election: {unavailable_late:?}"
    );
    // Besides, only "retry later" answers. LEASE_EXPIRED answers a renewal
    // after an unregister whose answer was lost (it was carried out: the
    // instance is rightly gone); otherwise it is allowed only right around
    // the election, where a renewal decided on a snapshot the new leader
    // had not caught up with yet may be refused once (the SDK then
    // registers again under the same id). Never outside that window.
    for (i, c) in calls.iter().enumerate() {
        match &c.outcome {
            Outcome::Ok | Outcome::NoReply => {}
            Outcome::Refused(code) if code == "UNAVAILABLE" || code == "REGISTRY_BUSY" => {}
            Outcome::Refused(code) if code == "LEASE_EXPIRED" => {
                let before = calls[..i]
                    .iter()
                    .rev()
                    .find(|p| p.instance == c.instance && is_write(p.op))
                    .expect("a renewal follows a registration");
                let after_lost_unregister =
                    before.op == Operation::Unregister && before.outcome != Outcome::Ok;
                let around_election = c.done > fault && c.done < elected + Duration::from_secs(6);
                assert!(
                    after_lost_unregister || around_election,
                    "{}: a lease expired after {before:?}",
                    c.instance
                );
            }
            Outcome::Refused(code) => panic!("{}: refused {code} ({by_code:?})", c.instance),
        }
    }

    // Nothing acknowledged is lost: the last acknowledged write of every
    // instance, with no unanswered write after it, is what is stored.
    let mut expected: BTreeMap<String, Option<bool>> = BTreeMap::new();
    for c in calls.iter().filter(|c| is_write(c.op)) {
        let present = match (&c.outcome, c.op) {
            (Outcome::Ok, Operation::Unregister) => Some(false),
            (Outcome::Ok, _) => Some(true),
            // Unknown: the write may or may not have been stored.
            (Outcome::NoReply, _) => None,
            (Outcome::Refused(code), _) if code == "UNAVAILABLE" => None,
            (Outcome::Refused(_), _) => continue,
        };
        expected.insert(c.instance.clone(), present);
    }
    let stored: Vec<String> = snapshot(&observer, &project)
        .await
        .records
        .into_iter()
        .map(|r| r.instance.unwrap().instance_id)
        .collect();
    for (instance, present) in &expected {
        if let Some(present) = present {
            assert_eq!(
                stored.contains(instance),
                *present,
                "{instance}: the last acknowledged write says present={present}"
            );
        }
    }
}
