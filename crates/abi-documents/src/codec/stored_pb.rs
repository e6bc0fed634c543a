//! A stored document's JSON text written straight to protobuf, for a get's
//! reply: no [`abi_pyjson::Json`] tree and no document values in between.
//!
//! It takes the text as both services store it (`dumps` of [`super::encode`]:
//! keys sorted and unique, tags exactly `{"$t": <kind>, "$v": <text>}`) and
//! refuses anything else, leaving it to the general path (parse, decode,
//! encode), which gives the answer or the error for any text. Where it
//! takes a text it writes exactly the bytes the general path writes, which
//! the tests check over every kind of value.

use std::borrow::Cow;

use abi_document_model::Datetime;
use abi_document_model::Value;
use abi_document_model::encode::{
    ENTRY_KEY_TAG, ENTRY_VALUE_TAG, FIELDS_TAG, ITEMS_TAG, close_delimited, open_delimited,
    value_tag,
};
use abi_pyjson::{Cursor, Next, Scalar};
use prost::encoding::{self, WireType, encode_key, encode_varint};

use super::keys::base64_decode;
use super::storage::{PAYLOAD, TAG, decode_float};

/// Appends the body of the `abi.document.v1.Data` message the stored JSON
/// `text` reads back as, and returns `true`; or returns `false`, with `buf`
/// as it was, when the text is not in the form this path takes (then the
/// general path answers, an error included).
pub fn write_stored_data(text: &str, buf: &mut Vec<u8>) -> bool {
    let start = buf.len();
    let written = (|| {
        let mut cursor = Cursor::new(text);
        if cursor.next() != Next::Object {
            return None;
        }
        match cursor.enter_object().ok()? {
            None => {}
            // A tag at the top is no document: the general path refuses it.
            Some(key) if key == TAG => return None,
            Some(key) => members(&mut cursor, key, buf)?,
        }
        cursor.finish().ok()
    })();
    if written.is_none() {
        buf.truncate(start);
    }
    written.is_some()
}

fn write_str(tag: u32, text: &str, buf: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(text.len() as u64, buf);
    buf.extend_from_slice(text.as_bytes());
}

/// The members of an object whose first key was read: map entries in key
/// order, keys unescaped. `None` for keys out of order or repeated, or a
/// key with a single leading `$` (only tags have one).
fn members<'a>(cursor: &mut Cursor<'a>, first: Cow<'a, str>, buf: &mut Vec<u8>) -> Option<()> {
    let mut previous: Option<Cow<'a, str>> = None;
    let mut key = Some(first);
    while let Some(raw) = key {
        let name = unescaped(raw)?;
        if previous.as_ref().is_some_and(|p| **p >= *name) {
            return None;
        }
        let entry = open_delimited(FIELDS_TAG, buf);
        if !name.is_empty() {
            write_str(ENTRY_KEY_TAG, &name, buf);
        }
        let value_at = open_delimited(ENTRY_VALUE_TAG, buf);
        value(cursor, buf)?;
        close_delimited(value_at, buf);
        close_delimited(entry, buf);
        previous = Some(name);
        key = cursor.after_member().ok()?;
    }
    Some(())
}

/// A stored key as the document names it: `$$x` is `$x`; `$x` is a tag's.
fn unescaped(raw: Cow<'_, str>) -> Option<Cow<'_, str>> {
    if !raw.starts_with('$') {
        return Some(raw);
    }
    if !raw.starts_with("$$") {
        return None;
    }
    Some(match raw {
        Cow::Borrowed(text) => Cow::Borrowed(&text[1..]),
        Cow::Owned(mut text) => {
            text.remove(0);
            Cow::Owned(text)
        }
    })
}

/// The `Value` message body of the value at the cursor.
fn value(cursor: &mut Cursor<'_>, buf: &mut Vec<u8>) -> Option<()> {
    use value_tag as t;
    match cursor.next() {
        Next::Scalar => match cursor.scalar().ok()? {
            Scalar::Null => encoding::bool::encode(t::NULL, &true, buf),
            Scalar::Bool(b) => encoding::bool::encode(t::BOOL, &b, buf),
            Scalar::Int(n) => encoding::sint64::encode(t::INT, &n, buf),
            // As the general path reads an integer beyond 64 bits.
            Scalar::BigInt(text) => encoding::double::encode(t::FLOAT, &text.parse().ok()?, buf),
            Scalar::Float(x) => match decode_float(x) {
                Value::Int(n) => encoding::sint64::encode(t::INT, &n, buf),
                _ => encoding::double::encode(t::FLOAT, &x, buf),
            },
            Scalar::Str(text) => write_str(t::STRING, &text, buf),
        },
        Next::Array => {
            let list = open_delimited(t::LIST, buf);
            let mut more = cursor.enter_array().ok()?;
            while more {
                let item = open_delimited(ITEMS_TAG, buf);
                value(cursor, buf)?;
                close_delimited(item, buf);
                more = cursor.after_item().ok()?;
            }
            close_delimited(list, buf);
        }
        Next::Object => match cursor.enter_object().ok()? {
            None => {
                open_delimited(t::OBJECT, buf);
            }
            Some(key) if key == TAG => tagged(cursor, buf)?,
            Some(key) => {
                let object = open_delimited(t::OBJECT, buf);
                members(cursor, key, buf)?;
                close_delimited(object, buf);
            }
        },
    }
    Some(())
}

/// A tagged value whose `$t` key was read: exactly `{"$t": "datetime" or
/// "bytes", "$v": <string>}`.
fn tagged(cursor: &mut Cursor<'_>, buf: &mut Vec<u8>) -> Option<()> {
    let Scalar::Str(kind) = cursor.scalar().ok()? else {
        return None;
    };
    if cursor.after_member().ok()?.as_deref() != Some(PAYLOAD) {
        return None;
    }
    let Scalar::Str(payload) = cursor.scalar().ok()? else {
        return None;
    };
    if cursor.after_member().ok()?.is_some() {
        return None;
    }
    match &*kind {
        "datetime" => {
            let at = Datetime::parse_iso(&payload).ok()?;
            write_str(value_tag::DATETIME, &at.isoformat(), buf);
        }
        "bytes" => {
            let bytes = base64_decode(&payload)?;
            encode_key(value_tag::BYTES, WireType::LengthDelimited, buf);
            encode_varint(bytes.len() as u64, buf);
            buf.extend_from_slice(&bytes);
        }
        _ => return None,
    }
    Some(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use abi_document_model::Data;
    use abi_document_model::encode::encode_data_body;

    use super::*;
    use crate::codec::{decode_data, parse, sample_values, stored_text};

    /// What the general path writes for `text`, if it reads it.
    fn general(text: &str) -> Option<Vec<u8>> {
        let data = decode_data(parse(text).ok()?).ok()?;
        let mut buf = Vec::new();
        encode_data_body(&data, &mut buf);
        Some(buf)
    }

    fn direct(text: &str) -> Option<Vec<u8>> {
        let mut buf = vec![7];
        let taken = write_stored_data(text, &mut buf);
        assert_eq!(buf.first(), Some(&7), "what was in the buffer stays");
        if !taken {
            assert_eq!(buf, [7], "nothing is left behind: {text}");
            return None;
        }
        Some(buf.split_off(1))
    }

    #[test]
    fn writes_what_the_general_path_writes_for_every_stored_value() {
        let values = sample_values();
        let mut documents: Vec<Data> = vec![Data::new()];
        for (n, value) in values.iter().enumerate() {
            documents.push(Data::from([
                (format!("k{n}"), value.clone()),
                ("$x".to_owned(), value.clone()),
                (
                    "$$y".to_owned(),
                    Value::List(vec![value.clone(), Value::Null]),
                ),
                (String::new(), value.clone()),
            ]));
        }
        // Large enough that lengths take two and three bytes.
        documents.push(Data::from([
            ("big".to_owned(), Value::String("x".repeat(20_000))),
            (
                "nested".to_owned(),
                Value::Object(Data::from([(
                    "list".to_owned(),
                    Value::List(values.clone()),
                )])),
            ),
        ]));
        for data in documents {
            let text = stored_text(&data);
            let ours = direct(&text).unwrap_or_else(|| panic!("taken: {text:.200}"));
            assert_eq!(Some(ours), general(&text), "{text:.200}");
        }
    }

    #[test]
    fn leaves_other_texts_to_the_general_path() {
        let table: [(&str, bool); 16] = [
            (r#"{"b": 1, "a": 2}"#, false),
            (r#"{"a": 1, "a": 2}"#, false),
            (
                r#"{"$t": "datetime", "$v": "2024-01-02T03:04:05.000006+00:00"}"#,
                false,
            ),
            (
                r#"{"a": {"$t": "datetime", "$v": "2024-01-02T03:04:05+00:00", "x": 1}}"#,
                false,
            ),
            (r#"{"a": {"$t": "bytes", "$v": "not base64!"}}"#, false),
            (r#"{"a": {"$t": "other", "$v": "x"}}"#, false),
            (r#"{"a": {"$t": 1, "$v": "x"}}"#, false),
            (r#"{"a": {"$x": 1}}"#, false),
            (r#"{"a": 1} x"#, false),
            ("[1]", false),
            ("not json", false),
            (
                r#"{"a": 1e400, "b": 100000000000000000000, "c": 1.0, "d": -0.0}"#,
                true,
            ),
            (r#" { "a" : [ ] , "b" : { } , "c" : "\u00e9\"" } "#, true),
            (
                r#"{"a": {"$t": "datetime", "$v": "2024-01-02T03:04:05+00:00"}}"#,
                true,
            ),
            (
                r#"{"a": {"$t": "bytes", "$v": "AAH/"}, "\u00e9": null}"#,
                true,
            ),
            (r#"{"$$t": true, "a": false}"#, true),
        ];
        for (text, taken) in table {
            let ours = direct(text);
            assert_eq!(ours.is_some(), taken, "{text}");
            if let Some(ours) = ours {
                assert_eq!(Some(ours), general(text), "{text}");
            }
        }
    }
}
