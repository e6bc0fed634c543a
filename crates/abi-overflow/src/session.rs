//! The overflow host's sessions, as pure state: what each transfer operation
//! does to them and what it answers, the checks in the reference's order and
//! words (`naas_abi_core.engine.nats_transfer.TransferHost._execute`). No
//! I/O and no clock: the host passes `now` in.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use abi_wire::ErrorCode;
use abi_wire::overflow as wire;
use bytes::{Bytes, BytesMut};

use crate::error::TransferError;

/// What a host holds at most, and how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Open sessions at once.
    pub max_sessions: usize,
    /// The largest value, uploaded or parked.
    pub max_value_bytes: usize,
    /// Bytes of parked replies at once.
    pub max_parked_bytes: usize,
    /// Bytes of uploads at once.
    pub max_uploaded_bytes: usize,
    /// How long an untouched session lives.
    pub idle: Duration,
    /// The chunk size this host grants at most.
    pub chunk_bytes: usize,
}

impl Limits {
    /// The reference's limits, chunks fitted to a broker of `max_payload`.
    pub fn for_broker(max_payload: usize) -> Self {
        Self {
            max_sessions: wire::MAX_SESSIONS,
            max_value_bytes: wire::MAX_VALUE_BYTES,
            max_parked_bytes: wire::MAX_PARKED_BYTES,
            max_uploaded_bytes: wire::MAX_UPLOADED_BYTES,
            idle: Duration::from_secs(wire::IDLE_SECONDS),
            chunk_bytes: wire::chunk_size(max_payload),
        }
    }
}

/// One chunk read, or the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The bytes (empty at the end).
    pub data: Bytes,
    /// The sequence this answers.
    pub sequence: u64,
    /// Whether this chunk ends a frame (of [`wire::CHUNK_BYTES`]).
    pub frame_end: bool,
    /// Whether nothing is left.
    pub done: bool,
}

/// Which budget a session's bytes count against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Budget {
    Uploaded,
    Parked,
}

#[derive(Debug)]
enum Body {
    /// Chunks arriving, `next` the sequence expected.
    Upload { data: BytesMut, next: u64 },
    /// Started (or parked): chunks going out, `next` the sequence to read.
    Reading { data: Bytes, next: u64 },
}

#[derive(Debug)]
struct Session {
    caller: String,
    chunk_bytes: usize,
    body: Body,
    budget: Budget,
    touched: Instant,
}

impl Session {
    fn bytes(&self) -> usize {
        match &self.body {
            Body::Upload { data, .. } => data.len(),
            Body::Reading { data, .. } => data.len(),
        }
    }
}

/// Every session of one host (`owner`), and the bytes they hold.
#[derive(Debug)]
pub struct Sessions {
    owner: String,
    limits: Limits,
    open: HashMap<String, Session>,
    uploaded: usize,
    parked: usize,
}

impl Sessions {
    /// No sessions yet, for host `owner` (32 hex digits).
    pub fn new(owner: impl Into<String>, limits: Limits) -> Self {
        Self {
            owner: owner.into(),
            limits,
            open: HashMap::new(),
            uploaded: 0,
            parked: 0,
        }
    }

    /// The host id in this table's session ids.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The limits this table keeps.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Sessions open now.
    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// Whether no session is open.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// Bytes held now: (uploads, parked replies).
    pub fn held(&self) -> (usize, usize) {
        (self.uploaded, self.parked)
    }

    /// Opens an upload for `caller` as `<owner>:<key>`; returns its id and
    /// the chunk size granted (the one asked for, at most this host's; 0
    /// asks for the host's).
    ///
    /// # Errors
    ///
    /// `INVALID_ARGUMENT` for an operation other than an upload, metadata
    /// above 16 KiB or chunks below 1 KiB; `RESOURCE_EXHAUSTED` when full.
    pub fn open(
        &mut self,
        caller: &str,
        operation: &str,
        metadata_bytes: usize,
        chunk_bytes: u32,
        key: &str,
        now: Instant,
    ) -> Result<(String, u32), TransferError> {
        if operation != wire::UPLOAD_OPERATION || metadata_bytes > wire::MAX_METADATA_BYTES {
            return Err(TransferError::invalid());
        }
        self.check_capacity()?;
        let asked = usize::try_from(chunk_bytes).unwrap_or(usize::MAX);
        let size = if asked == 0 {
            self.limits.chunk_bytes
        } else {
            asked.min(self.limits.chunk_bytes)
        };
        if size < wire::MIN_CHUNK_BYTES {
            return Err(TransferError::invalid());
        }
        let id = format!("{}:{key}", self.owner);
        self.open.insert(
            id.clone(),
            Session {
                caller: caller.to_owned(),
                chunk_bytes: size,
                body: Body::Upload {
                    data: BytesMut::new(),
                    next: 0,
                },
                budget: Budget::Uploaded,
                touched: now,
            },
        );
        // The granted size is at most the caller's u32 or the host's chunk
        // (1 MiB at most), so it fits.
        Ok((id, u32::try_from(size).unwrap_or(u32::MAX)))
    }

    /// Parks `data`, a reply for `caller`, as `<owner>:<key>`, ready to be
    /// read from sequence 0; returns its id.
    ///
    /// # Errors
    ///
    /// `PAYLOAD_TOO_LARGE` above the value limit; `RESOURCE_EXHAUSTED` when
    /// the parked budget or the session table is full.
    pub fn park(
        &mut self,
        caller: &str,
        data: Bytes,
        key: &str,
        now: Instant,
    ) -> Result<String, TransferError> {
        if data.len() > self.limits.max_value_bytes {
            return Err(TransferError::new(
                ErrorCode::PayloadTooLarge,
                "Reply exceeds the overflow value limit",
            ));
        }
        if self.parked + data.len() > self.limits.max_parked_bytes {
            return Err(TransferError::new(
                ErrorCode::ResourceExhausted,
                "Overflow reply budget exhausted",
            ));
        }
        self.check_capacity()?;
        let id = format!("{}:{key}", self.owner);
        self.parked += data.len();
        self.open.insert(
            id.clone(),
            Session {
                caller: caller.to_owned(),
                chunk_bytes: self.limits.chunk_bytes,
                body: Body::Reading { data, next: 0 },
                budget: Budget::Parked,
                touched: now,
            },
        );
        Ok(id)
    }

    fn check_capacity(&self) -> Result<(), TransferError> {
        if self.open.len() >= self.limits.max_sessions {
            return Err(TransferError::capacity());
        }
        Ok(())
    }

    /// The session `id` of `caller`, touched at `now`.
    fn session(
        &mut self,
        caller: &str,
        id: &str,
        now: Instant,
    ) -> Result<&mut Session, TransferError> {
        let session = self.open.get_mut(id).ok_or_else(TransferError::gone)?;
        if session.caller != caller {
            return Err(TransferError::not_callers());
        }
        session.touched = now;
        Ok(session)
    }

    /// Appends chunk `sequence` to upload `id`.
    ///
    /// # Errors
    ///
    /// `NOT_FOUND`, `PERMISSION_DENIED` (another caller's), `CONFLICT` (not
    /// an upload any more, or not the next sequence), `PAYLOAD_TOO_LARGE` (a
    /// chunk above the size granted, or the value above its limit),
    /// `RESOURCE_EXHAUSTED` (the host's upload budget).
    pub fn write(
        &mut self,
        caller: &str,
        id: &str,
        sequence: u64,
        chunk: &[u8],
        now: Instant,
    ) -> Result<(), TransferError> {
        let budget_left = self.limits.max_uploaded_bytes.saturating_sub(self.uploaded);
        let max_value = self.limits.max_value_bytes;
        let session = self.session(caller, id, now)?;
        let chunk_bytes = session.chunk_bytes;
        let Body::Upload { data, next } = &mut session.body else {
            return Err(TransferError::conflict("Invalid upload state or sequence"));
        };
        if sequence != *next {
            return Err(TransferError::conflict("Invalid upload state or sequence"));
        }
        if chunk.len() > chunk_bytes {
            return Err(TransferError::new(
                ErrorCode::PayloadTooLarge,
                "Upload chunk exceeds negotiated size",
            ));
        }
        if data.len() + chunk.len() > max_value {
            return Err(TransferError::new(
                ErrorCode::PayloadTooLarge,
                "Configured total upload limit exceeded",
            ));
        }
        if chunk.len() > budget_left {
            return Err(TransferError::new(
                ErrorCode::ResourceExhausted,
                "Total upload budget exhausted",
            ));
        }
        data.extend_from_slice(chunk);
        *next += 1;
        self.uploaded += chunk.len();
        Ok(())
    }

    /// Ends upload `id`: its bytes may be read from sequence 0.
    ///
    /// # Errors
    ///
    /// `NOT_FOUND`, `PERMISSION_DENIED`, `CONFLICT` when already started.
    pub fn start(&mut self, caller: &str, id: &str, now: Instant) -> Result<(), TransferError> {
        let session = self.session(caller, id, now)?;
        let Body::Upload { data, .. } = &mut session.body else {
            return Err(TransferError::conflict(
                "Transfer already started; do not replay",
            ));
        };
        let data = std::mem::take(data).freeze();
        session.body = Body::Reading { data, next: 0 };
        Ok(())
    }

    /// Chunk `sequence` of session `id`: the chunks of each 1 MiB frame in
    /// turn, the last of a frame marked, then `done`.
    ///
    /// # Errors
    ///
    /// `NOT_FOUND`, `PERMISSION_DENIED`, `CONFLICT` (not started, or not the
    /// next sequence).
    pub fn read(
        &mut self,
        caller: &str,
        id: &str,
        sequence: u64,
        now: Instant,
    ) -> Result<Chunk, TransferError> {
        let session = self.session(caller, id, now)?;
        let chunk_bytes = session.chunk_bytes;
        let Body::Reading { data, next } = &mut session.body else {
            return Err(TransferError::conflict("Invalid read state or sequence"));
        };
        if sequence != *next {
            return Err(TransferError::conflict("Invalid read state or sequence"));
        }
        let Some((start, end, frame_end)) = chunk_bounds(data.len(), chunk_bytes, sequence) else {
            return Ok(Chunk {
                data: Bytes::new(),
                sequence,
                frame_end: false,
                done: true,
            });
        };
        *next += 1;
        Ok(Chunk {
            data: data.slice(start..end),
            sequence,
            frame_end,
            done: false,
        })
    }

    /// Releases session `id`; a session already gone is no error.
    ///
    /// # Errors
    ///
    /// `PERMISSION_DENIED` for another caller's session.
    pub fn close(&mut self, caller: &str, id: &str) -> Result<(), TransferError> {
        match self.open.get(id) {
            None => Ok(()),
            Some(session) if session.caller != caller => Err(TransferError::not_callers()),
            Some(_) => {
                self.remove(id);
                Ok(())
            }
        }
    }

    /// Takes the bytes of upload `id` (not started) for its own service,
    /// in this process, and releases the session: what a read to the end
    /// and a close would do, without the round trips.
    ///
    /// # Errors
    ///
    /// `NOT_FOUND`, `PERMISSION_DENIED`, `CONFLICT` when it was started.
    pub fn take_upload(&mut self, caller: &str, id: &str) -> Result<Bytes, TransferError> {
        let session = self.session(caller, id, Instant::now())?;
        if !matches!(session.body, Body::Upload { .. }) {
            return Err(TransferError::conflict("Invalid read state or sequence"));
        }
        let Some(Session {
            body: Body::Upload { data, .. },
            ..
        }) = self.remove(id)
        else {
            return Err(TransferError::gone());
        };
        Ok(data.freeze())
    }

    /// Drops every session untouched for longer than the idle limit at
    /// `now`; returns how many.
    pub fn expire(&mut self, now: Instant) -> usize {
        let idle = self.limits.idle;
        let stale: Vec<String> = self
            .open
            .iter()
            .filter(|(_, s)| now.saturating_duration_since(s.touched) > idle)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &stale {
            self.remove(id);
        }
        stale.len()
    }

    fn remove(&mut self, id: &str) -> Option<Session> {
        let session = self.open.remove(id)?;
        let held = match session.budget {
            Budget::Uploaded => &mut self.uploaded,
            Budget::Parked => &mut self.parked,
        };
        *held = held.saturating_sub(session.bytes());
        Some(session)
    }
}

/// Where chunk `sequence` of a value of `len` bytes lies, in chunks of
/// `chunk_bytes` cut within frames of [`wire::CHUNK_BYTES`] (as the
/// reference's echo cuts them): start, end, whether it ends its frame.
/// `None` past the last chunk.
fn chunk_bounds(len: usize, chunk_bytes: usize, sequence: u64) -> Option<(usize, usize, bool)> {
    let chunk_bytes = chunk_bytes.max(1);
    let per_frame = wire::CHUNK_BYTES.div_ceil(chunk_bytes) as u64;
    let frame = usize::try_from(sequence / per_frame).ok()?;
    let piece = usize::try_from(sequence % per_frame).ok()?;
    let frame_start = frame.checked_mul(wire::CHUNK_BYTES)?;
    let frame_end = (frame_start + wire::CHUNK_BYTES).min(len);
    let start = frame_start.checked_add(piece.checked_mul(chunk_bytes)?)?;
    if start >= frame_end {
        return None;
    }
    let end = (start + chunk_bytes).min(frame_end);
    Some((start, end, end == frame_end))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use super::*;

    const OWNER: &str = "0123456789abcdef0123456789abcdef";
    const KIB: usize = 1024;

    fn table(limits: impl FnOnce(&mut Limits)) -> Sessions {
        let mut l = Limits::for_broker(1024 * KIB);
        limits(&mut l);
        Sessions::new(OWNER, l)
    }

    fn code(result: Result<impl std::fmt::Debug, TransferError>) -> ErrorCode {
        result.expect_err("refused").code
    }

    #[test]
    fn chunks_are_cut_within_frames_and_the_last_of_each_frame_is_marked() {
        let mib = wire::CHUNK_BYTES;
        // (value length, chunk size, sequence) -> (start, end, frame end)
        type Bounds = Option<(usize, usize, bool)>;
        let cases: &[(usize, usize, u64, Bounds)] = &[
            (0, 512 * KIB, 0, None),
            (10, 512 * KIB, 0, Some((0, 10, true))),
            (10, 512 * KIB, 1, None),
            (mib, 512 * KIB, 0, Some((0, 512 * KIB, false))),
            (mib, 512 * KIB, 1, Some((512 * KIB, mib, true))),
            (mib, 512 * KIB, 2, None),
            // 600 KiB chunks: a frame is 600 KiB + 424 KiB.
            (2 * mib, 600 * KIB, 1, Some((600 * KIB, mib, true))),
            (2 * mib, 600 * KIB, 2, Some((mib, mib + 600 * KIB, false))),
            (mib + 1, 512 * KIB, 2, Some((mib, mib + 1, true))),
            (mib + 1, 512 * KIB, 3, None),
        ];
        for &(len, chunk, sequence, expected) in cases {
            assert_eq!(
                chunk_bounds(len, chunk, sequence),
                expected,
                "{len} bytes, chunks of {chunk}, sequence {sequence}"
            );
        }
    }

    #[test]
    fn an_upload_is_written_in_order_started_then_read_back_whole() {
        let now = Instant::now();
        let mut t = table(|_| {});
        let (id, granted) = t.open("m", "request", 0, 2 * KIB as u32, "a", now).unwrap();
        assert_eq!(granted, 2 * KIB as u32);
        assert!(id.starts_with(OWNER));
        t.write("m", &id, 0, &[1; 2048], now).unwrap();
        t.write("m", &id, 1, &[2; 10], now).unwrap();
        assert_eq!(t.held(), (2058, 0));
        t.start("m", &id, now).unwrap();
        let first = t.read("m", &id, 0, now).unwrap();
        assert_eq!(
            (first.data.len(), first.frame_end, first.done),
            (2048, false, false)
        );
        let second = t.read("m", &id, 1, now).unwrap();
        assert_eq!((second.data.len(), second.frame_end), (10, true));
        assert!(t.read("m", &id, 2, now).unwrap().done);
        t.close("m", &id).unwrap();
        assert_eq!((t.len(), t.held()), (0, (0, 0)));
        t.close("m", &id).expect("closing twice is harmless");
    }

    #[test]
    fn operations_out_of_turn_or_of_another_caller_are_refused_and_change_nothing() {
        let now = Instant::now();
        let mut t = table(|l| l.max_value_bytes = 3 * KIB);
        let (id, _) = t.open("m", "request", 0, KIB as u32, "a", now).unwrap();
        let cases: Vec<(&str, ErrorCode)> = vec![
            ("read before start", code(t.read("m", &id, 0, now))),
            (
                "write out of sequence",
                code(t.write("m", &id, 1, &[0; 10], now)),
            ),
            (
                "chunk above the grant",
                code(t.write("m", &id, 0, &[0; KIB + 1], now)),
            ),
            (
                "another caller writes",
                code(t.write("x", &id, 0, &[0; 10], now)),
            ),
            ("another caller closes", code(t.close("x", &id))),
            ("unknown session", code(t.read("m", "nope", 0, now))),
        ];
        let expected = [
            ErrorCode::Conflict,
            ErrorCode::Conflict,
            ErrorCode::PayloadTooLarge,
            ErrorCode::PermissionDenied,
            ErrorCode::PermissionDenied,
            ErrorCode::NotFound,
        ];
        for ((what, got), want) in cases.into_iter().zip(expected) {
            assert_eq!(got, want, "{what}");
        }
        assert_eq!(t.held(), (0, 0), "nothing was written");
        for sequence in 0..3 {
            t.write("m", &id, sequence, &[0; KIB], now).unwrap();
        }
        assert_eq!(
            code(t.write("m", &id, 3, &[0; 1], now)),
            ErrorCode::PayloadTooLarge
        );
        t.start("m", &id, now).unwrap();
        assert_eq!(code(t.start("m", &id, now)), ErrorCode::Conflict);
        assert_eq!(
            code(t.write("m", &id, 3, &[0; 1], now)),
            ErrorCode::Conflict
        );
        assert_eq!(code(t.read("m", &id, 1, now)), ErrorCode::Conflict);
    }

    #[test]
    fn opens_are_checked_against_the_operation_metadata_chunks_and_capacity() {
        let now = Instant::now();
        let mut t = table(|l| l.max_sessions = 2);
        assert_eq!(
            code(t.open("m", "model", 0, 0, "a", now)),
            ErrorCode::InvalidArgument
        );
        assert_eq!(
            code(t.open("m", "request", 16 * KIB + 1, 0, "a", now)),
            ErrorCode::InvalidArgument
        );
        assert_eq!(
            code(t.open("m", "request", 0, 1023, "a", now)),
            ErrorCode::InvalidArgument
        );
        let (_, granted) = t.open("m", "request", 0, 0, "a", now).unwrap();
        assert_eq!(granted as usize, 512 * KIB, "0 asks for the host's chunk");
        let (_, capped) = t.open("m", "request", 0, u32::MAX, "b", now).unwrap();
        assert_eq!(capped as usize, 512 * KIB, "never above the host's chunk");
        assert_eq!(
            code(t.open("m", "request", 0, 0, "c", now)),
            ErrorCode::ResourceExhausted
        );
        assert_eq!(
            code(t.park("m", Bytes::from_static(b"x"), "d", now)),
            ErrorCode::ResourceExhausted
        );
    }

    #[test]
    fn parked_replies_count_against_their_budget_until_closed_or_expired() {
        let start = Instant::now();
        let mut t = table(|l| {
            l.max_parked_bytes = 100;
            l.max_value_bytes = 80;
        });
        assert_eq!(
            code(t.park("m", Bytes::from(vec![0; 81]), "a", start)),
            ErrorCode::PayloadTooLarge
        );
        let id = t.park("m", Bytes::from(vec![7; 60]), "b", start).unwrap();
        assert_eq!(
            code(t.park("m", Bytes::from(vec![0; 41]), "c", start)),
            ErrorCode::ResourceExhausted
        );
        let chunk = t.read("m", &id, 0, start).unwrap();
        assert_eq!(chunk.data, Bytes::from(vec![7; 60]));
        assert_eq!(t.held(), (0, 60));
        let idle = t.limits().idle;
        assert_eq!(
            t.expire(start + idle),
            0,
            "not idle longer than the limit yet"
        );
        assert_eq!(t.expire(start + idle + Duration::from_millis(1)), 1);
        assert_eq!((t.len(), t.held()), (0, (0, 0)));
        assert_eq!(code(t.read("m", &id, 1, start)), ErrorCode::NotFound);
    }

    #[test]
    fn a_local_take_hands_over_the_upload_and_releases_it() {
        let now = Instant::now();
        let mut t = table(|_| {});
        let (id, _) = t.open("m", "request", 0, 0, "a", now).unwrap();
        t.write("m", &id, 0, b"hello", now).unwrap();
        assert_eq!(code(t.take_upload("x", &id)), ErrorCode::PermissionDenied);
        assert_eq!(
            t.take_upload("m", &id).unwrap(),
            Bytes::from_static(b"hello")
        );
        assert_eq!((t.len(), t.held()), (0, (0, 0)));
        let (started, _) = t.open("m", "request", 0, 0, "b", now).unwrap();
        t.start("m", &started, now).unwrap();
        assert_eq!(code(t.take_upload("m", &started)), ErrorCode::Conflict);
    }
}
