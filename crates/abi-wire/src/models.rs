//! The chat model contract's names: subjects, limits.
