//! Reads after an early word. The writer tells a put's document as decided
//! before its batch commits, and whoever hears it may act on it at once (a
//! job host starts the run its RUNNING record stands for); a read that
//! reaches the store after that must not answer from before the commit, or
//! an observer of the run would see it still queued. So a read first waits
//! for every batch that told a word before it began to end.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::watch;

/// The writer's batches that told a word, and those ended since.
#[derive(Debug)]
pub struct Told {
    /// The number of batches that told at least one word (only the writer
    /// thread adds to it).
    told: AtomicU64,
    /// The value of `told` once the batches counted in it had ended,
    /// committed or rolled back.
    ended: watch::Sender<u64>,
}

impl Default for Told {
    fn default() -> Self {
        Self {
            told: AtomicU64::new(0),
            ended: watch::Sender::new(0),
        }
    }
}

impl Told {
    /// The writer, just before a batch tells its words.
    pub fn telling(&self) {
        self.told.fetch_add(1, Ordering::SeqCst);
    }

    /// The writer, once its batch ended, committed or not: every batch that
    /// told a word has ended (there is one writer, one batch at a time).
    pub fn batch_ended(&self) {
        let told = self.told.load(Ordering::SeqCst);
        self.ended.send_if_modified(|ended| {
            let moved = *ended != told;
            *ended = told;
            moved
        });
    }

    /// Waits until every batch that told a word before this call has
    /// ended; at once when none is pending, which is nearly always.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only waits.
    pub async fn settled(&self) {
        let told = self.told.load(Ordering::SeqCst);
        if *self.ended.borrow() >= told {
            return;
        }
        let mut ended = self.ended.subscribe();
        // The sender lives as long as `self`: an error cannot come while
        // we hold `&self`, and would only mean there is nothing to wait for.
        let _ = ended.wait_for(|ended| *ended >= told).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    /// Nothing told: a read goes at once. A batch that told and has not
    /// ended holds the reads that began after its word until it ends.
    #[tokio::test]
    async fn reads_wait_for_batches_that_told_until_they_end() {
        let told = Arc::new(Told::default());
        tokio::time::timeout(Duration::from_secs(5), told.settled())
            .await
            .unwrap();
        told.batch_ended();
        tokio::time::timeout(Duration::from_secs(5), told.settled())
            .await
            .unwrap();

        told.telling();
        let waiting = tokio::spawn({
            let told = Arc::clone(&told);
            async move { told.settled().await }
        });
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert!(!waiting.is_finished(), "held while the batch is pending");
        told.batch_ended();
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .unwrap()
            .unwrap();
        tokio::time::timeout(Duration::from_secs(5), told.settled())
            .await
            .unwrap();
    }
}
