//! PostgreSQL failures as the reference's adapter reports them.

use abi_document_model::DocumentError;
use tokio_postgres::error::SqlState;

/// The message of a write refused by a unique field, group or id.
pub const UNIQUE_MESSAGE: &str = "Document violates a unique constraint";
/// The message of a query the server refused as malformed.
pub const ADAPTER_MESSAGE: &str = "PostgreSQL rejected a malformed document store query";
/// The message of any other failed operation.
pub const STORAGE_MESSAGE: &str = "PostgreSQL document storage operation failed";
/// The message when the store cannot be opened.
pub const INIT_MESSAGE: &str = "Cannot initialize PostgreSQL document storage";

/// Maps a driver error as the reference does with psycopg's classes:
/// `unique_violation` (23505) is [`DocumentError::UniqueViolation`]; the
/// SQLSTATE classes psycopg raises as `ProgrammingError` (20, 21, 3D, 3F,
/// 42, 44: syntax errors, undefined objects, ...) are
/// [`DocumentError::Adapter`]; everything else (connection loss, timeouts,
/// lock failures, data errors) is [`DocumentError::Storage`], whose outcome
/// may be unknown for a write.
pub fn translate(error: &tokio_postgres::Error) -> DocumentError {
    match error.code() {
        Some(code) if *code == SqlState::UNIQUE_VIOLATION => {
            DocumentError::UniqueViolation(UNIQUE_MESSAGE.to_owned())
        }
        Some(code) if is_programming_error(code.code()) => {
            DocumentError::Adapter(ADAPTER_MESSAGE.to_owned())
        }
        _ => DocumentError::Storage(STORAGE_MESSAGE.to_owned()),
    }
}

/// Whether a SQLSTATE is in a class psycopg maps to `ProgrammingError`.
fn is_programming_error(sqlstate: &str) -> bool {
    matches!(
        sqlstate.get(..2),
        Some("20" | "21" | "3D" | "3F" | "42" | "44")
    )
}

/// `Result<T, tokio_postgres::Error>` to `Result<T, DocumentError>`,
/// logging the cause once (the reply carries only the code and a fixed
/// message). The driver's errors never hold the connection string.
pub trait Translate<T> {
    /// Translates the error with [`translate`].
    ///
    /// # Errors
    ///
    /// The translated error.
    fn translated(self) -> Result<T, DocumentError>;
}

impl<T> Translate<T> for Result<T, tokio_postgres::Error> {
    fn translated(self) -> Result<T, DocumentError> {
        self.map_err(|e| {
            let mapped = translate(&e);
            if !matches!(mapped, DocumentError::UniqueViolation(_)) {
                tracing::warn!(error = %e, code = mapped.code().as_str(), "postgres operation failed");
            }
            mapped
        })
    }
}

/// A pool failure (no connection within the pool timeout, a connection
/// refused, the pool closed): a storage error, logged once.
pub fn pool_error(error: &deadpool_postgres::PoolError) -> DocumentError {
    tracing::warn!(error = %error, "postgres connection unavailable");
    DocumentError::Storage(STORAGE_MESSAGE.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programming_error_classes_are_psycopgs() {
        for code in [
            "42601", "42P01", "42883", "3F000", "3D000", "21000", "20000", "44000",
        ] {
            assert!(is_programming_error(code), "{code}");
        }
        for code in [
            "23505", "23502", "22P02", "57014", "40001", "40P01", "08006", "55P03",
        ] {
            assert!(!is_programming_error(code), "{code}");
        }
    }
}
