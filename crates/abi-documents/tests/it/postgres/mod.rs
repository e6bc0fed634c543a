//! The PostgreSQL adapter against a real server (`abi_test_support`'s
//! `PostgresServer`, from the binaries `./scripts/setup.sh` installs): the
//! conformance suite, then the adapter's own guarantees in [`faults`].
//!
//! Conformance databases are schemas on one server shared by the cases that
//! run at the same time (the last one to finish stops it: no server outlives
//! the test binary), so a case never sees another's catalog and a database
//! costs a `CREATE SCHEMA`, not an `initdb`. Stores opened on one database
//! are independent pools, as two server processes would be. The fault tests
//! start their own servers.

mod faults;

use std::sync::{Arc, Mutex, Weak};

use abi_document_model::{DocumentStore, Value};
use abi_documents::store::postgres::PostgresStore;
use abi_test_support::postgres::PostgresServer;

use crate::conformance::{self, Backend, data, docs, p, round_trip_values};

/// The conformance backend: a fresh schema per database.
#[derive(Debug)]
pub struct Postgres;

/// A database of the suite: the server and the schema its stores use.
#[derive(Debug)]
pub struct PgDb {
    server: Arc<PostgresServer>,
    schema: String,
}

/// The server the running cases share; dropped with its last user.
static SHARED: Mutex<Weak<PostgresServer>> = Mutex::new(Weak::new());

/// The shared server, started when no running case holds one.
async fn shared_server() -> Arc<PostgresServer> {
    if let Some(server) = SHARED.lock().unwrap().upgrade() {
        return server;
    }
    let started = Arc::new(PostgresServer::start().await);
    let mut shared = SHARED.lock().unwrap();
    match shared.upgrade() {
        // Another case started one meanwhile: use it (ours stops on drop).
        Some(server) => server,
        None => {
            *shared = Arc::downgrade(&started);
            started
        }
    }
}

impl Backend for Postgres {
    type Db = PgDb;
    type Store = PostgresStore;

    async fn database(&self) -> PgDb {
        PgDb {
            server: shared_server().await,
            schema: faults::schema(),
        }
    }

    async fn open(&self, db: &PgDb) -> PostgresStore {
        faults::open(&db.server, &db.schema).await
    }
}

// Every case of `conformance_tests!` but `every_value_round_trips`, which
// PostgreSQL passes in the reference's form below.
conformance::conformance_tests!(@cases &Postgres;
    decimal_numeric_equality_ranges_uniqueness_and_paging,
    long_incompressible_values_index_and_unique,
    adapter_filters_and_reordered_predicates,
    catalog_changes_from_peer_are_visible,
    invalid_type_declaration_preserves_data_and_catalog,
    delete_zero_is_a_version_conflict_even_for_absent_documents,
    literal_field_names_preserve_queries_and_uniqueness,
    cursor_sort_keys_match_database_order_for_every_value_kind,
    collection_spec_reads_back_as_declared_and_merged,
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

/// A value as the reference's PostgreSQL adapter reads it back: JSONB
/// stores numbers as `numeric`, so a float Python writes in exponent form
/// with no fraction (`1e+16`) comes back as integer text, which the
/// reference's `decode` keeps as an `int` inside the 64-bit range.
fn as_postgres_reads(value: &Value) -> Value {
    match value {
        Value::Float(x) if x.fract() == 0.0 && x.abs() >= 1e16 && x.abs() < 9.2e18 => {
            Value::Int(*x as i64)
        }
        Value::List(items) => Value::List(items.iter().map(as_postgres_reads).collect()),
        Value::Object(members) => Value::Object(
            members
                .iter()
                .map(|(k, v)| (k.clone(), as_postgres_reads(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// `every_value_round_trips` with the reference's PostgreSQL reading:
/// every value reads back as written (integral exponent-form floats as
/// integers), and matches `eq` with the value as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_value_round_trips_as_the_reference_reads_jsonb() {
    let (_db, s) = docs(&Postgres).await;
    for (i, value) in round_trip_values().into_iter().enumerate() {
        let id = format!("id{i}");
        let written = s
            .put(
                "module",
                "records",
                &id,
                data([("value", value.clone())]),
                None,
            )
            .await
            .expect("put");
        let read = s.get("module", "records", &id).await.expect("get");
        assert_eq!(read, written, "{value:?}");
        assert_eq!(read.data["value"], as_postgres_reads(&value), "{value:?}");
        assert!(read.updated_at >= read.created_at);
        assert_eq!(read.version, 1);
        let n = s
            .count("module", "records", vec![p("value", "eq", value.clone())])
            .await;
        assert_eq!(n, Ok(1), "{value:?}");
        // Alone in the collection, as in the suite's case (0 matches 0.0).
        s.delete("module", "records", &id, None)
            .await
            .expect("delete");
    }
}
