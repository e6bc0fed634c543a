//! The storage port: what the document service needs from a backend.
//!
//! Adapters (SQLite, PostgreSQL in `abi-documents`) are the authority on
//! validation, as the reference's shared SQL layer is: each operation checks
//! its arguments (same order, same messages) before touching storage, so a
//! decoded request can be handed straight in.

use std::future::Future;

use crate::{CollectionSpec, Data, Document, DocumentError, FindQuery, Page, Predicate};

/// One write of a [`DocumentStore::batch`], with the arguments of the single
/// operation.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// A [`DocumentStore::put`].
    Put {
        /// The namespace.
        namespace: String,
        /// The collection.
        collection: String,
        /// The document id.
        id: String,
        /// The document.
        data: Data,
        /// The expected version.
        if_version: Option<i64>,
    },
    /// A [`DocumentStore::delete`].
    Delete {
        /// The namespace.
        namespace: String,
        /// The collection.
        collection: String,
        /// The document id.
        id: String,
        /// The expected version.
        if_version: Option<i64>,
    },
}

/// Why a batch wrote nothing: the write refused, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("batch refused: {error}")]
pub struct BatchFailure {
    /// The position of the refused write; `None` when the batch failed as
    /// a whole (storage, a closed store).
    pub index: Option<usize>,
    /// Its refusal, as the single operation would answer it.
    #[source]
    pub error: DocumentError,
}

/// Told a put's document as it will be stored once the store has decided
/// to store it, before its commit is durable ([`DocumentStore::put_deciding`]).
/// Called at most once, on the store's writing thread: it should only hand
/// the stamps on.
pub struct Decided(Box<dyn FnOnce(&Document) + Send>);

impl Decided {
    /// Calls `tell` with the decided document.
    pub fn new(tell: impl FnOnce(&Document) + Send + 'static) -> Self {
        Self(Box::new(tell))
    }

    /// Tells `document` as decided.
    pub fn tell(self, document: &Document) {
        (self.0)(document);
    }
}

impl std::fmt::Debug for Decided {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Decided")
    }
}

/// A document storage backend.
///
/// One document is the unit of atomicity. `put` replaces the whole document:
/// `if_version` `None` writes unconditionally, `Some(0)` only creates, and
/// `Some(n)` writes only over version `n` (compare-and-swap); versions start
/// at 1. Every operation on a collection that was never ensured fails with
/// `COLLECTION_NOT_FOUND`.
pub trait DocumentStore: Send + Sync + 'static {
    /// Declares a collection, or merges `spec` into its declaration (new
    /// fields, indexes and unique groups; a declared type never changes).
    fn ensure_collection(
        &self,
        namespace: &str,
        spec: CollectionSpec,
    ) -> impl Future<Output = Result<(), DocumentError>> + Send;

    /// Deletes a collection with its documents and indexes.
    fn drop_collection(
        &self,
        namespace: &str,
        collection: &str,
    ) -> impl Future<Output = Result<(), DocumentError>> + Send;

    /// The namespace's collections, sorted.
    fn collections(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<Vec<String>, DocumentError>> + Send;

    /// A collection's merged declaration.
    fn collection_spec(
        &self,
        namespace: &str,
        collection: &str,
    ) -> impl Future<Output = Result<CollectionSpec, DocumentError>> + Send;

    /// Namespaces holding at least one collection, sorted.
    fn namespaces(&self) -> impl Future<Output = Result<Vec<String>, DocumentError>> + Send;

    /// Writes a whole document (see the trait's notes on `if_version`).
    fn put(
        &self,
        namespace: &str,
        collection: &str,
        id: &str,
        data: Data,
        if_version: Option<i64>,
    ) -> impl Future<Output = Result<Document, DocumentError>> + Send;

    /// [`put`](Self::put), telling `decided` the document as it will be
    /// stored as soon as the store knows it will store it unless the commit
    /// itself fails: before the commit is durable. Only the answer
    /// acknowledges the write; a refused put tells nothing. A store that
    /// cannot tell earlier (this default) tells nothing, and its answer
    /// alone counts.
    fn put_deciding(
        &self,
        namespace: &str,
        collection: &str,
        id: &str,
        data: Data,
        if_version: Option<i64>,
        decided: Decided,
    ) -> impl Future<Output = Result<Document, DocumentError>> + Send {
        drop(decided);
        self.put(namespace, collection, id, data, if_version)
    }

    /// Reads one document.
    fn get(
        &self,
        namespace: &str,
        collection: &str,
        id: &str,
    ) -> impl Future<Output = Result<Document, DocumentError>> + Send;

    /// Reads one document as protobuf: field `tag` holding its
    /// `abi.document.v1.Document` message (what
    /// [`crate::encode::encode_document_field`] writes for [`DocumentStore::get`]'s
    /// answer). A store that keeps documents as text may write the reply
    /// from it without building the document; by default, `get` then encode.
    fn get_encoded(
        &self,
        namespace: &str,
        collection: &str,
        id: &str,
        tag: u32,
    ) -> impl Future<Output = Result<Vec<u8>, DocumentError>> + Send {
        async move {
            let document = self.get(namespace, collection, id).await?;
            let mut reply = Vec::new();
            crate::encode::encode_document_field(tag, &document, &mut reply);
            Ok(reply)
        }
    }

    /// Deletes one document; with `if_version`, only at that version
    /// (`VERSION_CONFLICT` otherwise). Deleting a missing document without
    /// `if_version` succeeds.
    fn delete(
        &self,
        namespace: &str,
        collection: &str,
        id: &str,
        if_version: Option<i64>,
    ) -> impl Future<Output = Result<(), DocumentError>> + Send;

    /// One page of the documents matching a query.
    fn find(
        &self,
        namespace: &str,
        collection: &str,
        query: FindQuery,
    ) -> impl Future<Output = Result<Page, DocumentError>> + Send;

    /// Performs `writes` in order as one transaction: all are stored, or,
    /// when one is refused, none. Answers per write what the single
    /// operation answers (the document a put wrote, `None` for a delete).
    fn batch(
        &self,
        writes: Vec<Write>,
    ) -> impl Future<Output = Result<Vec<Option<Document>>, BatchFailure>> + Send;

    /// How many documents match.
    fn count(
        &self,
        namespace: &str,
        collection: &str,
        where_: Vec<Predicate>,
    ) -> impl Future<Output = Result<i64, DocumentError>> + Send;
}
