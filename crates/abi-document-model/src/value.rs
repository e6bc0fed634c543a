//! A document's values: the portable JSON-like set the reference stores.

use std::collections::BTreeMap;

use crate::Datetime;

/// A document's fields by name. Ordered by name: the protobuf map carries no
/// order, and the stored form sorts its keys.
pub type Data = BTreeMap<String, Value>;

/// One value of a document, the `abi.document.v1.Value` oneof.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `null_value`.
    Null,
    /// `bool_value`.
    Bool(bool),
    /// `int_value` (`sint64` on the wire).
    Int(i64),
    /// `float_value`; finite only (the checks refuse NaN and infinities).
    Float(f64),
    /// `string_value`; never holds NUL.
    String(String),
    /// `bytes_value`.
    Bytes(Vec<u8>),
    /// `datetime_value`: an aware instant.
    Datetime(Datetime),
    /// `list_value`.
    List(Vec<Value>),
    /// `object_value`.
    Object(Data),
}

impl Value {
    /// The Python type name the reference names in its messages
    /// (`"str"`, `"int"`, ...).
    pub fn python_type(&self) -> &'static str {
        match self {
            Value::Null => "NoneType",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::String(_) => "str",
            Value::Bytes(_) => "bytes",
            Value::Datetime(_) => "datetime",
            Value::List(_) => "list",
            Value::Object(_) => "dict",
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::String(s)
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Self {
        Value::Int(n)
    }
}

impl From<f64> for Value {
    fn from(x: f64) -> Self {
        Value::Float(x)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl From<Datetime> for Value {
    fn from(d: Datetime) -> Self {
        Value::Datetime(d)
    }
}

impl From<Vec<Value>> for Value {
    fn from(items: Vec<Value>) -> Self {
        Value::List(items)
    }
}

impl From<Data> for Value {
    fn from(data: Data) -> Self {
        Value::Object(data)
    }
}
