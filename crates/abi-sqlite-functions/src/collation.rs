//! Collations over the raw bytes of two texts.

use std::cmp::Ordering;
use std::ffi::{CString, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use rusqlite::Connection;
use rusqlite::ffi;

use crate::scalar::{destroy, refused};

/// Registers `compare` on `connection` as the collation `name` for UTF-8
/// text. It is given the two texts' bytes as SQLite holds them (UTF-8 that
/// SQLite does not check), so a caller that needs `str` decides what an
/// invalid sequence means.
///
/// # Errors
///
/// When `name` holds a NUL byte or SQLite refuses the registration.
pub fn register_collation<F>(
    connection: &Connection,
    name: &str,
    compare: F,
) -> rusqlite::Result<()>
where
    F: Fn(&[u8], &[u8]) -> Ordering + Send + 'static,
{
    let c_name = CString::new(name).map_err(rusqlite::Error::NulError)?;
    let boxed: *mut F = Box::into_raw(Box::new(compare));
    // SAFETY: the handle is the open connection's, used on this thread for
    // this call only; on success SQLite owns `boxed` and hands it to
    // `destroy::<F>` once, when the collation is replaced or the connection
    // closes; `compare_texts::<F>` reads it as an `F`.
    let code = unsafe {
        ffi::sqlite3_create_collation_v2(
            connection.handle(),
            c_name.as_ptr(),
            ffi::SQLITE_UTF8,
            boxed.cast::<c_void>(),
            Some(compare_texts::<F>),
            Some(destroy::<F>),
        )
    };
    if code != ffi::SQLITE_OK {
        // Unlike a function's, a collation's destructor is not run when its
        // registration fails (SQLite's documentation): the box is still ours.
        // SAFETY: `boxed` came from `Box::into_raw` and SQLite did not take it.
        drop(unsafe { Box::from_raw(boxed) });
    }
    refused(code)
}

/// SQLite's entry point for a registered collation.
///
/// # Safety
///
/// Called by SQLite only: `data` is the `Box<F>` registered, and each text
/// pointer holds its length in bytes.
unsafe extern "C" fn compare_texts<F>(
    data: *mut c_void,
    left_len: c_int,
    left: *const c_void,
    right_len: c_int,
    right: *const c_void,
) -> c_int
where
    F: Fn(&[u8], &[u8]) -> Ordering,
{
    // SAFETY: the caller's promise, for both texts.
    let (left, right) = unsafe { (bytes(left, left_len), bytes(right, right_len)) };
    // SAFETY: `data` is the `Box<F>` given at registration, alive until
    // `destroy::<F>`, which SQLite does not run during a comparison.
    let compare = unsafe { &*data.cast::<F>() };
    // A panic must not unwind into SQLite; a collation cannot fail, so a
    // comparison that panicked sorts the left text first, as `rusqlite` does.
    match catch_unwind(AssertUnwindSafe(|| compare(left, right))) {
        Ok(Ordering::Less) | Err(_) => -1,
        Ok(Ordering::Equal) => 0,
        Ok(Ordering::Greater) => 1,
    }
}

/// The `len` bytes at `start` (none when null or not positive).
///
/// # Safety
///
/// A non-null `start` with a positive `len` points at `len` readable bytes
/// that outlive the returned slice.
unsafe fn bytes<'a>(start: *const c_void, len: c_int) -> &'a [u8] {
    match usize::try_from(len) {
        Ok(len) if len > 0 && !start.is_null() => {
            // SAFETY: the caller's promise.
            unsafe { std::slice::from_raw_parts(start.cast::<u8>(), len) }
        }
        _ => &[],
    }
}
