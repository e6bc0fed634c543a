//! The console's routes: a page for every view (one HTML shell, the view
//! drawn by the page's script), the JSON API it reads, the event stream
//! that keeps it live, and the actions.
//!
//! | route | what |
//! | --- | --- |
//! | `/`, `/modules/{id}`, `/jobs`, `/jobs/{module}/{job}`, `/runs/{module}/{run}`, `/agents`, `/agents/{module}/{invocation}`, `/search` | pages |
//! | `/assets/console.js`, `/assets/console.css` | the page's script and style |
//! | `GET /api/modules` | the modules view |
//! | `GET /api/jobs` | declared jobs, triggers, next ticks, running counts |
//! | `GET /api/jobs/{module}/{job}/runs?status=&limit=` | recent runs |
//! | `GET /api/runs/{module}/{run}` | a run's record, attempts and steps |
//! | `GET /api/agents` | declared agents and models, chats per model and replica |
//! | `GET /api/agents/{module}/runs?agent=&limit=` | recent agent runs |
//! | `GET /api/agents/{module}/runs/{invocation}` | an agent run's record |
//! | `GET /api/search?q=` | what a query names |
//! | `GET /api/events` | server-sent events: `modules`, `runs`, `agents`, `chats` |
//! | `POST /api/jobs/{module}/{job}/trigger` | trigger a run (actions allowed) |
//! | `POST /api/runs/{module}/{run}/cancel` | cancel a run |
//! | `POST /api/jobs/{module}/{job}/cancel` | cancel the runs a filter selects, with a typed confirmation |
//! | `POST /api/instances/{instance}/evict` | evict an instance |

mod actions;
mod api;
pub mod assets;
mod events;

use std::sync::Arc;

use abi_sdk::{CallError, CallErrorKind, DiscoveryClient};
use abi_wire::ErrorCode;
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::ConsoleOptions;
use crate::live::Live;

/// What every route shares.
#[derive(Debug)]
pub struct AppState {
    pub(crate) client: DiscoveryClient,
    pub(crate) options: ConsoleOptions,
    pub(crate) live: Live,
    pub(crate) tasks: TaskTracker,
    pub(crate) stop: CancellationToken,
}

type State = axum::extract::State<Arc<AppState>>;

/// The console's router.
pub fn router(state: Arc<AppState>) -> axum::Router {
    let page = get(assets::page);
    axum::Router::new()
        .route("/", page.clone())
        .route("/modules", page.clone())
        .route("/modules/{module}", page.clone())
        .route("/jobs", page.clone())
        .route("/jobs/{module}/{job}", page.clone())
        .route("/runs/{module}/{run}", page.clone())
        .route("/agents", page.clone())
        .route("/agents/{module}/{invocation}", page.clone())
        .route("/search", page)
        .route("/assets/console.js", get(assets::script))
        .route("/assets/console.css", get(assets::style))
        .route("/api/modules", get(api::modules))
        .route("/api/jobs", get(api::jobs))
        .route("/api/jobs/{module}/{job}/runs", get(api::job_runs))
        .route("/api/runs/{module}/{run}", get(api::run))
        .route("/api/agents", get(api::agents))
        .route("/api/agents/{module}/runs", get(api::agent_runs))
        .route(
            "/api/agents/{module}/runs/{invocation}",
            get(api::agent_run),
        )
        .route("/api/search", get(api::search))
        .route("/api/events", get(events::stream))
        .route("/api/jobs/{module}/{job}/trigger", post(actions::trigger))
        .route("/api/runs/{module}/{run}/cancel", post(actions::cancel))
        .route(
            "/api/jobs/{module}/{job}/cancel",
            post(actions::cancel_many),
        )
        .route("/api/instances/{instance}/evict", post(actions::evict))
        .with_state(state)
}

/// An API error: an HTTP status and `{"code", "message"}` with a wire code.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: ErrorCode,
    message: String,
}

impl ApiError {
    /// `code` with `message`, at the HTTP status the code means.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        let status = match code {
            ErrorCode::InvalidArgument => StatusCode::BAD_REQUEST,
            ErrorCode::PermissionDenied => StatusCode::FORBIDDEN,
            ErrorCode::Unauthenticated => StatusCode::UNAUTHORIZED,
            ErrorCode::NotFound
            | ErrorCode::ModuleNotFound
            | ErrorCode::InstanceNotFound
            | ErrorCode::JobNotFound
            | ErrorCode::DocumentNotFound
            | ErrorCode::InvocationNotFound => StatusCode::NOT_FOUND,
            ErrorCode::Conflict | ErrorCode::VersionConflict => StatusCode::CONFLICT,
            ErrorCode::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
            _ => StatusCode::BAD_GATEWAY,
        };
        Self {
            status,
            code,
            message: message.into(),
        }
    }
}

impl ApiError {
    /// What went wrong, as said to the page.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl From<CallError> for ApiError {
    fn from(err: CallError) -> Self {
        let code = err
            .code()
            .and_then(ErrorCode::from_wire)
            .unwrap_or(match err.kind() {
                CallErrorKind::TimedOut => ErrorCode::DeadlineExceeded,
                CallErrorKind::InvalidArgument => ErrorCode::InvalidArgument,
                CallErrorKind::RunNotFound => ErrorCode::NotFound,
                _ => ErrorCode::Unavailable,
            });
        Self::new(code, err.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"code": self.code.as_str(), "message": self.message});
        (self.status, Json(body)).into_response()
    }
}
