//! The schema, tables and indexes: created on first boot, repaired when the
//! compiler's index definitions change.

use sha2::{Digest, Sha256};

use abi_document_model::DocumentError;

use super::error::Translate;
use super::{PostgresStore, execute, query};
use crate::sql::{Compiler, SqlParam, Statement};

/// The prefix of the comment that records an index's defining SQL.
const FINGERPRINT_PREFIX: &str = "abi-document-index:";
/// The GIN index on the data (containment narrows equality predicates).
const GIN_INDEX: &str = "abi_documents_data_gin";

/// The advisory lock serializing first-boot DDL across the processes that
/// use `schema`: the first 8 bytes of its SHA-256 as a signed big-endian
/// integer, the reference's key, so its processes and ours exclude each
/// other too.
pub(super) fn lock_id(schema: &str) -> i64 {
    let digest = Sha256::digest(schema.as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(first)
}

/// Creates the schema, the two tables and the GIN index if missing, in one
/// transaction under the advisory lock (its wait bounded by the statement
/// timeout).
///
/// # Errors
///
/// The translated driver error (the caller reports it as an
/// initialization failure).
pub(super) async fn initialize(store: &PostgresStore, schema: &str) -> Result<(), DocumentError> {
    let mut conn = store.connection().await?;
    let tx = conn.transaction().await.translated()?;
    execute(
        &tx,
        &Statement {
            sql: "SELECT pg_advisory_xact_lock($1)".to_owned(),
            params: vec![SqlParam::Int(lock_id(schema))],
        },
    )
    .await?;
    let quoted = postgres_protocol::escape::escape_identifier(schema);
    tx.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {quoted}; \
         CREATE TABLE IF NOT EXISTS {} (namespace TEXT COLLATE \"C\" NOT NULL, name TEXT COLLATE \"C\" NOT NULL, spec TEXT NOT NULL, PRIMARY KEY (namespace, name)); \
         CREATE TABLE IF NOT EXISTS {} (namespace TEXT COLLATE \"C\" NOT NULL, collection TEXT COLLATE \"C\" NOT NULL, id TEXT COLLATE \"C\" NOT NULL, data JSONB NOT NULL, created_at TIMESTAMPTZ NOT NULL, updated_at TIMESTAMPTZ NOT NULL, version BIGINT NOT NULL, PRIMARY KEY (namespace, collection, id))",
        store.collections, store.documents
    ))
    .await
    .translated()?;
    let compiler = store.compiler();
    let gin = format!(
        "CREATE INDEX IF NOT EXISTS {GIN_INDEX} ON {} USING gin (data jsonb_path_ops)",
        store.documents
    );
    ensure_index(&tx, &compiler, GIN_INDEX, &gin).await?;
    tx.commit().await.translated()
}

/// Creates index `name` with `statement` unless it exists with exactly that
/// definition: the comment on an index we made holds the SHA-256 of its
/// SQL, so an index from an older definition (or someone else's) is
/// dropped and rebuilt, in the caller's transaction (under the catalog
/// row's write lock for a collection's indexes).
///
/// # Errors
///
/// The translated driver error; `UNIQUE_VIOLATION` when existing documents
/// break a unique index (the transaction, replacement included, rolls
/// back).
pub(super) async fn ensure_index(
    tx: &deadpool_postgres::Transaction<'_>,
    compiler: &Compiler<'_>,
    name: &str,
    statement: &str,
) -> Result<(), DocumentError> {
    let qualified = compiler.qualified_index_name(name);
    let fingerprint = fingerprint(statement);
    let rows = query(
        tx,
        &Statement {
            sql: "SELECT obj_description(to_regclass($1), 'pg_class')".to_owned(),
            params: vec![SqlParam::Text(qualified.clone())],
        },
    )
    .await?;
    let current: Option<String> = match rows.first() {
        Some(row) => row.try_get(0).translated()?,
        None => None,
    };
    if current.as_deref() == Some(fingerprint.as_str()) {
        return Ok(());
    }
    tx.batch_execute(&format!(
        "DROP INDEX IF EXISTS {qualified}; {statement}; COMMENT ON INDEX {qualified} IS {}",
        compiler.literal(&fingerprint)?
    ))
    .await
    .translated()
}

/// The comment recording `statement`: the reference's, so that its servers
/// and ours sharing a database each find the other's index current.
///
/// The reference hashes the text it hands psycopg, where every `%` of a
/// literal is doubled (psycopg's placeholder escape); ours holds them once.
/// (A literal with a backslash still differs: `postgres-protocol` writes it
/// as `E'...'`, the reference as a standard string. Its index is then
/// rebuilt when the other side ensures the collection: slower, still
/// correct.)
pub(super) fn fingerprint(statement: &str) -> String {
    let as_sent_by_psycopg = statement.replace('%', "%%");
    format!(
        "{FINGERPRINT_PREFIX}{}",
        hex::encode(Sha256::digest(as_sent_by_psycopg.as_bytes()))
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use abi_document_model::{CollectionSpec, FieldSpec};

    use super::*;
    use crate::sql::Dialect;

    #[test]
    fn index_names_and_fingerprints_are_the_references() {
        // DocumentSQL(postgres=True, ...).index_statements("mod'ule", spec)
        // of naas-abi-core 3.1.0, and sha256 of each statement.
        let spec = CollectionSpec::new("records")
            .field(FieldSpec::new("x", "string").indexed())
            .field(FieldSpec::new("y", "int").unique())
            .field(FieldSpec::new("p%q", "float").indexed())
            .unique_together(["a", "it's"]);
        let (documents, collections) = (
            "\"abi_document\".abi_documents",
            "\"abi_document\".abi_document_collections",
        );
        let compiler = Compiler::new(
            Dialect::Postgres,
            &super::super::PgQuote,
            documents,
            collections,
        );
        let got: Vec<(String, String)> = compiler
            .index_statements("mod'ule", &spec)
            .unwrap()
            .into_iter()
            .map(|(name, statement)| {
                (
                    name,
                    fingerprint(&statement)[FINGERPRINT_PREFIX.len()..].to_owned(),
                )
            })
            .collect();
        let want = [
            (
                "abi_doc_a5440688544c42a4010f596bf19a005d06d78b8e",
                "a77d6e6983a9d7d15dcb9d3241afcd12749bd384d72bb594a73bee13cc99825c",
            ),
            (
                "abi_doc_fd91561315a9aa1e0d7b2cad0a18fc03d3663b33",
                "981c2a60390e722fad1b53019f8cfa39622b6ec06f31671ffef92939b367dac8",
            ),
            (
                "abi_doc_fa3a51e391d9e77c2768856c7fd72aca7958bc96",
                "006ab2ddf75b23538a9bd6ec478807edbd74d3c18e6f236bdd3bd80be0cad669",
            ),
            (
                "abi_doc_4ef3bc0e5f20d2fc3f77920850d3eb05b4a9743a",
                "b52ed8678536ec7e6620d2af57ec2bde651a3fb576ac1c03f2d184fa9259f76d",
            ),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(n, f)| ((*n).to_owned(), (*f).to_owned()))
            .collect();
        assert_eq!(got, want);
        let gin = format!(
            "CREATE INDEX IF NOT EXISTS {GIN_INDEX} ON {documents} USING gin (data jsonb_path_ops)"
        );
        assert_eq!(
            fingerprint(&gin),
            "abi-document-index:a7fb68c341bafba2e4b5bcd47e53169137fa7967d4facb750fcaedc8e1d7a68c"
        );
    }

    #[test]
    fn lock_id_is_the_references() {
        // int.from_bytes(hashlib.sha256(b"abi_document").digest()[:8], "big", signed=True)
        assert_eq!(lock_id("abi_document"), 3576637577002723845);
    }
}
