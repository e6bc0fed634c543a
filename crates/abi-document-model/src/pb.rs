//! The protobuf form of the model (`abi.document.v1`), both ways, as the
//! reference's `values.py` and `document_nats_codec.py` convert.

use abi_proto::document::v1 as pb;
use pb::value::Kind;

use crate::{
    CollectionSpec, Data, Datetime, Document, DocumentError, FieldSpec, OrderBy, Predicate, Value,
};

/// Reads a wire value.
///
/// # Errors
///
/// `INVALID_ARGUMENT` for a value without a kind or an unreadable datetime
/// (NaN and NUL pass here and are refused by [`crate::validate`], as in the
/// reference).
pub fn value_from_pb(value: &pb::Value) -> Result<Value, DocumentError> {
    let Some(kind) = &value.kind else {
        return Err(DocumentError::invalid("Document value has no kind"));
    };
    Ok(match kind {
        Kind::NullValue(_) => Value::Null,
        Kind::StringValue(s) => Value::String(s.clone()),
        Kind::IntValue(n) => Value::Int(*n),
        Kind::FloatValue(x) => Value::Float(*x),
        Kind::BoolValue(b) => Value::Bool(*b),
        Kind::BytesValue(b) => Value::Bytes(b.clone()),
        Kind::DatetimeValue(s) => Value::Datetime(Datetime::parse_iso(s)?),
        Kind::ListValue(list) => Value::List(
            list.items
                .iter()
                .map(value_from_pb)
                .collect::<Result<_, _>>()?,
        ),
        Kind::ObjectValue(data) => Value::Object(data_from_pb(data)?),
    })
}

/// Reads a wire document body.
///
/// # Errors
///
/// As [`value_from_pb`], for the first bad field.
pub fn data_from_pb(data: &pb::Data) -> Result<Data, DocumentError> {
    data.fields
        .iter()
        .map(|(k, v)| Ok((k.clone(), value_from_pb(v)?)))
        .collect()
}

/// [`value_from_pb`], moving the strings and bytes out of `value` instead
/// of copying them.
///
/// # Errors
///
/// As [`value_from_pb`].
pub fn value_from_pb_owned(value: pb::Value) -> Result<Value, DocumentError> {
    let Some(kind) = value.kind else {
        return Err(DocumentError::invalid("Document value has no kind"));
    };
    Ok(match kind {
        Kind::StringValue(s) => Value::String(s),
        Kind::BytesValue(b) => Value::Bytes(b),
        Kind::ListValue(list) => Value::List(
            list.items
                .into_iter()
                .map(value_from_pb_owned)
                .collect::<Result<_, _>>()?,
        ),
        Kind::ObjectValue(data) => Value::Object(data_from_pb_owned(data)?),
        scalar => value_from_pb(&pb::Value { kind: Some(scalar) })?,
    })
}

/// [`data_from_pb`], moving the keys and values out of `data`.
///
/// # Errors
///
/// As [`value_from_pb`], for the first bad field.
pub fn data_from_pb_owned(data: pb::Data) -> Result<Data, DocumentError> {
    data.fields
        .into_iter()
        .map(|(k, v)| Ok((k, value_from_pb_owned(v)?)))
        .collect()
}

/// The wire form of a value (datetimes as Python's `isoformat()` in UTC).
pub fn value_to_pb(value: &Value) -> pb::Value {
    let kind = match value {
        Value::Null => Kind::NullValue(true),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Int(n) => Kind::IntValue(*n),
        Value::Float(x) => Kind::FloatValue(*x),
        Value::String(s) => Kind::StringValue(s.clone()),
        Value::Bytes(b) => Kind::BytesValue(b.clone()),
        Value::Datetime(d) => Kind::DatetimeValue(d.isoformat()),
        Value::List(items) => Kind::ListValue(pb::Values {
            items: items.iter().map(value_to_pb).collect(),
        }),
        Value::Object(data) => Kind::ObjectValue(data_to_pb(data)),
    };
    pb::Value { kind: Some(kind) }
}

/// The wire form of a document body.
pub fn data_to_pb(data: &Data) -> pb::Data {
    pb::Data {
        fields: data
            .iter()
            .map(|(k, v)| (k.clone(), value_to_pb(v)))
            .collect(),
    }
}

/// The wire form of a stored document.
pub fn document_to_pb(doc: &Document) -> pb::Document {
    pb::Document {
        id: doc.id.clone(),
        data: Some(data_to_pb(&doc.data)),
        created_at: doc.created_at.isoformat(),
        updated_at: doc.updated_at.isoformat(),
        version: doc.version,
    }
}

/// Reads a wire document (the client side).
///
/// # Errors
///
/// `INVALID_ARGUMENT` for a bad value or timestamp.
pub fn document_from_pb(doc: &pb::Document) -> Result<Document, DocumentError> {
    Ok(Document {
        id: doc.id.clone(),
        data: doc
            .data
            .as_ref()
            .map(data_from_pb)
            .transpose()?
            .unwrap_or_default(),
        created_at: Datetime::parse_iso(&doc.created_at)?,
        updated_at: Datetime::parse_iso(&doc.updated_at)?,
        version: doc.version,
    })
}

/// [`document_from_pb`], moving the document's parts out of `doc`.
///
/// # Errors
///
/// As [`document_from_pb`].
pub fn document_from_pb_owned(doc: pb::Document) -> Result<Document, DocumentError> {
    Ok(Document {
        data: doc
            .data
            .map(data_from_pb_owned)
            .transpose()?
            .unwrap_or_default(),
        created_at: Datetime::parse_iso(&doc.created_at)?,
        updated_at: Datetime::parse_iso(&doc.updated_at)?,
        version: doc.version,
        id: doc.id,
    })
}

/// Reads a wire collection declaration (checked later by
/// [`crate::validate::validate_spec`]).
pub fn spec_from_pb(spec: &pb::CollectionSpec) -> CollectionSpec {
    CollectionSpec {
        name: spec.name.clone(),
        fields: spec
            .fields
            .iter()
            .map(|f| FieldSpec {
                name: f.name.clone(),
                field_type: f.r#type.clone(),
                indexed: f.indexed,
                unique: f.unique,
            })
            .collect(),
        unique_together: spec
            .unique_together
            .iter()
            .map(|g| g.fields.clone())
            .collect(),
    }
}

/// The wire form of a collection declaration.
pub fn spec_to_pb(spec: &CollectionSpec) -> pb::CollectionSpec {
    pb::CollectionSpec {
        name: spec.name.clone(),
        fields: spec
            .fields
            .iter()
            .map(|f| pb::FieldSpec {
                name: f.name.clone(),
                r#type: f.field_type.clone(),
                indexed: f.indexed,
                unique: f.unique,
            })
            .collect(),
        unique_together: spec
            .unique_together
            .iter()
            .map(|g| pb::UniqueGroup { fields: g.clone() })
            .collect(),
    }
}

/// Reads wire predicates.
///
/// # Errors
///
/// As [`value_from_pb`] (a predicate without a value has a value without a kind).
pub fn where_from_pb(predicates: &[pb::Predicate]) -> Result<Vec<Predicate>, DocumentError> {
    predicates
        .iter()
        .map(|p| {
            Ok(Predicate {
                field: p.field.clone(),
                operator: p.operator.clone(),
                value: value_from_pb(&p.value.clone().unwrap_or_default())?,
            })
        })
        .collect()
}

/// The wire form of predicates.
pub fn where_to_pb(predicates: &[Predicate]) -> Vec<pb::Predicate> {
    predicates
        .iter()
        .map(|p| pb::Predicate {
            field: p.field.clone(),
            operator: p.operator.clone(),
            value: Some(value_to_pb(&p.value)),
        })
        .collect()
}

/// Reads a wire order (unset: none).
pub fn order_from_pb(order: Option<&pb::OrderBy>) -> Option<OrderBy> {
    order.map(|o| OrderBy {
        field: o.field.clone(),
        direction: o.direction.clone(),
    })
}

/// The wire form of an order.
pub fn order_to_pb(order: &OrderBy) -> pb::OrderBy {
    pb::OrderBy {
        field: order.field.clone(),
        direction: order.direction.clone(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn values_round_trip() {
        let mut data = Data::new();
        data.insert("n".into(), Value::Int(-5));
        data.insert(
            "l".into(),
            Value::List(vec![Value::Null, Value::Float(0.5)]),
        );
        data.insert(
            "d".into(),
            Value::Datetime(Datetime::parse_iso("2026-01-02T03:04:05+01:00").unwrap()),
        );
        let back = data_from_pb(&data_to_pb(&data)).unwrap();
        assert_eq!(back, data);
        let wire = value_to_pb(&data["d"]);
        assert_eq!(
            wire.kind,
            Some(Kind::DatetimeValue("2026-01-02T02:04:05+00:00".into()))
        );
        assert_eq!(
            value_from_pb(&pb::Value::default())
                .unwrap_err()
                .to_string(),
            "Document value has no kind"
        );
    }
}
