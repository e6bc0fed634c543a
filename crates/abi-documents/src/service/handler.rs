//! One request, from bytes to reply bytes: the token, the operation's rights,
//! the protobuf body, the reference's checks in its order, the store, and the
//! reply (or the refusal, with the code the reference sends).
//!
//! Free of NATS: [`Handler::handle`] takes the body and the two headers it
//! reads, so the same code serves the NATS endpoints and in-process tests.

use std::sync::Arc;

use abi_document_model::decode::{IncomingPut, IncomingPutMany};
use abi_document_model::pb::{
    document_to_pb, order_from_pb, spec_from_pb, spec_to_pb, where_from_pb,
};
use abi_document_model::validate::{
    validate_data, validate_max_bytes, validate_name, validate_query, validate_spec,
    validate_version,
};
use abi_document_model::{
    Data, Datetime, Decided, Document, DocumentError, DocumentStore, FindQuery, Write,
};
use abi_overflow::OverflowHost;
use abi_process::Secret;
use abi_proto::common::v1::CallError;
use abi_proto::document::v1 as pb;
use abi_wire::ErrorCode;
use abi_wire::documents::{self, DocumentRpc, Operation};
use abi_wire::rpc::Reply;
use prost::Message as _;

/// What the handler needs besides the store.
#[derive(Debug, Clone)]
pub struct HandlerConfig {
    /// The project secret tokens are checked with (module keys derive from it).
    pub secret: Secret,
    /// Identities allowed to call the cross-namespace operations.
    pub admin_identities: Vec<String>,
    /// Whether a module identity may write only its own namespace (reads stay
    /// open). Off by default, as the reference (a trusted-caller convention).
    pub strict_namespaces: bool,
}

/// One request as the handler sees it.
#[derive(Debug)]
pub struct Request<'a> {
    /// The operation its subject names.
    pub operation: Operation,
    /// The `Nats-Auth-Token` header, if any.
    pub token: Option<&'a str>,
    /// The transfer id of a body uploaded first (the `Abi-Overflow-Request`
    /// header), read from the overflow host before decoding.
    pub upload: Option<&'a str>,
    /// The request's headers (the token and trace context an upload is
    /// read with).
    pub headers: Option<&'a async_nats::HeaderMap>,
    /// Whether a reply above the broker's limit will be parked for the
    /// caller rather than refused (it accepts overflow, and this process
    /// has an overflow host).
    pub replies_overflow: bool,
    /// The protobuf body.
    pub body: &'a [u8],
    /// The broker's max payload on the connection it arrived on, which sizes
    /// `find` pages.
    pub max_payload: Option<usize>,
    /// For a put, told the document as it will be stored once the store
    /// decided to store it, before the commit is durable (the
    /// [`abi_wire::documents::DECIDED_HEADER`] extension); other operations
    /// ignore it.
    pub decided: Option<Decided>,
}

/// The encoded reply, and the code when it is a refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The protobuf reply.
    pub payload: Vec<u8>,
    /// The refusal's code (sent in the `Abi-Error-Code` header too).
    pub code: Option<ErrorCode>,
}

/// The request handler over a store.
#[derive(Debug)]
pub struct Handler<S> {
    store: Arc<S>,
    config: HandlerConfig,
    /// Checks callers' tokens with the config's secret, remembering those
    /// that checked.
    verifier: abi_auth::Verifier,
    /// This process's overflow host, when it reads uploads and parks replies.
    overflow: Option<Arc<OverflowHost>>,
}

/// A successful reply as bytes.
trait Encode {
    /// The refusal's code when the reply is one.
    fn code(&self) -> Option<ErrorCode>;
    /// The protobuf bytes.
    fn into_payload(self) -> Vec<u8>;
}

impl<T: prost::Message + Reply> Encode for T {
    fn code(&self) -> Option<ErrorCode> {
        self.call_error()
            .and_then(|error| ErrorCode::from_wire(&error.code))
    }

    fn into_payload(self) -> Vec<u8> {
        self.encode_to_vec()
    }
}

/// A put's or a get's answer, `PutResponse` and `GetResponse` alike
/// (`document = 2`, no error), written straight from the document rather
/// than through a copy of it in the generated message.
struct DocumentReply(Document);

impl Encode for DocumentReply {
    fn code(&self) -> Option<ErrorCode> {
        None
    }

    fn into_payload(self) -> Vec<u8> {
        let mut payload = Vec::new();
        abi_document_model::encode::encode_document_field(
            abi_wire::documents::REPLY_DOCUMENT_TAG,
            &self.0,
            &mut payload,
        );
        payload
    }
}

/// A successful reply the store already wrote as protobuf (a get's).
struct EncodedReply(Vec<u8>);

impl Encode for EncodedReply {
    fn code(&self) -> Option<ErrorCode> {
        None
    }

    fn into_payload(self) -> Vec<u8> {
        self.0
    }
}

/// The message of an unauthenticated call (the reference's).
pub const UNAUTHENTICATED_MESSAGE: &str = "missing or invalid auth token";

impl<S: DocumentStore> Handler<S> {
    /// A handler serving `store`.
    pub fn new(store: Arc<S>, config: HandlerConfig) -> Self {
        let verifier = abi_auth::Verifier::new(config.secret.expose());
        Self {
            store,
            config,
            verifier,
            overflow: None,
        }
    }

    /// The same handler reading overflowed requests through `host` (and
    /// its serving side parking the replies too large to send).
    #[must_use]
    pub fn with_overflow(mut self, host: Arc<OverflowHost>) -> Self {
        self.overflow = Some(host);
        self
    }

    /// The overflow host, when there is one.
    pub fn overflow(&self) -> Option<&Arc<OverflowHost>> {
        self.overflow.as_ref()
    }

    /// The store served.
    pub fn store(&self) -> &Arc<S> {
        &self.store
    }

    /// Handles one request.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a write may be stored without its reply. The
    /// endpoints run each request in its own task.
    pub async fn handle(&self, request: Request<'_>) -> Answer {
        use Operation as Op;
        match request.operation {
            Op::EnsureCollection => self.serve(request, Self::ensure_collection).await,
            Op::DropCollection => self.serve(request, Self::drop_collection).await,
            Op::Collections => self.serve(request, Self::collections).await,
            Op::CollectionSpec => self.serve(request, Self::collection_spec).await,
            Op::Put => {
                self.serve_decoded::<pb::PutRequest, _, _, _, _>(
                    request,
                    IncomingPut::decode,
                    Self::put,
                )
                .await
            }
            Op::Get => self.serve(request, Self::get).await,
            Op::Delete => self.serve(request, Self::delete).await,
            Op::Find => self.serve(request, Self::find).await,
            Op::Count => self.serve(request, Self::count).await,
            Op::Namespaces => self.serve(request, Self::namespaces).await,
            // Boxed: these two hold several operations' futures at once,
            // and inline they would size every request's task for them.
            Op::Batch => Box::pin(self.serve(request, Self::batch)).await,
            Op::PutMany => {
                Box::pin(self.serve_decoded::<pb::PutManyRequest, _, _, _, _>(
                    request,
                    IncomingPutMany::decode,
                    Self::put_many,
                ))
                .await
            }
        }
    }

    /// Authenticates, checks the operation's rights, decodes, runs `op`, and
    /// encodes whatever comes out.
    async fn serve<'h, R, F, Fut, Out>(&'h self, request: Request<'_>, op: F) -> Answer
    where
        R: DocumentRpc,
        F: FnOnce(&'h Self, Call, R) -> Fut,
        Fut: Future<Output = Result<Out, DocumentError>>,
        Out: Encode,
    {
        self.serve_decoded::<R, R, F, Fut, Out>(request, |body| R::decode(body), op)
            .await
    }

    /// [`Self::serve`], the request decoded by `decode` into `D` (a put read
    /// straight into the model) rather than into the message `R` whose
    /// answer a refusal takes.
    async fn serve_decoded<'h, R, D, F, Fut, Out>(
        &'h self,
        request: Request<'_>,
        decode: fn(&[u8]) -> Result<D, prost::DecodeError>,
        op: F,
    ) -> Answer
    where
        R: DocumentRpc,
        F: FnOnce(&'h Self, Call, D) -> Fut,
        Fut: Future<Output = Result<Out, DocumentError>>,
        Out: Encode,
    {
        let Some(identity) = request
            .token
            .and_then(|token| self.verifier.verify(token, None).ok())
        else {
            return refusal::<R>(ErrorCode::Unauthenticated, UNAUTHENTICATED_MESSAGE);
        };
        if request.operation.is_admin() && !self.is_admin(&identity) {
            let message = format!(
                "{} needs a platform service identity",
                request.operation.as_str()
            );
            return refusal::<R>(ErrorCode::PermissionDenied, &message);
        }
        let uploaded;
        let body = match (request.upload, &self.overflow) {
            (None, _) => request.body,
            (Some(_), None) => {
                return refusal::<R>(
                    ErrorCode::Unavailable,
                    "This process cannot read overflowed requests",
                );
            }
            // Boxed: rare, and inline it would size every request's task.
            (Some(id), Some(host)) => match Box::pin(host.fetch(id, request.headers)).await {
                Ok(bytes) => {
                    uploaded = bytes;
                    &uploaded[..]
                }
                // The reference's words: the code alone, but for a bad
                // argument, whose message is kept.
                Err(err) if err.code == ErrorCode::InvalidArgument => {
                    return refusal::<R>(err.code, &err.to_string());
                }
                Err(err) => return refusal::<R>(err.code, err.code.as_str()),
            },
        };
        let decoded = match decode(body) {
            Ok(decoded) => decoded,
            Err(error) => {
                let message = format!("Malformed protobuf: {error}");
                return refusal::<R>(ErrorCode::InvalidArgument, &message);
            }
        };
        let call = Call {
            identity,
            page_bytes: request
                .max_payload
                .map(|limit| (limit / abi_wire::documents::PAGE_SHARE) as i64),
            // A reply that can be parked need not fit.
            max_payload: request.max_payload.filter(|_| !request.replies_overflow),
            request_bytes: body.len(),
            decided: request.decided,
        };
        match op(self, call, decoded).await {
            Ok(reply) => Answer {
                // A batch refused by one of its writes answers its index
                // beside the refusal.
                code: reply.code(),
                payload: reply.into_payload(),
            },
            Err(error) => refused::<R>(&error),
        }
    }

    fn is_admin(&self, identity: &str) -> bool {
        self.config.admin_identities.iter().any(|a| a == identity)
    }

    /// In strict mode, a write to another module's namespace is refused:
    /// first-party and admin identities may write anywhere.
    fn check_write(&self, call: &Call, namespace: &str) -> Result<(), DocumentError> {
        if !self.config.strict_namespaces
            || call.identity == namespace
            || self.is_admin(&call.identity)
            || abi_auth::is_first_party(&call.identity)
        {
            return Ok(());
        }
        Err(DocumentError::PermissionDenied(format!(
            "identity {} may write only its own namespace",
            call.identity
        )))
    }

    async fn ensure_collection(
        &self,
        call: Call,
        r: pb::EnsureCollectionRequest,
    ) -> Result<pb::EnsureCollectionResponse, DocumentError> {
        validate_name(&r.namespace)?;
        self.check_write(&call, &r.namespace)?;
        let spec = spec_from_pb(&r.spec.unwrap_or_default());
        validate_spec(&spec)?;
        self.store.ensure_collection(&r.namespace, spec).await?;
        Ok(pb::EnsureCollectionResponse::default())
    }

    async fn drop_collection(
        &self,
        call: Call,
        r: pb::DropCollectionRequest,
    ) -> Result<pb::DropCollectionResponse, DocumentError> {
        validate_name(&r.namespace)?;
        self.check_write(&call, &r.namespace)?;
        validate_name(&r.collection)?;
        self.store
            .drop_collection(&r.namespace, &r.collection)
            .await?;
        Ok(pb::DropCollectionResponse::default())
    }

    async fn collections(
        &self,
        _call: Call,
        r: pb::CollectionsRequest,
    ) -> Result<pb::CollectionsResponse, DocumentError> {
        validate_name(&r.namespace)?;
        let collections = self.store.collections(&r.namespace).await?;
        Ok(pb::CollectionsResponse {
            collections,
            ..Default::default()
        })
    }

    async fn collection_spec(
        &self,
        _call: Call,
        r: pb::CollectionSpecRequest,
    ) -> Result<pb::CollectionSpecResponse, DocumentError> {
        validate_name(&r.namespace)?;
        validate_name(&r.collection)?;
        let spec = self
            .store
            .collection_spec(&r.namespace, &r.collection)
            .await?;
        Ok(pb::CollectionSpecResponse {
            spec: Some(spec_to_pb(&spec)),
            ..Default::default()
        })
    }

    async fn namespaces(
        &self,
        _call: Call,
        _r: pb::NamespacesRequest,
    ) -> Result<pb::NamespacesResponse, DocumentError> {
        let namespaces = self.store.namespaces().await?;
        Ok(pb::NamespacesResponse {
            namespaces,
            ..Default::default()
        })
    }

    async fn put(&self, call: Call, r: IncomingPut) -> Result<DocumentReply, DocumentError> {
        let put = self.checked_put(&call, r)?;
        if let Some(limit) = call.max_payload
            && !reply_surely_fits(call.request_bytes, limit)
        {
            check_put_reply_fits(&put.id, &put.data, limit)?;
        }
        Ok(DocumentReply(self.store_put(put, call.decided).await?))
    }

    /// Stores a checked put, telling `decided` (when given) the document
    /// before its commit is durable.
    async fn store_put(
        &self,
        put: CheckedPut,
        decided: Option<Decided>,
    ) -> Result<Document, DocumentError> {
        let CheckedPut {
            namespace,
            collection,
            id,
            data,
            if_version,
        } = put;
        match decided {
            None => {
                self.store
                    .put(&namespace, &collection, &id, data, if_version)
                    .await
            }
            Some(decided) => {
                self.store
                    .put_deciding(&namespace, &collection, &id, data, if_version, decided)
                    .await
            }
        }
    }

    /// A put checked as the reference checks it, in its order.
    fn checked_put(&self, call: &Call, mut put: IncomingPut) -> Result<CheckedPut, DocumentError> {
        validate_name(&put.request.namespace)?;
        self.check_write(call, &put.request.namespace)?;
        let data = put.take_body()?;
        let r = put.request;
        validate_data(&data, None)?;
        validate_version(r.if_version)?;
        validate_name(&r.collection)?;
        validate_name(&r.id)?;
        Ok(CheckedPut {
            namespace: r.namespace,
            collection: r.collection,
            id: r.id,
            data,
            if_version: r.if_version,
        })
    }

    /// Checks and stores each put on its own, as [`Self::put`] does, all of
    /// them handed to the store at once (SQLite commits them together); a
    /// put refused leaves the others stored. Each answer is the document's
    /// stamps without its data, so the reply is never larger than the
    /// request's puts' names and stamps.
    async fn put_many(
        &self,
        call: Call,
        r: IncomingPutMany,
    ) -> Result<pb::PutManyResponse, DocumentError> {
        check_count("a put_many request", "puts", r.puts.len())?;
        let mut named = std::collections::HashSet::with_capacity(r.puts.len());
        for put in r.puts.iter().map(|put| &put.request) {
            if !named.insert((&put.namespace, &put.collection, &put.id)) {
                return Err(DocumentError::InvalidArgument(format!(
                    "a put_many request writes document {:?} twice: send the second in another request",
                    put.id
                )));
            }
        }
        let stored = futures::future::join_all(r.puts.into_iter().map(|put| {
            let checked = self.checked_put(&call, put);
            async move { self.store_put(checked?, None).await }
        }))
        .await;
        Ok(pb::PutManyResponse {
            results: stored
                .into_iter()
                .map(|result| match result {
                    Ok(doc) => stamped_reply(&doc),
                    Err(error) => pb::PutResponse {
                        error: Some(call_error(&error)),
                        ..Default::default()
                    },
                })
                .collect(),
            ..Default::default()
        })
    }

    /// Checks every write as its single operation checks it, then stores
    /// them as one transaction; a refused write is named by its index and
    /// nothing is stored.
    async fn batch(
        &self,
        call: Call,
        r: pb::BatchRequest,
    ) -> Result<pb::BatchResponse, DocumentError> {
        check_count("a batch", "writes", r.writes.len())?;
        // Each answer is at most its put's bound; their sum, that of the
        // whole request.
        if let Some(limit) = call.max_payload
            && !reply_surely_fits(call.request_bytes, limit)
        {
            return Err(DocumentError::PayloadTooLarge(
                BATCH_REPLY_TOO_LARGE.to_owned(),
            ));
        }
        let mut writes = Vec::with_capacity(r.writes.len());
        for (index, write) in r.writes.into_iter().enumerate() {
            match self.batch_write(&call, write) {
                Ok(write) => writes.push(write),
                Err(error) => return Ok(batch_refused(Some(index), &error)),
            }
        }
        match self.store.batch(writes).await {
            Ok(documents) => Ok(pb::BatchResponse {
                results: documents
                    .iter()
                    .map(|document| pb::BatchResult {
                        document: document.as_ref().map(document_to_pb),
                    })
                    .collect(),
                ..Default::default()
            }),
            Err(failure) => Ok(batch_refused(failure.index, &failure.error)),
        }
    }

    /// One write of a batch, checked in its single operation's order.
    fn batch_write(&self, call: &Call, write: pb::BatchWrite) -> Result<Write, DocumentError> {
        use pb::batch_write::Write as W;
        match write.write {
            Some(W::Put(r)) => Ok(self.checked_put(call, r.into())?.into()),
            Some(W::Delete(r)) => {
                validate_name(&r.namespace)?;
                self.check_write(call, &r.namespace)?;
                validate_version(r.if_version)?;
                validate_name(&r.collection)?;
                validate_name(&r.id)?;
                Ok(Write::Delete {
                    namespace: r.namespace,
                    collection: r.collection,
                    id: r.id,
                    if_version: r.if_version,
                })
            }
            None => Err(DocumentError::InvalidArgument(
                "a batch write is a put or a delete".to_owned(),
            )),
        }
    }

    async fn get(&self, _call: Call, r: pb::GetRequest) -> Result<EncodedReply, DocumentError> {
        validate_name(&r.namespace)?;
        validate_name(&r.collection)?;
        validate_name(&r.id)?;
        let payload = self
            .store
            .get_encoded(
                &r.namespace,
                &r.collection,
                &r.id,
                abi_wire::documents::REPLY_DOCUMENT_TAG,
            )
            .await?;
        Ok(EncodedReply(payload))
    }

    async fn delete(
        &self,
        call: Call,
        r: pb::DeleteRequest,
    ) -> Result<pb::DeleteResponse, DocumentError> {
        validate_name(&r.namespace)?;
        self.check_write(&call, &r.namespace)?;
        validate_version(r.if_version)?;
        validate_name(&r.collection)?;
        validate_name(&r.id)?;
        self.store
            .delete(&r.namespace, &r.collection, &r.id, r.if_version)
            .await?;
        Ok(pb::DeleteResponse::default())
    }

    async fn find(
        &self,
        call: Call,
        r: pb::FindRequest,
    ) -> Result<pb::FindResponse, DocumentError> {
        validate_name(&r.namespace)?;
        let where_ = where_from_pb(&r.r#where)?;
        let order_by = order_from_pb(r.order_by.as_ref());
        let limit = r
            .limit
            .map_or(abi_document_model::query::DEFAULT_FIND_LIMIT, i64::from);
        // The smaller of the caller's budget and the broker's share, so the
        // reply fits in one message.
        let max_bytes = match (r.max_bytes, call.page_bytes) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        validate_query(&where_, order_by.as_ref(), limit)?;
        validate_max_bytes(max_bytes)?;
        validate_name(&r.collection)?;
        let query = FindQuery {
            where_,
            order_by,
            limit,
            cursor: r.cursor,
            max_bytes,
        };
        let page = self.store.find(&r.namespace, &r.collection, query).await?;
        Ok(pb::FindResponse {
            items: page.items.iter().map(document_to_pb).collect(),
            cursor: page.cursor,
            ..Default::default()
        })
    }

    async fn count(
        &self,
        _call: Call,
        r: pb::CountRequest,
    ) -> Result<pb::CountResponse, DocumentError> {
        validate_name(&r.namespace)?;
        let where_ = where_from_pb(&r.r#where)?;
        validate_query(&where_, None, abi_document_model::query::DEFAULT_FIND_LIMIT)?;
        validate_name(&r.collection)?;
        let count = self
            .store
            .count(&r.namespace, &r.collection, where_)
            .await?;
        Ok(pb::CountResponse {
            count,
            ..Default::default()
        })
    }
}

/// A put as checked, ready for the store.
struct CheckedPut {
    namespace: String,
    collection: String,
    id: String,
    data: Data,
    if_version: Option<i64>,
}

impl From<CheckedPut> for Write {
    fn from(put: CheckedPut) -> Self {
        Write::Put {
            namespace: put.namespace,
            collection: put.collection,
            id: put.id,
            data: put.data,
            if_version: put.if_version,
        }
    }
}

/// A put's answer as `put_many` gives it, and as the early word of a put
/// ([`Request::decided`]) tells it: the document's stamps without its data.
pub fn stamped_reply(doc: &Document) -> pb::PutResponse {
    pb::PutResponse {
        document: Some(pb::Document {
            id: doc.id.clone(),
            data: None,
            created_at: doc.created_at.isoformat(),
            updated_at: doc.updated_at.isoformat(),
            version: doc.version,
        }),
        ..Default::default()
    }
}

/// Who calls, and how large a `find` page may be.
#[derive(Debug)]
struct Call {
    identity: String,
    page_bytes: Option<i64>,
    /// The broker's max payload, when known: the largest reply.
    max_payload: Option<usize>,
    /// The request's encoded size.
    request_bytes: usize,
    /// A put's early word ([`Request::decided`]).
    decided: Option<Decided>,
}

/// A refusal reply of `R`'s type: `code`, `message`, not retryable (as the
/// reference marks every refusal of this service).
fn refusal<R: DocumentRpc>(code: ErrorCode, message: &str) -> Answer {
    let reply = R::Response::with_error(wire_error(code, message));
    Answer {
        payload: reply.encode_to_vec(),
        code: Some(code),
    }
}

/// The message of a put refused because its answer would not fit.
pub const PUT_REPLY_TOO_LARGE: &str = "The stored document would not fit in the reply (the broker's max payload): nothing was stored; store less, or a storage reference";

/// How many times its request's size a put's reply can be at most: a
/// datetime grows most, from its shortest accepted form (`2026-01-02T03Z`,
/// 16 bytes as a value) to its long one (32 characters, 34 bytes), about 2x.
const REPLY_GROWTH: usize = 4;
/// What a put's reply adds beyond its data: two long timestamps, the version
/// and the framing.
const REPLY_OVERHEAD_BYTES: usize = 256;

/// Whether a put of `request_bytes` gives a reply within `limit` whatever it
/// holds, so [`check_put_reply_fits`] need not build it to find out.
fn reply_surely_fits(request_bytes: usize, limit: usize) -> bool {
    request_bytes
        .saturating_mul(REPLY_GROWTH)
        .saturating_add(REPLY_OVERHEAD_BYTES)
        <= limit
}

/// Refuses, before anything is stored, a put whose reply (the stored
/// document: datetimes come back in their long form) would exceed `limit`
/// bytes: stored, it could never be read back. Timestamps and version are
/// counted at their longest.
fn check_put_reply_fits(id: &str, data: &Data, limit: usize) -> Result<(), DocumentError> {
    let longest =
        Datetime::from_unix_micros(Datetime::now().unix_micros() | 1).unwrap_or_else(Datetime::now);
    let reply = abi_document_model::encode::document_field_len(
        abi_wire::documents::REPLY_DOCUMENT_TAG,
        id,
        data,
        [&longest, &longest],
        i64::MAX,
    );
    if reply > limit {
        return Err(DocumentError::PayloadTooLarge(
            PUT_REPLY_TOO_LARGE.to_owned(),
        ));
    }
    Ok(())
}

/// The refusal for a failed operation: the message only for
/// `INVALID_ARGUMENT` (the others say their code, as the reference, so no
/// storage detail or document name leaks).
fn refused<R: DocumentRpc>(error: &DocumentError) -> Answer {
    let (code, message) = refusal_words(error);
    refusal::<R>(code, message)
}

/// The code and message a refusal of `error` sends.
fn refusal_words(error: &DocumentError) -> (ErrorCode, &str) {
    let code = error.code();
    match error {
        DocumentError::InvalidArgument(message)
        | DocumentError::PermissionDenied(message)
        | DocumentError::PayloadTooLarge(message) => (code, message),
        DocumentError::Storage(_) | DocumentError::Adapter(_) => {
            // Logged by kind only: storage messages may hold connection details.
            tracing::warn!(code = code.as_str(), "document operation failed in storage");
            (code, code.as_str())
        }
        _ => (code, code.as_str()),
    }
}

/// Refuses a batch or `put_many` of no writes or more than
/// [`documents::MAX_BATCH_WRITES`].
fn check_count(request: &str, writes: &str, count: usize) -> Result<(), DocumentError> {
    if count == 0 || count > documents::MAX_BATCH_WRITES {
        return Err(DocumentError::InvalidArgument(format!(
            "{request} holds 1 to {} {writes}, not {count}",
            documents::MAX_BATCH_WRITES
        )));
    }
    Ok(())
}

/// The `CallError` a refusal of `error` carries.
fn call_error(error: &DocumentError) -> CallError {
    let (code, message) = refusal_words(error);
    wire_error(code, message)
}

/// A refusal on the wire: `code`, `message`, not retryable (as the
/// reference marks every refusal of this service).
fn wire_error(code: ErrorCode, message: &str) -> CallError {
    CallError {
        code: code.as_str().to_owned(),
        message: message.to_owned(),
        retryable: false,
        status: None,
    }
}

/// A batch refused because of write `index` (or as a whole): nothing stored.
fn batch_refused(index: Option<usize>, error: &DocumentError) -> pb::BatchResponse {
    pb::BatchResponse {
        error: Some(call_error(error)),
        failed: index.and_then(|i| u32::try_from(i).ok()),
        ..Default::default()
    }
}

/// The message of a batch refused because its answer might not fit.
pub const BATCH_REPLY_TOO_LARGE: &str = "The batch's answer might not fit in the reply (the broker's max payload): nothing was stored; send fewer or smaller writes";

/// The reply sent instead of one too large for the broker (the reference's).
pub fn too_large(operation: Operation) -> Answer {
    use Operation as Op;
    const MESSAGE: &str = "Reply exceeds the payload limit; use streaming or a storage reference. The operation may already have completed; do not replay it automatically.";
    let code = ErrorCode::PayloadTooLarge;
    match operation {
        Op::EnsureCollection => refusal::<pb::EnsureCollectionRequest>(code, MESSAGE),
        Op::DropCollection => refusal::<pb::DropCollectionRequest>(code, MESSAGE),
        Op::Collections => refusal::<pb::CollectionsRequest>(code, MESSAGE),
        Op::CollectionSpec => refusal::<pb::CollectionSpecRequest>(code, MESSAGE),
        Op::Put => refusal::<pb::PutRequest>(code, MESSAGE),
        Op::Get => refusal::<pb::GetRequest>(code, MESSAGE),
        Op::Delete => refusal::<pb::DeleteRequest>(code, MESSAGE),
        Op::Find => refusal::<pb::FindRequest>(code, MESSAGE),
        Op::Count => refusal::<pb::CountRequest>(code, MESSAGE),
        Op::Namespaces => refusal::<pb::NamespacesRequest>(code, MESSAGE),
        Op::Batch => refusal::<pb::BatchRequest>(code, MESSAGE),
        Op::PutMany => refusal::<pb::PutManyRequest>(code, MESSAGE),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]

    use super::*;
    use abi_proto::document::v1::value::Kind;

    #[test]
    fn a_reply_is_never_more_than_its_bound_of_the_request() {
        // The shortest forms of the values that grow most on the way back.
        let shortest = [
            "20260102",
            "2026-01-02",
            "2026-01-02T03Z",
            "2026-01-02T03:04Z",
            "2026-01-02T03:04:05Z",
            "2026-01-02T03:04:05+01",
            "2026-01-02T03:04:05+01:00",
        ];
        let mut tried = Vec::new();
        for text in shortest {
            let Ok(_) = Datetime::parse_iso(text) else {
                continue;
            };
            tried.push(text);
            for count in [1usize, 10, 1000] {
                let fields = (0..count).map(|i| {
                    let value = pb::Value {
                        kind: Some(Kind::DatetimeValue(text.to_owned())),
                    };
                    (format!("{i}"), value)
                });
                let request = pb::PutRequest {
                    namespace: "n".into(),
                    collection: "c".into(),
                    id: "i".into(),
                    data: Some(pb::Data {
                        fields: fields.collect(),
                    }),
                    ..Default::default()
                };
                let request_bytes = request.encoded_len();
                let data =
                    abi_document_model::pb::data_from_pb(&request.data.clone().unwrap_or_default())
                        .expect("a valid document");
                let longest = Datetime::from_unix_micros(Datetime::now().unix_micros() | 1)
                    .unwrap_or_else(Datetime::now);
                let reply = pb::PutResponse {
                    document: Some(document_to_pb(&Document {
                        id: request.id.clone(),
                        data,
                        created_at: longest,
                        updated_at: longest,
                        version: i64::MAX,
                    })),
                    ..Default::default()
                };
                assert!(
                    reply.encoded_len() <= request_bytes * REPLY_GROWTH + REPLY_OVERHEAD_BYTES,
                    "{text} x{count}: {} > bound of {request_bytes}",
                    reply.encoded_len()
                );
                assert!(reply_surely_fits(
                    request_bytes,
                    reply.encoded_len() * 4 + 256
                ));
            }
        }
        assert!(
            tried.contains(&"2026-01-02T03Z"),
            "the shortest form: {tried:?}"
        );
        assert!(!reply_surely_fits(300_000, 1024 * 1024));
        assert!(reply_surely_fits(200_000, 1024 * 1024));
    }
}
