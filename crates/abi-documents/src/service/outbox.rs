//! Replies sent together: the requests a commit answers at once leave in one
//! write to the broker instead of one each.
//!
//! A group commit answers many requests at the same moment, each in its own
//! task. A reply published from a task wakes the connection's task, which
//! the runtime polls right after the replying task (its LIFO slot), so each
//! reply reached the socket in a `writev` of its own, and the broker woke to
//! read each one. Here the first task with a reply to send leads: it yields
//! once, so the other tasks that are ready run and leave their replies in
//! the outbox, then it publishes everything there in a row, and the
//! connection's task writes them all at once.

use std::sync::{Mutex, PoisonError};

/// Replies waiting for their leader to publish them.
#[derive(Debug)]
pub(crate) struct Outbox<T> {
    waiting: Mutex<Vec<T>>,
}

impl<T> Default for Outbox<T> {
    fn default() -> Self {
        Self {
            waiting: Mutex::new(Vec::new()),
        }
    }
}

impl<T> Outbox<T> {
    /// Queues `reply`. If the outbox was empty this caller leads: it lets
    /// the other ready tasks queue theirs, then hands every reply waiting to
    /// `publish`, in the order they came. Otherwise it returns at once, the
    /// leader before it sending the reply.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a leader dropped before it publishes leaves the
    /// replies queued until the next leader. The request tasks that send
    /// are never cancelled (the drain waits for them).
    pub(crate) async fn send(&self, reply: T, publish: impl AsyncFnOnce(Vec<T>)) {
        let leads = {
            let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            waiting.push(reply);
            waiting.len() == 1
        };
        if !leads {
            return;
        }
        tokio::task::yield_now().await;
        // Taken under the lock: a reply queued after this finds the outbox
        // empty and leads the next round.
        let replies =
            std::mem::take(&mut *self.waiting.lock().unwrap_or_else(PoisonError::into_inner));
        // Boxed: only the round's leader gets this far, and inline the
        // publishing future would size every waiting reply's task for it.
        Box::pin(publish(replies)).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::Arc;

    use tokio::sync::Semaphore;

    use super::*;

    /// Replies ready at the same moment (a commit's) go out in one
    /// publish; one ready alone goes out alone, and none is left behind.
    #[tokio::test(flavor = "current_thread")]
    async fn replies_ready_together_are_published_together() {
        let outbox = Arc::new(Outbox::default());
        let published = Arc::new(Mutex::new(Vec::<Vec<usize>>::new()));
        let commit = Arc::new(Semaphore::new(0));
        let mut tasks = Vec::new();
        for reply in 0..16 {
            let (outbox, published, commit) = (outbox.clone(), published.clone(), commit.clone());
            tasks.push(tokio::spawn(async move {
                let _answered = commit.acquire().await.unwrap();
                outbox
                    .send(reply, async |replies| {
                        published.lock().unwrap().push(replies)
                    })
                    .await;
            }));
        }
        // The commit answers all sixteen at once.
        commit.add_permits(16);
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(
            *published.lock().unwrap(),
            vec![(0..16).collect::<Vec<_>>()],
            "one publish of the sixteen, in order"
        );

        let lone = published.clone();
        outbox
            .send(16, async |replies| lone.lock().unwrap().push(replies))
            .await;
        assert_eq!(published.lock().unwrap().last(), Some(&vec![16]));
    }
}
