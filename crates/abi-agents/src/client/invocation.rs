//! [`Invocation`]: one run, as its caller follows it. A submitting handle
//! reads the updates the owner pushes to its inbox and reads Status only to
//! fill a gap, after 5 s of silence, and at the end; any other handle polls
//! Status every 0.1 s.
//!
//! The end without Status: when the owner pushes `SUCCEEDED` with a
//! `last_sequence` this handle already followed event by event from the
//! first, the result is what Status would report, the data of the run's
//! `message` events joined by newlines (both hosts store exactly that: the
//! one message of an invoke, the messages of a stream), so the handle ends
//! there (the reference reads Status at every end). Any other end (a gap, a
//! failure, a cancel, a handle that did not follow from the first event)
//! still reads Status.

use abi_wire::ErrorCode;
use std::collections::VecDeque;
use std::time::Duration;

use abi_proto::agent::v1 as apb;
use abi_wire::agents::{self as wire, Operation, RunStatus, is_terminal};
use futures::StreamExt as _;
use prost::Message as _;
use tokio::time::Instant;

use super::{AgentClient, AgentError, AgentErrorKind, route};
use abi_sdk_core::CallError;

/// How often a handle without pushed updates reads Status.
const POLL: Duration = Duration::from_millis(100);

/// One event of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvocationEvent {
    /// 1, 2, ... in the order the run emitted them.
    pub sequence: u64,
    /// The event's name (`message`, `done`, or the handler's own).
    pub event: String,
    /// Its text, whole (read back part by part when it was large).
    pub data: String,
    /// `Some(false)` for a tool response that is no chat source.
    pub chat_source: Option<bool>,
}

/// A run as its owner reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvocationStatus {
    /// The caller's invocation id.
    pub invocation_id: String,
    /// The caller's thread id.
    pub thread_id: String,
    /// `ACCEPTED`, `RUNNING`, `CANCELLING`, `FINALIZING` or a terminal status.
    pub status: String,
    /// The result, whole, once `SUCCEEDED`.
    pub result: String,
    /// Why it did not succeed.
    pub error_code: String,
    /// The owner's message.
    pub error_message: String,
    /// The instance executing it.
    pub owner_instance_id: String,
    /// Whether discovery still lists that instance.
    pub owner_available: bool,
    /// The events after the cursor asked for (at most 64).
    pub events: Vec<InvocationEvent>,
    /// The run's last event.
    pub last_sequence: u64,
}

/// One run: its status, its events, its result; cancel it.
#[derive(Debug)]
pub struct Invocation {
    client: AgentClient,
    invocation_id: String,
    owner: String,
    thread_id: String,
    updates: Option<async_nats::Subscriber>,
    read_first: bool,
    result_cache: Option<String>,
    last_status: Option<InvocationStatus>,
    cursor: u64,
    pending: VecDeque<InvocationEvent>,
    /// The `message` events' data, in order, of events 1 to `cursor`.
    messages: Vec<String>,
    /// Whether this handle saw every event from the first, in order.
    followed: bool,
    read: Option<bool>,
    end: Option<Result<(), (String, String, String)>>,
}

impl Invocation {
    pub(crate) fn new(client: AgentClient, invocation_id: String) -> Self {
        Self {
            client,
            invocation_id,
            owner: String::new(),
            thread_id: String::new(),
            updates: None,
            read_first: true,
            result_cache: None,
            last_status: None,
            cursor: 0,
            pending: VecDeque::new(),
            messages: Vec::new(),
            followed: true,
            read: None,
            end: None,
        }
    }

    /// The invocation id.
    pub fn invocation_id(&self) -> &str {
        &self.invocation_id
    }

    /// The instance that owns the run, once known.
    pub fn owner_instance_id(&self) -> &str {
        &self.owner
    }

    /// The last status read.
    pub fn last_status(&self) -> Option<&InvocationStatus> {
        self.last_status.as_ref()
    }

    pub(super) async fn subscribe_updates(&mut self) -> Result<String, AgentError> {
        let Some(nats) = self.client.proxy.client().nats() else {
            return Err(CallError::new(
                abi_sdk_core::CallErrorKind::NoResponders,
                "agents are called over NATS only",
            )
            .into());
        };
        let inbox = nats.new_inbox();
        let sub = nats.subscribe(inbox.clone()).await.map_err(|e| {
            AgentError::from(
                CallError::new(
                    abi_sdk_core::CallErrorKind::Transport,
                    "cannot subscribe the updates inbox",
                )
                .with_source(e),
            )
        })?;
        self.updates = Some(sub);
        Ok(inbox)
    }

    pub(super) async fn stop_updates(&mut self) {
        if let Some(mut sub) = self.updates.take() {
            let _ = sub.unsubscribe().await;
        }
    }

    pub(super) fn accepted(&mut self, invocation: apb::Invocation) {
        self.owner = invocation.owner_instance_id;
        self.thread_id = invocation.thread_id;
        // A resubmission of a finished run gets no updates: read it at once.
        self.read_first = is_terminal(&invocation.status);
    }

    async fn output(&self, sequence: u64, parts: u32) -> Result<String, AgentError> {
        let mut content = Vec::new();
        for part in 0..parts {
            let request = apb::EventRequest {
                context: route::context(&self.client),
                invocation_id: self.invocation_id.clone(),
                sequence,
                part,
            };
            let reply: apb::EventResponse = route::to_owner(
                &self.client,
                Operation::Event,
                &self.owner,
                request.encode_to_vec(),
            )
            .await?;
            content.extend(reply.data);
        }
        Ok(String::from_utf8_lossy(&content).into_owned())
    }

    async fn decode(&mut self, value: apb::Invocation) -> Result<InvocationStatus, AgentError> {
        self.owner.clone_from(&value.owner_instance_id);
        let mut events = Vec::with_capacity(value.events.len());
        for e in value.events {
            let data = if e.parts > 0 {
                self.output(e.sequence, e.parts).await?
            } else {
                e.data
            };
            events.push(InvocationEvent {
                sequence: e.sequence,
                event: e.event,
                data,
                chat_source: e.chat_source.filter(|c| !c),
            });
        }
        let mut result = value.result;
        if value.result_parts > 0 {
            if self.result_cache.is_none() {
                self.result_cache = Some(self.output(0, value.result_parts).await?);
            }
            result = self.result_cache.clone().unwrap_or_default();
        }
        Ok(InvocationStatus {
            invocation_id: value.invocation_id,
            thread_id: value.thread_id,
            status: value.status,
            result,
            error_code: value.error_code,
            error_message: value.error_message,
            owner_instance_id: value.owner_instance_id,
            owner_available: value.owner_available,
            events,
            last_sequence: value.last_sequence,
        })
    }

    /// The run's state and up to 64 events after `after_sequence`.
    ///
    /// # Errors
    ///
    /// The call's refusal (`INVOCATION_NOT_FOUND`, `PERMISSION_DENIED`, ...).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads; the status kept for later calls changes only once an answer arrived.
    pub async fn status(&mut self, after_sequence: u64) -> Result<InvocationStatus, AgentError> {
        let request = apb::StatusRequest {
            context: route::context(&self.client),
            invocation_id: self.invocation_id.clone(),
            after_sequence,
            output_format: wire::OUTPUT_FORMAT as u32,
        };
        let reply: apb::StatusResponse = route::to_owner(
            &self.client,
            Operation::Status,
            &self.owner,
            request.encode_to_vec(),
        )
        .await?;
        let status = self.decode(reply.invocation.unwrap_or_default()).await?;
        self.last_status = Some(status.clone());
        Ok(status)
    }

    /// Asks the owner to stop the run; returns its state right after.
    ///
    /// # Errors
    ///
    /// `OWNER_UNAVAILABLE` when the instance answering does not own the
    /// live run; the call's other refusals.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a cancelled call may have reached the owner; [`Invocation::status`] tells.
    pub async fn cancel(&mut self) -> Result<InvocationStatus, AgentError> {
        let request = apb::CancelRequest {
            context: route::context(&self.client),
            invocation_id: self.invocation_id.clone(),
            output_format: wire::OUTPUT_FORMAT as u32,
        };
        let reply: apb::CancelResponse = route::to_owner(
            &self.client,
            Operation::Cancel,
            &self.owner,
            request.encode_to_vec(),
        )
        .await?;
        self.decode(reply.invocation.unwrap_or_default()).await
    }

    /// The run's next event, `None` once it succeeded; waits at most until
    /// `deadline`.
    ///
    /// # Errors
    ///
    /// `WaitTimeout` at the deadline (the run may go on); the run's end when
    /// it did not succeed (`Failed`, `Cancelled`, `TimedOut`, `OwnerGone`);
    /// `OwnerUnavailable` when its owner is no longer registered.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: an event being read may be lost; read Status after.
    pub async fn next_event(
        &mut self,
        deadline: Option<Instant>,
    ) -> Result<Option<InvocationEvent>, AgentError> {
        let result = self.next_inner(deadline).await;
        if !matches!(result, Ok(Some(_))) {
            self.stop_updates().await;
        }
        result
    }

    async fn next_inner(
        &mut self,
        deadline: Option<Instant>,
    ) -> Result<Option<InvocationEvent>, AgentError> {
        let far = Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600);
        let deadline = deadline.unwrap_or(far);
        let mut read = *self
            .read
            .get_or_insert(self.read_first || self.updates.is_none());
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(Some(event));
            }
            match &self.end {
                Some(Ok(())) => return Ok(None),
                Some(Err((status, code, message))) => {
                    return Err(AgentError::ended(status, code, message));
                }
                None => {}
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(self.wait_timeout());
            }
            if !read {
                let quiet = remaining.min(Duration::from_secs(wire::QUIET_SECS));
                let update = self.next_update(quiet).await;
                if let Some(end) = update.as_ref().and_then(|u| self.succeeded_inline(u)) {
                    self.last_status = Some(end);
                    self.end = Some(Ok(()));
                    continue;
                }
                let Some(pushed) = update.and_then(|u| u.event) else {
                    read = true; // silence, the end, or an unreadable update
                    self.read = Some(true);
                    continue;
                };
                if pushed.sequence <= self.cursor {
                    continue;
                }
                if pushed.sequence != self.cursor + 1 {
                    read = true; // an update was lost
                    self.read = Some(true);
                    continue;
                }
                let data = if pushed.parts > 0 {
                    self.output(pushed.sequence, pushed.parts).await?
                } else {
                    pushed.data
                };
                let event = InvocationEvent {
                    sequence: pushed.sequence,
                    event: pushed.event,
                    data,
                    chat_source: pushed.chat_source.filter(|c| !c),
                };
                self.advance(&event);
                return Ok(Some(event));
            }
            let status = match tokio::time::timeout(remaining, self.status(self.cursor)).await {
                Ok(status) => status?,
                Err(_) => return Err(self.wait_timeout()),
            };
            let paged = !status.events.is_empty();
            for event in status.events.iter().cloned() {
                self.advance(&event);
                self.pending.push_back(event);
            }
            if paged && self.cursor < status.last_sequence {
                continue; // one page of events; read the next
            }
            if is_terminal(&status.status) {
                if self.cursor < status.last_sequence {
                    continue;
                }
                self.end = Some(if status.status == RunStatus::Succeeded.as_str() {
                    Ok(())
                } else {
                    Err((
                        status.status.clone(),
                        status.error_code.clone(),
                        status.error_message.clone(),
                    ))
                });
                continue;
            }
            if !status.owner_available {
                if !self.pending.is_empty() {
                    continue;
                }
                return Err(AgentError::new(
                    AgentErrorKind::OwnerUnavailable,
                    format!(
                        "Invocation {} has no registered owner; execution outcome is unknown and is not replayed",
                        self.invocation_id
                    ),
                )
                .with_code(ErrorCode::OwnerUnavailable.as_str()));
            }
            if self.updates.is_some() {
                read = false;
                self.read = Some(false);
                continue;
            }
            if self.pending.is_empty() {
                tokio::time::sleep(POLL.min(deadline.saturating_duration_since(Instant::now())))
                    .await;
            }
        }
    }

    /// Moves the cursor to `event`, keeping its data when a message (only
    /// while the handle followed every event from the first).
    fn advance(&mut self, event: &InvocationEvent) {
        if event.sequence == self.cursor + 1 {
            if self.followed && event.event == wire::MESSAGE_EVENT {
                self.messages.push(event.data.clone());
            }
        } else {
            // A jump: the messages before it were not seen here.
            self.messages = Vec::new();
            self.followed = false;
        }
        self.cursor = event.sequence;
    }

    /// What Status would answer now, when `update` is the owner's push of
    /// `SUCCEEDED` at the event this handle followed to from the first.
    fn succeeded_inline(&self, update: &apb::RunUpdate) -> Option<InvocationStatus> {
        let complete = update.event.is_none()
            && update.status == RunStatus::Succeeded.as_str()
            && self.followed
            && update.last_sequence == self.cursor
            && !self.thread_id.is_empty();
        complete.then(|| InvocationStatus {
            invocation_id: self.invocation_id.clone(),
            thread_id: self.thread_id.clone(),
            status: update.status.clone(),
            result: self.messages.join("\n"),
            error_code: String::new(),
            error_message: String::new(),
            owner_instance_id: self.owner.clone(),
            // The owner itself just answered.
            owner_available: true,
            events: Vec::new(),
            last_sequence: update.last_sequence,
        })
    }

    fn wait_timeout(&self) -> AgentError {
        AgentError::new(
            AgentErrorKind::WaitTimeout,
            format!(
                "Invocation {} may still be running; use status() or cancel()",
                self.invocation_id
            ),
        )
        .with_code(abi_wire::codes::WAIT_TIMEOUT)
    }

    async fn next_update(&mut self, timeout: Duration) -> Option<apb::RunUpdate> {
        let sub = self.updates.as_mut()?;
        let msg = tokio::time::timeout(timeout, sub.next()).await.ok()??;
        apb::RunUpdate::decode(msg.payload.as_ref()).ok()
    }

    /// Every remaining event, until the run ended or `timeout` passed.
    ///
    /// # Errors
    ///
    /// As [`Invocation::next_event`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: events read before the cancellation are lost to the caller (loop on [`Invocation::next_event`] to keep each one).
    pub async fn events(
        &mut self,
        timeout: Option<Duration>,
    ) -> Result<Vec<InvocationEvent>, AgentError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut all = Vec::new();
        while let Some(event) = self.next_event(deadline).await? {
            all.push(event);
        }
        Ok(all)
    }

    /// Waits for the run's end and returns its result.
    ///
    /// # Errors
    ///
    /// As [`Invocation::next_event`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: as [`Invocation::events`]; the run itself goes on (call `result` again, or `status`).
    pub async fn result(&mut self, timeout: Option<Duration>) -> Result<String, AgentError> {
        self.events(timeout).await?;
        Ok(self
            .last_status
            .as_ref()
            .map(|s| s.result.clone())
            .unwrap_or_default())
    }
}
