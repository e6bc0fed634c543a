//! `abictl watch`: registry events as they happen, until Ctrl-C or `--for`.

use std::io::Write as _;

use abi_sdk::{RegistryEvent, RegistryWatch, WatchOptions, pb};
use futures::StreamExt as _;
use serde_json::json;

use super::{Ctx, major_of, module_of};
use crate::connect;
use crate::output::{Style, clock, or_dash};
use crate::signals;
use crate::snapshot::now_epoch;

/// Prints one line per event (JSON lines with `--json`).
///
/// # Errors
///
/// NATS unreachable. A registry that does not exist yet is waited for.
///
/// # Cancel safety
///
/// Cancel safe: dropping it drops the registry watch; each event line is written whole between
/// awaits.
pub async fn run(cx: Ctx<'_>, for_secs: Option<f64>) -> anyhow::Result<()> {
    // The watch only reads the registry's KV key: no discovery call, so no
    // credentials for one.
    let nats = connect::nats(cx.global).await?;
    let mut events = RegistryWatch::new(nats, &cx.global.project, WatchOptions::default());
    let until = signals::after(for_secs);
    tokio::pin!(until);
    let stop = signals::interrupted();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            () = &mut stop => break,
            () = &mut until => break,
            event = events.next() => match event {
                Some(event) => {
                    let text = line(&event, now_epoch(), cx.global.json, cx.style);
                    // A reader that went away (a closed pipe) ends the watch quietly.
                    let mut out = std::io::stdout().lock();
                    if writeln!(out, "{text}").and_then(|()| out.flush()).is_err() {
                        break;
                    }
                }
                None => break,
            },
        }
    }
    Ok(())
}

/// One event as a line of text (or a JSON object).
pub fn line(event: &RegistryEvent, now: f64, json: bool, style: Style) -> String {
    let i: &pb::Instance = event.instance();
    let (kind, status, previous) = match event {
        RegistryEvent::Registered(i) => ("registered", i.status.clone(), String::new()),
        RegistryEvent::StatusChanged { instance, previous } => (
            "changed",
            instance.status.clone(),
            previous.as_str().to_owned(),
        ),
        RegistryEvent::Gone(i) => ("gone", "gone".to_owned(), i.status.clone()),
        RegistryEvent::Expired(i) => ("expired", "expired".to_owned(), i.status.clone()),
        _ => ("other", i.status.clone(), String::new()),
    };
    if json {
        return json!({
            "at": now,
            "event": kind,
            "module_id": module_of(i),
            "contract_major": major_of(i),
            "instance_id": i.instance_id,
            "rollout_id": i.rollout_id,
            "status": status,
            "previous": previous,
        })
        .to_string();
    }
    let change = if previous.is_empty() {
        status.clone()
    } else if kind == "changed" {
        format!("{previous} -> {status}")
    } else {
        format!("{status} (was {previous})")
    };
    let change = format!("{change:<22}");
    format!(
        "{}  {kind:<10}  {:<24}  {}  instance={} rollout={}",
        clock(now),
        format!("{}@{}", module_of(i), major_of(i)),
        style.paint(&status, &change),
        i.instance_id,
        or_dash(&i.rollout_id),
    )
}

#[cfg(test)]
mod tests {
    use abi_sdk::Status;

    use super::*;

    #[test]
    fn a_status_change_reads_as_an_arrow() {
        let instance = pb::Instance {
            instance_id: "i1".into(),
            status: "READY".into(),
            descriptor: Some(pb::ModuleDescriptor {
                module_id: "m".into(),
                contract_major: 1,
                ..Default::default()
            }),
            ..Default::default()
        };
        let event = RegistryEvent::StatusChanged {
            instance,
            previous: Status::Starting,
        };
        let text = line(&event, 3661.0, false, Style::plain());
        assert!(text.starts_with("01:01:01  changed"), "{text}");
        assert!(
            text.contains("m@1") && text.contains("STARTING -> READY"),
            "{text}"
        );
        let json: serde_json::Value =
            serde_json::from_str(&line(&event, 0.0, true, Style::plain())).unwrap_or_default();
        assert_eq!(json["previous"], "STARTING");
    }
}
