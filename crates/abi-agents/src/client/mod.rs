//! The caller side: [`AgentClient`] (one agent of one module, from
//! [`AgentsExt::agent_client`]) and [`Invocation`] (one run),
//! wire-compatible with the reference's `AgentProxy`/`InvocationHandle`.
//!
//! Beyond the reference: submits spread over the READY replicas (a
//! rotating start, not always the lowest instance id), and a replica that
//! answers `AGENT_BUSY` (full) is skipped for a while; on that answer or on
//! `MODULE_UNAVAILABLE` (draining, not READY) the submit goes to the next.

mod error;
mod invocation;
mod route;

use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use error::{AgentError, AgentErrorKind};
pub use invocation::{Invocation, InvocationEvent, InvocationStatus};

use abi_proto::agent::v1 as apb;
use abi_wire::agents as wire;

use abi_sdk_core::ModuleProxy;
use abi_sdk_core::{CallErrorKind, ids};

/// How a submit starts a run.
#[derive(Debug, Clone, Default)]
pub struct SubmitOptions {
    /// The invocation id (default a fresh UUID): submitting it again finds
    /// the same run.
    pub invocation_id: Option<String>,
    /// Stream events (the handler's stream) instead of one result.
    pub stream: bool,
    /// The run's deadline in seconds, 0 for none (at most 3600).
    pub deadline_secs: u32,
    /// The conversation this submit belongs to (default the client's,
    /// [`AgentClient::thread_id`]); the client's own is left as it is.
    pub thread_id: Option<String>,
}

/// One agent of one module, called over NATS.
///
/// Cheap to clone; clones share the conversation (thread id) and the
/// routing state ([`AgentClient::new_thread`] starts another conversation,
/// [`SubmitOptions::thread_id`] picks one for a single submit).
#[derive(Clone)]
pub struct AgentClient {
    pub(crate) proxy: ModuleProxy,
    pub(crate) name: String,
    pub(crate) contract_major: u32,
    thread_id: Arc<Mutex<String>>,
    pub(crate) route: Arc<route::Route>,
    pub(crate) request_timeout: Duration,
    pub(crate) signer: Option<abi_sdk_core::BoundSigner>,
}

impl std::fmt::Debug for AgentClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentClient")
            .field("module", &self.proxy.module_id())
            .field("name", &self.name)
            .field("contract_major", &self.contract_major)
            .finish_non_exhaustive()
    }
}

impl AgentClient {
    pub(crate) fn new(proxy: ModuleProxy, name: String) -> Self {
        Self {
            proxy,
            name,
            contract_major: 1,
            thread_id: Arc::new(Mutex::new(ids::uuid4())),
            route: Arc::new(route::Route::default()),
            request_timeout: abi_sdk_core::DEFAULT_REQUEST_TIMEOUT,
            signer: None,
        }
    }

    /// The agent's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Calls the agent at contract major `major` (default 1).
    #[must_use]
    pub fn contract_major(mut self, major: u32) -> Self {
        self.contract_major = major;
        self
    }

    /// Sets the deadline of each call (default 10 s).
    #[must_use]
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Signs the instance-bound tokens with `signer` instead of the
    /// client's module key (a tool holding the project secret).
    #[must_use]
    pub fn bound_tokens(mut self, signer: abi_sdk_core::BoundSigner) -> Self {
        self.signer = Some(signer);
        self
    }

    /// A client of the same agent in a new conversation (a fresh thread id);
    /// plain clones share the conversation.
    #[must_use]
    pub fn new_thread(&self) -> Self {
        Self {
            thread_id: Arc::new(Mutex::new(ids::uuid4())),
            ..self.clone()
        }
    }

    /// The conversation submits belong to (a fresh UUID at first).
    pub fn thread_id(&self) -> String {
        self.thread_id.lock().map(|t| t.clone()).unwrap_or_default()
    }

    /// Continues the conversation `thread_id`.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for an empty id.
    pub fn set_thread_id(&self, thread_id: impl Into<String>) -> Result<(), AgentError> {
        let thread_id = thread_id.into();
        if thread_id.is_empty() {
            return Err(AgentError::new(
                AgentErrorKind::InvalidArgument,
                "thread_id must be nonempty",
            ));
        }
        if let Ok(mut t) = self.thread_id.lock() {
            *t = thread_id;
        }
        Ok(())
    }

    /// The handle of an invocation submitted before (by anyone with the
    /// same identity): status, events, cancel.
    pub fn invocation(&self, invocation_id: impl Into<String>) -> Invocation {
        Invocation::new(self.clone(), invocation_id.into())
    }

    /// Starts a run of `prompt`, subscribed to its pushed updates first.
    ///
    /// # Errors
    ///
    /// `SubmissionUncertain` (with the handle) when the outcome is unknown
    /// (no reply, `UNAVAILABLE`, `INTERNAL`, `PAYLOAD_TOO_LARGE`); `Call`
    /// with the refusal otherwise (`AGENT_UNAVAILABLE` without a replica;
    /// `NoResponders`, naming the registered instance that did not answer).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a cancelled call may still have started the run; submit again with the same invocation id and input to rejoin it.
    pub async fn submit(
        &self,
        prompt: &str,
        options: SubmitOptions,
    ) -> Result<Invocation, AgentError> {
        if options.deadline_secs > wire::MAX_DEADLINE_SECS {
            return Err(AgentError::new(
                AgentErrorKind::InvalidArgument,
                "deadline must be 0..3600 seconds",
            ));
        }
        let thread_id = match options.thread_id {
            Some(thread_id) if thread_id.is_empty() => {
                return Err(AgentError::new(
                    AgentErrorKind::InvalidArgument,
                    "thread_id must be nonempty",
                ));
            }
            Some(thread_id) => thread_id,
            None => self.thread_id(),
        };
        let mut handle = self.invocation(options.invocation_id.unwrap_or_else(ids::uuid4));
        let inbox = handle.subscribe_updates().await?;
        let request = apb::SubmitRequest {
            context: route::context(self),
            invocation_id: handle.invocation_id().to_owned(),
            thread_id,
            prompt: prompt.to_owned(),
            mode: if options.stream { "stream" } else { "invoke" }.into(),
            deadline_seconds: options.deadline_secs,
            output_format: wire::OUTPUT_FORMAT as u32,
            updates_inbox: inbox,
        };
        match route::submit(self, request).await {
            Ok(reply) => {
                handle.accepted(reply.invocation.unwrap_or_default());
                Ok(handle)
            }
            Err(e) => {
                handle.stop_updates().await;
                // No responders: the broker delivered it to nobody, so the
                // outcome is known (nothing was created).
                let uncertain = matches!(
                    e.kind(),
                    CallErrorKind::TimedOut
                        | CallErrorKind::Transport
                        | CallErrorKind::Unavailable
                        | CallErrorKind::Internal
                        | CallErrorKind::PayloadTooLarge
                );
                if uncertain {
                    Err(AgentError::uncertain(handle, e))
                } else {
                    Err(e.into())
                }
            }
        }
    }

    /// Runs `prompt` and returns its result, waiting at most `timeout`
    /// (1..3600 s; the run's deadline is its ceiling, default 300 s).
    ///
    /// # Errors
    ///
    /// As [`AgentClient::submit`] and [`Invocation::result`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: the run may have started and goes on to its deadline; its invocation id is lost with the call (use [`AgentClient::submit`] to keep a handle).
    pub async fn invoke(
        &self,
        prompt: &str,
        timeout: Option<Duration>,
    ) -> Result<String, AgentError> {
        let deadline_secs = deadline(timeout)?;
        let mut handle = self
            .submit(
                prompt,
                SubmitOptions {
                    deadline_secs,
                    ..Default::default()
                },
            )
            .await?;
        handle.result(timeout).await
    }

    /// Starts a streamed run of `prompt` (deadline as [`AgentClient::invoke`]);
    /// read it with [`Invocation::next_event`].
    ///
    /// # Errors
    ///
    /// As [`AgentClient::submit`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: as [`AgentClient::submit`].
    pub async fn stream(
        &self,
        prompt: &str,
        timeout: Option<Duration>,
    ) -> Result<Invocation, AgentError> {
        let deadline_secs = deadline(timeout)?;
        self.submit(
            prompt,
            SubmitOptions {
                stream: true,
                deadline_secs,
                ..Default::default()
            },
        )
        .await
    }
}

fn deadline(timeout: Option<Duration>) -> Result<u32, AgentError> {
    match timeout {
        None => Ok(wire::DEFAULT_DEADLINE_SECS),
        Some(t) if t >= Duration::from_secs(1) && t <= Duration::from_secs(3600) => {
            Ok(t.as_secs_f64().ceil() as u32)
        }
        Some(_) => Err(AgentError::new(
            AgentErrorKind::InvalidArgument,
            "timeout must be 1..3600 seconds",
        )),
    }
}
/// Agent clients from a module's proxy: `proxy.agent_client("echo")`
/// (in the `abi_sdk` prelude).
pub trait AgentsExt {
    /// A client of this module's agent `name` (submit, status, cancel,
    /// events, invoke, stream); no call is made until it is used.
    /// [`ModuleProxy::agent`] looks up the agent's descriptor instead.
    fn agent_client(&self, name: impl Into<String>) -> AgentClient;
}

impl AgentsExt for ModuleProxy {
    fn agent_client(&self, name: impl Into<String>) -> AgentClient {
        AgentClient::new(self.clone(), name.into())
    }
}
