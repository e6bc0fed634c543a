//! `abictl micro ls|stats [name]`: the NATS micro services answering on
//! `$SRV.INFO` and `$SRV.STATS` (the document service, discovery, ...), for
//! users without the `nats` CLI. Every instance answers the one request;
//! replies are gathered until none came for a short while.

use std::time::Duration;

use futures::StreamExt as _;
use serde_json::{Value, json};

use super::Ctx;
use crate::connect;
use crate::output::{Table, or_dash, print_json};

/// The longest wait for a first reply.
const FIRST_REPLY: Duration = Duration::from_secs(2);
/// Once replies come, the gathering ends after this long without one.
const QUIET: Duration = Duration::from_millis(300);

/// What to ask the services.
#[derive(Debug, Clone, Copy)]
pub enum Ask {
    /// `$SRV.INFO`: name, id, version, endpoints.
    Info,
    /// `$SRV.STATS`: requests, errors and processing time per endpoint.
    Stats,
}

/// Asks every instance of every service (or of `name`) and prints one row
/// per instance (`ls`) or per endpoint (`stats`).
///
/// # Errors
///
/// NATS unreachable.
///
/// # Cancel safety
///
/// Cancel safe: it only asks `$SRV` and gathers the replies; dropping it drops the reply inbox,
/// and nothing is printed.
pub async fn run(cx: Ctx<'_>, ask: Ask, name: Option<&str>) -> anyhow::Result<()> {
    let verb = match ask {
        Ask::Info => "INFO",
        Ask::Stats => "STATS",
    };
    let subject = match name {
        Some(name) => format!("$SRV.{verb}.{name}"),
        None => format!("$SRV.{verb}"),
    };
    let nats = connect::nats(cx.global).await?;
    let mut replies = gather(&nats, subject).await?;
    replies.sort_by_key(|r| (text(r, "name"), text(r, "id")));
    if cx.global.json {
        print_json(&json!(replies));
        return Ok(());
    }
    let table = match ask {
        Ask::Info => info_table(&replies),
        Ask::Stats => stats_table(&replies),
    };
    print!("{}", table.render(cx.style));
    if replies.is_empty() {
        println!("(no service answered)");
    }
    Ok(())
}

/// Every JSON reply to one request on `subject`.
async fn gather(nats: &async_nats::Client, subject: String) -> anyhow::Result<Vec<Value>> {
    let inbox = nats.new_inbox();
    let mut subscription = nats.subscribe(inbox.clone()).await?;
    nats.publish_with_reply(subject, inbox, Default::default())
        .await?;
    nats.flush().await?;
    let mut replies = Vec::new();
    let mut wait = FIRST_REPLY;
    while let Ok(Some(message)) = tokio::time::timeout(wait, subscription.next()).await {
        if let Ok(reply) = serde_json::from_slice::<Value>(&message.payload) {
            replies.push(reply);
        }
        wait = QUIET;
    }
    Ok(replies)
}

fn text(value: &Value, key: &str) -> String {
    match value.get(key) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn endpoints(reply: &Value) -> &[Value] {
    reply
        .get("endpoints")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// One row per instance.
fn info_table(replies: &[Value]) -> Table {
    let mut table = Table::new(&["NAME", "ID", "VERSION", "ENDPOINTS", "DESCRIPTION"]);
    for reply in replies {
        table.row(vec![
            text(reply, "name"),
            text(reply, "id"),
            or_dash(&text(reply, "version")),
            endpoints(reply).len().to_string(),
            or_dash(&text(reply, "description")),
        ]);
    }
    table
}

/// One row per endpoint of each instance.
fn stats_table(replies: &[Value]) -> Table {
    let mut table = Table::new(&[
        "NAME",
        "ID",
        "ENDPOINT",
        "REQUESTS",
        "ERRORS",
        "AVERAGE",
        "LAST ERROR",
    ]);
    for reply in replies {
        for endpoint in endpoints(reply) {
            let average = endpoint
                .get("average_processing_time")
                .and_then(Value::as_u64)
                .map_or_else(
                    || "-".to_owned(),
                    |nanos| format!("{:.1?}", Duration::from_nanos(nanos)),
                );
            table.row(vec![
                text(reply, "name"),
                text(reply, "id"),
                text(endpoint, "name"),
                text(endpoint, "num_requests"),
                text(endpoint, "num_errors"),
                average,
                or_dash(&text(endpoint, "last_error")),
            ]);
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::Style;

    #[test]
    fn stats_rows_are_one_per_endpoint_with_a_readable_average() {
        let replies = [json!({
            "name": "abi-documents",
            "id": "x1",
            "endpoints": [
                {"name": "put", "num_requests": 3, "num_errors": 1, "average_processing_time": 1_500_000, "last_error": "CONFLICT"},
                {"name": "get", "num_requests": 0, "num_errors": 0}
            ]
        })];
        let text = stats_table(&replies).render(Style::plain());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(
            lines[1].contains("put") && lines[1].contains("1.5ms") && lines[1].contains("CONFLICT"),
            "{text}"
        );
        assert!(
            lines[2].contains("get") && lines[2].trim_end().ends_with('-'),
            "{text}"
        );
        let info = info_table(&replies).render(Style::plain());
        assert!(
            info.lines()
                .nth(1)
                .is_some_and(|l| l.contains("abi-documents") && l.contains(" 2 ")),
            "{info}"
        );
    }
}
