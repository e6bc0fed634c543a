//! [`Links`]: what a served host is built from. The runner makes one, once
//! the instance registered, and hands it to every [`super::ServedHost`]; a
//! host made from it is bound from its first line, so no host method has to
//! ask "was I bound yet?".

use crate::client::DiscoveryClient;
use crate::documents::DocumentClient;
use crate::session::SessionHandle;

/// A running module's connection, discovery client, documents and
/// registration. Only the runner makes one, after the instance registered.
/// Cheap to clone.
#[derive(Clone, Debug)]
pub struct Links {
    nats: async_nats::Client,
    discovery: DiscoveryClient,
    documents: DocumentClient,
    session: SessionHandle,
}

/// The part of a running module a served host needs and this one lacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MissingLink {
    /// The module runs against an in-process service (`Runner::local`).
    #[error("a NATS connection (the module runs against an in-process service)")]
    Nats,
    /// The configuration has no discovery.
    #[error("discovery (the configuration has none)")]
    Discovery,
    /// The module did not register (yet).
    #[error("a registration with discovery")]
    Registration,
}

impl Links {
    /// The links of a registered module (the runner's `bind_served`).
    pub(crate) fn new(
        nats: async_nats::Client,
        discovery: DiscoveryClient,
        documents: DocumentClient,
        session: SessionHandle,
    ) -> Self {
        Self {
            nats,
            discovery,
            documents,
            session,
        }
    }

    /// The module's NATS connection.
    pub fn nats(&self) -> &async_nats::Client {
        &self.nats
    }

    /// The module's discovery client.
    pub fn discovery(&self) -> &DiscoveryClient {
        &self.discovery
    }

    /// The module's documents (its own namespace, its token).
    pub fn documents(&self) -> &DocumentClient {
        &self.documents
    }

    /// The instance's registration.
    pub fn session(&self) -> &SessionHandle {
        &self.session
    }

    /// The project (`ABI_PROJECT`).
    pub fn project(&self) -> &str {
        self.discovery.project()
    }

    /// The module's id.
    pub fn module_id(&self) -> &str {
        self.session.module_id()
    }

    /// The registration's instance id.
    pub fn instance_id(&self) -> &str {
        self.session.instance_id()
    }
}
