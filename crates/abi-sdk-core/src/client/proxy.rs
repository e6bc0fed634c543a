//! [`ModuleProxy`] (one dependency) and [`Modules`] (the declared ones).

use abi_wire::ErrorCode;
use std::collections::BTreeMap;

use abi_proto::discovery::v1 as pb;

use crate::client::DiscoveryClient;
use crate::error::{CallError, CallErrorKind};
use crate::status::Status;

/// Lookups against one module at one contract major.
#[derive(Clone, Debug)]
pub struct ModuleProxy {
    client: DiscoveryClient,
    module_id: String,
    contract_major: u32,
}

/// A descriptor found on a READY instance, with where it was found.
#[derive(Clone, Debug, PartialEq)]
pub struct Found<T> {
    /// The READY instance that declares it.
    pub instance_id: String,
    /// The descriptor.
    pub descriptor: T,
}

impl ModuleProxy {
    pub(crate) fn new(client: DiscoveryClient, module_id: String, contract_major: u32) -> Self {
        Self {
            client,
            module_id,
            contract_major,
        }
    }

    /// The module id this proxy looks up.
    pub fn module_id(&self) -> &str {
        &self.module_id
    }

    /// The discovery client this proxy looks up through.
    pub fn client(&self) -> &DiscoveryClient {
        &self.client
    }

    /// The contract major this proxy requires.
    pub fn contract_major(&self) -> u32 {
        self.contract_major
    }

    /// Every live instance, whatever its status.
    ///
    /// # Errors
    ///
    /// `ModuleNotFound`, `IncompatibleModule`, or a transport kind.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn instances(&self) -> Result<Vec<pb::Instance>, CallError> {
        self.client
            .get_module(&self.module_id, self.contract_major)
            .await
    }

    /// The READY instances, at least one.
    ///
    /// # Errors
    ///
    /// `ModuleUnavailable` when instances exist but none is READY; otherwise
    /// as [`ModuleProxy::instances`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn ready_instances(&self) -> Result<Vec<pb::Instance>, CallError> {
        let ready: Vec<_> = self
            .instances()
            .await?
            .into_iter()
            .filter(|i| Status::parse(&i.status) == Status::Ready)
            .collect();
        if ready.is_empty() {
            return Err(CallError::new(
                CallErrorKind::ModuleUnavailable,
                format!("{} has no ready instances", self.module_id),
            )
            .with_code(ErrorCode::ModuleUnavailable.as_str()));
        }
        Ok(ready)
    }

    /// The agents of the first READY instance.
    ///
    /// # Errors
    ///
    /// As [`ModuleProxy::ready_instances`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn list_agents(&self) -> Result<Vec<pb::AgentDescriptor>, CallError> {
        let first = self.first_ready().await?;
        Ok(first.descriptor.map(|d| d.agents).unwrap_or_default())
    }

    /// The agent `name` on a READY instance.
    ///
    /// # Errors
    ///
    /// `AgentNotFound`, or as [`ModuleProxy::ready_instances`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn agent(&self, name: &str) -> Result<Found<pb::AgentDescriptor>, CallError> {
        self.find(
            name,
            CallErrorKind::AgentNotFound,
            ErrorCode::AgentNotFound.as_str(),
            |d| &d.agents,
            |a| &a.name,
        )
        .await
    }

    /// The model `name` on a READY instance.
    ///
    /// # Errors
    ///
    /// `ModelNotFound`, or as [`ModuleProxy::ready_instances`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn model(&self, name: &str) -> Result<Found<pb::ModelDescriptor>, CallError> {
        self.find(
            name,
            CallErrorKind::ModelNotFound,
            ErrorCode::ModelNotFound.as_str(),
            |d| &d.models,
            |m| &m.name,
        )
        .await
    }

    /// The job `name` on a READY instance.
    ///
    /// # Errors
    ///
    /// `JobNotFound`, or as [`ModuleProxy::ready_instances`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn job(&self, name: &str) -> Result<Found<pb::JobDescriptor>, CallError> {
        self.find(
            name,
            CallErrorKind::JobNotFound,
            ErrorCode::JobNotFound.as_str(),
            |d| &d.jobs,
            |j| &j.name,
        )
        .await
    }

    /// The app `name` on a READY instance.
    ///
    /// # Errors
    ///
    /// `AppNotFound`, or as [`ModuleProxy::ready_instances`].
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn app(&self, name: &str) -> Result<Found<pb::AppDescriptor>, CallError> {
        self.find(
            name,
            CallErrorKind::AppNotFound,
            ErrorCode::AppNotFound.as_str(),
            |d| &d.apps,
            |a| &a.name,
        )
        .await
    }

    async fn first_ready(&self) -> Result<pb::Instance, CallError> {
        let mut ready = self.ready_instances().await?;
        // ready_instances never returns an empty list.
        Ok(ready.swap_remove(0))
    }

    async fn find<T: Clone>(
        &self,
        name: &str,
        kind: CallErrorKind,
        code: &str,
        list: impl Fn(&pb::ModuleDescriptor) -> &Vec<T>,
        name_of: impl Fn(&T) -> &String,
    ) -> Result<Found<T>, CallError> {
        let first = self.first_ready().await?;
        first
            .descriptor
            .as_ref()
            .and_then(|d| list(d).iter().find(|x| name_of(x) == name).cloned())
            .map(|descriptor| Found {
                instance_id: first.instance_id.clone(),
                descriptor,
            })
            .ok_or_else(|| CallError::new(kind, name.to_owned()).with_code(code))
    }
}

/// Proxies for the modules a module declared it depends on, and only those.
#[derive(Clone, Debug, Default)]
pub struct Modules {
    client: Option<DiscoveryClient>,
    declared: BTreeMap<String, u32>,
}

impl Modules {
    pub(crate) fn new(
        client: Option<DiscoveryClient>,
        declared: impl IntoIterator<Item = (String, u32)>,
    ) -> Self {
        Self {
            client,
            declared: declared.into_iter().collect(),
        }
    }

    /// The proxy for a declared dependency.
    ///
    /// # Errors
    ///
    /// `NotDeclared` at once, without a network call, for a module the module
    /// did not declare (or when it runs without discovery).
    pub fn get(&self, module_id: &str) -> Result<ModuleProxy, CallError> {
        match (&self.client, self.declared.get(module_id)) {
            (Some(client), Some(&major)) => Ok(client.module(module_id, major)),
            _ => Err(CallError::new(
                CallErrorKind::NotDeclared,
                format!("module did not declare module dependency: {module_id}"),
            )),
        }
    }

    /// Every declared dependency's proxy.
    pub fn all(&self) -> Vec<ModuleProxy> {
        match &self.client {
            Some(client) => self
                .declared
                .iter()
                .map(|(id, &major)| client.module(id.clone(), major))
                .collect(),
            None => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::token::TokenSource;

    #[tokio::test]
    async fn only_declared_dependencies_are_handed_out_and_without_a_call() {
        let server = abi_test_support::NatsServer::start().await;
        let nats = async_nats::connect(server.url()).await.unwrap();
        let client = DiscoveryClient::new(nats, "p", TokenSource::issued("t"));
        let modules = Modules::new(Some(client), [("store".to_owned(), 2)]);
        let store = modules.get("store").unwrap();
        assert_eq!((store.module_id(), store.contract_major()), ("store", 2));
        // Nobody serves discovery here: an error at once proves no call was made.
        let err = modules.get("billing").unwrap_err();
        assert_eq!(err.kind(), CallErrorKind::NotDeclared);
        assert_eq!(modules.all().len(), 1);

        let without_discovery = Modules::new(None, [("store".to_owned(), 1)]);
        assert_eq!(
            without_discovery.get("store").unwrap_err().kind(),
            CallErrorKind::NotDeclared
        );
    }
}
