//! SQLite failures as the reference's adapter reports them.

use abi_document_model::DocumentError;
use rusqlite::ffi;

/// The message of a write refused by a unique field, group or id.
pub const UNIQUE_MESSAGE: &str = "Document violates a unique constraint";
/// The message of any other failed operation.
pub const STORAGE_MESSAGE: &str = "SQLite document storage operation failed";

/// Maps a SQLite error as the reference does: a UNIQUE or PRIMARY KEY
/// constraint is [`DocumentError::UniqueViolation`], another constraint a
/// storage error, the generic `SQLITE_ERROR` (syntax, unknown column, an
/// error raised by a custom function) an adapter defect, anything else
/// (busy, locked, I/O, full) a storage error whose outcome may be unknown.
pub fn translate(error: &rusqlite::Error) -> DocumentError {
    match error {
        rusqlite::Error::SqliteFailure(e, _) => match e.extended_code {
            ffi::SQLITE_CONSTRAINT_UNIQUE | ffi::SQLITE_CONSTRAINT_PRIMARYKEY => {
                DocumentError::UniqueViolation(UNIQUE_MESSAGE.to_owned())
            }
            _ if e.code == rusqlite::ErrorCode::ConstraintViolation => {
                DocumentError::Storage("SQLite document storage constraint failed".to_owned())
            }
            ffi::SQLITE_ERROR => DocumentError::Adapter(
                "SQLite rejected a malformed document store query".to_owned(),
            ),
            _ => DocumentError::Storage(STORAGE_MESSAGE.to_owned()),
        },
        // A custom function's error reaches SQLite as SQLITE_ERROR.
        rusqlite::Error::UserFunctionError(_) => {
            DocumentError::Adapter("SQLite rejected a malformed document store query".to_owned())
        }
        _ => DocumentError::Storage(STORAGE_MESSAGE.to_owned()),
    }
}

/// `Result<T, rusqlite::Error>` to `Result<T, DocumentError>`, logging the
/// cause once (the reply carries only the code and a fixed message).
pub trait Translate<T> {
    /// Translates the error with [`translate`].
    fn translated(self) -> Result<T, DocumentError>;
}

impl<T> Translate<T> for Result<T, rusqlite::Error> {
    fn translated(self) -> Result<T, DocumentError> {
        self.map_err(|e| {
            let mapped = translate(&e);
            if !matches!(mapped, DocumentError::UniqueViolation(_)) {
                tracing::warn!(error = %e, code = mapped.code().as_str(), "sqlite operation failed");
            }
            mapped
        })
    }
}
