//! `abi.svc.document.v1` on the wire: the micro service `document`, one
//! endpoint per operation on `abi.svc.document.v1.<op>` (no project in the
//! subject: one document service per NATS account, as the reference engine
//! runs it), the reply header naming a refusal's code, and each request type
//! bound to its operation and reply.

use abi_proto::common::v1 as common;
use abi_proto::document::v1 as pb;

use crate::rpc::Reply;

/// The micro-service name the document service registers (`$SRV.*.document`).
pub const SERVICE_NAME: &str = "document";
/// The micro-service version the reference announces.
pub const SERVICE_VERSION: &str = "1.0.0";
/// How the service describes itself to `$SRV.INFO`.
pub const SERVICE_DESCRIPTION: &str =
    "abi.svc.document.v1: namespaced collections of versioned documents";
/// The root of every engine service's subjects (`abi.svc.<service>.v1.<op>`).
pub const SERVICE_SUBJECT_ROOT: &str = "abi.svc.";
/// The subject prefix of every operation.
pub const SUBJECT_PREFIX: &str = "abi.svc.document.v1";
/// The reply header carrying a refusal's code, beside the protobuf
/// `CallError` (the reference's traffic view reads it without decoding).
pub const ERROR_CODE_HEADER: &str = "Abi-Error-Code";
/// A put request's header naming a subject where our service tells the
/// put's outcome as soon as it is decided, before its commit is durable: a
/// `PutResponse` with the document's stamps and no data. The reply still
/// comes once the commit is durable, and only it acknowledges the write.
/// The reference's service ignores the header (no early word), as does
/// ours for a refused put and for a store that cannot tell earlier.
pub const DECIDED_HEADER: &str = "Abi-Put-Decided";
/// The longest subject [`DECIDED_HEADER`] may name; a longer one, or one
/// with a wildcard or white space, is ignored (the put is served as
/// without the header).
pub const MAX_DECIDED_SUBJECT: usize = 256;

/// Whether `subject` may carry a put's early word ([`DECIDED_HEADER`]):
/// one literal subject, no wildcards, of at most [`MAX_DECIDED_SUBJECT`]
/// bytes.
pub fn is_decided_subject(subject: &str) -> bool {
    !subject.is_empty()
        && subject.len() <= MAX_DECIDED_SUBJECT
        && subject
            .split('.')
            .all(|token| !token.is_empty() && token != "*" && token != ">")
        && !subject.bytes().any(|b| b.is_ascii_whitespace())
}
/// A find page's estimated size stays under the broker's max payload divided
/// by this (the reference's share: protobuf can run a few times larger than
/// the stored JSON the estimate counts).
pub const PAGE_SHARE: usize = 4;
/// The identities allowed to call [`Operation::Namespaces`] unless configured
/// (the reference's: the engine's API and the engine itself).
pub const DEFAULT_ADMIN_IDENTITIES: [&str; 2] = ["api", "engine"];

/// The operations of `abi.svc.document.v1`, one endpoint each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    /// Declare a collection or merge into its declaration.
    EnsureCollection,
    /// Delete a collection and its documents.
    DropCollection,
    /// List a namespace's collections.
    Collections,
    /// Read a collection's declaration.
    CollectionSpec,
    /// Write a document.
    Put,
    /// Read a document.
    Get,
    /// Delete a document.
    Delete,
    /// Page through matching documents.
    Find,
    /// Count matching documents.
    Count,
    /// List every namespace (platform identities only).
    Namespaces,
    /// Several puts and deletes in one transaction: this runtime's
    /// extension, served by our document service only (not in [`Self::ALL`],
    /// the reference's endpoints).
    Batch,
    /// Several puts in one request, each stored or refused on its own: this
    /// runtime's extension, as [`Self::Batch`].
    PutMany,
}

/// The most writes one batch (or one [`Operation::PutMany`]) may hold.
pub const MAX_BATCH_WRITES: usize = 64;

impl Operation {
    /// Every operation, in the reference's endpoint order.
    pub const ALL: [Operation; 10] = [
        Operation::EnsureCollection,
        Operation::DropCollection,
        Operation::Collections,
        Operation::CollectionSpec,
        Operation::Put,
        Operation::Get,
        Operation::Delete,
        Operation::Find,
        Operation::Count,
        Operation::Namespaces,
    ];

    /// What our document service serves: the reference's endpoints and its
    /// extensions.
    pub const SERVED: [Operation; 12] = {
        let mut served = [Operation::Batch; 12];
        let mut i = 0;
        while i < Self::ALL.len() {
            served[i] = Self::ALL[i];
            i += 1;
        }
        served[Self::ALL.len() + 1] = Operation::PutMany;
        served
    };

    /// The endpoint name and last subject token, e.g. `ensure_collection`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::EnsureCollection => "ensure_collection",
            Operation::DropCollection => "drop_collection",
            Operation::Collections => "collections",
            Operation::CollectionSpec => "collection_spec",
            Operation::Put => "put",
            Operation::Get => "get",
            Operation::Delete => "delete",
            Operation::Find => "find",
            Operation::Count => "count",
            Operation::Namespaces => "namespaces",
            Operation::Batch => "batch",
            Operation::PutMany => "put_many",
        }
    }

    /// The operation a subject token names.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::SERVED.into_iter().find(|op| op.as_str() == name)
    }

    /// Whether the operation reads or writes across namespaces, so only
    /// administrator identities may call it.
    pub fn is_admin(self) -> bool {
        self == Operation::Namespaces
    }

    /// Whether the operation changes what is stored (what a strict
    /// namespace policy guards).
    pub fn writes(self) -> bool {
        matches!(
            self,
            Operation::EnsureCollection
                | Operation::DropCollection
                | Operation::Put
                | Operation::Delete
                | Operation::Batch
                | Operation::PutMany
        )
    }
}

/// The subject of `op`: `abi.svc.document.v1.<op>`.
pub fn operation(op: Operation) -> String {
    format!("{SUBJECT_PREFIX}.{}", op.as_str())
}

/// A document request: the operation it names and what answers it.
pub trait DocumentRpc: prost::Message + Default + Clone {
    /// The operation, i.e. the last token of the subject it is sent on.
    const OPERATION: Operation;
    /// The reply type.
    type Response: prost::Message + Default + Reply;
    /// Sets the call envelope.
    fn set_context(&mut self, context: common::CallContext);
}

macro_rules! document_rpc {
    ($($req:ident => $resp:ident, $op:ident;)*) => {$(
        impl DocumentRpc for pb::$req {
            const OPERATION: Operation = Operation::$op;
            type Response = pb::$resp;
            fn set_context(&mut self, context: common::CallContext) {
                self.context = Some(context);
            }
        }
        crate::rpc::reply!(pb::$resp);
    )*};
}

document_rpc! {
    EnsureCollectionRequest => EnsureCollectionResponse, EnsureCollection;
    DropCollectionRequest => DropCollectionResponse, DropCollection;
    CollectionsRequest => CollectionsResponse, Collections;
    CollectionSpecRequest => CollectionSpecResponse, CollectionSpec;
    PutRequest => PutResponse, Put;
    GetRequest => GetResponse, Get;
    DeleteRequest => DeleteResponse, Delete;
    FindRequest => FindResponse, Find;
    CountRequest => CountResponse, Count;
    NamespacesRequest => NamespacesResponse, Namespaces;
    BatchRequest => BatchResponse, Batch;
    PutManyRequest => PutManyResponse, PutMany;
}

/// A `PutResponse` read for its document's stamps only (same field
/// numbers): what a caller keeping the data it sent needs. The document's
/// data is skipped as an unknown field, never decoded (decoding and
/// converting it back took a tenth of a job host's CPU per run).
#[derive(Clone, PartialEq, prost::Message)]
pub struct PutStamped {
    /// The refusal, if any.
    #[prost(message, optional, tag = "1")]
    pub error: Option<common::CallError>,
    /// The stored document, but its data.
    #[prost(message, optional, tag = "2")]
    pub document: Option<DocumentStamps>,
}
crate::rpc::reply!(PutStamped);

/// An `abi.document.v1.Document` without its data (field 2).
#[derive(Clone, PartialEq, prost::Message)]
pub struct DocumentStamps {
    /// The document's id.
    #[prost(string, tag = "1")]
    pub id: String,
    /// When it was created (ISO 8601).
    #[prost(string, tag = "3")]
    pub created_at: String,
    /// When it was last written (ISO 8601).
    #[prost(string, tag = "4")]
    pub updated_at: String,
    /// Its version.
    #[prost(int64, tag = "5")]
    pub version: i64,
}

/// Every request's `context` field number.
pub const CONTEXT_TAG: u32 = 1;
/// `PutManyRequest.puts`' field number, for a request written from puts
/// already encoded.
pub const PUT_MANY_PUTS_TAG: u32 = 2;
/// `PutRequest.data`'s field number, for a request whose data is written
/// straight from the model.
pub const PUT_REQUEST_DATA_TAG: u32 = 5;
/// `PutRequest.if_version`'s field number.
pub const PUT_REQUEST_IF_VERSION_TAG: u32 = 6;
/// `PutResponse.document`'s and `GetResponse.document`'s field number, for
/// a reply written straight from the model.
pub const REPLY_DOCUMENT_TAG: u32 = 2;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subjects_match_the_reference() {
        assert_eq!(operation(Operation::Put), "abi.svc.document.v1.put");
        assert_eq!(
            operation(Operation::EnsureCollection),
            "abi.svc.document.v1.ensure_collection"
        );
        for op in Operation::SERVED {
            assert_eq!(Operation::from_name(op.as_str()), Some(op));
        }
        assert_eq!(&Operation::SERVED[..10], &Operation::ALL[..]);
        assert!(Operation::Namespaces.is_admin());
        assert!(!Operation::Find.is_admin());
    }

    #[test]
    fn a_put_decision_goes_only_to_one_literal_subject() {
        let long = format!("_INBOX.{}", "a".repeat(MAX_DECIDED_SUBJECT));
        let cases = [
            ("_INBOX.abc.decided.7", true),
            ("reply", true),
            ("", false),
            ("_INBOX.*.7", false),
            ("_INBOX.>", false),
            ("_INBOX..7", false),
            (".7", false),
            ("_INBOX.a b", false),
            ("_INBOX.a\tb", false),
            (long.as_str(), false),
        ];
        for (subject, valid) in cases {
            assert_eq!(is_decided_subject(subject), valid, "{subject:?}");
        }
    }

    #[test]
    #[allow(clippy::unwrap_used)]
    fn a_put_reply_reads_as_its_stamps() {
        use prost::Message as _;
        let mut fields = std::collections::BTreeMap::new();
        fields.insert(
            "k".to_owned(),
            pb::Value {
                kind: Some(pb::value::Kind::StringValue("v".repeat(300))),
            },
        );
        let full = pb::PutResponse {
            error: None,
            document: Some(pb::Document {
                id: "d-1".into(),
                data: Some(pb::Data { fields }),
                created_at: "2026-01-01T00:00:00+00:00".into(),
                updated_at: "2026-01-02T00:00:00.000001+00:00".into(),
                version: 42,
            }),
        };
        let stamped = PutStamped::decode(full.encode_to_vec().as_slice()).unwrap();
        let stamps = stamped.document.unwrap();
        assert_eq!(stamps.id, "d-1");
        assert_eq!(stamps.version, 42);
        assert_eq!(stamps.created_at, "2026-01-01T00:00:00+00:00");
        assert_eq!(stamps.updated_at, "2026-01-02T00:00:00.000001+00:00");
        assert!(stamped.error.is_none());
        let refused = pb::PutResponse {
            error: Some(common::CallError {
                code: crate::ErrorCode::VersionConflict.as_str().into(),
                message: "m".into(),
                ..Default::default()
            }),
            document: None,
        };
        let stamped = PutStamped::decode(refused.encode_to_vec().as_slice()).unwrap();
        assert_eq!(
            stamped.call_error().unwrap().code,
            crate::ErrorCode::VersionConflict.as_str()
        );
        assert!(stamped.document.is_none());
    }

    #[test]
    fn every_operation_is_bound_once() {
        let bound = [
            <pb::EnsureCollectionRequest as DocumentRpc>::OPERATION,
            <pb::DropCollectionRequest as DocumentRpc>::OPERATION,
            <pb::CollectionsRequest as DocumentRpc>::OPERATION,
            <pb::CollectionSpecRequest as DocumentRpc>::OPERATION,
            <pb::PutRequest as DocumentRpc>::OPERATION,
            <pb::GetRequest as DocumentRpc>::OPERATION,
            <pb::DeleteRequest as DocumentRpc>::OPERATION,
            <pb::FindRequest as DocumentRpc>::OPERATION,
            <pb::CountRequest as DocumentRpc>::OPERATION,
            <pb::NamespacesRequest as DocumentRpc>::OPERATION,
            <pb::BatchRequest as DocumentRpc>::OPERATION,
            <pb::PutManyRequest as DocumentRpc>::OPERATION,
        ];
        for op in Operation::SERVED {
            assert_eq!(bound.iter().filter(|b| **b == op).count(), 1, "{op:?}");
        }
    }
}
