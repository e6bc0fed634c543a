//! The agent contract's names: instance-addressed subjects, record collections, limits.
