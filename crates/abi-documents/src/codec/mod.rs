//! The reference's storage codec (`document_codec.py`), byte for byte:
//! canonical JSON, the stored form of values, equality and sort keys, exact
//! numeric comparison, and `find` cursors.

mod cursor;
mod decimal;
mod keys;
mod storage;
mod stored_pb;

pub use abi_pyjson::{
    Json, JsonError, dumps, exact_integer_text, json_string, parse, python_repr, repr_integer_text,
};
pub use cursor::{CursorKey, INVALID_CURSOR, fingerprint, next_cursor, read_cursor};
pub use decimal::compare_numeric_text;
pub use keys::{
    ValueKind, base64_decode, equality_key, expect_written, number_text, sqlite_bytes_key,
    sqlite_field, sqlite_field_bytes, sqlite_json_key, sqlite_legacy_json_key, sqlite_numeric_text,
    value_json_key, value_sort_parts,
};
#[cfg(test)]
pub(crate) use storage::tests::sample_values;
pub use storage::{
    PAYLOAD, TAG, as_stored, decode, decode_data, encode, encode_data, storage_key, stored_text,
    stored_text_and_members, stored_value_text,
};
pub use stored_pb::write_stored_data;
