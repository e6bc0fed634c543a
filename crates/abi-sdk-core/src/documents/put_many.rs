//! Puts from many tasks sent together: [`PutQueue`], over our document
//! service's extension `abi.svc.document.v1.put_many` (several puts in one
//! request, each stored or refused on its own).
//!
//! A put goes out at once, as its own request, while fewer than
//! [`IN_FLIGHT`] of the queue's requests are on their way; past that it
//! waits, and when a request comes back the puts that waited leave in one
//! `put_many` (at most [`MAX_GROUP`] of them; the rest, in the next). An
//! idle caller therefore pays nothing for the queue, and a busy one sends a
//! request per group of puts rather than per put: fewer messages through
//! the broker, fewer requests for the service to read.
//!
//! The reference's document service has no such endpoint. The first group
//! to leave asks the broker whether anybody serves it (an empty, unsigned
//! request: our service refuses it and stores nothing; where only the
//! reference's runs, the broker answers "no responders" at once). Where
//! nobody does, groups leave one put per request, as the reference's hosts
//! send them, and the queue asks again after a while.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use abi_proto::document::v1 as pb;
use abi_wire::documents;
use async_nats::RequestErrorKind;
use bytes::Bytes;
use prost::Message as _;
use tokio::sync::oneshot;

use super::{Data, Deciding, DocumentClient, Written, put_request};
use crate::error::{CallError, CallErrorKind};
use crate::transport::{Link, refusal};

/// How many of a queue's requests may be on their way at once; puts beyond
/// them wait and leave together.
pub const IN_FLIGHT: usize = 4;
/// The most puts one group carries. Larger groups save little more and
/// hold their first puts back for the last: in `abi-bench jobs` at
/// `max_concurrency` 64, groups of up to 64 ran fewer jobs per second than
/// single puts, groups of up to 16 (about what the document service commits
/// at once there) the most (docs/benchmarks.md).
pub const MAX_GROUP: usize = 16;
const _: () = assert!(MAX_GROUP <= documents::MAX_BATCH_WRITES);
/// How long a queue takes "nobody serves `put_many`" as the answer before
/// probing again (a document service of ours may start).
const UNSERVED_FOR: Duration = Duration::from_secs(30);
/// How long a probe waits for an answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Puts of one [`DocumentClient`], sent together when many wait (see the
/// module's documentation). Cheap to clone: clones share the queue.
#[derive(Clone, Debug)]
pub struct PutQueue {
    client: DocumentClient,
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    /// The queue's requests on their way.
    in_flight: usize,
    /// Puts waiting for one of them to come back.
    waiting: VecDeque<Waiting>,
    /// What is known of the endpoint.
    served: Served,
    /// Whether a group's probe is on its way.
    probing: bool,
}

/// Whether `put_many` is served here.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Served {
    /// Not asked yet.
    #[default]
    Unknown,
    /// Our document service answered.
    Yes,
    /// Nobody answered, at that time.
    No(Instant),
}

/// A put waiting for its turn: the `PutRequest`'s bytes (without a call
/// context) and where its answer goes.
#[derive(Debug)]
struct Waiting {
    collection: String,
    id: String,
    request: Vec<u8>,
    answer: oneshot::Sender<Result<Written, CallError>>,
}

type Answer = Result<Written, CallError>;

impl DocumentClient {
    /// A queue that sends this client's puts together when many wait.
    pub fn put_queue(&self) -> PutQueue {
        PutQueue {
            client: self.clone(),
            state: Arc::default(),
        }
    }
}

impl PutQueue {
    /// As [`DocumentClient::put_ref`]: stores `data` as `collection/id`
    /// (`if_version` as there), alone or with other waiting puts.
    ///
    /// # Errors
    ///
    /// As [`DocumentClient::put_ref`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a cancelled put may still be stored.
    pub async fn put(
        &self,
        collection: &str,
        id: &str,
        data: &Data,
        if_version: Option<i64>,
    ) -> Result<Written, CallError> {
        // Decided and queued under one lock: a put queued after the last
        // request came back would wait for nobody.
        let receiver = {
            let mut state = self.lock();
            if state.in_flight < IN_FLIGHT {
                state.in_flight += 1;
                None
            } else {
                let (answer, receiver) = oneshot::channel();
                state.waiting.push_back(Waiting {
                    collection: collection.to_owned(),
                    id: id.to_owned(),
                    request: put_request(
                        None,
                        &self.client.namespace,
                        collection,
                        id,
                        data,
                        if_version,
                    ),
                    answer,
                });
                Some(receiver)
            }
        };
        match receiver {
            None => {
                // The slot is given back (or on to the waiting puts) however
                // this put ends, dropped mid-way included.
                let _slot = Slot(self);
                self.client.put_ref(collection, id, data, if_version).await
            }
            Some(receiver) => receiver.await.unwrap_or_else(|_| {
                Err(CallError::new(
                    CallErrorKind::Internal,
                    "the put's queue stopped before it was answered",
                ))
            }),
        }
    }

    /// As [`DocumentClient::put_deciding`] when none of the queue's
    /// requests is on its way (an idle caller, whose put would wait for a
    /// sync after a pause); otherwise [`Self::put`], decided and stored at
    /// once. The early word costs a message through the broker, which a
    /// busy caller, whose puts leave grouped, would pay for little.
    ///
    /// # Errors
    ///
    /// As [`DocumentClient::put_deciding`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a cancelled put may still be stored.
    pub async fn put_deciding(
        &self,
        collection: &str,
        id: &str,
        data: &Data,
        if_version: Option<i64>,
    ) -> Result<Deciding, CallError> {
        let idle = {
            let mut state = self.lock();
            let idle = state.in_flight == 0;
            state.in_flight += usize::from(idle);
            idle
        };
        if idle {
            // Given back once the put is decided: its durable answer is a
            // moment away, and a put queued meanwhile need not wait for it.
            let _slot = Slot(self);
            return self
                .client
                .put_deciding(collection, id, data, if_version)
                .await;
        }
        let written = self.put(collection, id, data, if_version).await?;
        Ok(Deciding::at_once(written))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays whole between statements: a panic elsewhere
        // leaves nothing half-written to refuse.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A request of the queue came back: its slot goes to the puts that
    /// waited, sent from a task of their own, or is freed.
    fn request_done(&self) {
        let next = self.next_group();
        if next.is_empty() {
            return;
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let queue = self.clone();
                runtime.spawn(async move { queue.drain(next).await });
            }
            // No runtime left to send them from (a put dropped as its
            // runtime shut down): their callers are answered by the drop of
            // their senders ("stopped before it was answered"); the slot
            // stays taken, as nothing can send on it any more.
            Err(_) => drop(next),
        }
    }

    /// The puts to send next, taking the finished request's slot (freed
    /// when none wait). Two puts of one document never leave together: the
    /// second waits for the next group.
    fn next_group(&self) -> Vec<Waiting> {
        let mut state = self.lock();
        if state.waiting.is_empty() {
            state.in_flight -= 1;
            return Vec::new();
        }
        take_group(&mut state.waiting)
    }

    /// Sends `group`, then every group that waits meanwhile, on one slot.
    async fn drain(self, mut group: Vec<Waiting>) {
        while !group.is_empty() {
            self.send(group).await;
            group = self.next_group();
        }
    }

    /// Sends `group` as one `put_many` where that is served, else one put
    /// per request; answers each put.
    async fn send(&self, group: Vec<Waiting>) {
        if group.len() > 1 && self.served().await {
            match self.put_many(&group).await {
                Ok(answers) => {
                    for (waiting, answer) in group.into_iter().zip(answers) {
                        let _ = waiting.answer.send(answer);
                    }
                    return;
                }
                Err(error) if error.kind() == CallErrorKind::NoResponders => {
                    self.lock().served = Served::No(Instant::now());
                }
                Err(error) => {
                    for waiting in group {
                        let _ = waiting.answer.send(Err(each_of(&error)));
                    }
                    return;
                }
            }
        }
        let sent = group.into_iter().map(|waiting| async move {
            let answer = self.put_one(&waiting).await;
            let _ = waiting.answer.send(answer);
        });
        futures::future::join_all(sent).await;
    }

    /// Whether to send a group as one `put_many`: what is known, or what a
    /// probe finds when nothing is (while another group's probe is on its
    /// way, not yet).
    async fn served(&self) -> bool {
        {
            let mut state = self.lock();
            match state.served {
                Served::Yes => return true,
                Served::No(since) if since.elapsed() < UNSERVED_FOR => return false,
                Served::Unknown | Served::No(_) if state.probing => return false,
                Served::Unknown | Served::No(_) => state.probing = true,
            }
        }
        let found = self.probe().await;
        let mut state = self.lock();
        state.probing = false;
        state.served = found;
        found == Served::Yes
    }

    /// Asks the broker whether anybody serves `put_many`: an empty request
    /// without a token, which our service refuses (storing nothing) and
    /// which nobody answers where only the reference's service runs. Sent
    /// once, not resent as calls are, so the answer takes one round trip.
    async fn probe(&self) -> Served {
        let Link::Nats(nats) = self.client.transport.link() else {
            return Served::No(Instant::now());
        };
        let subject = documents::operation(documents::Operation::PutMany);
        match tokio::time::timeout(PROBE_TIMEOUT, nats.request(subject, Bytes::new())).await {
            // Our service's refusal; anything else is not it.
            Ok(Ok(reply)) => match pb::PutManyResponse::decode(reply.payload) {
                Ok(refused) if refused.error.is_some() => Served::Yes,
                _ => Served::No(Instant::now()),
            },
            Ok(Err(error)) if error.kind() == RequestErrorKind::NoResponders => {
                Served::No(Instant::now())
            }
            // No answer in time, or a broken link: nothing learnt.
            Ok(Err(_)) | Err(_) => Served::Unknown,
        }
    }

    /// A `PutManyRequest`'s bytes for `group`.
    fn request(&self, group: &[Waiting]) -> Vec<u8> {
        put_many_request(
            &self.client.transport.context(),
            group.iter().map(|w| w.request.as_slice()),
        )
    }

    /// One `put_many` for `group`: an answer per put, or why none came.
    async fn put_many(&self, group: &[Waiting]) -> Result<Vec<Answer>, CallError> {
        let reply: pb::PutManyResponse = self
            .client
            .transport
            .exchange_reply(
                &documents::operation(documents::Operation::PutMany),
                self.request(group),
                None,
            )
            .await?;
        if let Some(error) = &reply.error {
            return Err(refusal(error));
        }
        if reply.results.len() != group.len() {
            return Err(CallError::new(
                CallErrorKind::Decode,
                format!(
                    "a put_many of {} puts answered {}",
                    group.len(),
                    reply.results.len()
                ),
            ));
        }
        Ok(reply
            .results
            .into_iter()
            .zip(group)
            .map(|(result, waiting)| self.answer(result, waiting))
            .collect())
    }

    /// A put that waited, sent as its own request.
    async fn put_one(&self, waiting: &Waiting) -> Answer {
        let context = self.client.transport.context();
        let mut payload = Vec::with_capacity(context.encoded_len() + 4 + waiting.request.len());
        prost::encoding::message::encode(documents::CONTEXT_TAG, &context, &mut payload);
        payload.extend_from_slice(&waiting.request);
        let reply: documents::PutStamped = self
            .client
            .transport
            .exchange(
                &documents::operation(documents::Operation::Put),
                payload,
                None,
            )
            .await
            .map_err(|e| {
                self.client
                    .name_missing(e, &waiting.collection, &waiting.id)
            })?;
        Written::from_stamps(reply.document)
    }

    /// One answer of a `put_many`, its refusal named as
    /// [`DocumentClient::put_ref`] names it.
    fn answer(&self, reply: pb::PutResponse, waiting: &Waiting) -> Answer {
        if let Some(error) = &reply.error {
            return Err(self
                .client
                .name_missing(refusal(error), &waiting.collection, &waiting.id));
        }
        Written::from_parts(
            reply
                .document
                .map(|d| (d.version, d.created_at, d.updated_at)),
        )
    }
}

/// A `PutManyRequest`'s bytes: `context`, then each put's bytes (each a
/// `PutRequest` without a context).
fn put_many_request<'a>(
    context: &abi_proto::common::v1::CallContext,
    puts: impl Iterator<Item = &'a [u8]> + Clone,
) -> Vec<u8> {
    let mut payload = Vec::with_capacity(
        context.encoded_len() + 8 + puts.clone().map(|p| p.len() + 4).sum::<usize>(),
    );
    prost::encoding::message::encode(documents::CONTEXT_TAG, context, &mut payload);
    for put in puts {
        prost::encoding::encode_key(
            documents::PUT_MANY_PUTS_TAG,
            prost::encoding::WireType::LengthDelimited,
            &mut payload,
        );
        prost::encoding::encode_varint(put.len() as u64, &mut payload);
        payload.extend_from_slice(put);
    }
    payload
}

/// A slot of the queue taken by a put sent at once: given back when the put
/// ends, however it ends.
struct Slot<'a>(&'a PutQueue);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.request_done();
    }
}

/// A group's failure as each of its puts reports it: its kind, code and
/// message (the cause, not cloneable, is left out; the message names it).
fn each_of(error: &CallError) -> CallError {
    let copy = CallError::new(error.kind(), error.message());
    match error.code() {
        Some(code) => copy.with_code(code),
        None => copy,
    }
}

/// The first puts of `waiting`, in order: at most [`MAX_GROUP`], up to
/// (not including) the first that names a document already in the group.
fn take_group(waiting: &mut VecDeque<Waiting>) -> Vec<Waiting> {
    let mut group: Vec<Waiting> = Vec::new();
    while group.len() < MAX_GROUP {
        let Some(next) = waiting.front() else {
            break;
        };
        // A scan of at most `MAX_GROUP` puts costs less than hashing (and
        // copying) every put's name.
        let named = |put: &Waiting| put.id == next.id && put.collection == next.collection;
        if group.iter().any(named) {
            break;
        }
        if let Some(next) = waiting.pop_front() {
            group.push(next);
        }
    }
    group
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use abi_document_model::Value;

    #[test]
    fn a_group_stops_before_a_document_it_holds_and_at_its_size() {
        let waiting = |names: &[(&str, &str)]| -> VecDeque<Waiting> {
            names
                .iter()
                .map(|(collection, id)| Waiting {
                    collection: (*collection).into(),
                    id: (*id).into(),
                    request: Vec::new(),
                    answer: oneshot::channel().0,
                })
                .collect()
        };
        let names = |group: &[Waiting]| -> Vec<String> {
            group
                .iter()
                .map(|p| format!("{}/{}", p.collection, p.id))
                .collect()
        };
        // The puts queued (collection, id); the group taken; how many stay.
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str], usize);
        let cases: [Case; 5] = [
            (&[], &[], 0),
            (&[("r", "a"), ("r", "b")], &["r/a", "r/b"], 0),
            // One id in two collections is two documents.
            (&[("r", "a"), ("s", "a")], &["r/a", "s/a"], 0),
            // A second put of `r/a` waits for the next group, with all after it.
            (
                &[("r", "a"), ("r", "b"), ("r", "a"), ("r", "c")],
                &["r/a", "r/b"],
                2,
            ),
            (&[("r", "a"), ("r", "a")], &["r/a"], 1),
        ];
        for (queued, expected, left) in cases {
            let mut queue = waiting(queued);
            let group = take_group(&mut queue);
            assert_eq!(names(&group), expected, "{queued:?}");
            assert_eq!(queue.len(), left, "{queued:?}");
        }
        let ids: Vec<String> = (0..MAX_GROUP + 3).map(|i| i.to_string()).collect();
        let many: Vec<(&str, &str)> = ids.iter().map(|id| ("r", id.as_str())).collect();
        let mut queue = waiting(&many);
        assert_eq!(take_group(&mut queue).len(), MAX_GROUP);
        assert_eq!(queue.len(), 3);
    }

    #[test]
    fn a_put_many_request_is_the_bytes_prost_writes() {
        let context = abi_proto::common::v1::CallContext {
            trace_id: "t-1".into(),
            timeout_ms: 10_000,
            ..Default::default()
        };
        let data = Data::from([("n".to_owned(), Value::Int(3))]);
        let puts = [
            put_request(None, "ns", "runs", "a", &data, Some(0)),
            put_request(None, "ns", "runs", "b", &Data::new(), None),
        ];
        let ours = put_many_request(&context, puts.iter().map(Vec::as_slice));
        let prost = pb::PutManyRequest {
            context: Some(context),
            puts: puts
                .iter()
                .map(|p| pb::PutRequest::decode(p.as_slice()).unwrap())
                .collect(),
        };
        assert_eq!(ours, prost.encode_to_vec());
        let read = pb::PutManyRequest::decode(ours.as_slice()).unwrap();
        assert_eq!(read.puts[0].id, "a");
        assert_eq!(read.puts[0].if_version, Some(0));
        assert_eq!(read.puts[1].if_version, None);
    }
}
