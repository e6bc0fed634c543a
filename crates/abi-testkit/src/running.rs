//! [`RunningModule`]: a module's runner in a task, stopped like SIGTERM would.

use abi_sdk::{Module, RunError, Runner};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A module running in a task (see [`crate::TestRegistry::start_module`]).
///
/// Dropping it stops the module the hard way (the task is aborted, nothing
/// is unregistered, as with `kill -9`); [`RunningModule::stop`] drains it.
#[derive(Debug)]
pub struct RunningModule {
    stop: CancellationToken,
    task: Option<JoinHandle<Result<(), RunError>>>,
}

/// How a [`RunningModule`] ended.
#[derive(Debug, thiserror::Error)]
pub enum Ended {
    /// The runner returned an error (a hook failed, a dependency timed out, ...).
    #[error(transparent)]
    Failed(#[from] RunError),
    /// The task panicked.
    #[error("the module task ended abnormally: {0}")]
    Crashed(#[from] tokio::task::JoinError),
}

impl RunningModule {
    /// Runs `module` with `runner` in a task (for a runner configured beyond
    /// what [`crate::TestRegistry::start_module`] sets up). The runner must
    /// not handle signals if the test process should survive a SIGTERM.
    pub fn from_runner<M: Module>(runner: Runner, module: M) -> Self {
        let stop = CancellationToken::new();
        let runner = runner.stop_on(stop.clone());
        let task = tokio::spawn(runner.run(module));
        Self {
            stop,
            task: Some(task),
        }
    }

    /// Asks the module to drain (what SIGTERM does) and waits until it has
    /// stopped: work guards released, `on_unloaded` run, unregistered.
    ///
    /// # Errors
    ///
    /// What the runner returned, or [`Ended::Crashed`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: the drain was asked for and goes on, but the handle is consumed, so its outcome is lost.
    pub async fn stop(mut self) -> Result<(), Ended> {
        self.stop.cancel();
        self.join().await
    }

    /// Waits until the module stops on its own (its `run` returned, or it
    /// failed).
    ///
    /// # Errors
    ///
    /// As [`RunningModule::stop`].
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: the handle is consumed, and dropping it aborts the module (see [`RunningModule`]).
    pub async fn finished(mut self) -> Result<(), Ended> {
        self.join().await
    }

    /// Whether the module's runner has returned.
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Stops the task without draining, as `kill -9` would: the registration
    /// stays until its lease passes.
    pub fn kill(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }

    async fn join(&mut self) -> Result<(), Ended> {
        match self.task.take() {
            Some(task) => match task.await {
                Ok(result) => result.map_err(Ended::Failed),
                Err(err) => Err(Ended::Crashed(err)),
            },
            None => Ok(()),
        }
    }
}

impl Drop for RunningModule {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
