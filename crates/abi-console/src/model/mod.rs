//! What each view shows, built by pure functions of what was read (the
//! registry view, run records, the clock), so each is tested by tables.

pub mod jobs;
pub mod modules;
pub mod runs;
pub mod schedule;
pub mod search;
