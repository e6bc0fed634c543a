//! Raw discovery requests over NATS: one project's operation subjects, the
//! token header, a deadline and the decoded reply. What the SDK does for a
//! module, without the SDK, so tests can send any bytes and any token.

use std::time::Duration;

use abi_wire::discovery::{Operation, Project};
use async_nats::HeaderMap;
use bytes::Bytes;

/// The deadline of one call unless [`WireClient::with_timeout`] sets
/// another; generous for a loaded 2-core machine.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Headers carrying `token` in the auth header (none without a token).
pub fn auth_headers(token: Option<&str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Some(token) = token {
        headers.insert(abi_wire::AUTH_HEADER, token);
    }
    headers
}

/// Why a raw call got no usable reply.
#[derive(Debug)]
#[non_exhaustive]
pub enum WireCallError {
    /// No reply before the deadline.
    TimedOut,
    /// The request failed (no responders, connection closed, ...).
    Request(async_nats::RequestError),
    /// The reply is not the expected message.
    Decode(prost::DecodeError),
}

impl std::fmt::Display for WireCallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TimedOut => f.write_str("no reply before the deadline"),
            Self::Request(e) => write!(f, "request failed: {e}"),
            Self::Decode(e) => write!(f, "reply does not decode: {e}"),
        }
    }
}

impl std::error::Error for WireCallError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::TimedOut => None,
            Self::Request(e) => Some(e),
            Self::Decode(e) => Some(e),
        }
    }
}

/// A NATS client calling one project's discovery operations.
#[derive(Clone, Debug)]
pub struct WireClient {
    /// The connection the requests go out on.
    pub client: async_nats::Client,
    /// The project whose subjects are called.
    pub project: Project,
    timeout: Duration,
}

impl WireClient {
    /// Calls `project`'s subjects on `client`, [`DEFAULT_CALL_TIMEOUT`] per call.
    ///
    /// # Panics
    ///
    /// When `project` is not a valid project name.
    pub fn new(client: async_nats::Client, project: &str) -> Self {
        Self {
            client,
            project: Project::new(project).expect("a valid project name"),
            timeout: DEFAULT_CALL_TIMEOUT,
        }
    }

    /// Connects to `url` (one URL or a comma-separated seed list).
    ///
    /// # Panics
    ///
    /// When it cannot connect, or `project` is not a valid project name.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only connects; a dropped call leaves no connection open.
    pub async fn connect(url: &str, project: &str) -> Self {
        let client = async_nats::connect(url.split(',').collect::<Vec<_>>())
            .await
            .expect("connect to nats");
        Self::new(client, project)
    }

    /// Sets the deadline of each call (default [`DEFAULT_CALL_TIMEOUT`]).
    #[must_use]
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The subject of `op` for this project.
    pub fn subject(&self, op: Operation) -> String {
        abi_wire::discovery::operation(&self.project, op)
    }

    /// Sends `payload` with `headers` to `op` and returns the raw reply.
    ///
    /// # Errors
    ///
    /// [`WireCallError::TimedOut`] or [`WireCallError::Request`].
    ///
    /// # Cancel safety
    ///
    /// Cancelling drops the request; the service may still act on it.
    pub async fn try_raw(
        &self,
        op: Operation,
        headers: HeaderMap,
        payload: Bytes,
    ) -> Result<Bytes, WireCallError> {
        let sent = self
            .client
            .request_with_headers(self.subject(op), headers, payload);
        match tokio::time::timeout(self.timeout, sent).await {
            Ok(Ok(reply)) => Ok(reply.payload),
            Ok(Err(e)) => Err(WireCallError::Request(e)),
            Err(_) => Err(WireCallError::TimedOut),
        }
    }

    /// [`WireClient::try_raw`] that panics on failure.
    ///
    /// # Panics
    ///
    /// When no reply comes before the deadline or the request fails.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: as [`WireClient::try_raw`], a request already sent may still be acted on
    /// by the service, its reply lost.
    pub async fn raw(&self, op: Operation, headers: HeaderMap, payload: Vec<u8>) -> Bytes {
        match self.try_raw(op, headers, payload.into()).await {
            Ok(reply) => reply,
            Err(e) => panic!("{} on {}: {e}", op.as_str(), self.subject(op)),
        }
    }

    /// Sends `request` with `token` (if any) to `op` and decodes the reply as `R`.
    ///
    /// # Errors
    ///
    /// As [`WireClient::try_raw`], and [`WireCallError::Decode`].
    ///
    /// # Cancel safety
    ///
    /// As [`WireClient::try_raw`].
    pub async fn try_call<R: prost::Message + Default>(
        &self,
        op: Operation,
        token: Option<&str>,
        request: &impl prost::Message,
    ) -> Result<R, WireCallError> {
        let reply = self
            .try_raw(op, auth_headers(token), request.encode_to_vec().into())
            .await?;
        R::decode(reply).map_err(WireCallError::Decode)
    }

    /// [`WireClient::try_call`] that panics on failure.
    ///
    /// # Panics
    ///
    /// When there is no reply, or it does not decode as `R`.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: as [`WireClient::try_call`], a request already sent may still be acted on
    /// by the service, its reply lost.
    pub async fn call<R: prost::Message + Default>(
        &self,
        op: Operation,
        token: Option<&str>,
        request: &impl prost::Message,
    ) -> R {
        match self.try_call(op, token, request).await {
            Ok(reply) => reply,
            Err(e) => panic!("{} on {}: {e}", op.as_str(), self.subject(op)),
        }
    }

    /// Waits (`timeout` at most) until some owner answers `list_modules`
    /// sent with `token`, probing with a 2 s deadline each time.
    ///
    /// # Panics
    ///
    /// When nobody answers in time.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only sends `list_modules` probes (reads) and sleeps between them.
    pub async fn wait_ready(&self, token: &str, timeout: Duration) {
        let probe = self.clone().with_timeout(Duration::from_secs(2));
        let request = abi_proto::discovery::v1::ListModulesRequest {
            limit: 1,
            ..Default::default()
        };
        crate::wait_until(timeout, || async {
            probe
                .try_raw(
                    Operation::ListModules,
                    auth_headers(Some(token)),
                    prost::Message::encode_to_vec(&request).into(),
                )
                .await
                .is_ok()
        })
        .await
        .unwrap_or_else(|_| panic!("a discovery owner answers within {timeout:?}"));
    }
}
