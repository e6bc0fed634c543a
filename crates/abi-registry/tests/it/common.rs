//! Builders and a tiny in-memory registry shared by the scenario tests.
//!
//! `Registry` plays the part of the service around the rules: it keeps the
//! stored snapshot and a clock, drops expired records before each mutation
//! (as the reference's write path does) and answers lookups from the snapshot
//! as stored. Every scenario is written against the public API only.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

pub use abi_proto::discovery::v1 as pb;
use abi_registry::{Error, Mutation, Outcome, RegistryState, Rules, prune_expired};
use prost::Message;

/// The identity most scenarios register and renew as.
pub const OWNER: &str = "owner";

/// The stored snapshot, the policy and the clock of one discovery service.
pub struct Registry {
    pub rules: Rules,
    pub state: RegistryState,
    pub now: f64,
}

impl Registry {
    /// The reference's defaults: a 20 s lease, `api` and `engine` as admins, time 0.
    pub fn new() -> Self {
        Self::with_rules(Rules::new(20.0, ["api", "engine"]).unwrap())
    }

    pub fn with_rules(rules: Rules) -> Self {
        Self {
            rules,
            state: RegistryState::default(),
            now: 0.0,
        }
    }

    /// Applies one mutation the way the service's writer does.
    pub fn apply(&mut self, mutation: Mutation, owner: &str) -> Result<Outcome, Error> {
        prune_expired(&mut self.state, self.now);
        self.rules
            .apply(&mut self.state, &mutation, owner, self.now)
    }

    pub fn register_as(
        &mut self,
        req: &pb::RegisterRequest,
        owner: &str,
    ) -> Result<pb::RegisterResponse, Error> {
        match self.apply(Mutation::Register(req.clone()), owner)? {
            Outcome::Register(response) => Ok(response),
            other => panic!("register answered {other:?}"),
        }
    }

    pub fn register(&mut self, req: &pb::RegisterRequest) -> Result<pb::RegisterResponse, Error> {
        self.register_as(req, OWNER)
    }

    pub fn renew_with(
        &mut self,
        req: pb::RenewRequest,
        owner: &str,
    ) -> Result<pb::RenewResponse, Error> {
        match self.apply(Mutation::Renew(req), owner)? {
            Outcome::Renew(response) => Ok(response),
            other => panic!("renew answered {other:?}"),
        }
    }

    /// Renews `req`'s instance as [`OWNER`], reporting it initialized.
    pub fn renew(&mut self, req: &pb::RegisterRequest) -> Result<pb::RenewResponse, Error> {
        self.renew_with(renewal(req, true), OWNER)
    }

    /// Registers `req` as [`OWNER`] and reports it initialized, like a module
    /// whose startup succeeded.
    pub fn up(&mut self, req: &pb::RegisterRequest) -> pb::RenewResponse {
        self.register(req).unwrap();
        self.renew(req).unwrap()
    }

    pub fn unregister(&mut self, req: &pb::RegisterRequest, owner: &str) -> Result<(), Error> {
        let request = pb::UnregisterRequest {
            instance_id: req.instance_id.clone(),
            lease_token: req.lease_token.clone(),
            ..Default::default()
        };
        match self.apply(Mutation::Unregister(request), owner)? {
            Outcome::Unregister(response) => {
                assert_eq!(response, pb::UnregisterResponse::default());
                Ok(())
            }
            other => panic!("unregister answered {other:?}"),
        }
    }

    pub fn evict(&mut self, instance_id: &str, caller: &str) -> Result<pb::EvictResponse, Error> {
        let request = pb::EvictRequest {
            instance_id: instance_id.to_owned(),
            ..Default::default()
        };
        match self.apply(Mutation::Evict(request), caller)? {
            Outcome::Evict(response) => Ok(response),
            other => panic!("evict answered {other:?}"),
        }
    }

    pub fn get_module(
        &self,
        module_id: &str,
        contract_major: u32,
    ) -> Result<pb::GetModuleResponse, Error> {
        let request = pb::GetModuleRequest {
            module_id: module_id.to_owned(),
            contract_major,
            ..Default::default()
        };
        self.rules.get_module(&self.state, &request, self.now)
    }

    pub fn list(&self, limit: u32, after: &str) -> Result<pb::ListModulesResponse, Error> {
        let request = pb::ListModulesRequest {
            limit,
            after_instance_id: after.to_owned(),
            ..Default::default()
        };
        self.rules.list_modules(&self.state, &request, self.now)
    }

    /// Instance id -> status of `module_id` at `contract_major`, as lookups show it.
    pub fn statuses(&self, module_id: &str, contract_major: u32) -> BTreeMap<String, String> {
        self.get_module(module_id, contract_major)
            .unwrap()
            .instances
            .into_iter()
            .map(|i| (i.instance_id, i.status))
            .collect()
    }

    /// The instance ids a full listing shows.
    pub fn listed(&self) -> Vec<String> {
        self.list(100, "")
            .unwrap()
            .instances
            .into_iter()
            .map(|i| i.instance_id)
            .collect()
    }

    /// The stored snapshot's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        self.state.encode_to_vec()
    }

    /// The stored record of `instance_id`.
    pub fn record(&self, instance_id: &str) -> &pb::RegistryRecord {
        self.state
            .records
            .iter()
            .find(|r| r.instance.as_ref().unwrap().instance_id == instance_id)
            .unwrap_or_else(|| panic!("no record {instance_id}"))
    }
}

/// Expected statuses, for comparing with [`Registry::statuses`].
pub fn statuses(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(id, status)| ((*id).to_owned(), (*status).to_owned()))
        .collect()
}

/// A registration of `module_id` (contract 1) as `instance_id`, depending on
/// `dependencies` (each at contract 1), with a 32+ character lease token.
pub fn registration(
    module_id: &str,
    instance_id: &str,
    dependencies: &[&str],
) -> pb::RegisterRequest {
    pb::RegisterRequest {
        descriptor: Some(pb::ModuleDescriptor {
            module_id: module_id.to_owned(),
            contract_major: 1,
            dependencies: dependencies
                .iter()
                .map(|d| pb::Dependency {
                    module_id: (*d).to_owned(),
                    contract_major: 1,
                })
                .collect(),
            ..Default::default()
        }),
        instance_id: instance_id.to_owned(),
        lease_token: format!("{}{instance_id}", "a".repeat(32)),
        ..Default::default()
    }
}

/// The same registration inside rollout `rollout_id` with cohort `modules`
/// (empty: the module alone).
pub fn in_rollout(
    mut req: pb::RegisterRequest,
    rollout_id: &str,
    modules: &[&str],
) -> pb::RegisterRequest {
    req.rollout_id = rollout_id.to_owned();
    req.rollout_modules = modules.iter().map(|m| (*m).to_owned()).collect();
    req
}

/// The same registration at another contract major.
pub fn at_contract(mut req: pb::RegisterRequest, major: u32) -> pb::RegisterRequest {
    descriptor(&mut req).contract_major = major;
    req
}

pub fn descriptor(req: &mut pb::RegisterRequest) -> &mut pb::ModuleDescriptor {
    req.descriptor.get_or_insert_with(Default::default)
}

/// A job with one trigger, one slot and one attempt.
pub fn job(name: &str, kind: &str, spec: &str) -> pb::JobDescriptor {
    pb::JobDescriptor {
        name: name.to_owned(),
        contract_major: 1,
        triggers: vec![pb::JobTrigger {
            kind: kind.to_owned(),
            spec: spec.to_owned(),
            ..Default::default()
        }],
        max_concurrency: 1,
        max_attempts: 1,
        ..Default::default()
    }
}

/// The default job: `ingest`, every day at 06:00.
pub fn ingest() -> pb::JobDescriptor {
    job("ingest", "cron", "0 0 6 * * *")
}

pub fn with_jobs(
    mut req: pb::RegisterRequest,
    jobs: impl IntoIterator<Item = pb::JobDescriptor>,
) -> pb::RegisterRequest {
    descriptor(&mut req).jobs.extend(jobs);
    req
}

/// Adds an invocable agent `name`.
pub fn with_agent(mut req: pb::RegisterRequest, name: &str) -> pb::RegisterRequest {
    descriptor(&mut req).agents.push(pb::AgentDescriptor {
        name: name.to_owned(),
        contract_major: 1,
        capabilities: vec!["agent.invoke.v1".to_owned()],
        ..Default::default()
    });
    req
}

/// Adds a chat model `name`.
pub fn with_model(mut req: pb::RegisterRequest, name: &str) -> pb::RegisterRequest {
    descriptor(&mut req).models.push(pb::ModelDescriptor {
        name: name.to_owned(),
        kind: "chat".to_owned(),
        ..Default::default()
    });
    req
}

/// An app `name` at contract 1.
pub fn app(name: &str) -> pb::AppDescriptor {
    pb::AppDescriptor {
        name: name.to_owned(),
        contract_major: 1,
        ..Default::default()
    }
}

pub fn with_app(mut req: pb::RegisterRequest, app: pb::AppDescriptor) -> pb::RegisterRequest {
    descriptor(&mut req).apps.push(app);
    req
}

/// A renewal of `req`'s instance with its own token.
pub fn renewal(req: &pb::RegisterRequest, initialized: bool) -> pb::RenewRequest {
    pb::RenewRequest {
        instance_id: req.instance_id.clone(),
        lease_token: req.lease_token.clone(),
        initialized,
        ..Default::default()
    }
}

/// Asserts `result` failed with exactly `expected` ("CODE: message").
#[track_caller]
pub fn assert_refused<T: std::fmt::Debug>(result: Result<T, Error>, expected: &str) {
    match result {
        Ok(value) => panic!("expected {expected:?}, got Ok({value:?})"),
        Err(err) => assert_eq!(err.to_string(), expected),
    }
}
