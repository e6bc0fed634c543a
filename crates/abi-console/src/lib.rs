//! A live web console of one project, served by `abictl console`: its
//! modules and instances as discovery sees them (which generation serves,
//! what a staged rollout waits for, why an instance is DEGRADED, the
//! dependency graph), its jobs (triggers and next ticks, runs, a run's
//! record and attempts), workflow runs (the step timeline, child runs
//! linked), agent runs with their events, chats per model and replica, and
//! search. Live: the registry's KV watch, the jobs' trigger and completion
//! subjects and the chat subjects push server-sent events; no page reloads.
//!
//! The pages are plain HTML, CSS and JavaScript built into the binary
//! ([`http::assets`]); no build step, nothing fetched from elsewhere.
//! Actions (trigger, cancel, batch cancel, evict) are refused unless the
//! console runs with actions allowed, and each is logged with who asked and
//! what it did. It never shows a token or the secret.
//!
//! - [`model`]: what each view shows, built by pure functions (tables tested);
//! - [`live`]: the tasks following the project (registry, jobs, chats);
//! - [`http`]: the routes: pages, the JSON API, the event stream, actions.

pub mod http;
pub mod live;
pub mod model;
mod reads;

use std::net::SocketAddr;
use std::sync::Arc;

use abi_sdk::DiscoveryClient;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// How a console behaves.
#[derive(Debug, Clone)]
pub struct ConsoleOptions {
    /// Whether trigger, cancel and evict are carried out (refused otherwise).
    pub allow_actions: bool,
    /// The identity the console's calls are signed for (logged with each
    /// action).
    pub identity: String,
}

/// Why the console could not start.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// The discovery client has no NATS connection (an in-process client).
    #[error("the console needs a NATS connection")]
    NoConnection,
    /// A subscription could not be made.
    #[error("cannot subscribe to {subject}")]
    Subscribe {
        /// The subject.
        subject: String,
        /// Why.
        #[source]
        source: async_nats::SubscribeError,
    },
}

/// A running console: the live sources of one project, and the routes
/// that serve them.
#[derive(Debug, Clone)]
pub struct Console {
    state: Arc<http::AppState>,
}

impl Console {
    /// Starts following `client`'s project: the registry's KV watch, the
    /// jobs' trigger and completion subjects, the chat subjects. The tasks
    /// run until `stop` is cancelled.
    ///
    /// # Errors
    ///
    /// No NATS connection, or a subscription failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropped before it returns, the tasks it started stop
    /// with their subscriptions.
    pub async fn start(
        client: DiscoveryClient,
        options: ConsoleOptions,
        stop: CancellationToken,
    ) -> Result<Self, ConsoleError> {
        let tasks = TaskTracker::new();
        let live = live::Live::start(&client, &tasks, stop.clone()).await?;
        tasks.close();
        Ok(Self {
            state: Arc::new(http::AppState {
                client,
                options,
                live,
                tasks,
                stop,
            }),
        })
    }

    /// The console's routes.
    pub fn router(&self) -> axum::Router {
        http::router(self.state.clone())
    }

    /// Serves on `listener` until the token given to [`Console::start`] is
    /// cancelled: open event streams end then, so the server stops at once;
    /// then waits for the live tasks.
    ///
    /// # Errors
    ///
    /// Accepting connections failed.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping it stops serving; open event streams close.
    pub async fn serve(self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        let app = self
            .router()
            .into_make_service_with_connect_info::<SocketAddr>();
        let stop = self.state.stop.clone();
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await?;
        self.state.tasks.wait().await;
        Ok(())
    }
}
