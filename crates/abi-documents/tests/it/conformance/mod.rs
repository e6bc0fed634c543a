//! One conformance suite for every [`DocumentStore`] adapter, ported from the
//! reference's `document__secondary_adapter__generic_test.py` (plus the
//! `if_version` contract of the port).
//!
//! An adapter's test module implements [`Backend`] (a fresh database, and
//! any number of independent stores on it) and expands
//! [`conformance_tests!`] with it: one `#[tokio::test]` per case. Every case
//! is also a plain `pub async fn case<B: Backend>(backend: &B)`.

mod batch;
mod cases;
mod paging;
mod values;

use std::future::Future;

use abi_document_model::{
    CollectionSpec, Data, DocumentStore, FindQuery, OrderBy, Predicate, Value,
};

pub use batch::*;
pub use cases::*;
pub use paging::*;
pub use values::*;

/// What the suite needs from an adapter.
pub trait Backend: Send + Sync {
    /// A database (a file, a schema), removed when dropped.
    type Db: Send + Sync;
    /// The adapter.
    type Store: DocumentStore;
    /// A new, empty database.
    fn database(&self) -> impl Future<Output = Self::Db> + Send;
    /// A store on `db`; two stores on one database are independent peers
    /// (as two server processes would be).
    fn open(&self, db: &Self::Db) -> impl Future<Output = Self::Store> + Send;
}

/// A fresh database and a store on it.
pub async fn adapter<B: Backend>(backend: &B) -> (B::Db, B::Store) {
    let db = backend.database().await;
    let store = backend.open(&db).await;
    (db, store)
}

/// [`adapter`] with `module.records` ensured (the reference's `docs` fixture).
pub async fn docs<B: Backend>(backend: &B) -> (B::Db, B::Store) {
    let (db, store) = adapter(backend).await;
    store
        .ensure_collection("module", CollectionSpec::new("records"))
        .await
        .expect("ensure module.records");
    (db, store)
}

/// `{key: value, ...}`.
pub fn data<const N: usize>(pairs: [(&str, Value); N]) -> Data {
    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

/// A predicate.
pub fn p(field: &str, operator: &str, value: impl Into<Value>) -> Predicate {
    Predicate::new(field, operator, value)
}

/// A find query.
pub fn query(
    where_: Vec<Predicate>,
    order_by: Option<OrderBy>,
    limit: i64,
    cursor: Option<String>,
) -> FindQuery {
    FindQuery {
        where_,
        order_by,
        limit,
        cursor,
        max_bytes: None,
    }
}

/// The ids of one page.
pub async fn find_ids<S: DocumentStore>(store: &S, collection: &str, q: FindQuery) -> Vec<String> {
    store
        .find("module", collection, q)
        .await
        .expect("find")
        .items
        .into_iter()
        .map(|d| d.id)
        .collect()
}

/// Every id of a query, following cursors to the end, pages of `batch`.
pub async fn iterate<S: DocumentStore>(
    store: &S,
    namespace: &str,
    collection: &str,
    where_: Vec<Predicate>,
    order_by: Option<OrderBy>,
    batch: i64,
    max_bytes: Option<i64>,
) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    let mut cursor = None;
    loop {
        let page = store
            .find(
                namespace,
                collection,
                FindQuery {
                    where_: where_.clone(),
                    order_by: order_by.clone(),
                    limit: batch,
                    cursor,
                    max_bytes,
                },
            )
            .await
            .expect("find page");
        pages.push(page.items.into_iter().map(|d| d.id).collect());
        cursor = page.cursor;
        if cursor.is_none() {
            return pages;
        }
    }
}

/// Every id of a query in order (see [`iterate`]).
pub async fn all_ids<S: DocumentStore>(
    store: &S,
    where_: Vec<Predicate>,
    order_by: Option<OrderBy>,
    batch: i64,
) -> Vec<String> {
    iterate(store, "module", "records", where_, order_by, batch, None)
        .await
        .concat()
}

/// Expands to one `#[tokio::test]` per conformance case, each on
/// `$backend` (an expression giving a `&impl Backend`).
macro_rules! conformance_tests {
    ($backend:expr) => {
        $crate::conformance::conformance_tests!(@cases $backend;
            decimal_numeric_equality_ranges_uniqueness_and_paging,
            long_incompressible_values_index_and_unique,
            adapter_filters_and_reordered_predicates,
            catalog_changes_from_peer_are_visible,
            invalid_type_declaration_preserves_data_and_catalog,
            delete_zero_is_a_version_conflict_even_for_absent_documents,
            literal_field_names_preserve_queries_and_uniqueness,
            cursor_sort_keys_match_database_order_for_every_value_kind,
            collection_spec_reads_back_as_declared_and_merged,
            every_value_round_trips,
            independent_adapters_share_data_constraints_and_atomic_writes,
            concurrent_unconditional_writes_increment_every_version,
            cursor_rejects_other_queries_and_invalid_tokens,
            typed_fields_reject_incompatible_values_and_type_changes,
            numeric_range_preserves_large_integer_precision,
            large_finite_floats_remain_portable,
            byte_sort_and_exact_nested_array_membership,
            collection_lifecycle_and_namespaces,
            namespaces_lists_each_namespace_holding_a_collection,
            missing_collection_raises,
            compare_and_swap,
            if_version_semantics,
            concurrent_cas_has_one_winner,
            ordering_is_numeric_and_paging_handles_ties_and_nulls,
            cursor_is_stable_after_insert_and_deleted_anchor,
            predicates,
            mixed_type_ranges_and_ordering,
            unique_sparse_compound_and_additive_declarations,
            adding_unique_constraint_checks_existing_data_and_rolls_back,
            datetime_comparison_normalizes_offsets,
            names_and_predicate_values_are_not_sql,
            max_bytes_cuts_pages_without_gap_or_repeat,
            an_item_larger_than_max_bytes_comes_back_alone,
            limit_still_caps_a_page_within_max_bytes,
            validation_messages_and_order,
            batch_writes_all_or_none,
            racing_batches_have_one_winner_and_leave_nothing_else
        );
    };
    (@cases $backend:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                $crate::conformance::$case($backend).await;
            }
        )*
    };
}
pub(crate) use conformance_tests;
