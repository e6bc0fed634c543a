//! Opaque `find` cursors, byte-identical to the reference's:
//! `urlsafe_b64encode(dumps({"v": 1, "q": <fingerprint>, "key": <key>}))`.

use abi_document_model::validate::validate_name;
use abi_document_model::{Document, DocumentError, OrderBy, Predicate};
use base64::Engine;
use sha2::{Digest, Sha256};

use super::keys::{ValueKind, base64_decode, number_text, value_sort_parts};
use super::storage::encode;
use abi_pyjson::dumps;
use abi_pyjson::{self as json, Json};

/// The message of every refused cursor.
pub const INVALID_CURSOR: &str = "Invalid cursor for this query";

/// Where a page ended, read from a cursor: the last item's sort parts (with
/// an `order_by`) and its id, ready to bind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CursorKey {
    /// `(kind rank, number as decimal text, text)` of the ordered field.
    pub sort: Option<(i64, String, String)>,
    /// The last item's id.
    pub id: String,
}

/// The query fingerprint a cursor is bound to: the SHA-256 hex of the
/// canonical JSON of `[namespace, collection, predicates sorted by their
/// canonical JSON, [field, direction] or null]`, values encoded as stored.
/// Reordered predicates give the same fingerprint.
pub fn fingerprint(
    namespace: &str,
    collection: &str,
    where_: &[Predicate],
    order_by: Option<&OrderBy>,
) -> String {
    let mut predicates: Vec<(String, Json)> = where_
        .iter()
        .map(|p| {
            let item = Json::Array(vec![
                Json::Str(p.field.clone()),
                Json::Str(p.operator.clone()),
                encode(&p.value),
            ]);
            (dumps(&item), item)
        })
        .collect();
    // Python's sorted() with key=dumps: a stable sort on the ASCII text.
    predicates.sort_by(|a, b| a.0.cmp(&b.0));
    let order = match order_by {
        Some(o) => Json::Array(vec![
            Json::Str(o.field.clone()),
            Json::Str(o.direction.clone()),
        ]),
        None => Json::Null,
    };
    let query = Json::Array(vec![
        Json::Str(namespace.to_owned()),
        Json::Str(collection.to_owned()),
        Json::Array(predicates.into_iter().map(|(_, item)| item).collect()),
        order,
    ]);
    hex::encode(Sha256::digest(dumps(&query).as_bytes()))
}

/// The cursor resuming a query right after `last`.
pub fn next_cursor(fingerprint: &str, order_by: Option<&OrderBy>, last: &Document) -> String {
    let mut key = Vec::new();
    if let Some(order) = order_by {
        let (kind, number, text) = value_sort_parts(last.data.get(&order.field));
        key.extend([Json::Int(kind as i64), number, Json::Str(text)]);
    }
    key.push(Json::Str(last.id.clone()));
    let token = Json::Object(
        [
            ("v".to_owned(), Json::Int(1)),
            ("q".to_owned(), Json::Str(fingerprint.to_owned())),
            ("key".to_owned(), Json::Array(key)),
        ]
        .into_iter()
        .collect(),
    );
    base64::engine::general_purpose::URL_SAFE.encode(dumps(&token))
}

/// Reads a cursor for the query with `fingerprint`, with every check the
/// reference makes.
///
/// # Errors
///
/// `INVALID_ARGUMENT` "Invalid cursor for this query" for anything but a
/// cursor this query issued (or an equal one).
pub fn read_cursor(
    cursor: &str,
    fingerprint: &str,
    ordered: bool,
) -> Result<CursorKey, DocumentError> {
    parse_cursor(cursor, fingerprint, ordered).ok_or_else(|| DocumentError::invalid(INVALID_CURSOR))
}

fn parse_cursor(cursor: &str, fingerprint: &str, ordered: bool) -> Option<CursorKey> {
    // b64decode(altchars=b"-_") maps the URL-safe characters onto the
    // standard ones, so a cursor may mix both alphabets.
    let standard: String = cursor
        .chars()
        .map(|c| match c {
            '-' => '+',
            '_' => '/',
            c => c,
        })
        .collect();
    let bytes = base64_decode(&standard)?;
    let token = json::parse(std::str::from_utf8(&bytes).ok()?).ok()?;
    let Json::Object(token) = token else {
        return None;
    };
    // Python compares `token["v"] != 1`, so `1.0` and `true` pass too.
    match token.get("v")? {
        Json::Int(1) | Json::Bool(true) => {}
        Json::Float(x) if *x == 1.0 => {}
        _ => return None,
    }
    match token.get("q")? {
        Json::Str(q) if q == fingerprint => {}
        _ => return None,
    }
    let Json::Array(key) = token.get("key")? else {
        return None;
    };
    if key.len() != if ordered { 4 } else { 1 } {
        return None;
    }
    let Json::Str(id) = key.last()? else {
        return None;
    };
    validate_name(id).ok()?;
    if !key.iter().all(valid_value) {
        return None;
    }
    let sort = if ordered {
        let rank = match &key[0] {
            Json::Int(n) if (ValueKind::Null as i64..=ValueKind::Object as i64).contains(n) => *n,
            _ => return None,
        };
        let number = match &key[1] {
            n @ (Json::Int(_) | Json::Float(_)) => number_text(n)?,
            _ => return None,
        };
        let Json::Str(text) = &key[2] else {
            return None;
        };
        Some((rank, number, text.clone()))
    } else {
        None
    };
    Some(CursorKey {
        sort,
        id: id.clone(),
    })
}

/// `validate_value` on parsed JSON: no NUL in strings or keys, integers in
/// 64 bits, finite floats.
fn valid_value(value: &Json) -> bool {
    match value {
        Json::Str(s) => !s.contains('\0'),
        Json::BigInt(_) => false,
        Json::Float(x) => x.is_finite(),
        Json::Array(items) => items.iter().all(valid_value),
        Json::Object(members) => members
            .iter()
            .all(|(k, v)| !k.contains('\0') && valid_value(v)),
        Json::Null | Json::Bool(_) | Json::Int(_) => true,
    }
}
