//! Per-key ordering of submits: two submits of one invocation (or one
//! conversation) run one after the other, submits of different ones side by
//! side. The reference holds one process-wide lock over every submit's
//! document round trips instead.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

/// Async locks by key, forgotten when nobody holds or waits for them.
#[derive(Debug, Default)]
pub(crate) struct KeyedLocks {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// Held while one key's work runs.
#[derive(Debug)]
pub(crate) struct KeyGuard<'a> {
    owner: &'a KeyedLocks,
    key: String,
    guard: Option<OwnedMutexGuard<()>>,
}

impl KeyedLocks {
    /// Waits for `key`'s turn.
    pub(crate) async fn lock(&self, key: &str) -> KeyGuard<'_> {
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
            locks
                .entry(key.to_owned())
                .or_insert_with(|| Arc::new(tokio::sync::Mutex::new(())))
                .clone()
        };
        let guard = lock.lock_owned().await;
        KeyGuard {
            owner: self,
            key: key.to_owned(),
            guard: Some(guard),
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.locks.lock().map(|l| l.len()).unwrap_or(0)
    }
}

impl Drop for KeyGuard<'_> {
    fn drop(&mut self) {
        self.guard.take();
        let mut locks = self.owner.locks.lock().unwrap_or_else(|e| e.into_inner());
        // Only the map holds it: nobody waits, forget it.
        if locks
            .get(&self.key)
            .is_some_and(|l| Arc::strong_count(l) == 1)
        {
            locks.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn different_keys_do_not_wait_for_each_other_and_one_key_does() {
        let locks = KeyedLocks::default();
        let a = locks.lock("conversation-a").await;
        // Another conversation goes ahead while the first is held...
        let b = tokio::time::timeout(Duration::from_secs(1), locks.lock("conversation-b")).await;
        assert!(b.is_ok(), "a second conversation waited for the first");
        drop(b);
        // ...the same one waits.
        let same =
            tokio::time::timeout(Duration::from_millis(50), locks.lock("conversation-a")).await;
        assert!(same.is_err(), "one conversation's submits ran side by side");
        drop(a);
        let again =
            tokio::time::timeout(Duration::from_secs(1), locks.lock("conversation-a")).await;
        assert!(again.is_ok());
        drop(again);
        assert_eq!(locks.len(), 0, "unused locks are forgotten");
    }
}
