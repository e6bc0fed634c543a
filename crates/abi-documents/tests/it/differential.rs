//! The differential test of the document service: the reference
//! `DocumentService` with its SQLite adapter (`document_peer.py serve`) and
//! ours (in process, SQLite in a temp dir), each on its own nats-server (the
//! subjects carry no project), receive the same raw protobuf requests from
//! seeded random sequences: every operation, conflicts, bad input, tokens,
//! and `find` pages followed to the end. Every reply is compared: the
//! `Abi-Error-Code` header, the `CallError`, and the decoded reply (maps
//! sorted, floats by their exact representation, cursors byte for byte);
//! timestamps are checked on each side (well formed, `created_at` kept
//! across updates) rather than compared.
//!
//! The deliberate differences (README, "How we differ from the reference")
//! are left out of the comparison in [`messages_comparable`], each with its
//! reason.
//!
//! A failure names the seed and the operation, with the request and both
//! replies; `ABI_DOCUMENTS_DIFF_SEED=<seed>` runs that sequence alone
//! (every sequence starts from empty namespaces, so it replays exactly).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::time::{Duration, Instant, SystemTime};

use abi_document_model::Datetime;
use abi_proto::common::v1::CallError;
use abi_proto::document::v1 as pb;
use abi_test_support::NatsServer;
use abi_wire::documents::{self, Operation};
use base64::Engine as _;
use bytes::Bytes;
use pb::value::Kind;
use prost::Message;

use super::common::{OurServer, SECRET, reference_server, token};

/// Sequences per run, seeded `0..SEQUENCES`.
const SEQUENCES: u64 = 30;
/// Operations per sequence (each followed `find` page counts apart).
const OPERATIONS: usize = 150;
/// Runs only the sequence of this seed.
const SEED_ENV: &str = "ABI_DOCUMENTS_DIFF_SEED";
/// The most pages one query is followed for.
const MAX_PAGES: usize = 60;

#[tokio::test]
async fn every_reply_matches_the_reference() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ours_nats = NatsServer::start().await;
    let theirs_nats = NatsServer::start().await;
    let (ours_url, theirs_url) = (ours_nats.url(), theirs_nats.url());
    let (ours_server, mut theirs_server) = tokio::join!(
        OurServer::start(&ours_url, dir.path(), false),
        reference_server(&theirs_url, dir.path()),
    );
    let pair = Pair {
        ours: async_nats::connect(ours_nats.url()).await.expect("connect"),
        theirs: async_nats::connect(theirs_nats.url())
            .await
            .expect("connect"),
    };
    let seeds: Vec<u64> = match std::env::var(SEED_ENV) {
        Ok(seed) => vec![seed.parse().expect("a seed is a number")],
        Err(_) => (0..SEQUENCES).collect(),
    };
    let started = Instant::now();
    let mut stats = Stats::default();
    let mut failures = Vec::new();
    let tokens = Tokens::new();
    for &seed in &seeds {
        let mut sequence = Sequence::new(seed, &tokens);
        match sequence.run(&pair, &mut stats).await {
            Ok(()) => {}
            Err(Diverged::OnPurpose) => stats.ended_early += 1,
            Err(Diverged::Differs(report)) => failures.push(report),
        }
        sequence.clean_up(&pair).await;
    }
    eprintln!(
        "differential: {} sequences ({} ended early on a deliberate difference), {} requests \
         ({} follow-up pages, longest query {} pages, {} deliberate differences) in {:.1?}; \
         refusals: {:?}; per operation: {:?}",
        seeds.len(),
        stats.ended_early,
        stats.requests,
        stats.pages,
        stats.longest_paging,
        stats.deliberate,
        started.elapsed(),
        stats.codes,
        stats.outcomes
    );
    assert!(
        failures.is_empty(),
        "{} of {} sequences differ from the reference:\n\n{}",
        failures.len(),
        seeds.len(),
        failures.join("\n\n")
    );
    if seeds.len() as u64 == SEQUENCES {
        // The generator must keep reaching every refusal and real paging,
        // or the comparison proves little.
        for code in [
            "INVALID_ARGUMENT",
            "VERSION_CONFLICT",
            "DOCUMENT_NOT_FOUND",
            "COLLECTION_NOT_FOUND",
            "UNIQUE_VIOLATION",
            "UNAUTHENTICATED",
            "PERMISSION_DENIED",
        ] {
            assert!(
                stats.codes.get(code).is_some_and(|n| *n >= 3),
                "the sequences reached {code} too rarely: {:?}",
                stats.codes
            );
        }
        assert!(stats.longest_paging >= 5, "no query paged far enough");
    }
    ours_server.stop().await;
    theirs_server
        .kill()
        .await
        .expect("stop the reference server");
}

/// The two servers' connections.
struct Pair {
    ours: async_nats::Client,
    theirs: async_nats::Client,
}

impl Pair {
    /// Sends `call` to both servers at once.
    async fn send(&self, call: &Call) -> (Reply, Reply) {
        let (ours, theirs) = tokio::join!(
            Reply::request(&self.ours, call),
            Reply::request(&self.theirs, call)
        );
        (ours, theirs)
    }
}

/// Why a sequence stopped before its end.
enum Diverged {
    /// A reply differs: the report.
    Differs(String),
    /// The reference wrote what we deliberately refused.
    OnPurpose,
}

/// What the run reached.
#[derive(Default)]
struct Stats {
    deliberate: usize,
    ended_early: usize,
    requests: usize,
    pages: usize,
    longest_paging: usize,
    codes: BTreeMap<String, usize>,
    /// Replies per operation and code.
    outcomes: BTreeMap<String, usize>,
}

/// Tokens for the calls: the admin service identity, and refused ones.
struct Tokens {
    admin: String,
    forged: String,
    expired: String,
}

impl Tokens {
    fn new() -> Self {
        let forged = abi_auth::issue_service_token(
            "api",
            "another-secret-of-32-bytes-at-least",
            Duration::from_secs(600),
            SystemTime::now(),
            None,
        )
        .expect("token");
        let expired = abi_auth::issue_service_token(
            "api",
            SECRET,
            Duration::from_secs(60),
            SystemTime::now() - Duration::from_secs(3600),
            None,
        )
        .expect("token");
        Self {
            admin: token("api"),
            forged,
            expired,
        }
    }
}

/// One request, as sent to both servers.
struct Call {
    op: Operation,
    token: Option<String>,
    body: Vec<u8>,
    /// The request for the report (the decoded message, or the raw bytes).
    shown: String,
    /// The namespace and collection documents in the reply belong to.
    scope: Option<(String, String)>,
}

impl Call {
    fn new(
        op: Operation,
        token: Option<String>,
        request: &(impl Message + std::fmt::Debug),
    ) -> Self {
        Self {
            op,
            token,
            body: request.encode_to_vec(),
            shown: format!("{request:?}"),
            scope: None,
        }
    }

    fn scoped(mut self, namespace: &str, collection: &str) -> Self {
        self.scope = Some((namespace.to_owned(), collection.to_owned()));
        self
    }
}

/// A reply as received: the `Abi-Error-Code` header and the payload.
struct Reply {
    header: Option<String>,
    payload: Bytes,
}

impl Reply {
    async fn request(client: &async_nats::Client, call: &Call) -> Self {
        let mut headers = async_nats::HeaderMap::new();
        if let Some(token) = &call.token {
            headers.insert(abi_wire::AUTH_HEADER, token.as_str());
        }
        let reply = tokio::time::timeout(
            Duration::from_secs(30),
            client.request_with_headers(
                documents::operation(call.op),
                headers,
                call.body.clone().into(),
            ),
        )
        .await
        .unwrap_or_else(|_| panic!("no reply within 30 s to {:?} {}", call.op, call.shown))
        .unwrap_or_else(|e| panic!("request {:?} failed: {e}", call.op));
        Self {
            header: reply
                .headers
                .as_ref()
                .and_then(|h| h.get(documents::ERROR_CODE_HEADER))
                .map(|v| v.as_str().to_owned()),
            payload: reply.payload,
        }
    }
}

/// A reply decoded for comparison.
#[derive(Debug)]
struct View {
    header: Option<String>,
    error: Option<CallError>,
    /// Everything else, as canonical text (timestamps left out).
    body: String,
    /// The documents in the reply, for the timestamp checks.
    documents: Vec<pb::Document>,
    /// `find`'s next cursor.
    cursor: Option<String>,
}

impl View {
    fn new(op: Operation, reply: &Reply) -> Self {
        let mut view = Self {
            header: reply.header.clone(),
            error: None,
            body: String::new(),
            documents: Vec::new(),
            cursor: None,
        };
        let payload = reply.payload.clone();
        let decoded = match op {
            Operation::EnsureCollection => {
                pb::EnsureCollectionResponse::decode(payload).map(|r| view.error = r.error)
            }
            Operation::DropCollection => {
                pb::DropCollectionResponse::decode(payload).map(|r| view.error = r.error)
            }
            Operation::Delete => pb::DeleteResponse::decode(payload).map(|r| view.error = r.error),
            Operation::Collections => pb::CollectionsResponse::decode(payload).map(|r| {
                view.error = r.error;
                view.body = format!("{:?}", r.collections);
            }),
            Operation::Namespaces => pb::NamespacesResponse::decode(payload).map(|r| {
                view.error = r.error;
                view.body = format!("{:?}", r.namespaces);
            }),
            Operation::CollectionSpec => pb::CollectionSpecResponse::decode(payload).map(|r| {
                view.error = r.error;
                view.body = r.spec.map(|s| spec_text(&s)).unwrap_or_default();
            }),
            Operation::Count => pb::CountResponse::decode(payload).map(|r| {
                view.error = r.error;
                view.body = format!("count {}", r.count);
            }),
            Operation::Put => pb::PutResponse::decode(payload).map(|r| {
                view.error = r.error;
                view.documents.extend(r.document);
            }),
            // Ours only: never sent to both.
            Operation::Batch => pb::BatchResponse::decode(payload).map(|r| {
                view.error = r.error;
                view.documents
                    .extend(r.results.into_iter().filter_map(|r| r.document));
            }),
            Operation::PutMany => pb::PutManyResponse::decode(payload).map(|r| {
                view.error = r.error;
                view.documents
                    .extend(r.results.into_iter().filter_map(|r| r.document));
            }),
            Operation::Get => pb::GetResponse::decode(payload).map(|r| {
                view.error = r.error;
                view.documents.extend(r.document);
            }),
            Operation::Find => pb::FindResponse::decode(payload).map(|r| {
                view.error = r.error;
                view.documents = r.items;
                view.cursor = r.cursor;
            }),
        };
        if let Err(e) = decoded {
            view.body = format!("undecodable reply ({e}): {}", hex::encode(&reply.payload));
        }
        for doc in &view.documents {
            let _ = writeln!(view.body, "{}", document_text(doc));
        }
        if let Some(cursor) = &view.cursor {
            let _ = write!(view.body, "cursor {cursor}");
        }
        view
    }

    fn code(&self) -> Option<&str> {
        self.error.as_ref().map(|e| e.code.as_str())
    }
}

impl std::fmt::Display for View {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "    header: {:?}", self.header)?;
        if let Some(e) = &self.error {
            writeln!(
                f,
                "    error: {} {:?} (retryable {}, status {:?})",
                e.code, e.message, e.retryable, e.status
            )?;
        }
        for line in self.body.lines() {
            writeln!(f, "    {line}")?;
        }
        for doc in &self.documents {
            writeln!(
                f,
                "    {:?}: created_at {} updated_at {}",
                doc.id, doc.created_at, doc.updated_at
            )?;
        }
        Ok(())
    }
}

/// Whether the `CallError` messages are compared: always, except for the
/// deliberate differences (README, "How we differ from the reference"),
/// where both sides must still refuse with `INVALID_ARGUMENT`.
fn messages_comparable(op: Operation, ours: &CallError, theirs: &CallError) -> bool {
    let invalid = ours.code == "INVALID_ARGUMENT" && theirs.code == "INVALID_ARGUMENT";
    // Protobuf that does not decode: prost's message against upb's ("Error
    // parsing message ..."); neither names the problem the same way.
    let malformed = ours.message.starts_with("Malformed protobuf: ")
        && theirs.message.starts_with("Error parsing message");
    // A collection spec the reference checks with pydantic, whose messages
    // list every error of the model ("1 validation error for FieldSpec ...");
    // ours names the first problem, as the rest of the service does.
    let pydantic = op == Operation::EnsureCollection
        && theirs.message.contains(" validation error")
        && (theirs.message.contains(" for FieldSpec")
            || theirs.message.contains(" for CollectionSpec"));
    !(invalid && (malformed || pydantic))
}

/// Whether the replies differ on purpose as a whole (README, "How we differ
/// from the reference").
fn deliberately_different(ours: &View, theirs: &View) -> bool {
    // A datetime that leaves Python's range once converted to UTC
    // (0001-01-01T00:00:00+01:00): the reference's `astimezone` raises
    // OverflowError, which it answers INTERNAL; bad input gets
    // INVALID_ARGUMENT from us.
    let out_of_range =
        ours.error.as_ref().is_some_and(|e| {
            e.code == "INVALID_ARGUMENT" && e.message == "date value out of range"
        }) && theirs.code() == Some("INTERNAL");
    // A known field sent with another wire type: upb (the reference's
    // protobuf) keeps it as an unknown field and carries on without it;
    // prost refuses the message.
    let wire_type = ours.error.as_ref().is_some_and(|e| {
        e.message.starts_with("Malformed protobuf: ") && e.message.contains("invalid wire type")
    });
    out_of_range || wire_type
}

/// Where the two replies differ, if they do.
fn difference(op: Operation, ours: &View, theirs: &View) -> Option<String> {
    if ours.header != theirs.header {
        return Some("the Abi-Error-Code headers differ".into());
    }
    match (&ours.error, &theirs.error) {
        (None, None) => {}
        (Some(a), Some(b)) => {
            if a.code != b.code {
                return Some("the error codes differ".into());
            }
            if a.retryable != b.retryable || a.status != b.status {
                return Some("retryable or status differ".into());
            }
            if a.message != b.message && messages_comparable(op, a, b) {
                return Some("the error messages differ".into());
            }
        }
        _ => return Some("one side refused, the other did not".into()),
    }
    if ours.body != theirs.body {
        return Some("the replies differ".into());
    }
    None
}

/// Each side's `created_at` of the documents it returned, to check it is kept.
#[derive(Default)]
struct Stamps {
    created: HashMap<(String, String, String), String>,
}

impl Stamps {
    /// Timestamps well formed (UTC, Python's `isoformat()`), equal at
    /// version 1, `created_at` kept by every later version and never after
    /// `updated_at`.
    fn check(&mut self, scope: &(String, String), docs: &[pb::Document]) -> Result<(), String> {
        for doc in docs {
            let parse = |text: &str| {
                let well_formed = text.ends_with("+00:00")
                    && (text.len() == 25 || text.len() == 32)
                    && text.as_bytes().get(10) == Some(&b'T');
                Datetime::parse_iso(text)
                    .ok()
                    .filter(|_| well_formed)
                    .ok_or_else(|| format!("{:?}: malformed timestamp {text:?}", doc.id))
            };
            let created = parse(&doc.created_at)?;
            let updated = parse(&doc.updated_at)?;
            let key = (scope.0.clone(), scope.1.clone(), doc.id.clone());
            if doc.version == 1 {
                if created != updated {
                    return Err(format!(
                        "{:?}: version 1 with created_at != updated_at",
                        doc.id
                    ));
                }
                self.created.insert(key, doc.created_at.clone());
            } else {
                if updated < created {
                    return Err(format!("{:?}: updated_at before created_at", doc.id));
                }
                if let Some(first) = self.created.get(&key)
                    && *first != doc.created_at
                {
                    return Err(format!(
                        "{:?}: created_at changed from {first} to {} at version {}",
                        doc.id, doc.created_at, doc.version
                    ));
                }
            }
        }
        Ok(())
    }
}

/// splitmix64: a small seeded generator, the same sequence on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `percent`/100.
    fn percent(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// The declared-type vocabulary, and the fields the sequences use with the
/// type they are mostly given.
const TYPES: [&str; 7] = [
    "string", "int", "float", "bool", "datetime", "bytes", "json",
];
const FIELDS: [(&str, &str); 11] = [
    ("n", "int"),
    ("f", "float"),
    ("s", "string"),
    ("b", "bool"),
    ("t", "datetime"),
    ("y", "bytes"),
    ("j", "json"),
    ("u", "string"),
    ("v", "int"),
    ("a.b", "json"),
    ("$t", "string"),
];
const COLLECTIONS: [&str; 4] = ["runs", "events", "ç-𝔘", "x"];
const IDS: [&str; 12] = [
    "a",
    "b",
    "c",
    "d",
    "e",
    "A",
    "é",
    "𝔘",
    "id with space",
    "10",
    "9",
    "z-last",
];
const STRINGS: [&str; 14] = [
    "",
    "a",
    "b",
    "B",
    "ä",
    "é",
    "e\u{301}",
    "𝔘nicode",
    "Zebra",
    "zebra",
    "10",
    "9",
    "\u{7f}",
    "a b",
];
const INTS: [i64; 12] = [
    0,
    1,
    -1,
    2,
    10,
    i64::MAX,
    i64::MIN,
    1 << 53,
    (1 << 53) + 1,
    -(1 << 53) - 1,
    10_000_000_000_000_000,
    1_234_567_890_123_456_789,
];
const FLOATS: [f64; 14] = [
    0.0,
    -0.0,
    0.1,
    1.5,
    -2.5,
    1.0,
    1e16,
    -1e16,
    1.234_567_890_123_456_7e18,
    9_007_199_254_740_993.0,
    1e-300,
    5e-324,
    f64::MAX,
    10.0,
];
const DATETIMES: [&str; 12] = [
    "2026-10-01T12:00:00+00:00",
    "2026-10-01T12:00:00.5+02:00",
    "2026-10-01T12:00:00.123456-05:30",
    "2026-10-01 10:00:00Z",
    "20261001T100000+0100",
    "2026-10-01T12:00:00.1234567+00:00",
    "2026-10-01T12+05",
    "1970-01-01T00:00:00+00:00",
    "0001-01-01T00:00:00+00:00",
    "9999-12-31T23:59:59.999999+00:00",
    "2026-10-01T12:00:00,25+00:00:30",
    "2000-02-29T23:59:59-23:59",
];
/// Datetimes the reference refuses, each its own way.
const BAD_DATETIMES: [&str; 10] = [
    "2026-10-01",
    "2026-10-01T12:00:00",
    "nope",
    "",
    "2026-13-01T00:00:00Z",
    "2026-10-01T24:00:00Z",
    "2026-02-30T00:00:00Z",
    "0001-01-01T00:00:00+01:00",
    "2026-W40-4T00:00:00Z",
    "2026-10-01T12:00:00+24:00",
];

/// One sequence: its generator, namespaces and what it has seen.
struct Sequence<'t> {
    seed: u64,
    rng: Rng,
    tokens: &'t Tokens,
    namespaces: [String; 2],
    module: String,
    /// The last version the reference reported per document.
    versions: HashMap<(String, String, String), i64>,
    /// Cursors seen, with the query they continue.
    cursors: Vec<(pb::FindRequest, String)>,
    ours: Stamps,
    theirs: Stamps,
    index: usize,
}

impl<'t> Sequence<'t> {
    fn new(seed: u64, tokens: &'t Tokens) -> Self {
        Self {
            seed,
            rng: Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0xD0C5),
            tokens,
            namespaces: [format!("s{seed}"), format!("s{seed}-ü")],
            module: abi_test_support::requests::module_token(SECRET, &format!("s{seed}")),
            versions: HashMap::new(),
            cursors: Vec::new(),
            ours: Stamps::default(),
            theirs: Stamps::default(),
            index: 0,
        }
    }

    async fn run(&mut self, pair: &Pair, stats: &mut Stats) -> Result<(), Diverged> {
        // A few collections from the start, so most operations find one.
        for call in self.prologue() {
            self.exchange(pair, &call, stats, " (prologue)").await?;
        }
        for index in 0..OPERATIONS {
            self.index = index;
            let call = self.call();
            let theirs = self.exchange(pair, &call, stats, "").await?;
            if call.op == Operation::Find && theirs.cursor.is_some() && self.rng.percent(85) {
                self.follow(pair, &call, theirs, stats).await?;
            }
        }
        Ok(())
    }

    /// Sends `call` to both, compares, checks the timestamps and learns
    /// versions and cursors from the reference's reply.
    async fn exchange(
        &mut self,
        pair: &Pair,
        call: &Call,
        stats: &mut Stats,
        page: &str,
    ) -> Result<View, Diverged> {
        let (ours, theirs) = pair.send(call).await;
        let (ours, theirs) = (View::new(call.op, &ours), View::new(call.op, &theirs));
        stats.requests += 1;
        if let Some(code) = theirs.code() {
            *stats.codes.entry(code.to_owned()).or_default() += 1;
        }
        *stats
            .outcomes
            .entry(format!("{:?} {}", call.op, theirs.code().unwrap_or("OK")))
            .or_default() += 1;
        if deliberately_different(&ours, &theirs) {
            stats.deliberate += 1;
            if theirs.error.is_none() && call.op.writes() {
                // The reference wrote what we refused: the two stores no
                // longer hold the same, so the sequence ends here.
                return Err(Diverged::OnPurpose);
            }
            return Ok(theirs);
        }
        let mut problem = difference(call.op, &ours, &theirs);
        if problem.is_none()
            && let Some(scope) = &call.scope
        {
            let checked = self
                .ours
                .check(scope, &ours.documents)
                .map_err(|e| format!("ours: {e}"))
                .and_then(|()| {
                    self.theirs
                        .check(scope, &theirs.documents)
                        .map_err(|e| format!("the reference: {e}"))
                });
            problem = checked.err();
        }
        if let Some(problem) = problem {
            return Err(Diverged::Differs(format!(
                "seed {seed}, operation {index}{page}: {problem}\n  \
                 request: {op:?} (token: {token}) {shown}\n  ours:\n{ours}  the reference:\n{theirs}  \
                 replay: {SEED_ENV}={seed} cargo test -p abi-documents --test it differential::",
                seed = self.seed,
                index = self.index,
                op = call.op,
                token = self.token_name(call.token.as_deref()),
                shown = call.shown,
            )));
        }
        if let Some((namespace, collection)) = &call.scope {
            for doc in &theirs.documents {
                self.versions.insert(
                    (namespace.clone(), collection.clone(), doc.id.clone()),
                    doc.version,
                );
            }
        }
        Ok(theirs)
    }

    /// Follows a query's cursors to the end, comparing every page.
    async fn follow(
        &mut self,
        pair: &Pair,
        first: &Call,
        mut page: View,
        stats: &mut Stats,
    ) -> Result<(), Diverged> {
        let mut request = pb::FindRequest::decode(first.body.as_slice()).expect("our own request");
        let mut pages = 1;
        while let Some(cursor) = page.cursor.take() {
            if pages == MAX_PAGES {
                break;
            }
            self.cursors.push((request.clone(), cursor.clone()));
            request.cursor = Some(cursor);
            let mut call = Call::new(Operation::Find, first.token.clone(), &request);
            call.scope = first.scope.clone();
            page = self
                .exchange(pair, &call, stats, &format!(", page {}", pages + 1))
                .await?;
            pages += 1;
            stats.pages += 1;
        }
        stats.longest_paging = stats.longest_paging.max(pages);
        Ok(())
    }

    /// Drops every collection either side holds in this sequence's
    /// namespaces, so the next sequence starts from empty namespaces.
    async fn clean_up(&self, pair: &Pair) {
        let admin = Some(self.tokens.admin.clone());
        for namespace in &self.namespaces {
            let list = pb::CollectionsRequest {
                namespace: namespace.clone(),
                ..Default::default()
            };
            let (ours, theirs) = pair
                .send(&Call::new(Operation::Collections, admin.clone(), &list))
                .await;
            let mut names = Vec::new();
            for reply in [ours, theirs] {
                if let Ok(r) = pb::CollectionsResponse::decode(reply.payload) {
                    names.extend(r.collections);
                }
            }
            names.sort();
            names.dedup();
            for collection in names {
                let drop = pb::DropCollectionRequest {
                    namespace: namespace.clone(),
                    collection,
                    ..Default::default()
                };
                pair.send(&Call::new(Operation::DropCollection, admin.clone(), &drop))
                    .await;
            }
        }
    }

    fn token_name(&self, token: Option<&str>) -> &'static str {
        match token {
            None => "none",
            Some(t) if t == self.tokens.admin => "api",
            Some(t) if t == self.module => "module",
            Some(t) if t == self.tokens.forged => "forged",
            Some(t) if t == self.tokens.expired => "expired",
            Some(_) => "garbage",
        }
    }

    /// The token of a call: mostly the admin identity, sometimes the
    /// sequence's module, rarely none or a refused one.
    fn token(&mut self) -> Option<String> {
        match self.rng.below(100) {
            0..=84 => Some(self.tokens.admin.clone()),
            85..=95 => Some(self.module.clone()),
            96 => None,
            97 => Some(self.tokens.forged.clone()),
            98 => Some(self.tokens.expired.clone()),
            _ => Some("not.a.token".into()),
        }
    }

    /// A name from `pool`, rarely empty or holding NUL.
    fn name(&mut self, pool: &[&str]) -> String {
        match self.rng.below(100) {
            0 => String::new(),
            1 => "a\0b".into(),
            _ => (*self.rng.pick(pool)).to_owned(),
        }
    }

    fn namespace(&mut self) -> String {
        match self.rng.below(100) {
            0 => String::new(),
            1 => "n\0s".into(),
            2 => format!("s{}-other", self.seed),
            3..=77 => self.namespaces[0].clone(),
            _ => self.namespaces[1].clone(),
        }
    }

    fn collection(&mut self) -> String {
        match self.rng.below(100) {
            0 | 1 => "missing".into(),
            2..=46 => "runs".into(),
            47..=71 => "events".into(),
            _ => self.name(&COLLECTIONS),
        }
    }

    fn field(&mut self) -> (String, &'static str) {
        match self.rng.below(100) {
            0 => (String::new(), "json"),
            1 => ("f\0".into(), "json"),
            _ => {
                let (name, kind) = *self.rng.pick(&FIELDS);
                (name.to_owned(), kind)
            }
        }
    }

    /// Declares `runs` (typed, indexed, unique, unique together) and
    /// `events` in the first namespace, `runs` in the second.
    fn prologue(&self) -> Vec<Call> {
        let field = |name: &str, r#type: &str, indexed: bool, unique: bool| pb::FieldSpec {
            name: name.into(),
            r#type: r#type.into(),
            indexed,
            unique,
        };
        let specs = [
            (
                &self.namespaces[0],
                pb::CollectionSpec {
                    name: "runs".into(),
                    fields: vec![
                        field("n", "int", true, false),
                        field("u", "string", false, true),
                        field("t", "datetime", true, false),
                    ],
                    unique_together: vec![pb::UniqueGroup {
                        fields: vec!["s".into(), "v".into()],
                    }],
                },
            ),
            (
                &self.namespaces[0],
                pb::CollectionSpec {
                    name: "events".into(),
                    fields: vec![
                        field("s", "string", true, false),
                        field("f", "float", false, false),
                    ],
                    ..Default::default()
                },
            ),
            (
                &self.namespaces[1],
                pb::CollectionSpec {
                    name: "runs".into(),
                    ..Default::default()
                },
            ),
        ];
        specs
            .into_iter()
            .map(|(namespace, spec)| {
                let request = pb::EnsureCollectionRequest {
                    namespace: namespace.clone(),
                    spec: Some(spec),
                    ..Default::default()
                };
                Call::new(
                    Operation::EnsureCollection,
                    Some(self.tokens.admin.clone()),
                    &request,
                )
            })
            .collect()
    }

    /// The next request of the sequence.
    fn call(&mut self) -> Call {
        let token = self.token();
        match self.rng.below(100) {
            0..=9 => self.ensure_collection(token),
            10 => {
                let (namespace, collection) = (self.namespace(), self.collection());
                let request = pb::DropCollectionRequest {
                    namespace,
                    collection,
                    ..Default::default()
                };
                Call::new(Operation::DropCollection, token, &request)
            }
            11..=13 => {
                let request = pb::CollectionsRequest {
                    namespace: self.namespace(),
                    ..Default::default()
                };
                Call::new(Operation::Collections, token, &request)
            }
            14..=17 => {
                let (namespace, collection) = (self.namespace(), self.collection());
                let request = pb::CollectionSpecRequest {
                    namespace,
                    collection,
                    ..Default::default()
                };
                Call::new(Operation::CollectionSpec, token, &request)
            }
            18..=20 => {
                // As a platform identity or as the module (refused).
                let token = if self.rng.percent(40) {
                    Some(self.module.clone())
                } else {
                    token
                };
                Call::new(
                    Operation::Namespaces,
                    token,
                    &pb::NamespacesRequest::default(),
                )
            }
            21..=50 => self.put(token),
            51..=62 => {
                let (namespace, collection, id) = self.document();
                let request = pb::GetRequest {
                    namespace: namespace.clone(),
                    collection: collection.clone(),
                    id,
                    ..Default::default()
                };
                Call::new(Operation::Get, token, &request).scoped(&namespace, &collection)
            }
            63..=70 => self.delete(token),
            71..=88 => self.find(token),
            89..=95 => {
                let (namespace, collection) = (self.namespace(), self.collection());
                let request = pb::CountRequest {
                    namespace,
                    collection,
                    r#where: self.predicates(),
                    ..Default::default()
                };
                Call::new(Operation::Count, token, &request)
            }
            _ => self.malformed(token),
        }
    }

    fn document(&mut self) -> (String, String, String) {
        let (namespace, collection) = (self.namespace(), self.collection());
        (namespace, collection, self.name(&IDS))
    }

    fn ensure_collection(&mut self, token: Option<String>) -> Call {
        let namespace = self.namespace();
        let mut spec = pb::CollectionSpec {
            name: self.collection(),
            ..Default::default()
        };
        for _ in 0..self.rng.below(4) {
            let (name, kind) = self.field();
            let r#type = match self.rng.below(100) {
                0..=84 => kind.to_owned(),
                85..=95 => (*self.rng.pick(&TYPES)).to_owned(),
                96..=97 => "text".to_owned(),
                _ => String::new(),
            };
            spec.fields.push(pb::FieldSpec {
                name,
                r#type,
                indexed: self.rng.percent(35),
                unique: self.rng.percent(12),
            });
        }
        if self.rng.percent(15) {
            let mut fields: Vec<String> =
                (0..1 + self.rng.below(2)).map(|_| self.field().0).collect();
            match self.rng.below(20) {
                0 => fields.clear(),
                1 => fields.push(fields[0].clone()),
                _ => {}
            }
            spec.unique_together.push(pb::UniqueGroup { fields });
        }
        let request = pb::EnsureCollectionRequest {
            namespace,
            spec: (!self.rng.percent(2)).then_some(spec),
            ..Default::default()
        };
        Call::new(Operation::EnsureCollection, token, &request)
    }

    /// The version an `if_version` builds on: the last one the reference
    /// reported, or 1.
    fn known_version(&self, namespace: &str, collection: &str, id: &str) -> i64 {
        self.versions
            .get(&(namespace.to_owned(), collection.to_owned(), id.to_owned()))
            .copied()
            .unwrap_or(1)
    }

    fn put(&mut self, token: Option<String>) -> Call {
        let (namespace, collection, id) = self.document();
        let known = self.known_version(&namespace, &collection, &id);
        let if_version = match self.rng.below(100) {
            0..=34 => None,
            35..=54 => Some(0),
            55..=89 => Some(known),
            90..=94 => Some(known + 1 - 2 * self.rng.below(2) as i64),
            95..=97 => Some(-1),
            _ => Some(i64::MAX),
        };
        let mut data = pb::Data::default();
        for _ in 0..self.rng.below(5) {
            let (name, kind) = self.field();
            let value = self.typed_value(kind);
            data.fields.insert(name, value);
        }
        // Few distinct values for the unique field and the unique pair, so
        // writes collide.
        if self.rng.percent(30) {
            let u = self.rng.below(3);
            data.fields
                .insert("u".into(), string_value(&format!("u{u}")));
        }
        if self.rng.percent(20) {
            let (s, v) = (self.rng.below(2), self.rng.below(2) as i64);
            data.fields
                .insert("s".into(), string_value(&format!("s{s}")));
            data.fields.insert("v".into(), int_value(v));
        }
        let request = pb::PutRequest {
            namespace: namespace.clone(),
            collection: collection.clone(),
            id,
            data: (!self.rng.percent(3)).then_some(data),
            if_version,
            ..Default::default()
        };
        Call::new(Operation::Put, token, &request).scoped(&namespace, &collection)
    }

    fn delete(&mut self, token: Option<String>) -> Call {
        let (namespace, collection, id) = self.document();
        let known = self.known_version(&namespace, &collection, &id);
        let if_version = match self.rng.below(100) {
            0..=49 => None,
            50..=84 => Some(known),
            85..=94 => Some(known + 1 + self.rng.below(2) as i64),
            _ => Some(-1 - self.rng.below(2) as i64),
        };
        let request = pb::DeleteRequest {
            namespace,
            collection,
            id,
            if_version,
            ..Default::default()
        };
        Call::new(Operation::Delete, token, &request)
    }

    fn find(&mut self, token: Option<String>) -> Call {
        if !self.cursors.is_empty() && self.rng.percent(12) {
            return self.bad_cursor(token);
        }
        let (namespace, collection) = (self.namespace(), self.collection());
        let order_by = self.rng.percent(60).then(|| {
            let direction = match self.rng.below(20) {
                0 => "up",
                1 => "",
                2 => "ASC",
                n if n % 2 == 0 => "asc",
                _ => "desc",
            };
            pb::OrderBy {
                field: self.field().0,
                direction: direction.to_owned(),
            }
        });
        let limit = match self.rng.below(100) {
            0..=29 => None,
            30..=84 => Some(1 + self.rng.below(7) as i32),
            85..=88 => Some(0),
            89..=91 => Some(1001),
            92..=94 => Some(1000),
            _ => Some(-1),
        };
        let max_bytes = match self.rng.below(100) {
            0..=74 => None,
            75..=89 => Some(1 + self.rng.below(1500) as i64),
            90..=94 => Some(-(self.rng.below(2) as i64)),
            _ => Some(1 << 40),
        };
        let request = pb::FindRequest {
            namespace: namespace.clone(),
            collection: collection.clone(),
            r#where: self.predicates(),
            order_by,
            limit,
            max_bytes,
            ..Default::default()
        };
        Call::new(Operation::Find, token, &request).scoped(&namespace, &collection)
    }

    /// A query with a cursor that does not continue it: another query's, a
    /// mangled one, or one whose key was edited.
    fn bad_cursor(&mut self, token: Option<String>) -> Call {
        let (query, cursor) = self.rng.pick(&self.cursors).clone();
        let (mut request, cursor) = match self.rng.below(8) {
            0 => {
                // Another query's cursor.
                let (other, _) = self.rng.pick(&self.cursors).clone();
                (other, cursor)
            }
            1 => {
                let mut bytes = cursor.into_bytes();
                let at = self.rng.below(bytes.len());
                bytes[at] = *self.rng.pick(b"A_-=+/!");
                (query, String::from_utf8(bytes).expect("ascii"))
            }
            2 => (
                query,
                (*self.rng.pick(&["", "!!!", "e30", "e30=", "bnVsbA=="])).to_owned(),
            ),
            _ => {
                let edited = edit_cursor(&cursor, self.rng.below(12));
                (query, edited)
            }
        };
        request.cursor = Some(cursor);
        let (namespace, collection) = (request.namespace.clone(), request.collection.clone());
        Call::new(Operation::Find, token, &request).scoped(&namespace, &collection)
    }

    fn predicates(&mut self) -> Vec<pb::Predicate> {
        (0..self.rng.below(4)).map(|_| self.predicate()).collect()
    }

    fn predicate(&mut self) -> pb::Predicate {
        let (field, kind) = self.field();
        let operator = if self.rng.percent(4) {
            (*self.rng.pick(&["like", "EQ", "", "in "])).to_owned()
        } else {
            (*self.rng.pick(&[
                "eq", "ne", "lt", "lte", "gt", "gte", "in", "nin", "contains", "exists",
            ]))
            .to_owned()
        };
        let value = match operator.as_str() {
            "exists" if self.rng.percent(90) => bool_value(self.rng.percent(50)),
            "in" | "nin" => match self.rng.below(100) {
                0..=3 => self.typed_value(kind),
                4..=5 => list((0..501).map(int_value).collect()),
                6..=7 => list((0..500).map(int_value).collect()),
                _ => list(
                    (0..self.rng.below(5))
                        .map(|_| self.typed_value(kind))
                        .collect(),
                ),
            },
            "lt" | "lte" | "gt" | "gte" => match self.rng.below(100) {
                0..=4 => null_value(),
                5..=9 => self.value(1),
                _ => self.scalar(kind),
            },
            "contains" if self.rng.percent(50) => self.scalar(kind),
            _ => self.typed_value(kind),
        };
        pb::Predicate {
            field,
            operator,
            value: (!self.rng.percent(1)).then_some(value),
        }
    }

    /// A value for a field of `kind`: mostly of that kind, sometimes any.
    fn typed_value(&mut self, kind: &str) -> pb::Value {
        if self.rng.percent(15) {
            return self.value(2);
        }
        match kind {
            "json" => self.value(2),
            _ => self.scalar(kind),
        }
    }

    fn scalar(&mut self, kind: &str) -> pb::Value {
        let kind = match kind {
            "string" => Kind::StringValue(self.string()),
            "int" => Kind::IntValue(*self.rng.pick(&INTS)),
            "float" => Kind::FloatValue(self.float()),
            "bool" => Kind::BoolValue(self.rng.percent(50)),
            "datetime" => Kind::DatetimeValue(self.datetime()),
            "bytes" => Kind::BytesValue(
                (*self
                    .rng
                    .pick(&[&b""[..], b"\x00", b"\xff\x00", b"abc", b"ab"]))
                .to_vec(),
            ),
            _ => return self.value(0),
        };
        pb::Value { kind: Some(kind) }
    }

    fn string(&mut self) -> String {
        if self.rng.percent(1) {
            return "nul\0inside".into();
        }
        (*self.rng.pick(&STRINGS)).to_owned()
    }

    fn float(&mut self) -> f64 {
        match self.rng.below(100) {
            0 => f64::NAN,
            1 => f64::INFINITY,
            2 => f64::NEG_INFINITY,
            _ => *self.rng.pick(&FLOATS),
        }
    }

    fn datetime(&mut self) -> String {
        if self.rng.percent(4) {
            return (*self.rng.pick(&BAD_DATETIMES)).to_owned();
        }
        (*self.rng.pick(&DATETIMES)).to_owned()
    }

    /// Any value, nested at most `depth` deep (rarely without a kind).
    fn value(&mut self, depth: usize) -> pb::Value {
        let kind = match self.rng.below(if depth == 0 { 8 } else { 10 }) {
            0 => {
                if self.rng.percent(3) {
                    return pb::Value { kind: None };
                }
                Kind::NullValue(true)
            }
            1 => return self.scalar("string"),
            2 => return self.scalar("int"),
            3 => return self.scalar("float"),
            4 => return self.scalar("bool"),
            5 => return self.scalar("datetime"),
            6 => return self.scalar("bytes"),
            7 => Kind::NullValue(self.rng.percent(50)),
            8 => Kind::ListValue(pb::Values {
                items: (0..self.rng.below(4))
                    .map(|_| self.value(depth - 1))
                    .collect(),
            }),
            _ => {
                let mut data = pb::Data::default();
                for _ in 0..self.rng.below(4) {
                    let key = (*self.rng.pick(&["k", "$t", "$v", "é", "", "n\0"])).to_owned();
                    let value = self.value(depth - 1);
                    data.fields.insert(key, value);
                }
                Kind::ObjectValue(data)
            }
        };
        pb::Value { kind: Some(kind) }
    }

    /// Bytes that are not a valid request of the operation, or barely are.
    fn malformed(&mut self, token: Option<String>) -> Call {
        let op = *self.rng.pick(&Operation::ALL);
        let valid = pb::PutRequest {
            namespace: self.namespaces[0].clone(),
            collection: "runs".into(),
            id: "a".into(),
            data: Some(pb::Data::default()),
            ..Default::default()
        }
        .encode_to_vec();
        let body = match self.rng.below(6) {
            0 => (0..1 + self.rng.below(20))
                .map(|_| self.rng.next() as u8)
                .collect(),
            1 => valid[..self.rng.below(valid.len())].to_vec(),
            2 => {
                let mut bytes = valid;
                let at = self.rng.below(bytes.len());
                bytes[at] ^= 1 << self.rng.below(8);
                bytes
            }
            // Invalid UTF-8 in the namespace.
            3 => vec![0x12, 0x02, 0xc3, 0x28],
            // A field number 0.
            4 => vec![0x00, 0x01],
            _ => vec![0xff, 0xff],
        };
        Call {
            op,
            token,
            shown: format!("raw bytes {}", hex::encode(&body)),
            body,
            scope: None,
        }
    }
}

/// A cursor's key edited the `how`-th way, re-encoded (urlsafe base64 of JSON).
fn edit_cursor(cursor: &str, how: usize) -> String {
    let encode = |json: &serde_json::Value| {
        base64::engine::general_purpose::URL_SAFE.encode(json.to_string())
    };
    let Some(mut json) = base64::engine::general_purpose::URL_SAFE
        .decode(cursor)
        .ok()
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
    else {
        return format!("{cursor}x");
    };
    let key = json["key"].as_array().cloned().unwrap_or_default();
    let set_key = |json: &mut serde_json::Value, key: Vec<serde_json::Value>| {
        json["key"] = serde_json::Value::Array(key);
    };
    let key_edit = |i: usize, value: serde_json::Value| {
        let mut key = key.clone();
        if i < key.len() {
            key[i] = value;
        }
        key
    };
    use serde_json::json;
    match how {
        0 => json["v"] = json!(2),
        1 => json["q"] = json!("0".repeat(64)),
        2 => {
            let k = key_edit(0, json!(99));
            set_key(&mut json, k);
        }
        3 => {
            let k = key_edit(0, json!("1"));
            set_key(&mut json, k);
        }
        4 => {
            let k = key_edit(1, json!(true));
            set_key(&mut json, k);
        }
        5 => {
            let k = key_edit(1, json!(1.5e300));
            set_key(&mut json, k);
        }
        6 => {
            let last = key.len().saturating_sub(1);
            let k = key_edit(last, json!(""));
            set_key(&mut json, k);
        }
        7 => {
            let last = key.len().saturating_sub(1);
            let k = key_edit(last, json!(5));
            set_key(&mut json, k);
        }
        8 => {
            let mut k = key.clone();
            k.pop();
            set_key(&mut json, k);
        }
        9 => json = json!({"v": 1, "q": json["q"].clone()}),
        10 => {
            let k = key_edit(2, json!(null));
            set_key(&mut json, k);
        }
        // Same content, other JSON spacing: still a cursor of this query.
        _ => {
            let spaced = serde_json::to_string_pretty(&json).expect("json");
            return base64::engine::general_purpose::URL_SAFE.encode(spaced);
        }
    }
    encode(&json)
}

fn list(items: Vec<pb::Value>) -> pb::Value {
    pb::Value {
        kind: Some(Kind::ListValue(pb::Values { items })),
    }
}

fn string_value(s: &str) -> pb::Value {
    pb::Value {
        kind: Some(Kind::StringValue(s.to_owned())),
    }
}

fn int_value(n: i64) -> pb::Value {
    pb::Value {
        kind: Some(Kind::IntValue(n)),
    }
}

fn bool_value(b: bool) -> pb::Value {
    pb::Value {
        kind: Some(Kind::BoolValue(b)),
    }
}

fn null_value() -> pb::Value {
    pb::Value {
        kind: Some(Kind::NullValue(true)),
    }
}

/// A value as canonical text: object keys sorted, floats by their shortest
/// exact representation (so `-0.0` and `0.0` differ), kinds tagged.
fn value_text(value: &pb::Value, out: &mut String) {
    match &value.kind {
        None => out.push_str("<no kind>"),
        Some(Kind::NullValue(b)) => {
            let _ = write!(out, "null({b})");
        }
        Some(Kind::StringValue(s)) => {
            let _ = write!(out, "{s:?}");
        }
        Some(Kind::IntValue(n)) => {
            let _ = write!(out, "{n}i");
        }
        Some(Kind::FloatValue(x)) => {
            let _ = write!(out, "{x:?}f");
        }
        Some(Kind::BoolValue(b)) => {
            let _ = write!(out, "{b}");
        }
        Some(Kind::BytesValue(b)) => {
            let _ = write!(out, "b'{}'", hex::encode(b));
        }
        Some(Kind::DatetimeValue(s)) => {
            let _ = write!(out, "dt{s:?}");
        }
        Some(Kind::ListValue(list)) => {
            out.push('[');
            for (i, item) in list.items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                value_text(item, out);
            }
            out.push(']');
        }
        Some(Kind::ObjectValue(data)) => data_text(data, out),
    }
}

fn data_text(data: &pb::Data, out: &mut String) {
    let sorted: BTreeMap<&String, &pb::Value> = data.fields.iter().collect();
    out.push('{');
    for (i, (key, value)) in sorted.into_iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{key:?}: ");
        value_text(value, out);
    }
    out.push('}');
}

/// A document without its timestamps (checked apart).
fn document_text(doc: &pb::Document) -> String {
    let mut out = format!("doc {:?} v{} ", doc.id, doc.version);
    match &doc.data {
        Some(data) => data_text(data, &mut out),
        None => out.push_str("<no data>"),
    }
    out
}

fn spec_text(spec: &pb::CollectionSpec) -> String {
    let mut out = format!("spec {:?}", spec.name);
    for f in &spec.fields {
        let _ = write!(
            out,
            " field({:?} {:?} indexed={} unique={})",
            f.name, f.r#type, f.indexed, f.unique
        );
    }
    for g in &spec.unique_together {
        let _ = write!(out, " unique_together{:?}", g.fields);
    }
    out
}
