//! Fan-outs: [`FlowContext::map`], one step per item, and (in
//! [`crate::call`]) `map_call`, one child run per input; `concurrency` at a
//! time, in this process (the reference's `FlowContext._fan_out`). Item `i`
//! is journaled as `key[i]`, so a retried run replays the items that
//! succeeded and runs only the others.

use std::future::Future;

use abi_jobs::JobError;
use abi_pyjson::python_str_repr;
use abi_wire::workflows::{MAX_FAN_OUT, error_type, item_key};
use futures::StreamExt as _;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::flow::{FlowContext, FlowError};

impl FlowContext {
    /// Runs `f(item)` as step `key[i]` for each item, at most `concurrency`
    /// at once, and returns the results in the items' order. The items must
    /// come in the same order on every attempt (take them from an earlier
    /// step). The first failure stops the others (a stopped item's summary
    /// stays RUNNING: it runs again on a retry of the run).
    ///
    /// # Errors
    ///
    /// [`FlowError::Key`] for a bad or repeated `key`; [`FlowError::Step`]
    /// (`ValueError`, not retried: the same input fails the same way) for a
    /// `concurrency` of 0 or more than 10,000 items; else the first item's
    /// failure, as [`FlowContext::step`] gives it.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe, as [`FlowContext::step`]: dropped, the items going
    /// on stop where they are and run again on the next attempt.
    pub async fn map<I, T, F, Fut>(
        &self,
        key: &str,
        items: Vec<I>,
        concurrency: usize,
        f: F,
    ) -> Result<Vec<T>, FlowError>
    where
        T: Serialize + DeserializeOwned,
        F: Fn(I) -> Fut,
        Fut: Future<Output = Result<T, JobError>>,
    {
        let f = &f;
        self.fan_out(key, items, concurrency, |item_key, item| async move {
            let item = std::sync::Mutex::new(Some(item));
            self.step(&item_key, || {
                let item = item
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take();
                async move {
                    match item {
                        Some(item) => f(item).await,
                        // A step calls its function again only to retry
                        // it, and `step` does not retry.
                        None => Err(JobError::retryable("the item was taken")),
                    }
                }
            })
            .await
        })
        .await
    }

    /// Runs `one(key[i], item)` for each item, at most `concurrency` at
    /// once, results in the items' order; the first failure drops the
    /// others where they are.
    pub(crate) async fn fan_out<I, T, F, Fut>(
        &self,
        key: &str,
        items: Vec<I>,
        concurrency: usize,
        one: F,
    ) -> Result<Vec<T>, FlowError>
    where
        F: Fn(String, I) -> Fut,
        Fut: Future<Output = Result<T, FlowError>>,
    {
        let refuse = |message: String| {
            FlowError::Step(JobError::new(error_type::VALUE, message).permanent())
        };
        if concurrency == 0 {
            return Err(refuse("concurrency must be at least 1".to_owned()));
        }
        self.claim(key)?;
        if items.len() > MAX_FAN_OUT {
            return Err(refuse(format!(
                "{} fans out over {} items; at most {MAX_FAN_OUT}. \
                 Split them into batches, one child workflow per batch.",
                python_str_repr(key),
                items.len()
            )));
        }
        let count = items.len();
        let one = &one;
        let mut going = futures::stream::iter(
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| async move { (i, one(item_key(key, i), item).await) }),
        )
        .buffer_unordered(concurrency);
        let mut results: Vec<Option<T>> = (0..count).map(|_| None).collect();
        while let Some((i, one)) = going.next().await {
            results[i] = Some(one?);
        }
        Ok(results.into_iter().flatten().collect())
    }
}
