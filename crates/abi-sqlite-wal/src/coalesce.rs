//! What the VFS holds of a WAL file's writes: the pure rules, no I/O.

/// The most bytes held before they are written: 31 frames of 4 KiB pages.
/// SQLite's unix VFS writes at most this much per call (it masks a write's
/// length to 17 bits, so a longer write would lose its high bits), which
/// also keeps a large transaction's frames reaching the file as it goes.
pub(crate) const HOLD_LIMIT: usize = 0x1_ffff;

/// What one write does with the bytes held before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WritePlan {
    /// Write the held bytes to the file first.
    pub(crate) flush_first: bool,
    /// Hold this write's bytes (otherwise write them through at once).
    pub(crate) hold: bool,
}

/// Contiguous bytes held for one file, starting at `offset`.
#[derive(Debug, Default)]
pub(crate) struct Held {
    offset: i64,
    bytes: Vec<u8>,
}

impl Held {
    /// What a write of `len` bytes at `offset` does: a write that continues
    /// the held bytes joins them while they stay within [`HOLD_LIMIT`]; any
    /// other write sends the held bytes first, so the file sees every byte in
    /// the order SQLite wrote it.
    pub(crate) fn plan(&self, offset: i64, len: usize) -> WritePlan {
        let continues = !self.bytes.is_empty() && offset == self.end();
        if continues && self.bytes.len() + len <= HOLD_LIMIT {
            return WritePlan {
                flush_first: false,
                hold: true,
            };
        }
        WritePlan {
            flush_first: !self.bytes.is_empty(),
            hold: len <= HOLD_LIMIT,
        }
    }

    /// Holds `data`, written at `offset`; the caller has followed
    /// [`Held::plan`], so `data` continues what is held or nothing is.
    pub(crate) fn hold(&mut self, offset: i64, data: &[u8]) {
        if self.bytes.is_empty() {
            self.offset = offset;
        }
        self.bytes.extend_from_slice(data);
    }

    /// The held bytes and where they go, if any.
    pub(crate) fn pending(&self) -> Option<(i64, &[u8])> {
        (!self.bytes.is_empty()).then_some((self.offset, self.bytes.as_slice()))
    }

    /// Forgets the held bytes (written, or their write failed), keeping the
    /// buffer for the next commit.
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
    }

    fn end(&self) -> i64 {
        // A WAL file's offsets and a held buffer's length (<= HOLD_LIMIT)
        // are far below i64::MAX.
        self.offset + self.bytes.len() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(offset: i64, len: usize) -> Held {
        let mut held = Held::default();
        if len > 0 {
            held.hold(offset, &vec![7; len]);
        }
        held
    }

    #[test]
    fn plans() {
        const HOLD: WritePlan = WritePlan {
            flush_first: false,
            hold: true,
        };
        const FLUSH_HOLD: WritePlan = WritePlan {
            flush_first: true,
            hold: true,
        };
        const THROUGH: WritePlan = WritePlan {
            flush_first: false,
            hold: false,
        };
        const FLUSH_THROUGH: WritePlan = WritePlan {
            flush_first: true,
            hold: false,
        };
        let big = HOLD_LIMIT + 1;
        /// What is held (offset, length), the write (offset, length), the plan.
        type Case = ((i64, usize), (i64, usize), WritePlan);
        let table: &[Case] = &[
            // nothing held: a frame header is held, a huge write goes through
            ((0, 0), (32, 24), HOLD),
            ((0, 0), (32, HOLD_LIMIT), HOLD),
            ((0, 0), (32, big), THROUGH),
            // the page after its header joins it
            ((32, 24), (56, 4096), HOLD),
            // up to the limit, and not past it
            (
                (32, HOLD_LIMIT - 24),
                (32 + (HOLD_LIMIT - 24) as i64, 24),
                HOLD,
            ),
            (
                (32, HOLD_LIMIT - 24),
                (32 + (HOLD_LIMIT - 24) as i64, 25),
                FLUSH_HOLD,
            ),
            ((32, 24), (56, big), FLUSH_THROUGH),
            // a frame rewritten in place, the WAL restarted at its header, a gap
            ((32, 8240), (56, 4096), FLUSH_HOLD),
            ((4152, 8240), (0, 32), FLUSH_HOLD),
            ((32, 24), (100, 24), FLUSH_HOLD),
            // a write that ends where the held bytes start is not a continuation
            ((56, 4096), (32, 24), FLUSH_HOLD),
        ];
        for &((at, len), (offset, write_len), expected) in table {
            assert_eq!(
                held(at, len).plan(offset, write_len),
                expected,
                "held {len} at {at}, write {write_len} at {offset}"
            );
        }
    }

    #[test]
    fn held_bytes_keep_their_order_and_start() {
        let mut held = Held::default();
        assert_eq!(held.pending(), None);
        held.hold(32, b"head");
        held.hold(36, b"page");
        assert_eq!(held.pending(), Some((32, &b"headpage"[..])));
        held.clear();
        assert_eq!(held.pending(), None);
        held.hold(0, b"wal");
        assert_eq!(held.pending(), Some((0, &b"wal"[..])));
    }
}
