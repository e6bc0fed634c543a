//! Which instance a call to an instance-addressed service goes to (a chat,
//! an app request): the READY instances serving it, asked of discovery at
//! most once a second and shared by every clone of the client; a round
//! robin from a random replica; an instance that refuses before it ran the
//! call is passed over and forgotten, and once the remembered list is spent
//! a fresh one is asked for once.

use std::collections::HashSet;
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::error::CallError;

/// How long the list of instances is reused; an instance that refuses a
/// call leaves it at once.
pub const ROUTE_TTL: Duration = Duration::from_secs(1);

/// The instances one client calls, remembered; share it between clones.
#[derive(Debug)]
pub struct Routes {
    next: AtomicUsize,
    cached: Mutex<Option<(Instant, Vec<String>)>>,
}

impl Default for Routes {
    fn default() -> Self {
        Self::new()
    }
}

impl Routes {
    /// Nothing remembered; the round robin starts at a random replica, so
    /// callers built one per request (or many processes started together)
    /// do not all call the lowest instance id first.
    pub fn new() -> Self {
        Self {
            next: AtomicUsize::new(rand::random::<u32>() as usize),
            cached: Mutex::new(None),
        }
    }

    /// Calls `exchange` on one instance after the other until one answers
    /// or refuses in a way `retry_elsewhere` does not pass over: first the
    /// remembered instances (asked of `lookup` when older than
    /// [`ROUTE_TTL`]), then once over a fresh list, each instance once.
    ///
    /// # Errors
    ///
    /// `lookup`'s error; the answer of the instance that did not refuse;
    /// the last refusal when every instance refused; `none()` when there was
    /// none to call.
    ///
    /// # Cancel safety
    ///
    /// As `exchange`: a call in flight when dropped may have been acted on.
    pub async fn call<T, L, LF, X, XF>(
        &self,
        lookup: L,
        exchange: X,
        retry_elsewhere: impl Fn(&CallError) -> bool,
        none: impl FnOnce() -> CallError,
    ) -> Result<T, CallError>
    where
        L: Fn() -> LF,
        LF: Future<Output = Result<Vec<String>, CallError>>,
        X: Fn(String) -> XF,
        XF: Future<Output = Result<T, CallError>>,
    {
        let mut tried = HashSet::new();
        let mut last = None;
        for fresh in [false, true] {
            let ids = self.instances(fresh, &lookup).await?;
            let start = self.next.fetch_add(1, Ordering::Relaxed);
            for k in 0..ids.len() {
                let id = &ids[(start + k) % ids.len()];
                if !tried.insert(id.clone()) {
                    continue;
                }
                match exchange(id.clone()).await {
                    Err(err) if retry_elsewhere(&err) => {
                        self.forget(id);
                        last = Some(err);
                    }
                    other => return other,
                }
            }
        }
        Err(last.unwrap_or_else(none))
    }

    async fn instances<L, LF>(&self, fresh: bool, lookup: &L) -> Result<Vec<String>, CallError>
    where
        L: Fn() -> LF,
        LF: Future<Output = Result<Vec<String>, CallError>>,
    {
        if !fresh {
            let cached = self.lock();
            if let Some((at, ids)) = cached.as_ref()
                && at.elapsed() < ROUTE_TTL
                && !ids.is_empty()
            {
                return Ok(ids.clone());
            }
        }
        let ids = lookup().await?;
        *self.lock() = Some((Instant::now(), ids.clone()));
        Ok(ids)
    }

    fn forget(&self, instance_id: &str) {
        if let Some((_, ids)) = self.lock().as_mut() {
            ids.retain(|id| id != instance_id);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(Instant, Vec<String>)>> {
        // A poisoned lock only means a thread panicked holding it; the
        // cached list is still valid.
        self.cached.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::atomic::AtomicUsize;

    use super::*;
    use crate::error::CallErrorKind;

    fn refused() -> CallError {
        CallError::new(CallErrorKind::ModuleUnavailable, "draining")
    }

    #[tokio::test]
    async fn the_list_is_reused_and_a_refusing_instance_passed_over() {
        let routes = Routes::new();
        let lookups = AtomicUsize::new(0);
        let lookup = || async {
            lookups.fetch_add(1, Ordering::SeqCst);
            Ok(vec!["a".to_owned(), "b".to_owned()])
        };
        let retry = |e: &CallError| e.kind() == CallErrorKind::ModuleUnavailable;
        let none = || CallError::new(CallErrorKind::AppNotFound, "none");
        for _ in 0..5 {
            let answered = routes
                .call(
                    lookup,
                    |id| async move { Ok::<_, CallError>(id) },
                    retry,
                    none,
                )
                .await
                .unwrap();
            assert!(answered == "a" || answered == "b");
        }
        assert_eq!(lookups.load(Ordering::SeqCst), 1, "one lookup a second");
        // `a` refuses: the call goes to `b`.
        let answered = routes
            .call(
                lookup,
                |id| async move { if id == "a" { Err(refused()) } else { Ok(id) } },
                retry,
                none,
            )
            .await
            .unwrap();
        assert_eq!(answered, "b");
        // Every instance refuses, fresh list included: the last refusal.
        let err = routes
            .call(
                lookup,
                |_| async { Err::<String, _>(refused()) },
                retry,
                none,
            )
            .await
            .unwrap_err();
        assert_eq!(err.kind(), CallErrorKind::ModuleUnavailable);
        // Another failure is the answer: no other instance is tried.
        let calls = AtomicUsize::new(0);
        let err = routes
            .call(
                lookup,
                |_| async {
                    calls.fetch_add(1, Ordering::SeqCst);
                    Err::<String, _>(CallError::new(CallErrorKind::AppError, "ran"))
                },
                retry,
                none,
            )
            .await
            .unwrap_err();
        assert_eq!(
            (err.kind(), calls.load(Ordering::SeqCst)),
            (CallErrorKind::AppError, 1)
        );
    }
}
