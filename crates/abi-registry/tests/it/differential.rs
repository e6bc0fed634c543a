//! Differential test: our rules against the Python reference, operation by
//! operation.
//!
//! `tests/differential/reference.py` generates operation sequences (random
//! ones from fixed seeds, and hand-written scenarios), runs them through the
//! reference `DiscoveryService` and prints each operation with the
//! reference's answer. The `abi-registry-replay` binary runs the same
//! operations through `abi-registry` the way our service would. Every answer
//! must match exactly: the error code and message, or the encoded response
//! bytes, and the stored snapshot bytes at the end of each sequence.
//!
//! Cases where we deliberately differ are listed, with reasons, in
//! `DIFFERENCES` in reference.py; the generator leaves them out.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Instant;

use abi_proto::discovery::v1 as pb;
use abi_test_support::{python, workspace_root};
use prost::Message;
use serde_json::Value;

/// Seeds of the random sequences; each gives [`SEQUENCES_PER_SEED`].
const SEEDS: [u64; 4] = [11, 22, 33, 44];
/// Sequences per seed (20 to 60 operations each, a few far longer).
const SEQUENCES_PER_SEED: usize = 500;

/// Every code the reference can answer with: each must come up, so a
/// generator change that stops exercising a rule fails here.
const CODES: [&str; 14] = [
    "OK",
    "INVALID_ARGUMENT",
    "PERMISSION_DENIED",
    "LEASE_EXPIRED",
    "DESCRIPTOR_CONFLICT",
    "DEPENDENCY_CYCLE",
    "REGISTRY_FULL",
    "INSTANCE_NOT_FOUND",
    "MODULE_NOT_FOUND",
    "INCOMPATIBLE_MODULE",
    "AGENT_NOT_FOUND",
    "MODEL_NOT_FOUND",
    "APP_NOT_FOUND",
    "MODULE_UNAVAILABLE",
];
/// Every fixed refusal text of the reference's rules (the `*_NOT_FOUND`
/// ones carry the name asked for instead): each must come up.
const MESSAGES: [&str; 30] = [
    "DEPENDENCY_CYCLE: Required modules form a cycle",
    "DESCRIPTOR_CONFLICT: Registration identity cannot change",
    "DESCRIPTOR_CONFLICT: Replicas of a contract in one rollout must declare identical dependencies, agents, jobs, models and apps",
    "DESCRIPTOR_CONFLICT: Rollout members do not match",
    "INVALID_ARGUMENT: Duplicate agents",
    "INVALID_ARGUMENT: Duplicate dependencies",
    "INVALID_ARGUMENT: Invalid agent descriptor",
    "INVALID_ARGUMENT: Invalid app descriptor",
    "INVALID_ARGUMENT: Invalid contract or package version",
    "INVALID_ARGUMENT: Invalid dependency",
    "INVALID_ARGUMENT: Invalid instance identity",
    "INVALID_ARGUMENT: Invalid job descriptor",
    "INVALID_ARGUMENT: Invalid model descriptor",
    "INVALID_ARGUMENT: Invalid module or instance identity",
    "INVALID_ARGUMENT: Invalid rollout id",
    "INVALID_ARGUMENT: Invalid rollout modules",
    "INVALID_ARGUMENT: Lease token must contain 32 to 256 characters",
    "INVALID_ARGUMENT: Module identity and contract required",
    "INVALID_ARGUMENT: Page size must be 1..100",
    "INVALID_ARGUMENT: Too many dependencies or agents",
    "INVALID_ARGUMENT: Too many or duplicate apps",
    "INVALID_ARGUMENT: Too many or duplicate jobs",
    "INVALID_ARGUMENT: Too many or duplicate models",
    "LEASE_EXPIRED: Provider registration expired",
    "LEASE_EXPIRED: Register a fresh instance after lease loss",
    "MODULE_UNAVAILABLE: Provider is not ready",
    "PERMISSION_DENIED: Only platform administrators can evict registrations",
    "PERMISSION_DENIED: Registration belongs to another lease or caller",
    "REGISTRY_FULL: Registry snapshot exceeds 512 KiB",
    "REGISTRY_FULL: Registry supports at most 256 live instances",
];
const STATUSES: [&str; 5] = ["STARTING", "STAGED", "DEGRADED", "READY", "DRAINING"];

/// Runs reference.py with `args` and returns its JSON lines.
fn reference(args: &[String]) -> String {
    let script = workspace_root().join("tests/differential/reference.py");
    let output = Command::new(python())
        .arg(&script)
        .args(args)
        .output()
        .expect("cannot run the venv Python (run ./scripts/setup.sh)");
    assert!(
        output.status.success(),
        "reference.py {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("reference.py printed non-UTF-8")
}

/// Pipes `input` through the replay driver and returns its lines.
fn replay(input: &str) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_abi-registry-replay"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start abi-registry-replay");
    let mut stdin = child.stdin.take().unwrap();
    let output = std::thread::scope(|scope| {
        // Write from another thread: the driver answers as it reads, and
        // its output pipe would fill up while we still write.
        scope.spawn(move || stdin.write_all(input.as_bytes()).unwrap());
        child.wait_with_output().unwrap()
    });
    assert!(
        output.status.success(),
        "abi-registry-replay failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("the driver printed non-UTF-8")
}

/// What one comparison found.
#[derive(Debug, Default)]
struct Report {
    sequences: usize,
    ops: usize,
    mismatches: Vec<String>,
    /// Answers by code ("OK" for success), over every operation.
    codes: BTreeMap<String, usize>,
    /// Instance statuses seen in lookups and final snapshots.
    statuses: BTreeMap<String, usize>,
    /// Refusals by their `"CODE: message"` text.
    messages: BTreeMap<String, usize>,
}

impl Report {
    fn merge(&mut self, other: Report) {
        self.sequences += other.sequences;
        self.ops += other.ops;
        self.mismatches.extend(other.mismatches);
        for (code, n) in other.codes {
            *self.codes.entry(code).or_default() += n;
        }
        for (status, n) in other.statuses {
            *self.statuses.entry(status).or_default() += n;
        }
        for (message, n) in other.messages {
            *self.messages.entry(message).or_default() += n;
        }
    }
}

/// Compares the reference's lines with the driver's, pair by pair.
/// `how` says how to regenerate the input (for the failure message).
fn compare(how: &str, reference: &str, ours: &str) -> Report {
    let mut report = Report::default();
    let mut theirs = reference.lines().filter(|l| !l.trim().is_empty());
    let mut mine = ours.lines().filter(|l| !l.trim().is_empty());
    loop {
        let (expected, got) = match (theirs.next(), mine.next()) {
            (None, None) => break,
            (Some(e), Some(g)) => (e, g),
            (e, g) => {
                report.mismatches.push(format!(
                    "{how}: the outputs end differently (reference line {:?}, ours {:?})",
                    e.map(short),
                    g.map(short)
                ));
                break;
            }
        };
        let expected: Value = serde_json::from_str(expected).unwrap();
        let got: Value = serde_json::from_str(got).unwrap();
        let key = |v: &Value| (v["seq"].clone(), v["i"].clone(), v["op"].clone());
        if key(&expected) != key(&got) {
            report.mismatches.push(format!(
                "{how}: out of step: reference {:?}, ours {:?}",
                key(&expected),
                key(&got)
            ));
            break;
        }
        let op = expected["op"].as_str().unwrap_or_default();
        let want = &expected["expect"];
        let have = &got["result"];
        if op == "snapshot" {
            report.sequences += 1;
            count_statuses(&mut report, "snapshot", want);
        } else {
            report.ops += 1;
            let code = if want["ok"] == Value::Bool(true) {
                "OK"
            } else {
                want["code"].as_str().unwrap_or("?")
            };
            *report.codes.entry(code.to_owned()).or_default() += 1;
            if let Some(message) = want["message"].as_str() {
                *report.messages.entry(message.to_owned()).or_default() += 1;
            }
            count_statuses(&mut report, op, want);
        }
        if want != have {
            report.mismatches.push(describe(how, &expected, want, have));
        }
    }
    report
}

/// Counts the statuses in a lookup answer or a snapshot.
fn count_statuses(report: &mut Report, op: &str, answer: &Value) {
    let bytes = |field: &str| hex::decode(answer[field].as_str().unwrap_or_default()).unwrap();
    let instances: Vec<pb::Instance> = match op {
        "snapshot" => pb::RegistryState::decode(bytes("snapshot").as_slice())
            .unwrap()
            .records
            .into_iter()
            .filter_map(|r| r.instance)
            .collect(),
        "get_module" if answer["ok"] == Value::Bool(true) => {
            pb::GetModuleResponse::decode(bytes("response").as_slice())
                .unwrap()
                .instances
        }
        "list_modules" if answer["ok"] == Value::Bool(true) => {
            pb::ListModulesResponse::decode(bytes("response").as_slice())
                .unwrap()
                .instances
        }
        "view" => pb::RegistryState::decode(bytes("response").as_slice())
            .unwrap()
            .records
            .into_iter()
            .filter_map(|r| r.instance)
            .collect(),
        _ => Vec::new(),
    };
    for instance in instances {
        *report.statuses.entry(instance.status).or_default() += 1;
    }
}

/// A mismatch, with what it takes to reproduce and read it.
fn describe(how: &str, line: &Value, want: &Value, have: &Value) -> String {
    let seq = line["seq"].as_str().unwrap_or_default();
    let op = line["op"].as_str().unwrap_or_default();
    let mut text = format!(
        "MISMATCH in sequence {seq}, op #{} {op} (owner {}, now {}, note {})\n  \
         reproduce: {how}\n  request: {}\n  reference: {}\n  ours:      {}",
        line["i"],
        line["owner"],
        line["now"],
        line["note"],
        short(&line["request"].to_string()),
        short(&want.to_string()),
        short(&have.to_string()),
    );
    // Decoded, differing responses are easier to read than hex.
    let decoded = |answer: &Value| -> Option<String> {
        let field = if op == "snapshot" {
            "snapshot"
        } else {
            "response"
        };
        let bytes = hex::decode(answer[field].as_str()?).ok()?;
        Some(match op {
            "snapshot" | "view" => {
                format!("{:?}", pb::RegistryState::decode(bytes.as_slice()).ok()?)
            }
            "register" => format!("{:?}", pb::RegisterResponse::decode(bytes.as_slice()).ok()?),
            "renew" => format!("{:?}", pb::RenewResponse::decode(bytes.as_slice()).ok()?),
            "evict" => format!("{:?}", pb::EvictResponse::decode(bytes.as_slice()).ok()?),
            "get_module" => format!(
                "{:?}",
                pb::GetModuleResponse::decode(bytes.as_slice()).ok()?
            ),
            "list_modules" => {
                format!(
                    "{:?}",
                    pb::ListModulesResponse::decode(bytes.as_slice()).ok()?
                )
            }
            _ => return None,
        })
    };
    if let (Some(w), Some(h)) = (decoded(want), decoded(have)) {
        text.push_str(&format!(
            "\n  reference decoded: {}\n  ours decoded:      {}",
            short(&w),
            short(&h)
        ));
    }
    text
}

/// At most 3000 characters of `text`, for readable failures.
fn short(text: &str) -> String {
    if text.chars().count() <= 3000 {
        text.to_owned()
    } else {
        let head: String = text.chars().take(3000).collect();
        format!("{head}... ({} characters)", text.chars().count())
    }
}

/// Fails with the first mismatches, if any.
fn assert_no_mismatch(report: &Report) {
    if report.mismatches.is_empty() {
        return;
    }
    let shown: Vec<&str> = report
        .mismatches
        .iter()
        .take(8)
        .map(String::as_str)
        .collect();
    panic!(
        "{} of {} operations differ from the reference (first {} shown; see \
         tests/differential/FINDINGS.md for known ones):\n\n{}",
        report.mismatches.len(),
        report.ops + report.sequences,
        shown.len(),
        shown.join("\n\n")
    );
}

fn reproduce_seed(seed: u64) -> String {
    format!(
        "python tests/differential/reference.py --seed {seed} --only <K> for sequence {seed}:<K> \
         | target/debug/abi-registry-replay"
    )
}

#[test]
fn the_fixed_scenarios_match_the_reference() {
    let input = reference(&["--fixed".to_owned()]);
    let report = compare(
        "python tests/differential/reference.py --fixed | target/debug/abi-registry-replay",
        &input,
        &replay(&input),
    );
    assert_no_mismatch(&report);
    assert!(
        report.sequences >= 10,
        "only {} scenarios",
        report.sequences
    );
    assert!(report.ops >= 350, "only {} operations", report.ops);
    for code in CODES {
        assert!(
            report.codes.contains_key(code),
            "no fixed scenario answers {code}: {:?}",
            report.codes
        );
    }
}

#[test]
fn random_sequences_match_the_reference() {
    let started = Instant::now();
    let reports: Vec<Report> = std::thread::scope(|scope| {
        let runs: Vec<_> = SEEDS
            .iter()
            .map(|&seed| {
                scope.spawn(move || {
                    let input = reference(&[
                        "--seed".to_owned(),
                        seed.to_string(),
                        "--sequences".to_owned(),
                        SEQUENCES_PER_SEED.to_string(),
                    ]);
                    compare(&reproduce_seed(seed), &input, &replay(&input))
                })
            })
            .collect();
        runs.into_iter().map(|run| run.join().unwrap()).collect()
    });
    let mut total = Report::default();
    for report in reports {
        total.merge(report);
    }
    eprintln!(
        "differential: {} sequences, {} operations in {:.1?}; answers {:?}; statuses {:?}",
        total.sequences,
        total.ops,
        started.elapsed(),
        total.codes,
        total.statuses
    );
    assert_no_mismatch(&total);
    assert_eq!(total.sequences, SEEDS.len() * SEQUENCES_PER_SEED);
    assert!(total.ops >= 60_000, "only {} operations", total.ops);
    for code in CODES {
        assert!(
            total.codes.get(code).is_some_and(|&n| n >= 10),
            "the random sequences answer {code} fewer than 10 times: {:?}",
            total.codes
        );
    }
    for message in MESSAGES {
        assert!(
            total.messages.contains_key(message),
            "the random sequences never refuse with {message:?}"
        );
    }
    for status in STATUSES {
        assert!(
            total.statuses.get(status).is_some_and(|&n| n >= 10),
            "the random sequences show {status} fewer than 10 times: {:?}",
            total.statuses
        );
    }
}

#[test]
fn the_comparison_reports_one_changed_answer_with_its_place() {
    // Guards the guard: a single altered answer in the reference's output
    // must come out as exactly one mismatch naming its sequence and op.
    let input = reference(&["--fixed".to_owned()]);
    let ours = replay(&input);
    let mut lines: Vec<Value> = input
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let target = lines
        .iter()
        .position(|l| l["op"] == "register" && l["expect"]["ok"] == Value::Bool(true))
        .unwrap();
    let hex = lines[target]["expect"]["response"]
        .as_str()
        .unwrap()
        .to_owned();
    let flipped = format!(
        "{}{}",
        &hex[..hex.len() - 1],
        if hex.ends_with('0') { '1' } else { '0' }
    );
    lines[target]["expect"]["response"] = Value::String(flipped);
    let altered: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let report = compare("test", &altered, &ours);
    assert_eq!(report.mismatches.len(), 1, "{:?}", report.mismatches);
    let seq = lines[target]["seq"].as_str().unwrap();
    assert!(report.mismatches[0].contains(&format!("sequence {seq}, op #{}", lines[target]["i"])));
    // And an answer the driver left out is caught too.
    let fewer: String = ours.lines().skip(1).map(|l| format!("{l}\n")).collect();
    assert!(!compare("test", &input, &fewer).mismatches.is_empty());
}

#[test]
fn the_named_differences_show_exactly_where_and_as_described() {
    // reference.py --differences shows each entry of DIFFERENCES that the
    // rules can show, marking the operations that must differ. Those must
    // differ (else the entry is stale) and everything else must match; those
    // marked `bytes_only` must still decode to equal values.
    let input = reference(&["--differences".to_owned()]);
    let ours = replay(&input);
    let mut shown = std::collections::BTreeSet::new();
    let mut ops = 0;
    for (theirs, mine) in input.lines().zip(ours.lines()) {
        let theirs: Value = serde_json::from_str(theirs).unwrap();
        let mine: Value = serde_json::from_str(mine).unwrap();
        assert_eq!(theirs["seq"], mine["seq"]);
        assert_eq!(theirs["i"], mine["i"]);
        ops += 1;
        let (want, have) = (&theirs["expect"], &mine["result"]);
        let Some(difference) = theirs["difference"].as_str() else {
            assert_eq!(want, have, "an unmarked operation differs: {theirs}");
            continue;
        };
        shown.insert(difference.to_owned());
        assert_ne!(want, have, "{difference} no longer differs: {theirs}");
        let op = theirs["op"].as_str().unwrap();
        let field = if op == "snapshot" {
            "snapshot"
        } else {
            "response"
        };
        // Marked by the harness: the same answer, encoded apart.
        let bytes_only = theirs["bytes_only"] == Value::Bool(true);
        if let (true, Some(w), Some(h)) = (bytes_only, want[field].as_str(), have[field].as_str()) {
            let (w, h) = (hex::decode(w).unwrap(), hex::decode(h).unwrap());
            let equal = match op {
                "snapshot" => {
                    pb::RegistryState::decode(w.as_slice()).unwrap()
                        == pb::RegistryState::decode(h.as_slice()).unwrap()
                }
                "register" => {
                    pb::RegisterResponse::decode(w.as_slice()).unwrap()
                        == pb::RegisterResponse::decode(h.as_slice()).unwrap()
                }
                "get_module" => {
                    pb::GetModuleResponse::decode(w.as_slice()).unwrap()
                        == pb::GetModuleResponse::decode(h.as_slice()).unwrap()
                }
                other => panic!("no decoder for {other}"),
            };
            assert!(
                equal,
                "{difference}: the answers differ beyond bytes: {theirs}"
            );
        }
    }
    assert_eq!(ops, ours.lines().count());
    // Every entry of DIFFERENCES but the harness-only one is shown.
    let listed = Command::new(python())
        .arg("-c")
        .arg("import json, sys; sys.path.insert(0, sys.argv[1]); import reference; print(json.dumps(sorted(reference.DIFFERENCES)))")
        .arg(workspace_root().join("tests/differential"))
        .output()
        .unwrap();
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let mut listed: std::collections::BTreeSet<String> =
        serde_json::from_slice(&listed.stdout).unwrap();
    assert!(listed.remove("clock-off-grid"));
    assert_eq!(shown, listed);
}
