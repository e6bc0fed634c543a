//! The numbers the service keeps about itself: lock-free counters and
//! fixed-bucket histograms, bumped on the request path and read at scrape
//! time.
//!
//! A leaf: it uses no other module of the crate, so the writer, the lookups
//! and the endpoints can all count without depending on the places that
//! report the numbers (`metrics`, `micro`, `Discovery::stats`).

mod counters;
mod histogram;

pub(crate) use counters::Counters;
pub(crate) use histogram::Histogram;
pub use histogram::HistogramSnapshot;
