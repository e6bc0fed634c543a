//! How long this machine's disk takes to sync one small write, back to back
//! and after an idle gap. A put on SQLite is answered once its commit is
//! synced, so every latency row that waits for one commit (a put, a job's
//! trigger-to-start) carries this; on a VM a sync after a pause can cost ten
//! times one that follows another, and that changes from run to run.

use std::fmt;
use std::io::{Seek as _, SeekFrom, Write as _};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::measure::Samples;

/// Syncs timed in each of the two ways.
const SYNCS: usize = 50;
/// The pause before each sync of the "after idle" series: about the time
/// between two commits when calls come one at a time.
pub const IDLE_GAP: Duration = Duration::from_millis(2);
/// The bytes written before each sync: one SQLite page.
const PAGE: usize = 4096;

/// Median sync times of one page, in the two ways.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiskSync {
    /// One write and `fdatasync` right after the previous one.
    pub back_to_back: Duration,
    /// One write and `fdatasync` after [`IDLE_GAP`] without I/O.
    pub after_idle: Duration,
}

impl fmt::Display for DiskSync {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:.3} ms back to back, {:.3} ms after {} ms idle",
            self.back_to_back.as_secs_f64() * 1e3,
            self.after_idle.as_secs_f64() * 1e3,
            IDLE_GAP.as_millis()
        )
    }
}

/// Times [`SYNCS`] one-page writes synced with `fdatasync` (as our SQLite syncs)
/// back to back, then as many after [`IDLE_GAP`] each, in a temporary file
/// in `dir` (removed after). Blocks for about a quarter of a second.
///
/// # Errors
///
/// When the file cannot be created, written or synced.
pub fn measure(dir: &Path) -> std::io::Result<DiskSync> {
    let mut file = tempfile::tempfile_in(dir)?;
    let page = [0x5a_u8; PAGE];
    let mut series = |gap: Option<Duration>| -> std::io::Result<Duration> {
        let mut samples = Samples::default();
        for i in 0..SYNCS {
            if let Some(gap) = gap {
                // The pause is what is measured against, not a wait for an
                // event: the disk is left idle on purpose.
                std::thread::sleep(gap);
            }
            // Eight pages rewritten in turn, as a WAL reused after a
            // checkpoint is.
            file.seek(SeekFrom::Start(((i % 8) * PAGE) as u64))?;
            file.write_all(&page)?;
            let started = Instant::now();
            file.sync_data()?;
            samples.latencies.push(started.elapsed());
        }
        Ok(samples.summary().map_or(Duration::ZERO, |s| s.p50))
    };
    let back_to_back = series(None)?;
    let after_idle = series(Some(IDLE_GAP))?;
    Ok(DiskSync {
        back_to_back,
        after_idle,
    })
}

/// [`measure`] in the system's temporary directory (where the benches keep
/// their databases), off the async runtime, as a sentence for a report's
/// notes; says why when it could not measure.
///
/// # Cancel safety
///
/// Cancel safe: dropped, the measuring thread finishes on its own and removes
/// its file.
pub async fn describe() -> String {
    let dir = std::env::temp_dir();
    match tokio::task::spawn_blocking(move || measure(&dir)).await {
        Ok(Ok(sync)) => sync.to_string(),
        Ok(Err(error)) => format!("not measured ({error})"),
        Err(error) => format!("not measured ({error})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_both_series_on_a_real_file() -> std::io::Result<()> {
        let dir = tempfile::tempdir()?;
        let sync = measure(dir.path())?;
        assert!(sync.back_to_back > Duration::ZERO);
        assert!(sync.after_idle > Duration::ZERO);
        assert_eq!(
            std::fs::read_dir(dir.path())?.count(),
            0,
            "the probe's file is removed"
        );
        Ok(())
    }

    #[test]
    fn reads_as_milliseconds() {
        let sync = DiskSync {
            back_to_back: Duration::from_micros(52),
            after_idle: Duration::from_micros(640),
        };
        assert_eq!(
            sync.to_string(),
            "0.052 ms back to back, 0.640 ms after 2 ms idle"
        );
    }
}
