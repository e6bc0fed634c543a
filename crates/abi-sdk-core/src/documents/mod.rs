//! A typed client of the document service (`abi.svc.document.v1`): what the
//! job and agent hosts keep their records in, and what module code uses for
//! its own documents.
//!
//! A [`DocumentClient`] is bound to one namespace, the module's id by default
//! ([`crate::Context::documents`]); [`DocumentClient::for_namespace`] reads
//! another module's (its run records, say). Values are
//! [`abi_document_model::Value`]s; refusals are [`CallError`]s whose kind
//! names the reason (`DocumentNotFound`, `VersionConflict`,
//! `CollectionNotFound`, ...).
//!
//! ```no_run
//! use abi_sdk_core::documents::{CollectionSpec, Data, DocumentClient, FieldSpec, FindQuery, Predicate, Value};
//! # async fn demo(docs: DocumentClient) -> Result<(), abi_sdk_core::CallError> {
//! docs.ensure_collection(CollectionSpec::new("orders").field(FieldSpec::new("status", "string").indexed()))
//!     .await?;
//! let mut data = Data::new();
//! data.insert("status".into(), Value::from("open"));
//! let created = docs.put("orders", "o-1", data.clone(), Some(0)).await?; // create only
//! data.insert("status".into(), Value::from("paid"));
//! docs.put("orders", "o-1", data, Some(created.version)).await?; // compare-and-swap
//! let open = docs
//!     .find("orders", FindQuery { where_: vec![Predicate::new("status", "eq", "open")], ..Default::default() })
//!     .await?;
//! assert!(open.items.is_empty());
//! # Ok(()) }
//! ```

mod batch;
mod decided;
pub mod json;
mod put_many;

pub use batch::{BatchError, BatchWrite};
pub use decided::{Deciding, Stored};
pub use put_many::{IN_FLIGHT, MAX_GROUP, PutQueue};

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use abi_document_model::pb as convert;
pub use abi_document_model::{
    CollectionSpec, Data, Datetime, Document, FieldSpec, FindQuery, OrderBy, Page, Predicate, Value,
};

/// A JSON object as document data (integers stay integers, as the
/// reference stores them); what `abictl docs put` sends.
pub fn data_from_json(object: &serde_json::Map<String, serde_json::Value>) -> Data {
    json::to_data(object)
}
use abi_proto::document::v1 as pb;
use abi_wire::documents::{self, DocumentRpc};
use futures::Stream;
use prost::Message as _;

use crate::error::{CallError, CallErrorKind};
use crate::token::TokenSource;
use crate::transport::{Link, Transport};

/// The deadline of one document call unless set otherwise.
pub const DEFAULT_DOCUMENT_TIMEOUT: Duration = Duration::from_secs(10);

/// A client of the document service, bound to one namespace.
///
/// Cheap to clone; every call carries the token of the identity it was built
/// with.
#[derive(Clone, Debug)]
pub struct DocumentClient {
    transport: Transport,
    namespace: Arc<str>,
    /// Whether batches were found unserved, shared by clones.
    batches: Arc<batch::Support>,
}

impl DocumentClient {
    /// A client over `nats`, signing with `token`, bound to `namespace`.
    pub fn new(nats: async_nats::Client, token: TokenSource, namespace: impl Into<String>) -> Self {
        Self::with_transport(
            Transport::new(Link::Nats(nats), Arc::new(token), DEFAULT_DOCUMENT_TIMEOUT),
            namespace,
        )
    }

    /// A client over `nats` signing with a token source shared with its
    /// caller (a job client reads run records with the token it triggers
    /// with), bound to `namespace`.
    pub fn with_shared_token(
        nats: async_nats::Client,
        token: Arc<TokenSource>,
        namespace: impl Into<String>,
    ) -> Self {
        Self::with_transport(
            Transport::new(Link::Nats(nats), token, DEFAULT_DOCUMENT_TIMEOUT),
            namespace,
        )
    }

    pub(crate) fn with_transport(transport: Transport, namespace: impl Into<String>) -> Self {
        Self {
            transport,
            namespace: Arc::from(namespace.into()),
            batches: Arc::default(),
        }
    }

    /// The same client with a deadline of `timeout` per call (default
    /// [`DEFAULT_DOCUMENT_TIMEOUT`]).
    pub fn request_timeout(self, timeout: Duration) -> Self {
        Self {
            transport: Transport::new(
                self.transport.link().clone(),
                self.transport.token(),
                timeout,
            ),
            namespace: self.namespace,
            batches: self.batches,
        }
    }

    /// The same client bound to `namespace` (to read another module's
    /// documents; writes there need the service's permission).
    pub fn for_namespace(&self, namespace: impl Into<String>) -> Self {
        Self {
            transport: self.transport.clone(),
            namespace: Arc::from(namespace.into()),
            batches: self.batches.clone(),
        }
    }

    /// The token source this client signs with, shared (not copied): a
    /// client built from it (a job client of another module's run records)
    /// signs as this one does.
    pub fn token_source(&self) -> Arc<TokenSource> {
        self.transport.token()
    }

    /// The namespace this client is bound to.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    async fn call<R: DocumentRpc>(&self, mut request: R) -> Result<R::Response, CallError> {
        request.set_context(self.transport.context());
        let subject = documents::operation(R::OPERATION);
        self.transport
            .exchange(&subject, request.encode_to_vec(), None)
            .await
    }

    /// Declares `spec`'s collection, or merges `spec` into its declaration.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a bad spec (or a declared type that would change).
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a cancelled call may still have been applied; repeating it is harmless.
    pub async fn ensure_collection(&self, spec: CollectionSpec) -> Result<(), CallError> {
        self.call(pb::EnsureCollectionRequest {
            namespace: self.namespace.to_string(),
            spec: Some(convert::spec_to_pb(&spec)),
            ..Default::default()
        })
        .await
        .map(drop)
    }

    /// Deletes a collection and its documents.
    ///
    /// # Errors
    ///
    /// `CollectionNotFound` when there is none.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a cancelled call may still have been applied (a repeat then answers `CollectionNotFound`).
    pub async fn drop_collection(&self, collection: &str) -> Result<(), CallError> {
        self.call(pb::DropCollectionRequest {
            namespace: self.namespace.to_string(),
            collection: collection.to_owned(),
            ..Default::default()
        })
        .await
        .map(drop)
    }

    /// The namespace's collections, sorted.
    ///
    /// # Errors
    ///
    /// Transport failures and refusals as [`CallError`]s.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn collections(&self) -> Result<Vec<String>, CallError> {
        let reply = self
            .call(pb::CollectionsRequest {
                namespace: self.namespace.to_string(),
                ..Default::default()
            })
            .await?;
        Ok(reply.collections)
    }

    /// A collection's merged declaration.
    ///
    /// # Errors
    ///
    /// `CollectionNotFound` when there is none.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn collection_spec(&self, collection: &str) -> Result<CollectionSpec, CallError> {
        let reply = self
            .call(pb::CollectionSpecRequest {
                namespace: self.namespace.to_string(),
                collection: collection.to_owned(),
                ..Default::default()
            })
            .await?;
        Ok(convert::spec_from_pb(&reply.spec.unwrap_or_default()))
    }

    /// Every namespace holding a collection (platform identities only).
    ///
    /// # Errors
    ///
    /// `PermissionDenied` for a module identity.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn namespaces(&self) -> Result<Vec<String>, CallError> {
        Ok(self
            .call(pb::NamespacesRequest::default())
            .await?
            .namespaces)
    }

    /// Writes a whole document. `if_version`: `None` writes unconditionally,
    /// `Some(0)` only creates, `Some(n)` writes only over version `n`.
    ///
    /// # Errors
    ///
    /// `VersionConflict` when `if_version` does not match, `UniqueViolation`,
    /// `CollectionNotFound`, `InvalidArgument`.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a cancelled call may still have been written; read the document back (or repeat with `if_version`) to learn.
    pub async fn put(
        &self,
        collection: &str,
        id: &str,
        data: Data,
        if_version: Option<i64>,
    ) -> Result<Document, CallError> {
        let reply: pb::PutResponse = self.send_put(collection, id, &data, if_version).await?;
        document(reply.document)
    }

    /// [`put`](Self::put) for a caller that keeps what it wrote (a record
    /// it writes again later): the data is borrowed, not cloned, and the
    /// answer is the stored document's version and stamps, its data (what
    /// was sent) skipped rather than decoded.
    ///
    /// # Errors
    ///
    /// As [`put`](Self::put).
    ///
    /// # Cancel safety
    ///
    /// As [`put`](Self::put): not cancel safe.
    pub async fn put_ref(
        &self,
        collection: &str,
        id: &str,
        data: &Data,
        if_version: Option<i64>,
    ) -> Result<Written, CallError> {
        let reply: documents::PutStamped = self.send_put(collection, id, data, if_version).await?;
        Written::from_stamps(reply.document)
    }

    /// Sends a put, its data written straight into the request, and reads
    /// the reply as `Resp` (the whole `PutResponse`, or its stamps).
    async fn send_put<Resp>(
        &self,
        collection: &str,
        id: &str,
        data: &Data,
        if_version: Option<i64>,
    ) -> Result<Resp, CallError>
    where
        Resp: prost::Message + Default + abi_wire::rpc::Reply,
    {
        let payload = put_request(
            Some(self.transport.context()),
            &self.namespace,
            collection,
            id,
            data,
            if_version,
        );
        let subject = documents::operation(pb::PutRequest::OPERATION);
        self.transport
            .exchange(&subject, payload, None)
            .await
            .map_err(|e| self.name_missing(e, collection, id))
    }

    /// Reads one document.
    ///
    /// # Errors
    ///
    /// `DocumentNotFound` when there is none.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn get(&self, collection: &str, id: &str) -> Result<Document, CallError> {
        let reply = self
            .call(pb::GetRequest {
                namespace: self.namespace.to_string(),
                collection: collection.to_owned(),
                id: id.to_owned(),
                ..Default::default()
            })
            .await
            .map_err(|e| self.name_missing(e, collection, id))?;
        document(reply.document)
    }

    /// Names what is missing: the service answers `DOCUMENT_NOT_FOUND` and
    /// `COLLECTION_NOT_FOUND` with the code alone (as the reference).
    fn name_missing(&self, e: CallError, collection: &str, id: &str) -> CallError {
        let ns = &self.namespace;
        match e.kind() {
            CallErrorKind::DocumentNotFound => e.with_message(format!(
                "no document {id:?} in collection {ns}/{collection}"
            )),
            CallErrorKind::CollectionNotFound => {
                e.with_message(format!("no collection {ns}/{collection} (ensure it first)"))
            }
            _ => e,
        }
    }

    /// Reads one document, `None` when there is none.
    ///
    /// # Errors
    ///
    /// Refusals other than `DocumentNotFound`.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn try_get(&self, collection: &str, id: &str) -> Result<Option<Document>, CallError> {
        match self.get(collection, id).await {
            Ok(doc) => Ok(Some(doc)),
            Err(e) if e.kind() == CallErrorKind::DocumentNotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Deletes one document; with `if_version`, only at that version.
    ///
    /// # Errors
    ///
    /// `VersionConflict` when `if_version` does not match.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a cancelled call may still have deleted the document.
    pub async fn delete(
        &self,
        collection: &str,
        id: &str,
        if_version: Option<i64>,
    ) -> Result<(), CallError> {
        self.call(pb::DeleteRequest {
            namespace: self.namespace.to_string(),
            collection: collection.to_owned(),
            id: id.to_owned(),
            if_version,
            ..Default::default()
        })
        .await
        .map(drop)
        .map_err(|e| self.name_missing(e, collection, id))
    }

    /// One page of the documents matching `query`.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a bad query or a cursor of another query.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn find(&self, collection: &str, query: FindQuery) -> Result<Page, CallError> {
        let reply = self
            .call(pb::FindRequest {
                namespace: self.namespace.to_string(),
                collection: collection.to_owned(),
                r#where: convert::where_to_pb(&query.where_),
                order_by: query.order_by.as_ref().map(convert::order_to_pb),
                limit: Some(i32::try_from(query.limit).unwrap_or(i32::MAX)),
                cursor: query.cursor,
                max_bytes: query.max_bytes,
                ..Default::default()
            })
            .await?;
        let items = reply
            .items
            .into_iter()
            .map(|d| document(Some(d)))
            .collect::<Result<_, _>>()?;
        Ok(Page {
            items,
            cursor: reply.cursor,
        })
    }

    /// Every document matching `query`, page after page (each of at most
    /// `query.limit`), until the service says there is no more.
    pub fn find_all(
        &self,
        collection: &str,
        query: FindQuery,
    ) -> impl Stream<Item = Result<Document, CallError>> + Send + '_ {
        let collection = collection.to_owned();
        let state = (query, VecDeque::new(), false);
        futures::stream::unfold(state, move |(mut query, mut buffered, mut done)| {
            let collection = collection.clone();
            async move {
                loop {
                    if let Some(doc) = buffered.pop_front() {
                        return Some((Ok(doc), (query, buffered, done)));
                    }
                    if done {
                        return None;
                    }
                    match self.find(&collection, query.clone()).await {
                        Ok(page) => {
                            buffered.extend(page.items);
                            done = page.cursor.is_none();
                            query.cursor = page.cursor;
                        }
                        Err(e) => return Some((Err(e), (query, buffered, true))),
                    }
                }
            }
        })
    }

    /// How many documents match `where_`.
    ///
    /// # Errors
    ///
    /// `InvalidArgument` for a bad predicate.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn count(&self, collection: &str, where_: Vec<Predicate>) -> Result<i64, CallError> {
        let reply = self
            .call(pb::CountRequest {
                namespace: self.namespace.to_string(),
                collection: collection.to_owned(),
                r#where: convert::where_to_pb(&where_),
                ..Default::default()
            })
            .await?;
        Ok(reply.count)
    }
}

/// What [`DocumentClient::put_ref`] answers: the document as stored, but
/// its data, which is what the caller sent. The stamps are kept as the
/// reply's text and read when asked for: the job host, which writes most,
/// asks only for the version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The version written (1 when created, plus one per write).
    pub version: i64,
    created_at: String,
    updated_at: String,
}

impl Written {
    /// A put's answer from its reply's stamps; `Decode` when there are none.
    fn from_stamps(stamps: Option<documents::DocumentStamps>) -> Result<Self, CallError> {
        Self::from_parts(stamps.map(|d| (d.version, d.created_at, d.updated_at)))
    }

    /// A put's answer from its version and stamps; `Decode` when there are
    /// none.
    fn from_parts(stamps: Option<(i64, String, String)>) -> Result<Self, CallError> {
        let (version, created_at, updated_at) = stamps
            .ok_or_else(|| CallError::new(CallErrorKind::Decode, "reply without its document"))?;
        Ok(Self {
            version,
            created_at,
            updated_at,
        })
    }

    /// When the document was first written.
    ///
    /// # Errors
    ///
    /// [`CallErrorKind::Decode`] when the reply's stamp is not an ISO datetime.
    pub fn created_at(&self) -> Result<Datetime, CallError> {
        stamp(&self.created_at)
    }

    /// When it was written now.
    ///
    /// # Errors
    ///
    /// As [`created_at`](Self::created_at).
    pub fn updated_at(&self) -> Result<Datetime, CallError> {
        stamp(&self.updated_at)
    }
}

/// A reply's stamp read as a datetime.
fn stamp(text: &str) -> Result<Datetime, CallError> {
    Datetime::parse_iso(text).map_err(|e| {
        CallError::new(
            CallErrorKind::Decode,
            format!("malformed document in reply: {e}"),
        )
    })
}

/// Bytes a put's request reserves for its data (a job run's record takes
/// about half of it); a bigger document grows the request as it is written.
const PUT_DATA_ROOM: usize = 1024;

/// The bytes of a `PutRequest`, the same prost writes for the request
/// holding `data` converted (checked in the tests), without building that
/// copy of the data first.
fn put_request(
    context: Option<abi_proto::common::v1::CallContext>,
    namespace: &str,
    collection: &str,
    id: &str,
    data: &Data,
    if_version: Option<i64>,
) -> Vec<u8> {
    let head = pb::PutRequest {
        context,
        namespace: namespace.to_owned(),
        collection: collection.to_owned(),
        id: id.to_owned(),
        data: None,
        if_version: None,
    };
    // Room for most documents' data up front: it is written in one pass,
    // its size unknown until written, and growing from the head's size
    // would move the request two or three times.
    let mut payload = Vec::with_capacity(head.encoded_len() + PUT_DATA_ROOM);
    head.encode_raw(&mut payload);
    abi_document_model::encode::encode_data_field(
        documents::PUT_REQUEST_DATA_TAG,
        data,
        &mut payload,
    );
    if let Some(version) = if_version {
        prost::encoding::int64::encode(
            documents::PUT_REQUEST_IF_VERSION_TAG,
            &version,
            &mut payload,
        );
    }
    payload
}

fn document(doc: Option<pb::Document>) -> Result<Document, CallError> {
    let doc =
        doc.ok_or_else(|| CallError::new(CallErrorKind::Decode, "reply without its document"))?;
    convert::document_from_pb_owned(doc).map_err(|e| {
        CallError::new(
            CallErrorKind::Decode,
            format!("malformed document in reply: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_put_request_is_the_bytes_prost_writes() {
        let mut data = Data::new();
        data.insert("status".into(), Value::from("RUNNING"));
        data.insert("attempt".into(), Value::Int(2));
        data.insert(
            "nested".into(),
            Value::List(vec![Value::Null, Value::Float(1.5)]),
        );
        let context = abi_proto::common::v1::CallContext {
            trace_id: "t-1".into(),
            timeout_ms: 10_000,
            ..Default::default()
        };
        for (data, if_version) in [
            (data.clone(), Some(3)),
            (data, Some(0)),
            (Data::new(), None),
            (Data::new(), Some(-1)),
        ] {
            let ours = put_request(
                Some(context.clone()),
                "ns",
                "runs",
                "r-1",
                &data,
                if_version,
            );
            let prosts = pb::PutRequest {
                context: Some(context.clone()),
                namespace: "ns".into(),
                collection: "runs".into(),
                id: "r-1".into(),
                data: Some(convert::data_to_pb(&data)),
                if_version,
            }
            .encode_to_vec();
            assert_eq!(ours, prosts, "{if_version:?}");
        }
    }
}
