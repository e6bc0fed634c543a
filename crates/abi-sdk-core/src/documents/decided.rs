//! A put answered twice: as soon as our document service has decided to
//! store it, before its commit is durable, and once it is
//! ([`DocumentClient::put_deciding`], the `Abi-Put-Decided` extension).
//!
//! A caller that only needs to know a put was not refused (a job host
//! claiming a run before it starts the handler) goes on after the first
//! answer, and waits for the second before anything that must follow a
//! durable write (the run's outcome, the trigger's ack). The first answer
//! never acknowledges the write: a commit that fails after it (a full
//! disk, a service killed mid-sync) shows in the second.
//!
//! The early word travels on an inbox of the put's own, subscribed for the
//! call (so the word reaches the caller straight from the connection, not
//! through a routing task). The reference's service ignores the header, and
//! so does ours for a refused put: the reply, the only answer then, is both.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use abi_wire::documents;
use futures::{FutureExt as _, StreamExt as _};
use prost::Message as _;
use tokio::task::JoinHandle;

use super::{Data, DocumentClient, Written, put_request};
use crate::error::{CallError, CallErrorKind};
use crate::transport::Link;

/// A put decided: what it will store, and the durable answer to come.
#[derive(Debug)]
pub struct Deciding {
    /// The document's version and stamps as the service decided them (the
    /// durable answer carries the same).
    pub written: Written,
    /// The durable answer.
    pub stored: Stored,
}

impl Deciding {
    /// A put whose durable answer came first: decided and stored at once.
    pub fn at_once(written: Written) -> Self {
        Self {
            stored: Stored(Inner::Ready(Some(Ok(written.clone())))),
            written,
        }
    }
}

/// The durable answer of a put already decided: the written document once
/// its commit is synced, or why the put was not stored after all.
///
/// Polling it again after it answered is an `Internal` error. Dropping it
/// does not stop the put.
#[derive(Debug)]
pub struct Stored(Inner);

#[derive(Debug)]
enum Inner {
    Ready(Option<Result<Written, CallError>>),
    Pending(JoinHandle<Result<Written, CallError>>),
}

impl Future for Stored {
    type Output = Result<Written, CallError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let answer = match &mut self.0 {
            Inner::Ready(answer) => answer.take(),
            Inner::Pending(task) => Some(joined(std::task::ready!(Pin::new(task).poll(cx)))),
        };
        self.0 = Inner::Ready(None);
        Poll::Ready(answer.unwrap_or_else(|| {
            Err(CallError::new(
                CallErrorKind::Internal,
                "a put's durable answer awaited twice",
            ))
        }))
    }
}

/// A put's early word read.
fn decided(word: &[u8]) -> Result<Written, CallError> {
    let decided = documents::PutStamped::decode(word).map_err(|e| {
        CallError::new(CallErrorKind::Decode, "a malformed put decision").with_source(e)
    })?;
    Written::from_stamps(decided.document)
}

/// The answer of a put's task.
fn joined(
    task: Result<Result<Written, CallError>, tokio::task::JoinError>,
) -> Result<Written, CallError> {
    task.unwrap_or_else(|error| {
        Err(CallError::new(
            CallErrorKind::Internal,
            "the put's task ended without an answer",
        )
        .with_source(error))
    })
}

impl DocumentClient {
    /// [`put_ref`](Self::put_ref), answered as soon as the service decided
    /// to store the put, before its commit is durable (see the module's
    /// documentation): [`Deciding::written`] then, [`Deciding::stored`] the
    /// durable answer. Against a service that does not tell early (the
    /// reference's, or PostgreSQL's store) both come with the reply.
    ///
    /// # Errors
    ///
    /// As [`put_ref`](Self::put_ref): the put refused (or not answered)
    /// before anything was decided. A failure after the decision is
    /// [`Deciding::stored`]'s.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: the put goes on without its caller and may be
    /// stored.
    pub async fn put_deciding(
        &self,
        collection: &str,
        id: &str,
        data: &Data,
        if_version: Option<i64>,
    ) -> Result<Deciding, CallError> {
        let Link::Nats(nats) = self.transport.link() else {
            let written = self.put_ref(collection, id, data, if_version).await?;
            return Ok(Deciding::at_once(written));
        };
        // A subscription of the put's own: its word reaches this task
        // straight from the connection.
        let decided_to = nats.new_inbox();
        let mut word = nats.subscribe(decided_to.clone()).await.map_err(|e| {
            CallError::new(
                CallErrorKind::Transport,
                "could not subscribe for a put's decision",
            )
            .with_source(e)
        })?;
        let payload = put_request(
            Some(self.transport.context()),
            &self.namespace,
            collection,
            id,
            data,
            if_version,
        );
        let client = self.clone();
        let (collection, id) = (collection.to_owned(), id.to_owned());
        let mut reply = tokio::spawn(async move {
            let subject = documents::operation(documents::Operation::Put);
            let reply: documents::PutStamped = client
                .transport
                .exchange_told(&subject, payload, &decided_to)
                .await
                .map_err(|e| client.name_missing(e, &collection, &id))?;
            Written::from_stamps(reply.document)
        });
        tokio::select! {
            biased;
            Some(told) = word.next() => Ok(Deciding {
                written: decided(&told.payload)?,
                stored: Stored(Inner::Pending(reply)),
            }),
            stored = &mut reply => {
                // A word that arrived just before the reply, after this pass
                // looked for it, still decides: the put was decided, and
                // the reply is its durable answer.
                match (word.next().now_or_never().flatten(), joined(stored)) {
                    (Some(told), Err(error)) => Ok(Deciding {
                        written: decided(&told.payload)?,
                        stored: Stored(Inner::Ready(Some(Err(error)))),
                    }),
                    (_, stored) => Ok(Deciding::at_once(stored?)),
                }
            }
        }
    }
}
