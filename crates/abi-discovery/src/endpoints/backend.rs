//! What the endpoints need from the service, as a small port: the [`Discovery`]
//! core implements it (below, by forwarding), and tests put a scripted fake
//! behind the real NATS edge to reach what the core cannot produce on demand
//! (oversized answers, an outcome of the wrong operation, a failure with a
//! detail for the edge to log).

use abi_proto::discovery::v1 as pb;
use abi_registry::{Mutation, Outcome};
use futures::FutureExt as _;
use futures::future::BoxFuture;

use crate::discovery::Discovery;
use crate::error::DiscoveryError;

/// Why the registry did not answer a request.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// A rule refused it: the caller gets the code and `"CODE: message"`.
    #[error(transparent)]
    Refused(abi_registry::Error),
    /// The registry could not be read or written: the caller gets `UNAVAILABLE` and
    /// a fixed message. `detail` is logged by the edge; `None` when the failure was
    /// already logged where it happened.
    #[error("the registry could not be read or written")]
    Unavailable {
        /// What went wrong, for the log only.
        detail: Option<String>,
    },
}

impl From<abi_registry::Error> for Failure {
    fn from(error: abi_registry::Error) -> Self {
        Self::Refused(error)
    }
}

impl From<DiscoveryError> for Failure {
    fn from(error: DiscoveryError) -> Self {
        match error {
            DiscoveryError::Refused(error) => Self::Refused(error),
            // The core logged the cause where it happened.
            DiscoveryError::Unavailable => Self::Unavailable { detail: None },
        }
    }
}

/// The registry operations behind the endpoints.
pub trait Backend: Send + Sync + 'static {
    /// Applies a mutation for the caller `owner` (the token identity).
    fn mutate<'a>(
        &'a self,
        mutation: Mutation,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<Outcome, Failure>>;

    /// Looks up a module's instances.
    fn get_module<'a>(
        &'a self,
        req: &'a pb::GetModuleRequest,
    ) -> BoxFuture<'a, Result<pb::GetModuleResponse, Failure>>;

    /// Pages through the registered modules.
    fn list_modules<'a>(
        &'a self,
        req: &'a pb::ListModulesRequest,
    ) -> BoxFuture<'a, Result<pb::ListModulesResponse, Failure>>;

    /// Authorizes a call to an agent of the instance `owner` runs.
    fn authorize_agent<'a>(
        &'a self,
        req: &'a pb::AuthorizeAgentRequest,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<pb::AuthorizeAgentResponse, Failure>>;

    /// Authorizes a call to a model of the instance `owner` runs.
    fn authorize_model<'a>(
        &'a self,
        req: &'a pb::AuthorizeModelRequest,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<pb::AuthorizeModelResponse, Failure>>;

    /// Authorizes a call to an app of the instance `owner` runs.
    fn authorize_app<'a>(
        &'a self,
        req: &'a pb::AuthorizeAppRequest,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<pb::AuthorizeAppResponse, Failure>>;

    /// Whether `identity` is an admin (reported to callees as `caller_admin`).
    fn is_admin(&self, identity: &str) -> bool;
}

/// The core behind the endpoints: each call forwards, and the core's typed
/// error becomes the port's [`Failure`] kind for kind.
impl Backend for Discovery {
    fn mutate<'a>(
        &'a self,
        mutation: Mutation,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<Outcome, Failure>> {
        Discovery::mutate(self, mutation, owner)
            .map(|r| r.map_err(Failure::from))
            .boxed()
    }

    fn get_module<'a>(
        &'a self,
        req: &'a pb::GetModuleRequest,
    ) -> BoxFuture<'a, Result<pb::GetModuleResponse, Failure>> {
        Discovery::get_module(self, req)
            .map(|r| r.map_err(Failure::from))
            .boxed()
    }

    fn list_modules<'a>(
        &'a self,
        req: &'a pb::ListModulesRequest,
    ) -> BoxFuture<'a, Result<pb::ListModulesResponse, Failure>> {
        Discovery::list_modules(self, req)
            .map(|r| r.map_err(Failure::from))
            .boxed()
    }

    fn authorize_agent<'a>(
        &'a self,
        req: &'a pb::AuthorizeAgentRequest,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<pb::AuthorizeAgentResponse, Failure>> {
        Discovery::authorize_agent(self, req, owner)
            .map(|r| r.map_err(Failure::from))
            .boxed()
    }

    fn authorize_model<'a>(
        &'a self,
        req: &'a pb::AuthorizeModelRequest,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<pb::AuthorizeModelResponse, Failure>> {
        Discovery::authorize_model(self, req, owner)
            .map(|r| r.map_err(Failure::from))
            .boxed()
    }

    fn authorize_app<'a>(
        &'a self,
        req: &'a pb::AuthorizeAppRequest,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<pb::AuthorizeAppResponse, Failure>> {
        Discovery::authorize_app(self, req, owner)
            .map(|r| r.map_err(Failure::from))
            .boxed()
    }

    fn is_admin(&self, identity: &str) -> bool {
        self.rules().is_admin(identity)
    }
}
