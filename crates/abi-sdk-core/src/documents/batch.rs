//! Several writes as one transaction: [`DocumentClient::batch`], our
//! document service's extension (`abi.svc.document.v1.batch`).
//!
//! The reference's document service has no such endpoint: a batch sent where
//! only it serves gets "no responders", and [`BatchError::unsupported`] tells
//! the caller to write one document per request instead, as the reference's
//! hosts do. The client remembers that answer for a while, so a fleet on the
//! reference's service pays for the question once, not per call.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use abi_document_model::pb as convert;
use abi_proto::document::v1 as pb;
use abi_wire::documents::{self, DocumentRpc as _};
use prost::Message as _;

use super::{Data, Document, DocumentClient, document};
use crate::error::{CallError, CallErrorKind};
use crate::transport::refusal;

/// How long a client takes "no responders" on the batch subject as the
/// answer before asking again (a document service of ours may start).
const UNSUPPORTED_FOR: Duration = Duration::from_secs(30);

/// One write of a batch, in the client's namespace.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchWrite {
    /// A put, as [`DocumentClient::put`].
    Put {
        /// The collection.
        collection: String,
        /// The document id.
        id: String,
        /// The document.
        data: Data,
        /// `None` writes unconditionally, `Some(0)` only creates, `Some(n)`
        /// writes only over version `n`.
        if_version: Option<i64>,
    },
    /// A delete, as [`DocumentClient::delete`].
    Delete {
        /// The collection.
        collection: String,
        /// The document id.
        id: String,
        /// `Some(n)` deletes only version `n`.
        if_version: Option<i64>,
    },
}

/// Why a batch stored nothing.
#[derive(Debug, thiserror::Error)]
#[error("{}batch refused: {error}", failed.map(|i| format!("write {i} of a ")).unwrap_or_default())]
pub struct BatchError {
    /// The position of the write refused, when one was.
    pub failed: Option<usize>,
    /// The refusal or the transport's failure.
    #[source]
    pub error: CallError,
}

impl BatchError {
    /// Whether no document service here serves batches (the reference's
    /// does not): write one document per request instead.
    pub fn unsupported(&self) -> bool {
        self.failed.is_none() && self.error.kind() == CallErrorKind::NoResponders
    }

    /// Whether write `index` was refused with `kind`.
    pub fn refused(&self, index: usize, kind: CallErrorKind) -> bool {
        self.failed == Some(index) && self.error.kind() == kind
    }
}

/// When the batch subject last had no responders, shared by a client's
/// clones.
#[derive(Debug, Default)]
pub(super) struct Support {
    unsupported_since: Mutex<Option<Instant>>,
}

impl Support {
    fn known_unsupported(&self) -> bool {
        self.unsupported_since
            .lock()
            .ok()
            .and_then(|since| *since)
            .is_some_and(|since| since.elapsed() < UNSUPPORTED_FOR)
    }

    fn mark_unsupported(&self) {
        if let Ok(mut since) = self.unsupported_since.lock() {
            *since = Some(Instant::now());
        }
    }
}

impl DocumentClient {
    /// Stores `writes` in order as one transaction: every one, or none when
    /// one is refused. Answers per write the document a put stored (`None`
    /// for a delete).
    ///
    /// # Errors
    ///
    /// [`BatchError`] naming the write refused and why (nothing stored);
    /// [`BatchError::unsupported`] when only the reference's document
    /// service runs (nothing sent: write one by one).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a cancelled batch may still have been stored, whole.
    pub async fn batch(
        &self,
        writes: Vec<BatchWrite>,
    ) -> Result<Vec<Option<Document>>, BatchError> {
        let whole = |error| BatchError {
            failed: None,
            error,
        };
        if self.batches.known_unsupported() {
            return Err(whole(CallError::new(
                CallErrorKind::NoResponders,
                "no document service here serves batches",
            )));
        }
        let namespace = self.namespace.to_string();
        let mut request = pb::BatchRequest {
            writes: writes
                .into_iter()
                .map(|write| pb::BatchWrite {
                    write: Some(match write {
                        BatchWrite::Put {
                            collection,
                            id,
                            data,
                            if_version,
                        } => pb::batch_write::Write::Put(pb::PutRequest {
                            namespace: namespace.clone(),
                            collection,
                            id,
                            data: Some(convert::data_to_pb(&data)),
                            if_version,
                            ..Default::default()
                        }),
                        BatchWrite::Delete {
                            collection,
                            id,
                            if_version,
                        } => pb::batch_write::Write::Delete(pb::DeleteRequest {
                            namespace: namespace.clone(),
                            collection,
                            id,
                            if_version,
                            ..Default::default()
                        }),
                    }),
                })
                .collect(),
            ..Default::default()
        };
        request.set_context(self.transport.context());
        let subject = documents::operation(documents::Operation::Batch);
        let reply: pb::BatchResponse = match self
            .transport
            .exchange_reply(&subject, request.encode_to_vec(), None)
            .await
        {
            Ok(reply) => reply,
            Err(error) => {
                if error.kind() == CallErrorKind::NoResponders {
                    self.batches.mark_unsupported();
                }
                return Err(whole(error));
            }
        };
        if let Some(error) = &reply.error {
            return Err(BatchError {
                failed: reply.failed.and_then(|i| usize::try_from(i).ok()),
                error: refusal(error),
            });
        }
        reply
            .results
            .into_iter()
            .map(|result| result.document.map(|d| document(Some(d))).transpose())
            .collect::<Result<_, _>>()
            .map_err(whole)
    }
}
