//! Coalesced lookups: callers that arrive together share one store round
//! trip, but never one that began before they arrived (a round trip that
//! started earlier might miss a write acknowledged in between).
//!
//! At most two flights exist: `current`, possibly already running, and
//! `next`, which starts only once `current` has finished. A caller joins
//! `next` whenever `current` is still unfinished, so everyone waiting on
//! `next` arrived before its work began.

use std::sync::Mutex;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};

/// One shared round trip.
pub(crate) type Flight<T> = Shared<BoxFuture<'static, T>>;

/// See the module docs.
pub(crate) struct Coalescer<T: Clone> {
    slots: Mutex<Slots<T>>,
}

struct Slots<T: Clone> {
    current: Option<Flight<T>>,
    next: Option<Flight<T>>,
}

impl<T: Clone> std::fmt::Debug for Coalescer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coalescer").finish_non_exhaustive()
    }
}

impl<T: Clone> Default for Coalescer<T> {
    fn default() -> Self {
        Self {
            slots: Mutex::new(Slots {
                current: None,
                next: None,
            }),
        }
    }
}

impl<T: Clone + Send + Sync + 'static> Coalescer<T> {
    /// The flight this caller waits on. `work` is only called (and its
    /// future only started) after this call, and is dropped unused when the
    /// caller joins a flight someone else created.
    pub(crate) fn join<W>(&self, work: W) -> Flight<T>
    where
        W: FnOnce() -> BoxFuture<'static, T> + Send + 'static,
    {
        // Held only to swap `Shared` handles: never across an await.
        let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
        // A finished `current` retires; `next` (which may have begun by now)
        // takes its place, and retires too if it has also finished.
        for _ in 0..2 {
            if slots.current.as_ref().is_some_and(|c| c.peek().is_some()) {
                slots.current = slots.next.take();
            }
        }
        match &slots.current {
            None => {
                let flight = async move { work().await }.boxed().shared();
                slots.current = Some(flight.clone());
                flight
            }
            Some(current) => {
                if let Some(next) = &slots.next {
                    return next.clone();
                }
                let before = current.clone();
                let flight = async move {
                    before.await;
                    work().await
                }
                .boxed()
                .shared();
                slots.next = Some(flight.clone());
                flight
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test]
    async fn callers_share_flights_that_start_after_they_arrive() {
        let coalescer = Arc::new(Coalescer::<usize>::default());
        let started = Arc::new(AtomicUsize::new(0));
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let work = |started: Arc<AtomicUsize>, gate: Arc<tokio::sync::Semaphore>| {
            move || -> BoxFuture<'static, usize> {
                Box::pin(async move {
                    let n = started.fetch_add(1, Ordering::SeqCst) + 1;
                    gate.acquire().await.unwrap().forget();
                    n
                })
            }
        };
        // The first caller's flight starts and waits at the gate.
        let first = tokio::spawn(coalescer.join(work(started.clone(), gate.clone())));
        while started.load(Ordering::SeqCst) == 0 {
            tokio::task::yield_now().await;
        }
        // Later callers must not share it: they share the next one.
        let later: Vec<_> = (0..5)
            .map(|_| tokio::spawn(coalescer.join(work(started.clone(), gate.clone()))))
            .collect();
        gate.add_permits(10);
        assert_eq!(first.await.unwrap(), 1);
        for handle in later {
            assert_eq!(handle.await.unwrap(), 2);
        }
        assert_eq!(started.load(Ordering::SeqCst), 2);
        // Once everything finished, a new caller starts a fresh flight.
        assert_eq!(coalescer.join(work(started.clone(), gate.clone())).await, 3);
    }
}
