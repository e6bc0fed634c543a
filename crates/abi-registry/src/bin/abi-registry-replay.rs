//! `abi-registry-replay`: runs recorded discovery operations through our
//! rules, for the differential test against the Python reference.
//!
//! Reads the JSON lines `tests/differential/reference.py` prints (one per
//! operation, then one `"op": "snapshot"` line closing each sequence) on
//! stdin, ignores their `expect`, and prints one line per input line with the
//! same `seq`, `i` and `op` and our answer under `result`, in the shape of the
//! reference's `expect`:
//!
//! - `{"ok": true, "response": "<hex of the encoded response>"}`
//! - `{"ok": false, "code": "<wire code>", "message": "<CODE: message>"}`
//! - `{"snapshot": "<hex of the stored snapshot>"}` for the closing line.
//!
//! Each operation runs the way the discovery service runs it: the snapshot is
//! kept as encoded bytes; a mutation decodes it, drops expired records, applies
//! the mutation and stores the re-encoded result only on success; a lookup
//! decodes it and answers from it as stored (`view` answers with
//! `abi_registry::view` of it). A new `seq` starts from an empty
//! registry. The rules use a 20 s lease and the admin identities `api` and
//! `engine`, or the line's `lease_seconds` and `admins`, as the harness
//! configures the reference.

use std::io::{BufRead, BufWriter, Write};
use std::process::ExitCode;

use abi_proto::discovery::v1 as pb;
use abi_registry::{Mutation, Outcome, Rules, prune_expired, view};
use prost::Message;
use serde_json::{Value, json};

/// The reference harness's lease, in seconds, when a line names none.
const LEASE_SECONDS: f64 = 20.0;
/// The reference harness's admin identities.
const ADMINS: [&str; 2] = ["api", "engine"];

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("abi-registry-replay: {why}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let rules = Rules::new(LEASE_SECONDS, ADMINS).map_err(|e| e.to_string())?;
    let stdin = std::io::stdin().lock();
    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut replay = Replay {
        rules,
        seq: None,
        stored: Vec::new(),
    };
    for (number, line) in stdin.lines().enumerate() {
        let line = line.map_err(|e| format!("stdin: {e}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let answer = replay
            .line(&line)
            .map_err(|why| format!("input line {}: {why}", number + 1))?;
        writeln!(out, "{answer}").map_err(|e| format!("stdout: {e}"))?;
    }
    out.flush().map_err(|e| format!("stdout: {e}"))
}

/// The registry of the sequence being replayed.
struct Replay {
    rules: Rules,
    /// The sequence the stored snapshot belongs to.
    seq: Option<Value>,
    /// The snapshot as the service would store it: encoded bytes.
    stored: Vec<u8>,
}

impl Replay {
    /// Answers one input line.
    fn line(&mut self, line: &str) -> Result<Value, String> {
        let input: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
        let seq = input.get("seq").cloned().unwrap_or(Value::Null);
        if self.seq.as_ref() != Some(&seq) {
            self.seq = Some(seq.clone());
            self.stored.clear();
        }
        let op = input.get("op").and_then(Value::as_str).ok_or("no \"op\"")?;
        let now = input
            .get("now")
            .and_then(Value::as_f64)
            .ok_or("no numeric \"now\"")?;
        let owner = input.get("owner").and_then(Value::as_str).unwrap_or("");
        let lease = input
            .get("lease_seconds")
            .and_then(Value::as_f64)
            .unwrap_or(LEASE_SECONDS);
        let mut admins: Vec<&str> = match input.get("admins").and_then(Value::as_array) {
            Some(names) => names.iter().filter_map(Value::as_str).collect(),
            None => ADMINS.to_vec(),
        };
        // Sorted and unique, as the rules list them.
        admins.sort_unstable();
        admins.dedup();
        if lease.to_bits() != self.rules.lease_seconds().to_bits()
            || !self.rules.admin_identities().eq(admins.iter().copied())
        {
            self.rules = Rules::new(lease, admins).map_err(|e| e.to_string())?;
        }
        let result = match op {
            "snapshot" => {
                let snapshot = hex::encode(&self.stored);
                // The sequence ends here: the next line starts afresh even
                // if it reuses the seq.
                self.seq = None;
                self.stored.clear();
                json!({ "snapshot": snapshot })
            }
            "register" => self.mutate(
                Mutation::Register(request!(&input, pb::RegisterRequest)),
                owner,
                now,
            )?,
            "renew" => self.mutate(
                Mutation::Renew(request!(&input, pb::RenewRequest)),
                owner,
                now,
            )?,
            "unregister" => self.mutate(
                Mutation::Unregister(request!(&input, pb::UnregisterRequest)),
                owner,
                now,
            )?,
            "evict" => self.mutate(
                Mutation::Evict(request!(&input, pb::EvictRequest)),
                owner,
                now,
            )?,
            "get_module" => {
                let req = request!(&input, pb::GetModuleRequest);
                answer(self.rules.get_module(&self.state()?, &req, now))
            }
            "list_modules" => {
                let req = request!(&input, pb::ListModulesRequest);
                answer(self.rules.list_modules(&self.state()?, &req, now))
            }
            "authorize_agent" => {
                let req = request!(&input, pb::AuthorizeAgentRequest);
                answer(self.rules.authorize_agent(&self.state()?, &req, owner, now))
            }
            "authorize_model" => {
                let req = request!(&input, pb::AuthorizeModelRequest);
                answer(self.rules.authorize_model(&self.state()?, &req, owner, now))
            }
            "authorize_app" => {
                let req = request!(&input, pb::AuthorizeAppRequest);
                answer(self.rules.authorize_app(&self.state()?, &req, owner, now))
            }
            "view" => {
                let live = view(&self.state()?, now);
                json!({ "ok": true, "response": hex::encode(live.encode_to_vec()) })
            }
            other => return Err(format!("unknown op {other:?}")),
        };
        Ok(json!({
            "seq": seq,
            "i": input.get("i").cloned().unwrap_or(Value::Null),
            "op": op,
            "result": result,
        }))
    }

    /// The stored snapshot, decoded.
    fn state(&self) -> Result<pb::RegistryState, String> {
        pb::RegistryState::decode(self.stored.as_slice())
            .map_err(|e| format!("stored snapshot does not decode: {e}"))
    }

    /// One write: read, drop the expired, apply, store on success.
    fn mutate(&mut self, mutation: Mutation, owner: &str, now: f64) -> Result<Value, String> {
        let mut state = self.state()?;
        prune_expired(&mut state, now);
        Ok(match self.rules.apply(&mut state, &mutation, owner, now) {
            Ok(outcome) => {
                self.stored = state.encode_to_vec();
                let bytes = match outcome {
                    Outcome::Register(r) => r.encode_to_vec(),
                    Outcome::Renew(r) => r.encode_to_vec(),
                    Outcome::Unregister(r) => r.encode_to_vec(),
                    Outcome::Evict(r) => r.encode_to_vec(),
                };
                json!({ "ok": true, "response": hex::encode(bytes) })
            }
            Err(error) => refusal(&error),
        })
    }
}

/// The request of an input line, as a `$ty`: from `request_hex` (protobuf
/// bytes, for values JSON cannot carry) when present, else from the
/// `request` object. A macro because the serde bound cannot be named here
/// (serde itself is not a dependency of this crate, only serde_json).
macro_rules! request {
    ($input:expr, $ty:ty) => {
        match hex_request::<$ty>($input)? {
            Some(req) => req,
            None => {
                serde_json::from_value::<$ty>($input.get("request").cloned().unwrap_or(json!({})))
                    .map_err(|e| format!("request: {e}"))?
            }
        }
    };
}
use request;

/// The request from `request_hex`, if the line has one.
fn hex_request<M: Message + Default>(input: &Value) -> Result<Option<M>, String> {
    let Some(hex) = input.get("request_hex").and_then(Value::as_str) else {
        return Ok(None);
    };
    let bytes = hex::decode(hex).map_err(|e| format!("request_hex: {e}"))?;
    M::decode(bytes.as_slice())
        .map(Some)
        .map_err(|e| format!("request_hex: {e}"))
}

/// A lookup's answer in the harness's shape.
fn answer<M: Message>(result: Result<M, abi_registry::Error>) -> Value {
    match result {
        Ok(response) => json!({ "ok": true, "response": hex::encode(response.encode_to_vec()) }),
        Err(error) => refusal(&error),
    }
}

fn refusal(error: &abi_registry::Error) -> Value {
    json!({ "ok": false, "code": error.code().as_str(), "message": error.to_string() })
}
