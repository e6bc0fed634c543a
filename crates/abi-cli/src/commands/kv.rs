//! `abictl kv ls` and `abictl kv info [bucket]`: the JetStream KV buckets
//! (the registry's by default), for users without the `nats` CLI.

use futures::TryStreamExt as _;
use serde_json::json;

use super::Ctx;
use crate::connect;
use crate::error::{EXIT_SERVICE, Failure};
use crate::output::{Table, print_json};

/// The stream behind every KV bucket is `KV_<bucket>`.
const KV_STREAM_PREFIX: &str = "KV_";

/// Lists the KV buckets.
///
/// # Errors
///
/// NATS or JetStream unreachable.
///
/// # Cancel safety
///
/// Cancel safe: it only lists stream names; nothing is printed until the whole list is in.
pub async fn ls(cx: Ctx<'_>) -> anyhow::Result<()> {
    let nats = connect::nats(cx.global).await?;
    let js = async_nats::jetstream::new(nats);
    let mut buckets: Vec<String> = js
        .stream_names()
        .try_filter_map(
            |name| async move { Ok(name.strip_prefix(KV_STREAM_PREFIX).map(str::to_owned)) },
        )
        .try_collect()
        .await?;
    buckets.sort();
    if cx.global.json {
        print_json(&json!(buckets));
    } else {
        buckets.iter().for_each(|b| println!("{b}"));
    }
    Ok(())
}

/// Prints one bucket's configuration and state (default: the registry's).
///
/// # Errors
///
/// No such bucket (exit 1), NATS or JetStream unreachable.
///
/// # Cancel safety
///
/// Cancel safe: it only reads the bucket's status; nothing is printed before it has it.
pub async fn info(cx: Ctx<'_>, bucket: Option<&str>) -> anyhow::Result<()> {
    let bucket = bucket.map_or_else(
        || abi_wire::discovery::registry_bucket(&cx.global.project),
        str::to_owned,
    );
    let nats = connect::nats(cx.global).await?;
    let js = async_nats::jetstream::new(nats);
    let store = js
        .get_key_value(bucket.clone())
        .await
        .map_err(|e| Failure {
            exit: EXIT_SERVICE,
            message: format!("no KV bucket {bucket}: {e}"),
            hint: Some("`abictl kv ls` lists the buckets".to_owned()),
        })?;
    let status = store.status().await?;
    let info = &status.info;
    let config = &info.config;
    let state = &info.state;
    let out = json!({
        "bucket": bucket,
        "values": state.messages,
        "bytes": state.bytes,
        "revision": state.last_sequence,
        "history": config.max_messages_per_subject,
        "ttl_secs": config.max_age.as_secs_f64(),
        "max_bytes": config.max_bytes,
        "max_value_size": config.max_message_size,
        "storage": format!("{:?}", config.storage).to_lowercase(),
        "replicas": config.num_replicas,
        "compression": format!("{:?}", config.compression).to_lowercase(),
    });
    if cx.global.json {
        print_json(&out);
        return Ok(());
    }
    let mut table = Table::new(&["FIELD", "VALUE"]);
    if let Some(fields) = out.as_object() {
        for (key, value) in fields {
            let shown = match value {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            table.row(vec![key.clone(), shown]);
        }
    }
    print!("{}", table.render(cx.style));
    Ok(())
}
