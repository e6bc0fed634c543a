//! Python's `json` module, byte for byte, for everything the reference
//! hashes, stores or compares as JSON text: document storage, equality keys
//! and cursors (`abi-documents`), job and agent subject hashes (`abi-wire`).
//!
//! - [`Json`] and [`parse`]: a JSON tree with Python's number model
//!   (unbounded integers, doubles) and `json.loads`; [`Cursor`]: the same
//!   reading a piece at a time, for callers that build something else;
//! - [`dumps`]: the canonical text `json.dumps(v, ensure_ascii=True,
//!   sort_keys=True, separators=(",", ":"))`; [`json_string`]: one string
//!   literal with `ensure_ascii` escapes; [`dumps_default`]: `json.dumps(v)`
//!   with Python's default separators (`", "` and `": "`);
//! - [`python_repr`]: a double as Python's `repr` writes it; [`python_str_repr`]:
//!   a string as `repr` quotes it in messages.

mod cursor;
mod dumps;
mod float;
mod json;
mod repr;
mod unprintable;

pub use cursor::{Cursor, Next, Scalar};
pub use dumps::{dumps, dumps_default, json_string, write_json_string};
pub use float::{exact_integer_text, python_repr, repr_integer_text};
pub use json::{Json, JsonError, Member, object_members, parse};
pub use repr::python_str_repr;
