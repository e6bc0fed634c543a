//! [`DiscoveryClient`]: lookups, paging, eviction and capability search;
//! `proxy.rs`, the [`ModuleProxy`] a client hands out for one module.

pub(crate) mod proxy;

use std::sync::Arc;
use std::time::Duration;

use abi_proto::discovery::v1 as pb;
use futures::Stream;

use self::proxy::ModuleProxy;
use crate::error::CallError;
use crate::local::LocalDiscovery;
use crate::status::Status;
use crate::token::TokenSource;
use crate::transport::{Link, Rpc, Transport};
use crate::watch::{RegistryWatch, WatchOptions};

/// How long a discovery call may take unless configured otherwise (the
/// reference transport's default).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest page `list_modules` accepts.
pub const MAX_PAGE: u32 = 100;

/// A client of the discovery service of one project.
///
/// Cheap to clone: clones share the NATS connection (or the in-process
/// service) and the token source.
#[derive(Clone, Debug)]
pub struct DiscoveryClient {
    transport: Transport,
    project: Arc<str>,
}

/// One page of [`DiscoveryClient::list_modules`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Page {
    /// Instances ordered by instance id.
    pub instances: Vec<pb::Instance>,
    /// Where the next page starts; `None` on the last page.
    pub next_after_instance_id: Option<String>,
}

/// A READY instance's agent that advertises a capability.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentMatch {
    /// The module serving it.
    pub module_id: String,
    /// The instance serving it.
    pub instance_id: String,
    /// The agent as the instance declared it.
    pub agent: pb::AgentDescriptor,
}

impl DiscoveryClient {
    /// A client for `project` over `nats`, sending tokens from `token`, with
    /// [`DEFAULT_REQUEST_TIMEOUT`] per call.
    pub fn new(nats: async_nats::Client, project: impl Into<String>, token: TokenSource) -> Self {
        Self::with_link(
            Link::Nats(nats),
            project,
            Arc::new(token),
            DEFAULT_REQUEST_TIMEOUT,
        )
    }

    /// A client for `project` of an in-process service (the test kit's),
    /// sending tokens from `token`, with [`DEFAULT_REQUEST_TIMEOUT`] per call.
    pub fn local(
        service: Arc<dyn LocalDiscovery>,
        project: impl Into<String>,
        token: TokenSource,
    ) -> Self {
        Self::with_link(
            Link::Local(service),
            project,
            Arc::new(token),
            DEFAULT_REQUEST_TIMEOUT,
        )
    }

    pub(crate) fn with_link(
        link: Link,
        project: impl Into<String>,
        token: Arc<TokenSource>,
        timeout: Duration,
    ) -> Self {
        Self {
            transport: Transport::new(link, token, timeout),
            project: Arc::from(project.into()),
        }
    }

    /// Sets the deadline of each call (default [`DEFAULT_REQUEST_TIMEOUT`]).
    #[must_use]
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.transport = Transport::new(self.transport.link().clone(), self.token(), timeout);
        self
    }

    /// The token source this client signs with (shared, not copied).
    pub fn token(&self) -> Arc<TokenSource> {
        self.transport.token()
    }

    /// A document client bound to `namespace`, over this client's NATS
    /// connection and token; `None` for an in-process service.
    pub fn documents(&self, namespace: impl Into<String>) -> Option<crate::DocumentClient> {
        let nats = self.nats()?.clone();
        Some(crate::DocumentClient::with_transport(
            Transport::new(
                Link::Nats(nats),
                self.token(),
                crate::documents::DEFAULT_DOCUMENT_TIMEOUT,
            ),
            namespace,
        ))
    }

    /// The project this client talks to.
    pub fn project(&self) -> &str {
        &self.project
    }

    /// The NATS connection underneath; `None` for an in-process service.
    pub fn nats(&self) -> Option<&async_nats::Client> {
        match self.transport.link() {
            Link::Nats(client) => Some(client),
            Link::Local(_) => None,
        }
    }

    /// Sends one discovery request and decodes its answer: the token header,
    /// a fresh call context, this client's deadline, and the reply's
    /// `CallError` turned into a typed error (what the host crates use for
    /// the discovery calls of their own, such as `authorize_agent`).
    ///
    /// # Errors
    ///
    /// The service's refusal, a timeout, or the transport's failure.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping it abandons the request; an answer that comes
    /// later is discarded.
    pub async fn call<R: Rpc>(&self, request: &R) -> Result<R::Response, CallError> {
        self.transport.call(&self.project, request).await
    }

    /// Every live instance of `module_id` at `contract_major`, by instance id.
    ///
    /// # Errors
    ///
    /// `ModuleNotFound` when none is registered, `IncompatibleModule` when
    /// none has that major, and the transport kinds (`TimedOut`, ...).
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a lookup changes nothing.
    pub async fn get_module(
        &self,
        module_id: &str,
        contract_major: u32,
    ) -> Result<Vec<pb::Instance>, CallError> {
        let reply = self
            .call(&pb::GetModuleRequest {
                module_id: module_id.to_owned(),
                contract_major,
                ..Default::default()
            })
            .await?;
        Ok(reply.instances)
    }

    /// One page of every live instance, after `after_instance_id` ("" for the first).
    ///
    /// # Errors
    ///
    /// `InvalidArgument` when `limit` is not 1..=100, and the transport kinds.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn list_modules(
        &self,
        limit: u32,
        after_instance_id: &str,
    ) -> Result<Page, CallError> {
        let reply = self
            .call(&pb::ListModulesRequest {
                limit,
                after_instance_id: after_instance_id.to_owned(),
                ..Default::default()
            })
            .await?;
        Ok(Page {
            instances: reply.instances,
            next_after_instance_id: Some(reply.next_after_instance_id).filter(|s| !s.is_empty()),
        })
    }

    /// Every live instance, page after page, as a stream. It ends after the
    /// last page or the first error.
    pub fn list_all(&self) -> impl Stream<Item = Result<pb::Instance, CallError>> + Send + '_ {
        use futures::StreamExt;
        futures::stream::try_unfold(Some(String::new()), move |after| async move {
            let Some(after) = after else { return Ok(None) };
            let page = self.list_modules(MAX_PAGE, &after).await?;
            let next = page.next_after_instance_id;
            Ok(Some((
                futures::stream::iter(page.instances.into_iter().map(Ok)),
                next,
            )))
        })
        .map(|page| match page {
            Ok(items) => items.left_stream(),
            Err(err) => futures::stream::once(async { Err(err) }).right_stream(),
        })
        .flatten()
    }

    /// Removes a registration at once (admin identities only). Its process
    /// registers again under the same instance id at its next renewal.
    ///
    /// # Errors
    ///
    /// `PermissionDenied` for a non-admin token, `InstanceNotFound`, and the
    /// transport kinds.
    ///
    /// # Cancel safety
    ///
    /// Cancelling may leave the eviction applied.
    pub async fn evict(&self, instance_id: &str) -> Result<pb::Instance, CallError> {
        let reply = self
            .call(&pb::EvictRequest {
                instance_id: instance_id.to_owned(),
                ..Default::default()
            })
            .await?;
        Ok(reply.instance.unwrap_or_default())
    }

    /// READY instances' agents that advertise `capability`, across all modules.
    ///
    /// # Errors
    ///
    /// The first failing page's error.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe.
    pub async fn find_agents(&self, capability: &str) -> Result<Vec<AgentMatch>, CallError> {
        use futures::TryStreamExt;
        let instances: Vec<pb::Instance> = self.list_all().try_collect().await?;
        Ok(agents_with_capability(&instances, capability))
    }

    /// A proxy for `module_id` at `contract_major`. A module's own code gets
    /// proxies from [`crate::Modules`], which only hands out declared ones.
    pub fn module(&self, module_id: impl Into<String>, contract_major: u32) -> ModuleProxy {
        ModuleProxy::new(self.clone(), module_id.into(), contract_major)
    }

    /// A stream of registry events (see [`RegistryWatch`]).
    pub fn watch(&self) -> RegistryWatch {
        self.watch_with(WatchOptions::default())
    }

    /// [`DiscoveryClient::watch`] with explicit timings.
    pub fn watch_with(&self, options: WatchOptions) -> RegistryWatch {
        match self.transport.link() {
            Link::Nats(client) => RegistryWatch::new(client.clone(), &self.project, options),
            Link::Local(service) => {
                RegistryWatch::spawn_local(service.snapshots(&self.project), options)
            }
        }
    }
}

/// The agents of READY `instances` that advertise `capability`.
pub(crate) fn agents_with_capability(
    instances: &[pb::Instance],
    capability: &str,
) -> Vec<AgentMatch> {
    instances
        .iter()
        .filter(|i| Status::parse(&i.status) == Status::Ready)
        .flat_map(|i| {
            let module_id = i
                .descriptor
                .as_ref()
                .map(|d| d.module_id.clone())
                .unwrap_or_default();
            i.descriptor
                .iter()
                .flat_map(|d| d.agents.iter())
                .filter(|a| a.capabilities.iter().any(|c| c == capability))
                .map(move |a| AgentMatch {
                    module_id: module_id.clone(),
                    instance_id: i.instance_id.clone(),
                    agent: a.clone(),
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(id: &str, status: &str, caps: &[&str]) -> pb::Instance {
        pb::Instance {
            instance_id: id.into(),
            status: status.into(),
            descriptor: Some(pb::ModuleDescriptor {
                module_id: format!("m-{id}"),
                agents: vec![pb::AgentDescriptor {
                    name: "a".into(),
                    capabilities: caps.iter().map(|c| c.to_string()).collect(),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn capability_search_keeps_ready_instances_advertising_it() {
        let all = [
            instance("1", "READY", &["chat"]),
            instance("2", "DEGRADED", &["chat"]),
            instance("3", "READY", &["search"]),
        ];
        let found = agents_with_capability(&all, "chat");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].instance_id, "1");
        assert_eq!(found[0].module_id, "m-1");
    }
}
