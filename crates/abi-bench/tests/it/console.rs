//! `abi-bench console --smoke` end to end: a real nats-server, the real
//! `abi-discovery` with 250 instances, `abictl console` as a process, its
//! pages fetched and its event stream read raw, a few writes with one and
//! with ten streams open. A correctness check of the table's shape only: no
//! timing is asserted.

use std::path::Path;

use crate::common::{SmokeRun, is_latency, is_number};

const COLUMNS: [&str; 2] = ["console (abictl console)", "raw KV watch (floor)"];

/// What a measured cell looks like.
type Looks = fn(&str) -> bool;

/// A row's label, what a measured cell of each column looks like (`None`:
/// not measured there).
type Check = (&'static str, [Option<Looks>; 2]);

/// A number that may be below zero (a difference of two peaks).
fn is_signed(cell: &str) -> bool {
    cell.parse::<f64>().is_ok_and(f64::is_finite)
}

#[test]
fn smoke_run_measures_every_row_where_it_applies() {
    let abictl = abi_test_support::workspace_binary(
        Path::new(env!("CARGO_BIN_EXE_abi-bench")),
        "abi-cli",
        "abictl",
    );
    let abictl = abictl.to_str().unwrap();
    let run = SmokeRun::run_with("console", &["--abictl-bin", abictl], &COLUMNS);
    let (number, latency): (Looks, Looks) = (is_number, is_latency);
    let console = [Some(number), None];
    let both = [Some(latency), Some(latency)];
    let mut checks: Vec<Check> = vec![
        ("console CPU with nothing happening", console),
        ("console peak RSS while serving the GETs", console),
        ("`modules` event data", console),
        ("console memory per extra stream", [Some(is_signed), None]),
        (
            "failed GETs and writes",
            [Some(|c| c == "0"), Some(|c| c == "0")],
        ),
    ];
    // --smoke renews each instance every 50 s (a debug console keeps up).
    let every = "every instance renewing each 50 s";
    for (what, cells) in [
        (": renewals answered", [None, Some(number)]),
        (": news read", [Some(number), Some(number)]),
        (": event data pushed to each open stream", console),
        (": console CPU", console),
    ] {
        checks.push((format!("{every}{what}").leak(), cells));
    }
    for path in ["/", "/api/modules"] {
        for (what, looks) in [
            (": time to first byte", latency),
            (": whole answer", latency),
            (": body", number),
        ] {
            let label = format!("GET {path}{what}").leak();
            checks.push((label, [Some(looks), None]));
        }
    }
    let phases = [
        "1 event stream(s)".to_owned(),
        "10 event stream(s)".to_owned(),
        format!("1 event stream(s), {every}"),
    ];
    for phase in phases {
        for (what, cells) in [
            (": register sent to the news read", both),
            (": register request to its reply", [None, Some(latency)]),
            (": console CPU per update", console),
            (": console peak RSS", console),
        ] {
            checks.push((format!("{phase}{what}").leak(), cells));
        }
    }
    for (label, looks) in &checks {
        let cells = run.row(label);
        for (i, looks) in looks.iter().enumerate() {
            let cell = &cells[i + 1];
            match looks {
                Some(looks_right) => assert!(looks_right(cell), "{label}: {cells:?}"),
                None => assert_eq!(cell, "—", "{label} is not measured there: {cells:?}"),
            }
        }
    }
    assert_eq!(
        run.rows.len(),
        checks.len(),
        "no other rows:\n{}",
        run.stdout
    );
    let body = run.row("GET /api/modules: body")[1].parse::<u64>().unwrap();
    assert!(body > 10_000, "the view of 250 instances: {body} bytes");

    let verdicts = &run.verdicts;
    assert_eq!(verdicts[0], ["target", "measured", "verdict"]);
    assert_eq!(verdicts.len(), 2 + 2, "two targets:\n{}", run.stdout);
    for verdict in &verdicts[2..] {
        assert!(
            ["**met**", "**missed**"].contains(&verdict[2].as_str())
                || verdict[2].starts_with("not judged"),
            "every target judged or said why not: {verdict:?}"
        );
    }
}
