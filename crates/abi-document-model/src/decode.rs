//! Put requests read straight from protobuf bytes into the model, without
//! building the `abi.document.v1` messages first: the mirror of
//! [`crate::encode`].
//!
//! prost decodes a document body into a map of generated `Value`s, and
//! [`crate::pb::data_from_pb_owned`] then moves it into a second map of the
//! model's values. For a put that is half the decoding's work thrown away.
//! Here a body in its usual shape (each map entry with one key and one
//! value, each value with one kind, nothing unknown, nothing deeper than
//! [`MAX_DEPTH`]) goes straight into the model. Anything else, valid or not,
//! is left to prost and the conversion, so its answer (or its error) stays
//! theirs. The tests check that whenever the short way answers, it answers
//! what the long way does.

use abi_proto::common::v1::CallContext;
use abi_proto::document::v1 as pb;
use prost::Message as _;
use prost::encoding::{WireType, decode_key, decode_varint};

use crate::encode::{ENTRY_KEY_TAG, ENTRY_VALUE_TAG, FIELDS_TAG, ITEMS_TAG, value_tag};
use crate::pb::data_from_pb_owned;
use crate::{Data, Datetime, DocumentError, Value};

/// How many messages deep the short way reads (a body, a map entry and a
/// value are one level each). prost refuses past 100, so anything the short
/// way reads, prost would have read too.
pub const MAX_DEPTH: u32 = 32;

/// Field numbers of `abi.document.v1.PutRequest`.
mod put_tag {
    pub const CONTEXT: u32 = 1;
    pub const NAMESPACE: u32 = 2;
    pub const COLLECTION: u32 = 3;
    pub const ID: u32 = 4;
    pub const DATA: u32 = 5;
    pub const IF_VERSION: u32 = 6;
}

/// Field numbers of `abi.document.v1.PutManyRequest`.
mod put_many_tag {
    pub const CONTEXT: u32 = 1;
    pub const PUTS: u32 = 2;
}

/// A put request as a service reads it: the message, and its document body
/// already in the model when it was read the short way (the message's
/// `data` is then `None`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IncomingPut {
    /// The request; its `data` is `None` when [`Self::body`] holds it.
    pub request: pb::PutRequest,
    /// The body in the model, when read straight from the bytes.
    pub body: Option<Data>,
}

impl IncomingPut {
    /// Decodes a `PutRequest`, its body straight into the model when it
    /// has the usual shape.
    ///
    /// # Errors
    ///
    /// prost's, for bytes that are not a `PutRequest`.
    pub fn decode(bytes: &[u8]) -> Result<Self, prost::DecodeError> {
        match read_put(bytes) {
            Some(put) => Ok(put),
            None => pb::PutRequest::decode(bytes).map(Self::from),
        }
    }

    /// The document body in the model: the one read the short way, or the
    /// message's converted.
    ///
    /// # Errors
    ///
    /// As [`data_from_pb_owned`]: a value without a kind, an unreadable
    /// datetime.
    pub fn take_body(&mut self) -> Result<Data, DocumentError> {
        match self.body.take() {
            Some(body) => Ok(body),
            None => data_from_pb_owned(self.request.data.take().unwrap_or_default()),
        }
    }
}

impl From<pb::PutRequest> for IncomingPut {
    fn from(request: pb::PutRequest) -> Self {
        Self {
            request,
            body: None,
        }
    }
}

/// A `PutManyRequest` as a service reads it: the message without its puts,
/// and each put as [`IncomingPut::decode`] reads it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IncomingPutMany {
    /// The request; its `puts` are empty, moved to [`Self::puts`].
    pub request: pb::PutManyRequest,
    /// The puts, in order.
    pub puts: Vec<IncomingPut>,
}

impl IncomingPutMany {
    /// Decodes a `PutManyRequest`, each body straight into the model when
    /// every put has the usual shape.
    ///
    /// # Errors
    ///
    /// prost's, for bytes that are not a `PutManyRequest`.
    pub fn decode(bytes: &[u8]) -> Result<Self, prost::DecodeError> {
        if let Some(many) = read_put_many(bytes) {
            return Ok(many);
        }
        let mut request = pb::PutManyRequest::decode(bytes)?;
        let puts = std::mem::take(&mut request.puts)
            .into_iter()
            .map(IncomingPut::from)
            .collect();
        Ok(Self { request, puts })
    }
}

/// The next length-delimited field's bytes.
fn delimited<'a>(buf: &mut &'a [u8]) -> Option<&'a [u8]> {
    let len = usize::try_from(decode_varint(buf).ok()?).ok()?;
    if len > buf.len() {
        return None;
    }
    let (field, rest) = buf.split_at(len);
    *buf = rest;
    Some(field)
}

fn text(bytes: &[u8]) -> Option<String> {
    std::str::from_utf8(bytes).ok().map(str::to_owned)
}

fn read_put_many(mut buf: &[u8]) -> Option<IncomingPutMany> {
    let mut many = IncomingPutMany::default();
    let mut context_seen = false;
    while !buf.is_empty() {
        match decode_key(&mut buf).ok()? {
            (put_many_tag::CONTEXT, WireType::LengthDelimited) if !context_seen => {
                many.request.context = Some(CallContext::decode(delimited(&mut buf)?).ok()?);
                context_seen = true;
            }
            (put_many_tag::PUTS, WireType::LengthDelimited) => {
                many.puts.push(read_put(delimited(&mut buf)?)?);
            }
            _ => return None,
        }
    }
    Some(many)
}

fn read_put(mut buf: &[u8]) -> Option<IncomingPut> {
    let mut request = pb::PutRequest::default();
    let (mut context_seen, mut body) = (false, None);
    while !buf.is_empty() {
        match decode_key(&mut buf).ok()? {
            (put_tag::CONTEXT, WireType::LengthDelimited) if !context_seen => {
                request.context = Some(CallContext::decode(delimited(&mut buf)?).ok()?);
                context_seen = true;
            }
            (put_tag::NAMESPACE, WireType::LengthDelimited) => {
                request.namespace = text(delimited(&mut buf)?)?;
            }
            (put_tag::COLLECTION, WireType::LengthDelimited) => {
                request.collection = text(delimited(&mut buf)?)?;
            }
            (put_tag::ID, WireType::LengthDelimited) => request.id = text(delimited(&mut buf)?)?,
            (put_tag::DATA, WireType::LengthDelimited) if body.is_none() => {
                body = Some(read_data(delimited(&mut buf)?, 1)?);
            }
            // An int64: the varint's bits, as prost reads it.
            #[allow(clippy::cast_possible_wrap)]
            (put_tag::IF_VERSION, WireType::Varint) => {
                request.if_version = Some(decode_varint(&mut buf).ok()? as i64);
            }
            _ => return None,
        }
    }
    Some(IncomingPut {
        request,
        body: Some(body.unwrap_or_default()),
    })
}

fn read_data(mut buf: &[u8], depth: u32) -> Option<Data> {
    if depth > MAX_DEPTH {
        return None;
    }
    // Writers send a map's entries in key order (prost, our encoder), so
    // they are gathered and the map built at once, in far fewer key
    // comparisons than inserting each.
    let mut entries: Vec<(String, Value)> = Vec::new();
    let mut in_order = true;
    while !buf.is_empty() {
        match decode_key(&mut buf).ok()? {
            (FIELDS_TAG, WireType::LengthDelimited) => {
                let (key, value) = read_entry(delimited(&mut buf)?, depth + 1)?;
                in_order &= entries.last().is_none_or(|(last, _)| *last < key);
                entries.push((key, value));
            }
            _ => return None,
        }
    }
    if in_order {
        return Some(entries.into_iter().collect());
    }
    // A key sent twice keeps its last value, as prost's map does.
    let mut data = Data::new();
    for (key, value) in entries {
        data.insert(key, value);
    }
    Some(data)
}

fn read_entry(mut buf: &[u8], depth: u32) -> Option<(String, Value)> {
    let (mut key, mut value) = (String::new(), None);
    while !buf.is_empty() {
        match decode_key(&mut buf).ok()? {
            (ENTRY_KEY_TAG, WireType::LengthDelimited) => key = text(delimited(&mut buf)?)?,
            // A value sent twice is merged by prost: left to it.
            (ENTRY_VALUE_TAG, WireType::LengthDelimited) if value.is_none() => {
                value = Some(read_value(delimited(&mut buf)?, depth + 1)?);
            }
            _ => return None,
        }
    }
    // An entry without a value holds a value without a kind, an error the
    // conversion words.
    Some((key, value?))
}

fn read_items(mut buf: &[u8], depth: u32) -> Option<Vec<Value>> {
    let mut items = Vec::new();
    while !buf.is_empty() {
        match decode_key(&mut buf).ok()? {
            (ITEMS_TAG, WireType::LengthDelimited) => {
                items.push(read_value(delimited(&mut buf)?, depth + 1)?);
            }
            _ => return None,
        }
    }
    Some(items)
}

/// One value with exactly one kind; none (an error the conversion words) or
/// several (prost keeps or merges the last) are left to prost.
fn read_value(mut buf: &[u8], depth: u32) -> Option<Value> {
    if depth > MAX_DEPTH {
        return None;
    }
    let value = match decode_key(&mut buf).ok()? {
        (value_tag::NULL, WireType::Varint) => {
            decode_varint(&mut buf).ok()?;
            Value::Null
        }
        (value_tag::STRING, WireType::LengthDelimited) => {
            Value::String(text(delimited(&mut buf)?)?)
        }
        (value_tag::INT, WireType::Varint) => {
            let n = decode_varint(&mut buf).ok()?;
            // sint64's zigzag.
            #[allow(clippy::cast_possible_wrap)]
            let int = ((n >> 1) as i64) ^ -((n & 1) as i64);
            Value::Int(int)
        }
        (value_tag::FLOAT, WireType::SixtyFourBit) => {
            let (bits, rest) = buf.split_first_chunk::<8>()?;
            buf = rest;
            Value::Float(f64::from_le_bytes(*bits))
        }
        (value_tag::BOOL, WireType::Varint) => Value::Bool(decode_varint(&mut buf).ok()? != 0),
        (value_tag::BYTES, WireType::LengthDelimited) => {
            Value::Bytes(delimited(&mut buf)?.to_vec())
        }
        (value_tag::DATETIME, WireType::LengthDelimited) => {
            let text = std::str::from_utf8(delimited(&mut buf)?).ok()?;
            Value::Datetime(Datetime::parse_iso(text).ok()?)
        }
        (value_tag::LIST, WireType::LengthDelimited) => {
            Value::List(read_items(delimited(&mut buf)?, depth + 1)?)
        }
        (value_tag::OBJECT, WireType::LengthDelimited) => {
            Value::Object(read_data(delimited(&mut buf)?, depth + 1)?)
        }
        _ => return None,
    };
    buf.is_empty().then_some(value)
}

#[cfg(test)]
mod tests;
