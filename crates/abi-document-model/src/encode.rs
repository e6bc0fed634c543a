//! Protobuf bytes written straight from the model, without building the
//! `abi.document.v1` messages first.
//!
//! [`crate::pb`] converts a document to its generated message, copying every
//! key and string, and prost then encodes that copy. On the hot paths (a
//! put's request in the SDK, a put's reply in the service) the copy is all
//! waste, so these functions write the same bytes as prost would from the
//! converted message (field order, map entries in key order, defaults
//! skipped as prost skips them), checked byte for byte against it in the
//! tests below.

use prost::encoding::{self, WireType, encode_key, encode_varint, encoded_len_varint, key_len};

use crate::{Data, Datetime, Document, Value};

/// Field numbers of `abi.document.v1.Value`'s `kind`.
pub mod value_tag {
    /// `null_value`.
    pub const NULL: u32 = 1;
    /// `string_value`.
    pub const STRING: u32 = 2;
    /// `int_value`.
    pub const INT: u32 = 3;
    /// `float_value`.
    pub const FLOAT: u32 = 4;
    /// `bool_value`.
    pub const BOOL: u32 = 5;
    /// `bytes_value`.
    pub const BYTES: u32 = 6;
    /// `datetime_value`.
    pub const DATETIME: u32 = 7;
    /// `list_value`.
    pub const LIST: u32 = 8;
    /// `object_value`.
    pub const OBJECT: u32 = 9;
}

/// `Data.fields`.
pub const FIELDS_TAG: u32 = 1;
/// `Values.items`.
pub const ITEMS_TAG: u32 = 1;
/// A map entry's key.
pub const ENTRY_KEY_TAG: u32 = 1;
/// A map entry's value.
pub const ENTRY_VALUE_TAG: u32 = 2;

/// Field numbers of `abi.document.v1.Document`.
mod document_tag {
    pub const ID: u32 = 1;
    pub const DATA: u32 = 2;
    pub const CREATED_AT: u32 = 3;
    pub const UPDATED_AT: u32 = 4;
    pub const VERSION: u32 = 5;
}

/// The length of a length-delimited field `tag` holding `len` bytes.
fn delimited_len(tag: u32, len: usize) -> usize {
    key_len(tag) + encoded_len_varint(len as u64) + len
}

fn encode_delimited_header(tag: u32, len: usize, buf: &mut Vec<u8>) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(len as u64, buf);
}

/// Opens length-delimited field `tag` with a one-byte length, to be set by
/// [`close_delimited`] once its body is written; returns where the body
/// starts. Most bodies take under 128 bytes, so one pass writes them, where
/// a length written first would have to be computed by a pass of its own.
pub fn open_delimited(tag: u32, buf: &mut Vec<u8>) -> usize {
    encode_key(tag, WireType::LengthDelimited, buf);
    buf.push(0);
    buf.len()
}

/// Writes the length of the field [`open_delimited`] opened at `start`
/// (its body is what `buf` holds from there), widening it in place when it
/// takes more than one byte.
pub fn close_delimited(start: usize, buf: &mut Vec<u8>) {
    let len = buf.len() - start;
    if let Ok(byte) = u8::try_from(len)
        && byte < 0x80
    {
        buf[start - 1] = byte;
        return;
    }
    let width = encoded_len_varint(len as u64);
    buf.splice(start..start, std::iter::repeat_n(0, width - 1));
    // A varint of a usize takes at most 10 bytes.
    let mut length = [0u8; 10];
    let mut rest = len;
    for byte in &mut length[..width] {
        // The low seven bits, then a continuation bit on all but the last.
        *byte = (rest & 0x7f) as u8 | 0x80;
        rest >>= 7;
    }
    length[width - 1] &= 0x7f;
    buf[start - 1..start - 1 + width].copy_from_slice(&length[..width]);
}

fn encode_str(tag: u32, text: &str, buf: &mut Vec<u8>) {
    encode_delimited_header(tag, text.len(), buf);
    buf.extend_from_slice(text.as_bytes());
}

/// The encoded length of a `Value` message's body.
fn value_len(value: &Value) -> usize {
    use value_tag as t;
    match value {
        Value::Null => key_len(t::NULL) + 1,
        Value::Bool(_) => key_len(t::BOOL) + 1,
        Value::Int(n) => encoding::sint64::encoded_len(t::INT, n),
        Value::Float(_) => key_len(t::FLOAT) + 8,
        Value::String(s) => delimited_len(t::STRING, s.len()),
        Value::Bytes(b) => delimited_len(t::BYTES, b.len()),
        Value::Datetime(d) => delimited_len(t::DATETIME, d.isoformat_len()),
        Value::List(items) => delimited_len(t::LIST, list_len(items)),
        Value::Object(data) => delimited_len(t::OBJECT, data_len(data)),
    }
}

fn encode_value(value: &Value, buf: &mut Vec<u8>) {
    use value_tag as t;
    match value {
        Value::Null => encoding::bool::encode(t::NULL, &true, buf),
        Value::Bool(b) => encoding::bool::encode(t::BOOL, b, buf),
        Value::Int(n) => encoding::sint64::encode(t::INT, n, buf),
        Value::Float(x) => encoding::double::encode(t::FLOAT, x, buf),
        Value::String(s) => encode_str(t::STRING, s, buf),
        Value::Bytes(b) => {
            encode_delimited_header(t::BYTES, b.len(), buf);
            buf.extend_from_slice(b);
        }
        Value::Datetime(d) => encode_str(t::DATETIME, &d.isoformat(), buf),
        Value::List(items) => {
            let list = open_delimited(t::LIST, buf);
            for item in items {
                let at = open_delimited(ITEMS_TAG, buf);
                encode_value(item, buf);
                close_delimited(at, buf);
            }
            close_delimited(list, buf);
        }
        Value::Object(data) => {
            let object = open_delimited(t::OBJECT, buf);
            encode_data_body(data, buf);
            close_delimited(object, buf);
        }
    }
}

/// The encoded length of a `Values` message's body.
fn list_len(items: &[Value]) -> usize {
    items
        .iter()
        .map(|item| delimited_len(ITEMS_TAG, value_len(item)))
        .sum()
}

/// A map entry's body: the key unless empty (prost skips defaults in
/// entries), then the value (never the default: a model value has a kind).
fn entry_len(key: &str, value: &Value) -> usize {
    let key = if key.is_empty() {
        0
    } else {
        delimited_len(ENTRY_KEY_TAG, key.len())
    };
    key + delimited_len(ENTRY_VALUE_TAG, value_len(value))
}

/// The encoded length of a `Data` message's body.
pub fn data_len(data: &Data) -> usize {
    data.iter()
        .map(|(key, value)| delimited_len(FIELDS_TAG, entry_len(key, value)))
        .sum()
}

/// Appends the body of the `Data` message holding `data` (what
/// `prost::Message::encode_raw` writes for [`crate::pb::data_to_pb`]).
pub fn encode_data_body(data: &Data, buf: &mut Vec<u8>) {
    for (key, value) in data {
        let entry = open_delimited(FIELDS_TAG, buf);
        if !key.is_empty() {
            encode_str(ENTRY_KEY_TAG, key, buf);
        }
        let at = open_delimited(ENTRY_VALUE_TAG, buf);
        encode_value(value, buf);
        close_delimited(at, buf);
        close_delimited(entry, buf);
    }
}

/// Appends field `tag` holding the `Data` message of `data`.
pub fn encode_data_field(tag: u32, data: &Data, buf: &mut Vec<u8>) {
    let field = open_delimited(tag, buf);
    encode_data_body(data, buf);
    close_delimited(field, buf);
}

/// The encoded length of the `Document` message of `doc`.
fn document_len(doc: &Document) -> usize {
    document_body_len(
        &doc.id,
        &doc.data,
        [&doc.created_at, &doc.updated_at],
        doc.version,
    )
}

/// The encoded length of a `Document` message of these parts.
fn document_body_len(id: &str, data: &Data, stamps: [&Datetime; 2], version: i64) -> usize {
    let [created_at, updated_at] = stamps;
    document_len_of(
        id,
        data_len(data),
        [created_at.isoformat_len(), updated_at.isoformat_len()],
        version,
    )
}

/// The encoded length of a `Document` message whose data body, created and
/// updated stamps take `data_len` and `stamp_lens` bytes.
fn document_len_of(id: &str, data_len: usize, stamp_lens: [usize; 2], version: i64) -> usize {
    use document_tag as t;
    let text = |tag, len| if len == 0 { 0 } else { delimited_len(tag, len) };
    let [created_at, updated_at] = stamp_lens;
    text(t::ID, id.len())
        + delimited_len(t::DATA, data_len)
        + text(t::CREATED_AT, created_at)
        + text(t::UPDATED_AT, updated_at)
        + if version == 0 {
            0
        } else {
            encoding::int64::encoded_len(t::VERSION, &version)
        }
}

/// The encoded length of field `tag` holding a `Document` message of these
/// parts (`stamps`: created, updated), what [`encode_document_field`] would
/// write for them, found without building the document.
pub fn document_field_len(
    tag: u32,
    id: &str,
    data: &Data,
    stamps: [&Datetime; 2],
    version: i64,
) -> usize {
    delimited_len(tag, document_body_len(id, data, stamps, version))
}

/// Appends field `tag` holding a `Document` message of these parts whose
/// data is already encoded: `data_body` is the body of its `Data` message
/// (what [`encode_data_body`] writes). The same bytes as
/// [`encode_document_field`] for the document with that data.
pub fn encode_document_field_with_body(
    tag: u32,
    id: &str,
    data_body: &[u8],
    stamps: [&Datetime; 2],
    version: i64,
    buf: &mut Vec<u8>,
) {
    use document_tag as t;
    let [created_at, updated_at] = stamps;
    let (created_at, updated_at) = (created_at.isoformat(), updated_at.isoformat());
    let len = document_len_of(
        id,
        data_body.len(),
        [created_at.len(), updated_at.len()],
        version,
    );
    buf.reserve(delimited_len(tag, len));
    encode_delimited_header(tag, len, buf);
    if !id.is_empty() {
        encode_str(t::ID, id, buf);
    }
    encode_delimited_header(t::DATA, data_body.len(), buf);
    buf.extend_from_slice(data_body);
    encode_str(t::CREATED_AT, &created_at, buf);
    encode_str(t::UPDATED_AT, &updated_at, buf);
    if version != 0 {
        encoding::int64::encode(t::VERSION, &version, buf);
    }
}

/// Appends field `tag` holding the `Document` message of `doc` (what
/// prost writes for [`crate::pb::document_to_pb`]).
pub fn encode_document_field(tag: u32, doc: &Document, buf: &mut Vec<u8>) {
    use document_tag as t;
    encode_delimited_header(tag, document_len(doc), buf);
    if !doc.id.is_empty() {
        encode_str(t::ID, &doc.id, buf);
    }
    encode_data_field(t::DATA, &doc.data, buf);
    // isoformat is never empty; prost would skip an empty string.
    encode_str(t::CREATED_AT, &doc.created_at.isoformat(), buf);
    encode_str(t::UPDATED_AT, &doc.updated_at.isoformat(), buf);
    if doc.version != 0 {
        encoding::int64::encode(t::VERSION, &doc.version, buf);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use prost::Message as _;

    use super::*;
    use crate::pb::{data_to_pb, document_to_pb};
    use abi_proto::document::v1 as pb;

    fn sample() -> Data {
        let mut inner = Data::new();
        inner.insert("deep".into(), Value::List(vec![]));
        inner.insert(String::new(), Value::String(String::new()));
        let mut data = Data::new();
        data.insert("null".into(), Value::Null);
        data.insert("t".into(), Value::Bool(true));
        data.insert("f".into(), Value::Bool(false));
        data.insert("zero".into(), Value::Int(0));
        data.insert("neg".into(), Value::Int(i64::MIN));
        data.insert("big".into(), Value::Int(i64::MAX));
        data.insert("float".into(), Value::Float(-0.0));
        data.insert("pi".into(), Value::Float(3.25));
        data.insert("empty".into(), Value::String(String::new()));
        data.insert("text".into(), Value::String("héllo \u{1F600}".repeat(40)));
        data.insert("bytes".into(), Value::Bytes(vec![0, 1, 255]));
        data.insert(
            "at".into(),
            Value::Datetime(Datetime::from_unix_micros(1_700_000_000_000_000).unwrap()),
        );
        data.insert(
            "at_us".into(),
            Value::Datetime(Datetime::from_unix_micros(-1_700_000_000_000_123).unwrap()),
        );
        data.insert(
            "list".into(),
            Value::List(vec![
                Value::Int(-3),
                Value::Object(inner.clone()),
                Value::Null,
            ]),
        );
        data.insert("obj".into(), Value::Object(inner));
        data.insert(String::new(), Value::Int(7));
        data
    }

    #[test]
    fn data_bytes_are_prosts() {
        for data in [Data::new(), sample()] {
            let mut ours = Vec::new();
            encode_data_body(&data, &mut ours);
            assert_eq!(ours, data_to_pb(&data).encode_to_vec());
            assert_eq!(data_len(&data), ours.len());
            let request = pb::PutRequest {
                data: Some(data_to_pb(&data)),
                ..Default::default()
            };
            let mut field = Vec::new();
            encode_data_field(5, &data, &mut field);
            assert_eq!(field, request.encode_to_vec());
        }
    }

    #[test]
    fn lengths_of_every_width_are_written_as_prost_writes_them() {
        // Bodies around each width's edge (one, two, three and four bytes of
        // length), alone, in a list and in an object two levels down, so
        // every enclosing length widens too.
        for len in [0, 1, 120, 127, 128, 16_370, 16_383, 16_384, 2_097_152] {
            let text = Value::String("x".repeat(len));
            let mut inner = Data::new();
            inner.insert("s".into(), text.clone());
            let mut middle = Data::new();
            middle.insert("o".into(), Value::Object(inner));
            let mut data = Data::new();
            data.insert("a".into(), text.clone());
            data.insert("l".into(), Value::List(vec![text, Value::Int(1)]));
            data.insert("o".into(), Value::Object(middle));
            // After what the buffer already held.
            let mut ours = vec![0xAA];
            encode_data_field(3, &data, &mut ours);
            let mut expected = vec![0xAA];
            prost::encoding::message::encode(3, &data_to_pb(&data), &mut expected);
            assert_eq!(ours, expected, "{len}");
            let mut body = Vec::new();
            encode_data_body(&data, &mut body);
            assert_eq!(body, data_to_pb(&data).encode_to_vec(), "{len}");
            assert_eq!(body.len(), data_len(&data), "{len}");
        }
    }

    #[test]
    fn document_bytes_are_prosts() {
        let at = |micros| Datetime::from_unix_micros(micros).unwrap();
        for (id, version) in [("doc-1", 3), ("", 0), ("x", -1)] {
            let doc = Document {
                id: id.into(),
                data: sample(),
                created_at: at(1_700_000_000_000_000),
                updated_at: at(1_700_000_000_654_321),
                version,
            };
            let reply = pb::PutResponse {
                document: Some(document_to_pb(&doc)),
                ..Default::default()
            };
            let mut ours = Vec::new();
            encode_document_field(2, &doc, &mut ours);
            assert_eq!(ours, reply.encode_to_vec());
            let stamps = [&doc.created_at, &doc.updated_at];
            let mut body = Vec::new();
            encode_data_body(&doc.data, &mut body);
            let mut from_body = Vec::new();
            encode_document_field_with_body(2, id, &body, stamps, version, &mut from_body);
            assert_eq!(from_body, ours);
            assert_eq!(
                document_field_len(2, &doc.id, &doc.data, stamps, version),
                reply.encoded_len()
            );
        }
    }
}
