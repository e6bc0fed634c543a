//! The document workload: the collections and records every target gets, the
//! timed calls through [`DocumentClient`] with their answers checked, and the
//! failures tallied by phase and wire code.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use abi_proto::common::v1::CallContext;
use abi_proto::document::v1 as pb;
use abi_sdk::documents::{CollectionSpec, Data, FieldSpec, FindQuery, OrderBy, Predicate, Value};
use abi_sdk::{CallError, DocumentClient, TokenSource};
use anyhow::{Context as _, bail};
use async_nats::HeaderMap;
use bytes::Bytes;
use prost::Message as _;

/// The module identity the bench calls as, and the namespace it writes: its
/// own, as a module's records are.
pub const NAMESPACE: &str = "bench";
/// Documents written by the create phase (one new id per call).
pub const CREATED: &str = "created";
/// The fixed set that CAS, get and find work on.
pub const RECORDS: &str = "records";
/// Documents written by the throughput phase (one new id per call).
pub const LOAD: &str = "load";
/// The indexed field the find predicate tests for equality.
pub const STATUS_FIELD: &str = "status";
/// The field find orders by (descending).
pub const ORDER_FIELD: &str = "n";
/// The statuses records cycle through: each matches a fifth of the set, so a
/// find of 20 from 1000 documents picks 20 of 200 matches.
pub const STATUSES: [&str; 5] = [
    abi_wire::jobs::QUEUED,
    abi_wire::jobs::RUNNING,
    abi_wire::jobs::SUCCEEDED,
    abi_wire::jobs::FAILED,
    abi_wire::jobs::CANCELLED,
];
/// Lifetime of the floor's token (it is only echoed, never verified).
const FLOOR_TOKEN_TTL: Duration = Duration::from_secs(2 * 60 * 60);
/// A 36-character trace id, as the SDK's uuid4 ids are, for the floor's
/// requests.
const FLOOR_TRACE_ID: &str = "00000000-0000-4000-8000-000000000000";
/// The SDK's default call deadline, in the floor's call contexts too.
const FLOOR_TIMEOUT_MS: i32 = 10_000;

/// The spec of every bench collection: `status` and `n` declared and indexed.
pub fn spec(collection: &str) -> CollectionSpec {
    CollectionSpec::new(collection)
        .field(FieldSpec::new(STATUS_FIELD, "string").indexed())
        .field(FieldSpec::new(ORDER_FIELD, "int").indexed())
}

/// Record `i` (revision `rev`): a run-record-like document of about 150
/// bytes of JSON.
pub fn record(i: usize, rev: usize) -> Data {
    let mut data = Data::new();
    data.insert(
        STATUS_FIELD.into(),
        Value::from(STATUSES[i % STATUSES.len()]),
    );
    data.insert(ORDER_FIELD.into(), Value::from(as_i64(i)));
    data.insert(
        "owner".into(),
        Value::from(format!("bench-owner-{:02}", i % 16)),
    );
    data.insert("rev".into(), Value::from(as_i64(rev)));
    data.insert("note".into(), Value::from("n".repeat(64)));
    data
}

/// The id of record `i` of [`RECORDS`].
pub fn record_id(i: usize) -> String {
    format!("r{i:05}")
}

/// The find query of call `k`: status equal to one of [`STATUSES`], ordered
/// by `n` descending, at most `page` items.
pub fn find_query(k: usize, page: usize) -> FindQuery {
    FindQuery {
        where_: vec![Predicate::new(
            STATUS_FIELD,
            "eq",
            STATUSES[k % STATUSES.len()],
        )],
        order_by: Some(OrderBy::desc(ORDER_FIELD)),
        limit: as_i64(page),
        ..FindQuery::default()
    }
}

/// The bench identity's token source: a module key for [`NAMESPACE`].
///
/// # Errors
///
/// When the key cannot be derived from `secret`.
pub fn token_source(secret: &str) -> anyhow::Result<TokenSource> {
    let key = abi_auth::module_key(secret, NAMESPACE)?;
    Ok(TokenSource::module_key(NAMESPACE, key))
}

fn as_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Failed calls of one target, by phase and wire code (or the SDK's kind
/// when no service answered, e.g. `TimedOut`).
#[derive(Debug, Default)]
pub struct Failures(Mutex<BTreeMap<(&'static str, String), u64>>);

impl Failures {
    /// Counts one failure of `phase` with `code`.
    pub fn add(&self, phase: &'static str, code: impl Into<String>) {
        // A poisoned lock only means a panic elsewhere; the counts still hold.
        let mut counts = self.0.lock().unwrap_or_else(|e| e.into_inner());
        *counts.entry((phase, code.into())).or_default() += 1;
    }

    /// The counts so far.
    pub fn counts(&self) -> BTreeMap<(&'static str, String), u64> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// The code a failed call is tallied under.
fn code_of(error: &CallError) -> String {
    error
        .code()
        .map_or_else(|| format!("{:?}", error.kind()), str::to_owned)
}

/// One server target's calls, each timed from the SDK call to its answer.
#[derive(Debug)]
pub struct Calls<'a> {
    /// The client, bound to [`NAMESPACE`].
    pub docs: &'a DocumentClient,
    /// Where failures are tallied.
    pub failures: &'a Failures,
    /// The version each record of [`RECORDS`] is at.
    pub versions: Vec<AtomicI64>,
    /// Items a find page asks for.
    pub page: usize,
    /// Records in [`RECORDS`].
    pub records: usize,
}

impl Calls<'_> {
    /// Times `call`, tallying a refusal under `phase` and a wrong answer
    /// (`check` fails) as `WRONG_ANSWER`.
    async fn timed<T>(
        &self,
        phase: &'static str,
        call: impl Future<Output = Result<T, CallError>>,
        check: impl FnOnce(&T) -> anyhow::Result<()>,
    ) -> anyhow::Result<(Duration, T)> {
        let start = Instant::now();
        let answer = call.await;
        let elapsed = start.elapsed();
        match answer {
            Ok(value) => match check(&value) {
                Ok(()) => Ok((elapsed, value)),
                Err(error) => {
                    self.failures.add(phase, crate::measure::WRONG_ANSWER);
                    Err(error)
                }
            },
            Err(error) => {
                self.failures.add(phase, code_of(&error));
                Err(anyhow::Error::new(error).context(phase))
            }
        }
    }

    /// A create-only put (`if_version = 0`) of a new id in `collection`.
    ///
    /// # Errors
    ///
    /// A refusal, or an answer not at version 1.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped after the put went out, the document may be created with its
    /// answer unchecked and untallied; creating the same id again then conflicts.
    pub async fn create(
        &self,
        phase: &'static str,
        collection: &str,
        id: String,
        i: usize,
    ) -> anyhow::Result<Duration> {
        let call = self.docs.put(collection, &id, record(i, 0), Some(0));
        let (elapsed, _) = self
            .timed(phase, call, |doc| {
                check(doc.version == 1 && doc.id == id, "a create is version 1")
            })
            .await?;
        Ok(elapsed)
    }

    /// A compare-and-swap put of record `k % records` over the version it
    /// is at.
    ///
    /// # Errors
    ///
    /// A refusal, or an answer not one version up.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: dropped after the put went out, the record may move up a version while its
    /// slot keeps the old one, so the next CAS on it conflicts.
    pub async fn cas(&self, k: usize) -> anyhow::Result<Duration> {
        let i = k % self.records;
        let slot = self.versions.get(i).context("record index")?;
        let current = slot.load(Ordering::Relaxed);
        let id = record_id(i);
        let call = self.docs.put(RECORDS, &id, record(i, k + 1), Some(current));
        let (elapsed, doc) = self
            .timed("cas", call, |doc| {
                check(doc.version == current + 1, "a CAS bumps the version by one")
            })
            .await?;
        slot.store(doc.version, Ordering::Relaxed);
        Ok(elapsed)
    }

    /// A get of record `(7 k) % records` (7 is prime to the record count
    /// of any run that is not a multiple of 7, so the reads spread).
    ///
    /// # Errors
    ///
    /// A refusal, or another document.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads; a dropped call tallies nothing.
    pub async fn get(&self, phase: &'static str, k: usize) -> anyhow::Result<Duration> {
        let i = (7 * k) % self.records;
        let id = record_id(i);
        let call = self.docs.get(RECORDS, &id);
        let (elapsed, _) = self
            .timed(phase, call, |doc| {
                check(
                    doc.id == id && doc.data.get(ORDER_FIELD) == Some(&Value::from(as_i64(i))),
                    "get answers the document asked for",
                )
            })
            .await?;
        Ok(elapsed)
    }

    /// Find call `k`: a full page of one status, in descending `n`.
    ///
    /// # Errors
    ///
    /// A refusal, or a page that is short, holds another status or is out
    /// of order.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads; a dropped call tallies nothing.
    pub async fn find(&self, phase: &'static str, k: usize) -> anyhow::Result<Duration> {
        let status = Value::from(STATUSES[k % STATUSES.len()]);
        let matches = self.records.div_ceil(STATUSES.len());
        let expected = self.page.min(matches);
        let call = self.docs.find(RECORDS, find_query(k, self.page));
        let (elapsed, _) = self
            .timed(phase, call, |page| {
                let ns: Vec<Option<&Value>> =
                    page.items.iter().map(|d| d.data.get(ORDER_FIELD)).collect();
                let ordered = ns.windows(2).all(|w| match (w[0], w[1]) {
                    (Some(Value::Int(a)), Some(Value::Int(b))) => a > b,
                    _ => false,
                });
                let same = page
                    .items
                    .iter()
                    .all(|d| d.data.get(STATUS_FIELD) == Some(&status));
                check(
                    page.items.len() == expected && ordered && same,
                    "find answers a full page of the status, in order",
                )
            })
            .await?;
        Ok(elapsed)
    }
}

fn check(ok: bool, what: &str) -> anyhow::Result<()> {
    if !ok {
        bail!("wrong answer: {what}");
    }
    Ok(())
}

/// The request bytes and header the floor echoes: what the SDK sends for
/// each measured operation.
#[derive(Debug, Clone)]
pub struct FloorRequests {
    /// `Nats-Auth-Token` with a module token.
    pub headers: HeaderMap,
    /// A create-only `PutRequest` of one record.
    pub put: Bytes,
    /// A CAS `PutRequest` of one record.
    pub cas: Bytes,
    /// A `GetRequest`.
    pub get: Bytes,
    /// A `FindRequest` for a page of `page`.
    pub find: Bytes,
}

/// Encodes the floor's requests, as the SDK would for the bench's calls.
///
/// # Errors
///
/// When the token cannot be signed.
pub fn floor_requests(secret: &str, page: usize) -> anyhow::Result<FloorRequests> {
    let key = abi_auth::module_key(secret, NAMESPACE)?;
    let token =
        abi_auth::issue_module_token(NAMESPACE, &key, FLOOR_TOKEN_TTL, SystemTime::now(), None)?;
    let mut headers = HeaderMap::new();
    headers.insert(abi_auth::AUTH_HEADER, token.as_str());
    let context = || {
        Some(CallContext {
            trace_id: FLOOR_TRACE_ID.to_owned(),
            timeout_ms: FLOOR_TIMEOUT_MS,
            ..CallContext::default()
        })
    };
    let put = |if_version| pb::PutRequest {
        context: context(),
        namespace: NAMESPACE.to_owned(),
        collection: RECORDS.to_owned(),
        id: record_id(1),
        data: Some(abi_document_model::pb::data_to_pb(&record(1, 1))),
        if_version: Some(if_version),
    };
    let get = pb::GetRequest {
        context: context(),
        namespace: NAMESPACE.to_owned(),
        collection: RECORDS.to_owned(),
        id: record_id(1),
    };
    let query = find_query(0, page);
    let find = pb::FindRequest {
        context: context(),
        namespace: NAMESPACE.to_owned(),
        collection: RECORDS.to_owned(),
        r#where: abi_document_model::pb::where_to_pb(&query.where_),
        order_by: query
            .order_by
            .as_ref()
            .map(abi_document_model::pb::order_to_pb),
        limit: Some(i32::try_from(page).unwrap_or(i32::MAX)),
        ..pb::FindRequest::default()
    };
    Ok(FloorRequests {
        headers,
        put: put(0).encode_to_vec().into(),
        cas: put(1).encode_to_vec().into(),
        get: get.encode_to_vec().into(),
        find: find.encode_to_vec().into(),
    })
}
