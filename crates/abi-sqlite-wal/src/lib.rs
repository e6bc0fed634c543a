//! A SQLite VFS that writes a commit's WAL frames in one system call.
//!
//! SQLite writes every WAL frame as two `pwrite`s, its 24-byte header and its
//! page, so a group commit of a few dozen documents costs a hundred system
//! calls before its one sync. This VFS is the platform's own (`unix`) with one
//! difference: writes to a WAL file that continue the previous one are held in
//! memory and reach the file as one write, at the latest when SQLite syncs,
//! reads, sizes, truncates or closes the file. The bytes that reach the disk,
//! their order and the sync are SQLite's; only the number of calls changes.
//!
//! Why it is safe: SQLite publishes a commit's frames to other connections
//! (in the WAL index) only after its sync when `synchronous=FULL`, which every
//! connection that writes through this VFS must set; a read of the WAL through
//! the writer's own handle writes what is held first; a write that fails when
//! held bytes are written fails the call that wrote them, the sync of the
//! commit, so the commit fails and is not acknowledged.
//!
//! The pure rules of what is held are in `coalesce` (table-tested); the C
//! interface is in `vfs`, the one place in the workspace with `unsafe` code.

mod coalesce;
mod vfs;

pub use vfs::{RegisterError, VFS_NAME, register, wal_writes};

/// How many WAL writes this process's connections made through the VFS,
/// and how many reached the file: a test's and an operator's view of what the
/// coalescing saves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WalWrites {
    /// Writes SQLite asked for.
    pub asked: u64,
    /// Writes that reached the platform's file.
    pub written: u64,
}
