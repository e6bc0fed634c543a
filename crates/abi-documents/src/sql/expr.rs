//! Field expressions, sort parts and predicates.

use abi_document_model::{DocumentError, Predicate, Value};

use super::Compiler;
use super::params::{Params, SqlParam};
use crate::codec::{
    ValueKind, dumps, encode, number_text, storage_key, stored_value_text, value_json_key,
    value_sort_parts,
};

/// The portable `ORDER BY` expressions of one field: kind rank, numeric
/// value, text key. Arrays and objects tie within their kind (then the id
/// decides).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SortParts {
    /// The kind's rank (see [`ValueKind`]).
    pub rank: String,
    /// Numbers and booleans by exact value; 0 for the other kinds.
    pub numeric: String,
    /// Strings, datetimes (UTC text) and bytes (hex); `''` otherwise.
    pub text: String,
}

impl SortParts {
    /// The three expressions, in order.
    pub fn to_vec(&self) -> Vec<String> {
        vec![self.rank.clone(), self.numeric.clone(), self.text.clone()]
    }
}

impl Compiler<'_> {
    /// The stored JSON of top-level field `name` (SQL NULL when missing).
    ///
    /// # Errors
    ///
    /// When the backend's literal quoting fails.
    pub fn field(&self, name: &str) -> Result<String, DocumentError> {
        let key = self.literal(&storage_key(name))?;
        Ok(if self.pg() {
            format!("(data -> {key})")
        } else {
            format!("document_field(data, {key})")
        })
    }

    fn kind(&self, expression: &str) -> String {
        if self.pg() {
            format!("jsonb_typeof({expression})")
        } else {
            format!("json_type({expression})")
        }
    }

    fn text(&self, expression: &str) -> String {
        if self.pg() {
            format!("({expression} #>> '{{}}')")
        } else {
            format!("json_extract({expression}, '$')")
        }
    }

    fn child_text(&self, expression: &str, key: &str) -> Result<String, DocumentError> {
        Ok(if self.pg() {
            format!("({expression} ->> {})", self.literal(key)?)
        } else {
            let path = format!("$.{}", crate::codec::json_string(key));
            format!("json_extract({expression}, {})", self.literal(&path)?)
        })
    }

    /// The collation that orders ids (and text keys) by code point.
    pub fn id_collation(&self) -> &'static str {
        if self.pg() { "\"C\"" } else { "BINARY" }
    }

    /// The sort parts of `field`.
    ///
    /// # Errors
    ///
    /// When the backend's literal quoting fails.
    pub fn sort_parts(&self, field: &str) -> Result<SortParts, DocumentError> {
        let expression = self.field(field)?;
        let kind = self.kind(&expression);
        let tag = self.child_text(&expression, "$t")?;
        let value = self.child_text(&expression, "$v")?;
        let pg = self.pg();
        let numeric_types = if pg { "'number'" } else { "'integer','real'" };
        let bool_types = if pg { "'boolean'" } else { "'true','false'" };
        let string_type = if pg { "'string'" } else { "'text'" };
        let kinds = [
            (format!("{kind} IN ({bool_types})"), ValueKind::Bool),
            (format!("{kind} IN ({numeric_types})"), ValueKind::Number),
            (format!("{kind} = {string_type}"), ValueKind::String),
            (format!("{tag} = 'datetime'"), ValueKind::Datetime),
            (format!("{tag} = 'bytes'"), ValueKind::Bytes),
            (format!("{kind} = 'array'"), ValueKind::Array),
            (format!("{kind} = 'object'"), ValueKind::Object),
        ];
        let whens: Vec<String> = kinds
            .iter()
            .map(|(condition, rank)| format!("WHEN {condition} THEN {}", *rank as i64))
            .collect();
        let rank = format!(
            "CASE {} ELSE {} END",
            whens.join(" "),
            ValueKind::Null as i64
        );
        let scalar = self.text(&expression);
        let number = if pg {
            format!("CAST({scalar} AS NUMERIC)")
        } else {
            format!("document_numeric_text({expression})")
        };
        let boolean = if pg {
            format!("CASE WHEN {scalar} = 'true' THEN 1 ELSE 0 END")
        } else {
            scalar.clone()
        };
        let mut numeric = format!(
            "CASE WHEN {kind} IN ({numeric_types}) THEN {number} WHEN {kind} IN ({bool_types}) THEN {boolean} ELSE 0 END"
        );
        if !pg {
            numeric = format!("CAST(({numeric}) AS TEXT) COLLATE document_numeric");
        }
        let binary = if pg {
            format!("encode(decode({value}, 'base64'), 'hex')")
        } else {
            format!("document_bytes_key({value})")
        };
        let text = format!(
            "(CASE WHEN {kind} = {string_type} THEN {scalar} WHEN {tag} = 'datetime' THEN {value} WHEN {tag} = 'bytes' THEN {binary} ELSE '' END COLLATE {})",
            self.id_collation()
        );
        Ok(SortParts {
            rank: format!("({rank})"),
            numeric: format!("({numeric})"),
            text,
        })
    }

    /// `expression` equals `value` as JSONB compares (`1 == 1.0`,
    /// `true != 1`, objects unordered, arrays ordered).
    fn equal(&self, expression: &str, value: &Value, params: &mut Params) -> String {
        if self.pg() {
            let raw = stored_value_text(value);
            let p = params.bind(SqlParam::Json(raw));
            return format!("COALESCE({expression} = CAST({p} AS JSONB), FALSE)");
        }
        let key = format!("document_json_key_v2({expression})");
        match value_json_key(value) {
            None => format!("({key} IS NULL AND {expression} IS NOT NULL)"),
            Some(json_key) => {
                let p = params.bind(SqlParam::Text(json_key));
                format!("{key} = {p}")
            }
        }
    }

    /// Containment candidates for a positive match on `field`, so the
    /// PostgreSQL planner can use the GIN index; the exact check stays.
    fn gin_hint(&self, field: &str, values: &[Value], params: &mut Params) -> String {
        let clauses: Vec<String> = values
            .iter()
            .map(|value| {
                let probe = crate::codec::Json::Object(
                    [(storage_key(field), encode(value))].into_iter().collect(),
                );
                let p = params.bind(SqlParam::Json(dumps(&probe)));
                format!("data @> CAST({p} AS JSONB)")
            })
            .collect();
        format!("({})", clauses.join(" OR "))
    }

    /// The SQL condition of validated predicates (ANDed), binding their
    /// values into `params` in placeholder order; `TRUE` for none.
    ///
    /// # Errors
    ///
    /// When the backend's literal quoting fails.
    pub fn predicates(
        &self,
        where_: &[Predicate],
        params: &mut Params,
    ) -> Result<String, DocumentError> {
        let mut clauses = Vec::with_capacity(where_.len());
        for predicate in where_ {
            let expression = self.field(&predicate.field)?;
            let value = &predicate.value;
            let clause = match predicate.operator.as_str() {
                "exists" => {
                    let not = if matches!(value, Value::Bool(true)) {
                        "NOT "
                    } else {
                        ""
                    };
                    format!("{expression} IS {not}NULL")
                }
                op @ ("eq" | "ne") => {
                    let clause = self.equal(&expression, value, params);
                    if op == "ne" {
                        format!("{expression} IS NOT NULL AND NOT COALESCE(({clause}), FALSE)")
                    } else if self.pg() {
                        let hint =
                            self.gin_hint(&predicate.field, std::slice::from_ref(value), params);
                        format!("{clause} AND {hint}")
                    } else {
                        clause
                    }
                }
                op @ ("in" | "nin") => {
                    let items: &[Value] = match value {
                        Value::List(items) => items,
                        _ => &[],
                    };
                    let alternatives: Vec<String> = items
                        .iter()
                        .map(|item| self.equal(&expression, item, params))
                        .collect();
                    let joined = if alternatives.is_empty() {
                        "FALSE".to_owned()
                    } else {
                        alternatives.join(" OR ")
                    };
                    let clause = format!("({joined})");
                    if op == "nin" {
                        format!("{expression} IS NOT NULL AND NOT COALESCE({clause}, FALSE)")
                    } else if self.pg() && !items.is_empty() {
                        let hint = self.gin_hint(&predicate.field, items, params);
                        format!("{clause} AND {hint}")
                    } else {
                        clause
                    }
                }
                "contains" => {
                    let kind = self.kind(&expression);
                    let (item, source) = if self.pg() {
                        (
                            "member.value".to_owned(),
                            format!(
                                "jsonb_array_elements(CASE WHEN {kind} = 'array' THEN {expression} ELSE '[]'::jsonb END) AS member(value)"
                            ),
                        )
                    } else {
                        (
                            format!("({expression} -> ('$[' || member.key || ']'))"),
                            format!(
                                "json_each(CASE WHEN {kind} = 'array' THEN {expression} ELSE '[]' END) AS member"
                            ),
                        )
                    };
                    let equal = self.equal(&item, value, params);
                    format!("EXISTS (SELECT 1 FROM {source} WHERE {equal})")
                }
                op => {
                    let compare = match op {
                        "lt" => "<",
                        "lte" => "<=",
                        "gt" => ">",
                        _ => ">=",
                    };
                    let parts = self.sort_parts(&predicate.field)?;
                    let (rank, number, text) = value_sort_parts(Some(value));
                    let is_numeric = matches!(rank, ValueKind::Bool | ValueKind::Number);
                    let rank_p = params.bind(SqlParam::Int(rank as i64));
                    let target = if is_numeric {
                        let p = params
                            .bind(SqlParam::Numeric(number_text(&number).unwrap_or_default()));
                        if self.pg() {
                            format!("CAST({p} AS NUMERIC)")
                        } else {
                            p
                        }
                    } else {
                        params.bind(SqlParam::Text(text))
                    };
                    let side = if is_numeric {
                        &parts.numeric
                    } else {
                        &parts.text
                    };
                    format!("{} = {rank_p} AND {side} {compare} {target}", parts.rank)
                }
            };
            clauses.push(format!("({clause})"));
        }
        Ok(if clauses.is_empty() {
            "TRUE".to_owned()
        } else {
            clauses.join(" AND ")
        })
    }
}
