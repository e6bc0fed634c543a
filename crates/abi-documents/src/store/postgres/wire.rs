//! How values cross the PostgreSQL wire: every parameter as text the server
//! parses into the type it infers (what psycopg does with a Python `str`),
//! and the few column types the adapter reads.

use std::error::Error;

use abi_document_model::Datetime;
use tokio_postgres::types::{Format, FromSql, IsNull, ToSql, Type, to_sql_checked};

use crate::sql::SqlParam;

/// Microseconds from the Unix epoch to PostgreSQL's (2000-01-01 UTC).
const PG_EPOCH_UNIX_MICROS: i64 = 946_684_800_000_000;

/// One bound parameter, sent in text format.
///
/// The server parses the text with the input function of the type it infers
/// for the placeholder (`text`, `timestamptz`, `jsonb` through a cast,
/// `numeric`, `bigint`), exactly as it parses a literal: the compiler's SQL
/// can bind a timestamp or a JSON text without naming its type.
#[derive(Debug, Clone)]
pub(crate) struct TextParam {
    text: String,
    /// The type announced in a one-shot statement: `bigint` for integers,
    /// `unknown` (the server infers) for the rest.
    ty: Type,
}

impl TextParam {
    /// The wire form of a compiler parameter.
    pub(crate) fn new(param: &SqlParam) -> Self {
        match param {
            SqlParam::Int(n) => Self {
                text: n.to_string(),
                ty: Type::INT8,
            },
            SqlParam::Text(s) | SqlParam::Json(s) | SqlParam::Numeric(s) => Self {
                text: s.clone(),
                ty: Type::UNKNOWN,
            },
        }
    }

    /// The type a one-shot (`query_typed`) statement announces.
    pub(crate) fn ty(&self) -> Type {
        self.ty.clone()
    }
}

impl ToSql for TextParam {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        out.extend_from_slice(self.text.as_bytes());
        Ok(IsNull::No)
    }

    /// Any type: the server parses the text.
    fn accepts(_ty: &Type) -> bool {
        true
    }

    fn encode_format(&self, _ty: &Type) -> Format {
        Format::Text
    }

    to_sql_checked!();
}

/// A `jsonb` (or `json`/`text`) column as the JSON text PostgreSQL prints
/// for it: what psycopg hands to `json.loads` in the reference.
#[derive(Debug)]
pub(crate) struct JsonText(pub(crate) String);

impl<'a> FromSql<'a> for JsonText {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn Error + Sync + Send>> {
        // Binary jsonb is a version byte (1) and the text form.
        let text = if *ty == Type::JSONB {
            match raw.split_first() {
                Some((1, rest)) => rest,
                _ => return Err("unsupported jsonb binary version".into()),
            }
        } else {
            raw
        };
        Ok(Self(std::str::from_utf8(text)?.to_owned()))
    }

    fn accepts(ty: &Type) -> bool {
        matches!(*ty, Type::JSONB | Type::JSON | Type::TEXT)
    }
}

/// A `timestamptz` column as an instant.
#[derive(Debug)]
pub(crate) struct Timestamp(pub(crate) Datetime);

impl<'a> FromSql<'a> for Timestamp {
    fn from_sql(_ty: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn Error + Sync + Send>> {
        let bytes: [u8; 8] = raw.try_into().map_err(|_| "timestamptz is not 8 bytes")?;
        let micros = i64::from_be_bytes(bytes)
            .checked_add(PG_EPOCH_UNIX_MICROS)
            .ok_or("timestamptz out of range")?;
        Datetime::from_unix_micros(micros)
            .map(Self)
            .ok_or_else(|| "timestamptz out of range".into())
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::TIMESTAMPTZ
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_count_from_2000() {
        let zero = Timestamp::from_sql(&Type::TIMESTAMPTZ, &0i64.to_be_bytes()).unwrap();
        assert_eq!(zero.0.unix_micros(), PG_EPOCH_UNIX_MICROS);
        assert_eq!(zero.0.isoformat(), "2000-01-01T00:00:00+00:00");
    }

    #[test]
    fn binary_jsonb_drops_its_version_byte() {
        let json = JsonText::from_sql(&Type::JSONB, b"\x01{\"a\": 1}").unwrap();
        assert_eq!(json.0, "{\"a\": 1}");
        assert!(JsonText::from_sql(&Type::JSONB, b"\x02{}").is_err());
    }
}
