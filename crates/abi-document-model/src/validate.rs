//! The reference's checks on names, values, versions, queries and specs, with
//! its messages (`DocumentPort.py`), so a refusal reads the same from either
//! service.

use std::collections::HashSet;

use crate::spec::FIELD_TYPES;
use crate::{CollectionSpec, Data, DocumentError, OrderBy, Predicate, Value};

/// The largest `find` page.
pub const MAX_PAGE_SIZE: i64 = 1000;
/// The most values an `in`/`nin` list may hold.
pub const MAX_IN_VALUES: usize = 500;
/// The operators a [`Predicate`] may use.
pub const OPERATORS: [&str; 10] = [
    crate::query::EQ,
    "ne",
    "lt",
    "lte",
    "gt",
    "gte",
    crate::query::IN,
    "nin",
    "contains",
    "exists",
];

type Checked = Result<(), DocumentError>;

fn invalid(message: &str) -> DocumentError {
    DocumentError::InvalidArgument(message.to_owned())
}

/// A namespace, collection, id or field name: not empty, no NUL.
///
/// # Errors
///
/// `INVALID_ARGUMENT` otherwise.
pub fn validate_name(name: &str) -> Checked {
    if name.is_empty() || name.contains('\0') {
        return Err(invalid(
            "Names must be nonempty strings without NUL characters",
        ));
    }
    Ok(())
}

/// A value: strings without NUL, finite floats, recursively.
///
/// # Errors
///
/// `INVALID_ARGUMENT` for the first bad value found.
pub fn validate_value(value: &Value) -> Checked {
    match value {
        Value::String(s) => validate_string(s),
        Value::Float(x) if !x.is_finite() => Err(invalid("Document floats must be finite")),
        Value::List(items) => items.iter().try_for_each(validate_value),
        Value::Object(data) => validate_object(data),
        _ => Ok(()),
    }
}

fn validate_string(s: &str) -> Checked {
    if s.contains('\0') {
        return Err(invalid("Document strings cannot contain NUL characters"));
    }
    Ok(())
}

fn validate_object(data: &Data) -> Checked {
    data.iter().try_for_each(|(key, item)| {
        validate_string(key)?;
        validate_value(item)
    })
}

/// A document's data, and, with a spec, the declared type of each field it
/// holds (`null` always passes; an `int` passes as a `float`).
///
/// # Errors
///
/// `INVALID_ARGUMENT` naming the field.
pub fn validate_data(data: &Data, spec: Option<&CollectionSpec>) -> Checked {
    validate_object(data)?;
    let Some(spec) = spec else { return Ok(()) };
    for field in &spec.fields {
        let Some(value) = data.get(&field.name) else {
            continue;
        };
        let fits = matches!(
            (field.field_type.as_str(), value),
            (_, Value::Null)
                | ("json", _)
                | ("string", Value::String(_))
                | ("int", Value::Int(_))
                | ("float", Value::Float(_) | Value::Int(_))
                | ("bool", Value::Bool(_))
                | ("datetime", Value::Datetime(_))
                | ("bytes", Value::Bytes(_))
        );
        if !fits {
            return Err(DocumentError::InvalidArgument(format!(
                "Field {} must have type {}",
                crate::datetime::python_str_repr(&field.name),
                field.field_type
            )));
        }
    }
    Ok(())
}

/// `if_version`: unset, or at least 0.
///
/// # Errors
///
/// `INVALID_ARGUMENT` for a negative version.
pub fn validate_version(version: Option<i64>) -> Checked {
    match version {
        Some(v) if v < 0 => Err(invalid("if_version must be a nonnegative integer or None")),
        _ => Ok(()),
    }
}

/// `max_bytes`: unset, or at least 1.
///
/// # Errors
///
/// `INVALID_ARGUMENT` otherwise.
pub fn validate_max_bytes(max_bytes: Option<i64>) -> Checked {
    match max_bytes {
        Some(n) if n < 1 => Err(invalid("max_bytes must be a positive integer or None")),
        _ => Ok(()),
    }
}

/// A query: the page size, the order and each predicate, in the reference's order.
///
/// # Errors
///
/// `INVALID_ARGUMENT` for the first problem found.
pub fn validate_query(where_: &[Predicate], order_by: Option<&OrderBy>, limit: i64) -> Checked {
    if !(1..=MAX_PAGE_SIZE).contains(&limit) {
        return Err(DocumentError::InvalidArgument(format!(
            "Page size must be an integer between 1 and {MAX_PAGE_SIZE}"
        )));
    }
    if let Some(order) = order_by {
        if order.direction != "asc" && order.direction != "desc" {
            return Err(invalid("order_by must be (field, 'asc'|'desc')"));
        }
        validate_name(&order.field)?;
    }
    where_.iter().try_for_each(validate_predicate)
}

fn validate_predicate(p: &Predicate) -> Checked {
    validate_name(&p.field)?;
    let op = p.operator.as_str();
    if !OPERATORS.contains(&op) {
        return Err(DocumentError::InvalidArgument(format!(
            "Unsupported predicate operator: {op}"
        )));
    }
    validate_value(&p.value)?;
    match (op, &p.value) {
        ("exists", Value::Bool(_)) => Ok(()),
        ("exists", _) => Err(invalid("exists requires a boolean")),
        ("in" | "nin", Value::List(items)) if items.len() > MAX_IN_VALUES => {
            Err(DocumentError::InvalidArgument(format!(
                "in/nin lists cannot exceed {MAX_IN_VALUES} values"
            )))
        }
        ("in" | "nin", Value::List(_)) => Ok(()),
        ("in" | "nin", _) => Err(invalid("in/nin require a list")),
        ("lt" | "lte" | "gt" | "gte", Value::Null | Value::List(_) | Value::Object(_)) => {
            Err(invalid("Range predicates require a non-null scalar"))
        }
        _ => Ok(()),
    }
}

/// A collection declaration: names, known types, no duplicate field, unique
/// groups not empty and of distinct fields.
///
/// # Errors
///
/// `INVALID_ARGUMENT` for the first problem found. (The reference validates
/// with pydantic, whose messages are longer; the code is the same.)
pub fn validate_spec(spec: &CollectionSpec) -> Checked {
    for field in &spec.fields {
        validate_name(&field.name)?;
        if !FIELD_TYPES.contains(&field.field_type.as_str()) {
            return Err(DocumentError::InvalidArgument(format!(
                "Field {} has an unknown type {}: expected one of {}",
                crate::datetime::python_str_repr(&field.name),
                crate::datetime::python_str_repr(&field.field_type),
                FIELD_TYPES.join(", ")
            )));
        }
    }
    validate_name(&spec.name)?;
    let mut names = HashSet::new();
    if !spec.fields.iter().all(|f| names.insert(f.name.as_str())) {
        return Err(invalid("Duplicate field declarations"));
    }
    for group in &spec.unique_together {
        let distinct: HashSet<&String> = group.iter().collect();
        if group.is_empty() || distinct.len() != group.len() {
            return Err(invalid(
                "unique_together must contain nonempty groups of distinct fields",
            ));
        }
        group.iter().try_for_each(|name| validate_name(name))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FieldSpec;

    fn message(result: Checked) -> String {
        result.err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn refuses_what_the_reference_refuses() {
        assert!(validate_name("a").is_ok());
        assert_eq!(
            message(validate_name("")),
            "Names must be nonempty strings without NUL characters"
        );
        assert_eq!(
            message(validate_value(&Value::Float(f64::NAN))),
            "Document floats must be finite"
        );
        assert_eq!(
            message(validate_value(&Value::List(vec![Value::from("a\0")]))),
            "Document strings cannot contain NUL characters"
        );
        assert_eq!(
            message(validate_query(&[], None, 0)),
            "Page size must be an integer between 1 and 1000"
        );
        let bad_op = Predicate::new("a", "like", "x");
        assert_eq!(
            message(validate_query(&[bad_op], None, 10)),
            "Unsupported predicate operator: like"
        );
        let range = Predicate::new("a", "gt", Value::Null);
        assert_eq!(
            message(validate_query(&[range], None, 10)),
            "Range predicates require a non-null scalar"
        );
        let order = OrderBy {
            field: "a".into(),
            direction: "up".into(),
        };
        assert_eq!(
            message(validate_query(&[], Some(&order), 10)),
            "order_by must be (field, 'asc'|'desc')"
        );
        assert_eq!(
            message(validate_version(Some(-1))),
            "if_version must be a nonnegative integer or None"
        );
    }

    #[test]
    fn checks_declared_types() {
        let spec = CollectionSpec::new("c")
            .field(FieldSpec::new("n", "float"))
            .field(FieldSpec::new("s", "string"));
        let mut data = Data::new();
        data.insert("n".into(), Value::Int(3));
        assert!(validate_data(&data, Some(&spec)).is_ok());
        data.insert("s".into(), Value::Bool(true));
        assert_eq!(
            message(validate_data(&data, Some(&spec))),
            "Field 's' must have type string"
        );
        let dup = CollectionSpec::new("c")
            .field(FieldSpec::new("n", "int"))
            .field(FieldSpec::new("n", "int"));
        assert_eq!(message(validate_spec(&dup)), "Duplicate field declarations");
    }
}
