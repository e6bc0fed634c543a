//! The entry points the service calls: a mutation, or a lookup, under the
//! configured [`Rules`] (the policy itself is in `policy`).

use abi_proto::discovery::v1 as pb;

use crate::error::Error;
use crate::lookup::{self, LookupSource};
use crate::policy::Rules;
use crate::{Draft, Mutation, Outcome};

impl Rules {
    /// Applies one mutation for caller `owner` (the token's identity) to
    /// `state` at time `now`, and stores the recomputed statuses.
    ///
    /// `state` must hold live records only (see [`crate::prune_expired`]),
    /// as the service reads it before a write.
    ///
    /// # Errors
    /// The refusal the reference gives for the same call (see [`crate::ErrorCode`]),
    /// including REGISTRY_FULL when the result would encode to more than
    /// [`crate::MAX_SNAPSHOT_BYTES`]. On error `state` is left exactly as it was.
    ///
    /// To apply several mutations in a row, a [`Draft`] does the same with
    /// less copying.
    pub fn apply(
        &self,
        state: &mut pb::RegistryState,
        mutation: &Mutation,
        owner: &str,
        now: f64,
    ) -> Result<Outcome, Error> {
        let mut draft = Draft::new(std::mem::take(state));
        let answer = draft.apply(self, mutation, owner, now);
        *state = draft.into_state();
        answer
    }

    /// The live instances of one module at one contract major, by instance id.
    ///
    /// Takes the snapshot as stored (expired records are skipped here), or
    /// [`crate::Prepared`] for repeated lookups, and never changes it.
    ///
    /// # Errors
    /// INVALID_ARGUMENT for a bad module id or a zero contract major,
    /// MODULE_NOT_FOUND when no live instance serves the module, and
    /// INCOMPATIBLE_MODULE when none serves that contract major.
    pub fn get_module<'a>(
        &self,
        state: impl Into<LookupSource<'a>>,
        req: &pb::GetModuleRequest,
        now: f64,
    ) -> Result<pb::GetModuleResponse, Error> {
        lookup::get_module(state.into(), req, now)
    }

    /// One page of live instances of every module, by instance id.
    ///
    /// # Errors
    /// INVALID_ARGUMENT unless `limit` is within 1..=100.
    pub fn list_modules<'a>(
        &self,
        state: impl Into<LookupSource<'a>>,
        req: &pb::ListModulesRequest,
        now: f64,
    ) -> Result<pb::ListModulesResponse, Error> {
        lookup::list_modules(state.into(), req, now)
    }

    /// Whether the provider instance may serve the agent call. Only the
    /// decision: the service verifies `caller_token` and fills in
    /// `caller_identity` and `caller_admin`.
    ///
    /// # Errors
    /// LEASE_EXPIRED, PERMISSION_DENIED, AGENT_NOT_FOUND, or
    /// MODULE_UNAVAILABLE for a new invocation on a provider not READY.
    pub fn authorize_agent<'a>(
        &self,
        state: impl Into<LookupSource<'a>>,
        req: &pb::AuthorizeAgentRequest,
        owner: &str,
        now: f64,
    ) -> Result<pb::AuthorizeAgentResponse, Error> {
        lookup::authorize_agent(state.into(), req, owner, now)
    }

    /// Whether the provider instance may serve the chat model (decision only).
    ///
    /// # Errors
    /// LEASE_EXPIRED, PERMISSION_DENIED, MODEL_NOT_FOUND or MODULE_UNAVAILABLE.
    pub fn authorize_model<'a>(
        &self,
        state: impl Into<LookupSource<'a>>,
        req: &pb::AuthorizeModelRequest,
        owner: &str,
        now: f64,
    ) -> Result<pb::AuthorizeModelResponse, Error> {
        lookup::authorize_model(state.into(), req, owner, now)
    }

    /// Whether the provider instance may serve the app (decision only).
    ///
    /// # Errors
    /// LEASE_EXPIRED, PERMISSION_DENIED, APP_NOT_FOUND or MODULE_UNAVAILABLE.
    pub fn authorize_app<'a>(
        &self,
        state: impl Into<LookupSource<'a>>,
        req: &pb::AuthorizeAppRequest,
        owner: &str,
        now: f64,
    ) -> Result<pb::AuthorizeAppResponse, Error> {
        lookup::authorize_app(state.into(), req, owner, now)
    }
}
