//! The streams modules use but may not create, made before discovery serves
//! (as the reference engine's `prepare_module_streams`): the project's jobs
//! stream `ABI_JOBS_<project>` (message schedules and per-message TTL on) and
//! the claim-check object store `abi_claim_checks`.
//!
//! A module logged in as a restricted broker user may not create or update
//! streams; it registers as soon as discovery answers and starts its job
//! host, so both must exist by then. A failure here is logged and discovery
//! serves on, as the reference's engine does: modules then report the missing
//! stream themselves.

use std::time::Duration;

use abi_wire::jobs;
use async_nats::jetstream::{self, object_store, stream};

/// Why a stream could not be prepared.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrepareError {
    /// Reading, creating or updating the jobs stream failed.
    #[error("could not prepare the jobs stream {stream}: {detail}")]
    JobsStream {
        /// The stream's name.
        stream: String,
        /// What JetStream said.
        detail: String,
    },
    /// The broker kept the jobs stream without a feature the jobs need: it
    /// is too old (message schedules came with nats-server 2.12, per-message
    /// TTL with 2.11) and dropped the setting without a word.
    #[error(
        "nats-server {server_version} keeps the jobs stream {stream} without {}: {}; run nats-server 2.12 or later",
        .missing.join(" and "),
        consequences(.missing)
    )]
    Unsupported {
        /// The stream's name.
        stream: String,
        /// The server's version, as it announced it.
        server_version: String,
        /// What it lacks: [`MESSAGE_SCHEDULES`], [`MESSAGE_TTL`].
        missing: Vec<&'static str>,
    },
    /// Reading or creating the claim-check store failed.
    #[error("could not prepare the claim-check store {bucket}: {detail}")]
    ClaimChecks {
        /// The store's name.
        bucket: &'static str,
        /// What JetStream said.
        detail: String,
    },
}

/// What [`PrepareError::Unsupported`] calls the stream's message schedules.
pub const MESSAGE_SCHEDULES: &str = "message schedules";
/// What [`PrepareError::Unsupported`] calls the stream's per-message TTL.
pub const MESSAGE_TTL: &str = "per-message TTL";

/// What the jobs need of their stream that `config` (as the server
/// answered it) lacks: a server that does not know a setting drops it.
pub fn missing_features(config: &stream::Config) -> Vec<&'static str> {
    let mut missing = Vec::new();
    if !config.allow_message_schedules {
        missing.push(MESSAGE_SCHEDULES);
    }
    if !config.allow_message_ttl {
        missing.push(MESSAGE_TTL);
    }
    missing
}

/// What an operator loses without each missing feature.
fn consequences(missing: &[&'static str]) -> String {
    missing
        .iter()
        .map(|feature| match *feature {
            MESSAGE_SCHEDULES => "scheduled jobs (Cron, Every) never run",
            _ => "trigger TTLs are ignored (triggers nobody runs stay forever)",
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Creates the jobs stream and the claim-check store of `project` if
/// missing, and turns on schedules and per-message TTL on a jobs stream that
/// lacks them. `replicas` applies to what this call creates.
///
/// # Errors
///
/// [`PrepareError`] naming the stream that could not be prepared.
///
/// # Cancel safety
///
/// Not cancel safe: a cancelled call may have created the stream and not the store; calling it again finishes (every step is create-if-missing).
pub async fn prepare_module_streams(
    js: &jetstream::Context,
    project: &str,
    replicas: usize,
) -> Result<(), PrepareError> {
    // The store is prepared even when the stream is not as it should be.
    let stream = ensure_jobs_stream(js, project, replicas).await;
    let store = ensure_claim_checks(js, replicas).await;
    stream.and(store)
}

/// The jobs stream: the reference's configuration (its subjects, schedules
/// and TTL allowed, everything else the server's defaults).
pub fn jobs_stream_config(project: &str, replicas: usize) -> stream::Config {
    stream::Config {
        name: jobs::stream(project),
        subjects: vec![jobs::stream_subjects(project)],
        allow_message_schedules: true,
        allow_message_ttl: true,
        num_replicas: replicas,
        ..Default::default()
    }
}

async fn ensure_jobs_stream(
    js: &jetstream::Context,
    project: &str,
    replicas: usize,
) -> Result<(), PrepareError> {
    let name = jobs::stream(project);
    let failed = |detail: String| PrepareError::JobsStream {
        stream: name.clone(),
        detail,
    };
    let unsupported = |missing: Vec<&'static str>| PrepareError::Unsupported {
        stream: name.clone(),
        server_version: js.client().server_info().version,
        missing,
    };
    let config = match js.get_stream(&name).await {
        Ok(mut existing) => {
            let info = existing.info().await.map_err(|e| failed(e.to_string()))?;
            info.config.clone()
        }
        Err(e)
            if matches!(
                e.kind(),
                jetstream::context::GetStreamErrorKind::JetStream(ref js_error)
                    if js_error.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND
            ) =>
        {
            // Not there (or not readable): create it; a concurrent creator
            // makes ours fail, and the stream is read again below.
            match js
                .create_stream(jobs_stream_config(project, replicas))
                .await
            {
                Ok(created) => {
                    let missing = missing_features(&created.cached_info().config);
                    if !missing.is_empty() {
                        return Err(unsupported(missing));
                    }
                    tracing::info!(stream = %name, "created the jobs stream");
                    return Ok(());
                }
                Err(create) => {
                    let mut existing = js
                        .get_stream(&name)
                        .await
                        .map_err(|_| failed(create.to_string()))?;
                    existing
                        .info()
                        .await
                        .map_err(|e| failed(e.to_string()))?
                        .config
                        .clone()
                }
            }
        }
        Err(e) => return Err(failed(e.to_string())),
    };
    if missing_features(&config).is_empty() {
        return Ok(());
    }
    let mut updated = config;
    updated.allow_message_schedules = true;
    updated.allow_message_ttl = true;
    let answered = js
        .update_stream(updated)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let missing = missing_features(&answered.config);
    if !missing.is_empty() {
        return Err(unsupported(missing));
    }
    tracing::info!(stream = %name, "turned on schedules and per-message TTL on the jobs stream");
    Ok(())
}

async fn ensure_claim_checks(js: &jetstream::Context, replicas: usize) -> Result<(), PrepareError> {
    let bucket = jobs::CLAIM_CHECK_BUCKET;
    if js.get_object_store(bucket).await.is_ok() {
        return Ok(());
    }
    let created = js
        .create_object_store(object_store::Config {
            bucket: bucket.to_owned(),
            description: Some(jobs::CLAIM_CHECK_DESCRIPTION.to_owned()),
            max_age: Duration::from_secs(jobs::CLAIM_CHECK_TTL_SECS),
            num_replicas: replicas,
            ..Default::default()
        })
        .await;
    match created {
        Ok(_) => {
            tracing::info!(bucket, "created the claim-check store");
            Ok(())
        }
        // Created concurrently by another owner.
        Err(_) if js.get_object_store(bucket).await.is_ok() => Ok(()),
        Err(e) => Err(PrepareError::ClaimChecks {
            bucket,
            detail: e.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_the_server_kept_without_schedules_or_ttl_is_named() {
        let full = jobs_stream_config("p", 1);
        assert!(missing_features(&full).is_empty());
        let rows = [
            (false, true, vec![MESSAGE_SCHEDULES]),
            (true, false, vec![MESSAGE_TTL]),
            (false, false, vec![MESSAGE_SCHEDULES, MESSAGE_TTL]),
        ];
        for (schedules, ttl, expected) in rows {
            let config = stream::Config {
                allow_message_schedules: schedules,
                allow_message_ttl: ttl,
                ..full.clone()
            };
            assert_eq!(missing_features(&config), expected);
        }
        let error = PrepareError::Unsupported {
            stream: "ABI_JOBS_p".into(),
            server_version: "2.11.9".into(),
            missing: vec![MESSAGE_SCHEDULES],
        };
        assert_eq!(
            error.to_string(),
            "nats-server 2.11.9 keeps the jobs stream ABI_JOBS_p without message schedules: \
             scheduled jobs (Cron, Every) never run; run nats-server 2.12 or later"
        );
    }
}
