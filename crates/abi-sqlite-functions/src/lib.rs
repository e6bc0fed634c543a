//! SQLite scalar functions over text, and collations, registered through
//! SQLite's C interface.
//!
//! `rusqlite` wraps every call of a user function in a context of typed
//! values and every result in an owned SQL value, and hands a collation its
//! two texts only after a lossy UTF-8 conversion that scans them. An index
//! expression calls such a function for every index of every row written,
//! and a collation is called at every step down an index's B-tree, so on the
//! document service's put path that wrapping cost more than the functions'
//! own work. The registrations here pass a function the arguments' bytes as
//! SQLite holds them and copy its answer once, into SQLite's result.
//!
//! Safe to call: the `unsafe` code is this crate's, each block with its
//! reason; a panic in a registered function becomes an SQL error, never an
//! unwind across the C boundary.

mod collation;
mod scalar;

pub use collation::register_collation;
pub use scalar::{Args, NotText, register_text_function};
