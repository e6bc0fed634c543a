//! The [`Discovery`] facade as the endpoints' [`Backend`].

use abi_proto::discovery::v1 as pb;
use abi_registry::{ErrorCode, Mutation, Outcome};
use futures::FutureExt as _;
use futures::future::BoxFuture;

use super::backend::{Backend, Failure};
use crate::discovery::Discovery;
use crate::writer::UNAVAILABLE_MESSAGE;

/// The facade reports a store failure as `UNAVAILABLE` with a fixed message, after
/// logging it; the reference answers those without the `"CODE: "` prefix, unlike the
/// rules' own refusals.
fn failure(error: abi_registry::Error) -> Failure {
    if error.code() == ErrorCode::Unavailable && error.message() == UNAVAILABLE_MESSAGE {
        Failure::Unavailable { detail: None }
    } else {
        Failure::Refused(error)
    }
}

impl Backend for Discovery {
    fn mutate<'a>(
        &'a self,
        mutation: Mutation,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<Outcome, Failure>> {
        Discovery::mutate(self, mutation, owner)
            .map(|r| r.map_err(failure))
            .boxed()
    }

    fn get_module<'a>(
        &'a self,
        req: &'a pb::GetModuleRequest,
    ) -> BoxFuture<'a, Result<pb::GetModuleResponse, Failure>> {
        Discovery::get_module(self, req)
            .map(|r| r.map_err(failure))
            .boxed()
    }

    fn list_modules<'a>(
        &'a self,
        req: &'a pb::ListModulesRequest,
    ) -> BoxFuture<'a, Result<pb::ListModulesResponse, Failure>> {
        Discovery::list_modules(self, req)
            .map(|r| r.map_err(failure))
            .boxed()
    }

    fn authorize_agent<'a>(
        &'a self,
        req: &'a pb::AuthorizeAgentRequest,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<pb::AuthorizeAgentResponse, Failure>> {
        Discovery::authorize_agent(self, req, owner)
            .map(|r| r.map_err(failure))
            .boxed()
    }

    fn authorize_model<'a>(
        &'a self,
        req: &'a pb::AuthorizeModelRequest,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<pb::AuthorizeModelResponse, Failure>> {
        Discovery::authorize_model(self, req, owner)
            .map(|r| r.map_err(failure))
            .boxed()
    }

    fn authorize_app<'a>(
        &'a self,
        req: &'a pb::AuthorizeAppRequest,
        owner: &'a str,
    ) -> BoxFuture<'a, Result<pb::AuthorizeAppResponse, Failure>> {
        Discovery::authorize_app(self, req, owner)
            .map(|r| r.map_err(failure))
            .boxed()
    }

    fn is_admin(&self, identity: &str) -> bool {
        self.rules().is_admin(identity)
    }
}
