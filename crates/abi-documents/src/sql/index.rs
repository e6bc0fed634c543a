//! Index names and DDL for a collection's declarations.

use abi_document_model::{CollectionSpec, DocumentError};
use sha2::{Digest, Sha256};

use super::Compiler;
use crate::codec::{Json, dumps};

/// One index a declaration asks for: its fields and whether it is unique.
pub type IndexKey = (Vec<String>, bool);

impl Compiler<'_> {
    /// `abi_doc_` and 40 hex digits of the SHA-256 of
    /// `[namespace, collection, fields, unique]`: bounded, and distinct per
    /// namespace.
    pub fn index_name(
        &self,
        namespace: &str,
        collection: &str,
        fields: &[String],
        unique: bool,
    ) -> String {
        let key = Json::Array(vec![
            Json::Str(namespace.to_owned()),
            Json::Str(collection.to_owned()),
            Json::Array(fields.iter().map(|f| Json::Str(f.clone())).collect()),
            Json::Bool(unique),
        ]);
        let digest = hex::encode(Sha256::digest(dumps(&key).as_bytes()));
        format!("abi_doc_{}", &digest[..40])
    }

    /// The indexes of `spec`, first occurrence kept: indexed fields, unique
    /// fields, then unique groups.
    pub fn indexes(&self, spec: &CollectionSpec) -> Vec<IndexKey> {
        let candidates = spec
            .fields
            .iter()
            .filter(|f| f.indexed)
            .map(|f| (vec![f.name.clone()], false))
            .chain(
                spec.fields
                    .iter()
                    .filter(|f| f.unique)
                    .map(|f| (vec![f.name.clone()], true)),
            )
            .chain(spec.unique_together.iter().map(|g| (g.clone(), true)));
        let mut result: Vec<IndexKey> = Vec::new();
        for candidate in candidates {
            if !result.contains(&candidate) {
                result.push(candidate);
            }
        }
        result
    }

    /// `(name, CREATE INDEX ...)` for every index of `spec` in `namespace`.
    /// On SQLite a non-unique index gets a second, `<name>_eq`, on the
    /// equality key.
    ///
    /// # Errors
    ///
    /// When the backend's literal quoting fails.
    pub fn index_statements(
        &self,
        namespace: &str,
        spec: &CollectionSpec,
    ) -> Result<Vec<(String, String)>, DocumentError> {
        let mut statements = Vec::new();
        let condition = format!(
            "namespace = {} AND collection = {}",
            self.literal(namespace)?,
            self.literal(&spec.name)?
        );
        for (fields, unique) in self.indexes(spec) {
            let name = self.index_name(namespace, &spec.name, &fields, unique);
            let mut expressions = Vec::new();
            for field in &fields {
                let raw = self.field(field)?;
                if unique {
                    if self.pg() {
                        // A fixed-width hash bounds the B-tree entry for any
                        // value length; NULLIF leaves missing and null values
                        // out of the constraint. SHA-256 so that no crafted
                        // collision can refuse a distinct value.
                        let sparse = format!("NULLIF({raw}, 'null'::jsonb)");
                        expressions
                            .push(format!("(encode(sha256(({sparse})::text::bytea), 'hex'))"));
                    } else {
                        expressions.push(format!("document_json_key_v2({raw})"));
                    }
                } else {
                    let mut parts = self.sort_parts(field)?;
                    if self.pg() {
                        // Bounded entries for long strings and bytes; queries
                        // still compare whole values.
                        parts.text = format!("left({}, 256)", parts.text);
                    }
                    expressions.extend(parts.to_vec());
                }
            }
            statements.push((
                name.clone(),
                format!(
                    "CREATE {}INDEX IF NOT EXISTS {name} ON {} ({}) WHERE {condition}",
                    if unique { "UNIQUE " } else { "" },
                    self.documents,
                    expressions.join(", ")
                ),
            ));
            if !self.pg() && !unique {
                let equality = fields
                    .iter()
                    .map(|f| Ok(format!("document_json_key_v2({})", self.field(f)?)))
                    .collect::<Result<Vec<_>, DocumentError>>()?
                    .join(", ");
                statements.push((
                    format!("{name}_eq"),
                    format!(
                        "CREATE INDEX IF NOT EXISTS {name}_eq ON {} ({equality}) WHERE {condition}",
                        self.documents
                    ),
                ));
            }
        }
        Ok(statements)
    }

    /// An index name as `DROP INDEX` needs it: schema-qualified on
    /// PostgreSQL (indexes live in the table's schema), bare on SQLite.
    pub fn qualified_index_name(&self, name: &str) -> String {
        if self.pg() {
            match self.documents.rsplit_once('.') {
                Some((schema, _)) => format!("{schema}.{name}"),
                None => name.to_owned(),
            }
        } else {
            name.to_owned()
        }
    }
}
