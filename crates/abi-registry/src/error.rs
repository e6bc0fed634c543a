//! Wire error codes (being written).
