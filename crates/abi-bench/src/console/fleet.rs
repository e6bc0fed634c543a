//! The registry the console shows: 250 instances of 25 modules, each
//! module but the first depending on the one before (so the view has its
//! dependency edges), all renewed as initialized (READY); and the probe
//! instance each measured write registers, then unregisters.

use abi_proto::common::v1::CallError;
use abi_proto::discovery::v1 as pb;
use abi_test_support::requests;
use async_nats::{Client, HeaderMap};
use bytes::Bytes;
use futures::StreamExt as _;
use prost::Message;

use crate::wire::{self, Member, Response};

/// Modules of the registry.
pub const MODULES: usize = 25;
/// Instances of the registry (the browser test's first paint has as many).
pub const INSTANCES: usize = 250;
/// Registrations in flight while filling (not measured).
const FILL_CONCURRENCY: usize = 16;

impl Response for pb::UnregisterResponse {
    fn call_error(&self) -> Option<&CallError> {
        self.error.as_ref()
    }
}

/// One instance of module `fleet.mNN`, its requests encoded beforehand.
pub struct Instance {
    /// Its id: what the console's view and the stored snapshot name it by.
    pub id: String,
    /// Its token header, register, renew (initialized) and lookup.
    pub member: Member,
    /// Its unregister request.
    pub unregister: Bytes,
}

fn module_id(module: usize) -> String {
    format!("fleet.m{:02}", module % MODULES)
}

fn encode(message: &impl Message) -> Bytes {
    message.encode_to_vec().into()
}

impl Instance {
    /// Instance `id` of module number `module`, signed with `secret`'s
    /// key for that module.
    pub fn new(secret: &str, module: usize, id: String) -> Self {
        let module_id = module_id(module);
        let needs = (module % MODULES)
            .checked_sub(1)
            .map(|before| pb::Dependency {
                module_id: self::module_id(before),
                contract_major: 1,
            });
        let descriptor = pb::ModuleDescriptor {
            module_id: module_id.clone(),
            package_version: "1.0.0".to_owned(),
            contract_major: 1,
            dependencies: needs.into_iter().collect(),
            ..Default::default()
        };
        let mut headers = HeaderMap::new();
        let token = requests::module_token(secret, &module_id);
        headers.insert(abi_auth::AUTH_HEADER, token.as_str());
        let lookup = pb::GetModuleRequest {
            module_id,
            contract_major: 1,
            ..Default::default()
        };
        let member = Member {
            headers,
            register: encode(&requests::register_request(descriptor, &id)),
            renew: encode(&requests::renew_request(&id, true)),
            get_module: encode(&lookup),
        };
        Self {
            unregister: encode(&requests::unregister_request(&id)),
            id,
            member,
        }
    }

    /// The `k`th probe: a new instance of one of the modules.
    pub fn probe(secret: &str, k: usize) -> Self {
        Self::new(secret, k, format!("probe-{k:05}"))
    }
}

/// The registry's instances.
pub fn fleet(secret: &str) -> Vec<Instance> {
    (0..INSTANCES)
        .map(|n| {
            let id = format!("fleet-m{:02}-{n:03}", n % MODULES);
            Instance::new(secret, n, id)
        })
        .collect()
}

/// Discovery's subject for operation `name` of `project`.
pub fn subject(project: &str, name: &str) -> String {
    abi_wire::discovery::operation_named(project, name)
}

/// Registers every instance, then renews each as initialized.
///
/// # Errors
///
/// The first registration or renewal refused.
///
/// # Cancel safety
///
/// Not cancel safe: the registrations sent stand.
pub async fn fill(nats: &Client, project: &str, fleet: &[Instance]) -> anyhow::Result<()> {
    let (register, renew) = (subject(project, "register"), subject(project, "renew"));
    let registered = futures::stream::iter(fleet)
        .map(|i| {
            let m = &i.member;
            wire::call::<pb::RegisterResponse>(nats, &register, &m.headers, &m.register)
        })
        .buffer_unordered(FILL_CONCURRENCY)
        .collect::<Vec<_>>();
    for result in registered.await {
        result?;
    }
    let renewed = futures::stream::iter(fleet)
        .map(|i| wire::call::<pb::RenewResponse>(nats, &renew, &i.member.headers, &i.member.renew))
        .buffer_unordered(FILL_CONCURRENCY)
        .collect::<Vec<_>>();
    for result in renewed.await {
        result?;
    }
    Ok(())
}
