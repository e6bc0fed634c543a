//! Scalar functions whose arguments are text or NULL and whose answer is
//! text or NULL.

use std::ffi::{CString, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use rusqlite::Connection;
use rusqlite::ffi;

/// The arguments of one call, valid for the length of that call.
#[derive(Debug)]
pub struct Args<'call> {
    values: &'call [*mut ffi::sqlite3_value],
}

/// An argument that is neither text nor NULL (an integer, a real, a blob),
/// or an index past the last argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotText;

impl Args<'_> {
    /// How many arguments the call has.
    #[must_use]
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the call has no argument.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// The bytes of text argument `index` (SQLite's UTF-8, not checked
    /// here), `None` for NULL.
    ///
    /// # Errors
    ///
    /// [`NotText`] when the argument is of another type or missing.
    pub fn text(&self, index: usize) -> Result<Option<&[u8]>, NotText> {
        let value = *self.values.get(index).ok_or(NotText)?;
        // SAFETY: `value` is one of the argument pointers SQLite passed to
        // this call, live until the call returns, which outlives `&self`.
        match unsafe { ffi::sqlite3_value_type(value) } {
            ffi::SQLITE_NULL => Ok(None),
            ffi::SQLITE_TEXT => {
                // SAFETY: as above. A text already in UTF-8 (every text of
                // a UTF-8 database) is read as a blob: the same bytes, with
                // no copy to add the NUL terminator `sqlite3_value_text`
                // guarantees, which a column read from a record lacks (a
                // put's stored JSON was copied for each index expression).
                // Any other encoding is converted by `sqlite3_value_text`.
                // The pointer is asked for before the length, as SQLite's
                // documentation says, and stays valid until the call
                // returns: nothing converts the value after.
                let (start, len) = unsafe {
                    let start = if ffi::sqlite3_value_encoding(value) == ffi::SQLITE_UTF8 {
                        ffi::sqlite3_value_blob(value).cast::<u8>()
                    } else {
                        ffi::sqlite3_value_text(value)
                    };
                    (start, ffi::sqlite3_value_bytes(value))
                };
                let Ok(len) = usize::try_from(len) else {
                    return Err(NotText);
                };
                if start.is_null() || len == 0 {
                    return Ok(Some(&[]));
                }
                // SAFETY: SQLite's text of `len` bytes at `start`, valid for
                // the call (see above), which outlives the borrow of `self`.
                Ok(Some(unsafe { std::slice::from_raw_parts(start, len) }))
            }
            _ => Err(NotText),
        }
    }
}

/// Registers `function` on `connection` as the SQL function `name` of
/// `arity` arguments, deterministic (SQLite allows it in index expressions)
/// and innocuous (a pure function of its arguments, callable even with
/// `trusted_schema` off). Its `Ok(Some(text))` is the SQL answer, `Ok(None)`
/// SQL NULL, `Err(message)` an SQL error with that message (SQLite's
/// generic `SQLITE_ERROR`, as `rusqlite` reports a user function's error).
///
/// # Errors
///
/// When `name` holds a NUL byte or SQLite refuses the registration.
pub fn register_text_function<F, T>(
    connection: &Connection,
    name: &str,
    arity: c_int,
    function: F,
) -> rusqlite::Result<()>
where
    F: Fn(&Args<'_>) -> Result<Option<T>, String> + Send + 'static,
    T: AsRef<str>,
{
    let c_name = CString::new(name).map_err(rusqlite::Error::NulError)?;
    let flags = ffi::SQLITE_UTF8 | ffi::SQLITE_DETERMINISTIC | ffi::SQLITE_INNOCUOUS;
    let boxed: *mut F = Box::into_raw(Box::new(function));
    // SAFETY: the handle is the open connection's, used on this thread for
    // this call only; `boxed` is a live `Box<F>` whose ownership passes to
    // SQLite, which hands it to `destroy::<F>` exactly once, when the
    // function is replaced, when the connection closes, or at once if this
    // registration fails; `call::<F, T>` reads it as an `F`.
    let code = unsafe {
        ffi::sqlite3_create_function_v2(
            connection.handle(),
            c_name.as_ptr(),
            arity,
            flags,
            boxed.cast::<c_void>(),
            Some(call::<F, T>),
            None,
            None,
            Some(destroy::<F>),
        )
    };
    refused(code)
}

/// `Ok` for `SQLITE_OK`, else SQLite's error for `code`.
pub(crate) fn refused(code: c_int) -> rusqlite::Result<()> {
    if code == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(rusqlite::Error::SqliteFailure(ffi::Error::new(code), None))
    }
}

/// Drops the `Box<F>` behind `data`.
///
/// # Safety
///
/// `data` is a pointer from `Box::<F>::into_raw`, dropped once.
pub(crate) unsafe extern "C" fn destroy<F>(data: *mut c_void) {
    // SAFETY: the caller's promise.
    drop(unsafe { Box::from_raw(data.cast::<F>()) });
}

/// SQLite's entry point for a registered function.
///
/// # Safety
///
/// Called by SQLite only: `context` is a live function context whose user
/// data is the `Box<F>` registered with it, and `argv` holds `argc` live
/// values.
unsafe extern "C" fn call<F, T>(
    context: *mut ffi::sqlite3_context,
    argc: c_int,
    argv: *mut *mut ffi::sqlite3_value,
) where
    F: Fn(&Args<'_>) -> Result<Option<T>, String>,
    T: AsRef<str>,
{
    let values: &[*mut ffi::sqlite3_value] = match usize::try_from(argc) {
        Ok(len) if len > 0 && !argv.is_null() => {
            // SAFETY: SQLite passes `argc` live value pointers at `argv`.
            unsafe { std::slice::from_raw_parts(argv, len) }
        }
        _ => &[],
    };
    // SAFETY: the user data is the `Box<F>` given at registration, alive
    // until `destroy::<F>`, which SQLite does not run during a call.
    let function = unsafe { &*ffi::sqlite3_user_data(context).cast::<F>() };
    let args = Args { values };
    // A panic must not unwind into SQLite: it becomes the call's error.
    let outcome = catch_unwind(AssertUnwindSafe(|| function(&args)))
        .unwrap_or_else(|_| Err("a SQL function panicked".to_owned()));
    match outcome {
        Ok(Some(text)) => {
            let text = text.as_ref();
            // SAFETY: `context` is live; SQLite copies the `len` bytes at
            // `text` (SQLITE_TRANSIENT) before this returns; they are UTF-8,
            // as the encoding given says. A `usize` length always fits u64.
            unsafe {
                ffi::sqlite3_result_text64(
                    context,
                    text.as_ptr().cast(),
                    text.len() as u64,
                    ffi::SQLITE_TRANSIENT(),
                    ffi::SQLITE_UTF8 as u8,
                );
            }
        }
        // SAFETY: `context` is live.
        Ok(None) => unsafe { ffi::sqlite3_result_null(context) },
        Err(message) => {
            // An absurdly long message is cut: SQLite takes an int length.
            let len = c_int::try_from(message.len()).unwrap_or(c_int::MAX);
            // SAFETY: `context` is live; SQLite copies the `len` bytes of
            // the message before this returns.
            unsafe { ffi::sqlite3_result_error(context, message.as_ptr().cast(), len) };
        }
    }
}
