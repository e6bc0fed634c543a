//! EventBridge-style filters on an event's fields (`OnEvent` filters), as
//! the reference's `naas_abi_sdk/event_filter.py`: dotted paths in the
//! event's JSON mapped to a scalar (equals, compared as Python's `str()`), a
//! list (in) or an operator object (`eq ne in gt gte lt lte prefix suffix
//! contains exists`); keys are AND-joined.
//!
//! Python's `str()` of a scalar is reproduced exactly (`True`, `1.5`,
//! `None`); lists and objects compare by JSON equality, where Python's
//! `1 == 1.0 == True` is kept for numbers but not for booleans.

use serde_json::Value;

use crate::documents::json::py_repr;

const OPERATORS: [&str; 11] = [
    "contains", "eq", "exists", "gt", "gte", "in", "lt", "lte", "ne", "prefix", "suffix",
];

/// Checks a filter as the reference's `validate`, with its messages.
///
/// # Errors
///
/// The reference's message for a non-object, a bad path or an unknown operator.
pub fn validate(filter: &Value) -> Result<(), String> {
    let Value::Object(map) = filter else {
        return Err("An event filter is a dict of field paths to matchers".into());
    };
    for (key, expected) in map {
        let valid_path = !key.is_empty()
            && key.split('.').all(|part| {
                !part.is_empty()
                    && part
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            });
        if !valid_path {
            return Err(format!("Invalid event filter path: {}", py_repr(key)));
        }
        if let Value::Object(ops) = expected {
            let mut unknown: Vec<&String> = ops
                .keys()
                .filter(|op| !OPERATORS.contains(&op.as_str()))
                .collect();
            if !unknown.is_empty() {
                unknown.sort();
                let list: Vec<String> = unknown.iter().map(|op| py_repr(op)).collect();
                return Err(format!(
                    "Unknown event filter operator(s): [{}]",
                    list.join(", ")
                ));
            }
        }
    }
    Ok(())
}

/// Whether an event (its decoded JSON) passes `filter`; no filter passes all.
pub fn matches(data: &Value, filter: Option<&Value>) -> bool {
    let Some(Value::Object(filter)) = filter else {
        return true;
    };
    if filter.is_empty() {
        return true;
    }
    let Value::Object(_) = data else {
        return false;
    };
    filter
        .iter()
        .all(|(key, expected)| match_value(walk(data, key), expected))
}

fn walk<'a>(data: &'a Value, key: &str) -> &'a Value {
    let mut current = data;
    for part in key.split('.') {
        match current {
            Value::Object(map) => current = map.get(part).unwrap_or(&Value::Null),
            _ => return &Value::Null,
        }
    }
    current
}

/// Python's `str()` of a decoded JSON scalar.
fn py_str(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i.to_string(),
            (None, Some(u), _) => u.to_string(),
            (_, _, Some(f)) => abi_pyjson::python_repr(f),
            _ => n.to_string(),
        },
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Python's `==` on decoded JSON, numbers by value.
fn py_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn contains(list: &Value, actual: &Value) -> bool {
    match list {
        Value::Array(items) => items.iter().any(|item| py_eq(item, actual)),
        _ => false,
    }
}

fn match_value(actual: &Value, expected: &Value) -> bool {
    match expected {
        Value::Object(ops) => ops.iter().all(|(op, value)| match_op(actual, op, value)),
        Value::Array(_) => contains(expected, actual),
        Value::Null => actual.is_null(),
        _ => !actual.is_null() && py_str(actual) == py_str(expected),
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Python's `float(v)` of a decoded JSON value.
fn py_float(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn match_op(actual: &Value, op: &str, value: &Value) -> bool {
    if op == "exists" {
        return actual.is_null() != truthy(value);
    }
    if actual.is_null() {
        return false;
    }
    let text = |v: &Value| py_str(v);
    match op {
        "eq" => text(actual) == text(value),
        "ne" => text(actual) != text(value),
        "in" => contains(value, actual),
        "gt" | "gte" | "lt" | "lte" => {
            let (Some(a), Some(b)) = (py_float(actual), py_float(value)) else {
                return false;
            };
            match op {
                "gt" => a > b,
                "gte" => a >= b,
                "lt" => a < b,
                _ => a <= b,
            }
        }
        "prefix" => matches!(actual, Value::String(s) if s.starts_with(&text(value))),
        "suffix" => matches!(actual, Value::String(s) if s.ends_with(&text(value))),
        "contains" => matches!(actual, Value::String(s) if s.contains(&text(value))),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn filters_match_as_the_references() {
        let event = json!({"status": "paid", "amount": 12.5, "meta": {"key": "naas/x"}, "n": 1});
        let yes = [
            json!({"status": "paid"}),
            json!({"status": ["open", "paid"]}),
            json!({"amount": {"gt": 10, "lte": 12.5}}),
            json!({"meta.key": {"prefix": "naas/"}}),
            json!({"missing": {"exists": false}, "n": "1"}),
            json!({"n": [1.0]}),
        ];
        for filter in &yes {
            assert!(matches(&event, Some(filter)), "{filter}");
        }
        let no = [
            json!({"status": "open"}),
            json!({"amount": {"gt": 20}}),
            json!({"meta.key": {"suffix": "y"}}),
            json!({"missing": {"exists": true}}),
            json!({"missing": "None"}),
        ];
        for filter in &no {
            assert!(!matches(&event, Some(filter)), "{filter}");
        }
        assert!(!matches(&json!([1]), Some(&json!({"a": 1}))));
        assert!(matches(&json!([1]), None));
    }

    #[test]
    fn bad_filters_are_refused_with_the_references_messages() {
        assert_eq!(
            validate(&json!([1])).unwrap_err(),
            "An event filter is a dict of field paths to matchers"
        );
        assert_eq!(
            validate(&json!({"a..b": 1})).unwrap_err(),
            "Invalid event filter path: 'a..b'"
        );
        assert_eq!(
            validate(&json!({"a": {"zz": 1, "bad": 2, "eq": 3}})).unwrap_err(),
            "Unknown event filter operator(s): ['bad', 'zz']"
        );
    }
}
