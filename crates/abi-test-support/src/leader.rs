//! Who leads a JetStream stream, asked through a client of the test's own.

use std::time::Duration;

/// The `server_name` of `stream`'s leader, asked through `client` with a
/// short deadline: `None` while no leader is elected (requests then go
/// unanswered) or when the stream does not exist.
///
/// # Cancel safety
///
/// Cancel safe: it only reads the stream's info; dropping it abandons the request.
pub async fn stream_leader(client: &async_nats::Client, stream: &str) -> Option<String> {
    let context = async_nats::jetstream::new(client.clone());
    let info = tokio::time::timeout(Duration::from_millis(500), async {
        context.get_stream(stream).await.ok()?.get_info().await.ok()
    })
    .await
    .ok()??;
    info.cluster.and_then(|c| c.leader)
}

/// Waits (up to `timeout`) until `stream` has a leader other than `not`,
/// and returns its `server_name`.
///
/// # Panics
///
/// When no such leader is elected in time.
///
/// # Cancel safety
///
/// Cancel safe: it only polls the stream's info and sleeps.
pub async fn wait_for_stream_leader(
    client: &async_nats::Client,
    stream: &str,
    not: Option<&str>,
    timeout: Duration,
) -> String {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(leader) = stream_leader(client, stream)
            .await
            .filter(|leader| Some(leader.as_str()) != not)
        {
            return leader;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no leader of {stream} other than {not:?} within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
