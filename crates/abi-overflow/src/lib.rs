//! RPC overflow, as the Python reference does it (`naas_abi_sdk.overflow`,
//! `naas_abi_core.engine.nats_overflow`): a request or reply above the
//! broker's max payload travels as `abi.transfer.v1` chunks through an
//! overflow host on `abi.rpc.overflow.*`, so a document, a job payload or
//! an agent prompt of any size up to 256 MiB passes between our processes
//! and the reference's, both ways.
//!
//! - [`OverflowHost`]: one per serving process; parks the replies its
//!   services cannot send whole and reads the uploads their callers sent;
//! - [`Caller`]: the calling side (upload a request, download a reply);
//! - [`Sessions`]: the host's state and every operation's checks, pure;
//! - [`frame`]: when a message overflows, and the headers that say so.
//!
//! Subjects, headers and limits are in [`abi_wire::overflow`].

mod error;
mod exchange;
pub mod frame;
mod host;
mod session;

pub use error::TransferError;
pub use exchange::Caller;
pub use host::OverflowHost;
pub use session::{Chunk, Limits, Sessions};
