//! Lookups and authorization decisions over a snapshot as stored.

use std::sync::{Arc, OnceLock};

use abi_proto::discovery::v1 as pb;

use crate::error::{Error, ErrorCode, require};
use crate::lease::authorize;
use crate::patterns::name;
use crate::record;
use crate::record::READY;
use crate::status::{self, Evaluation, evaluate};

/// A stored snapshot prepared for repeated lookups.
///
/// A lookup shows each live record with the status the rules compute for the
/// live records at that moment, which costs a status computation over the
/// whole snapshot. While no lease in the snapshot has ended, the live records
/// are all of them, so that computation gives the same answer every time; and
/// when the snapshot is *settled* (the statuses and draining marks stored in
/// it are already what the computation gives, as a write leaves them), the
/// answer is what is stored. A `Prepared` checks that once, on its first
/// lookup, and from then on lookups before the earliest lease end read the
/// stored statuses instead of recomputing them. Answers are the same as on
/// the plain snapshot.
///
/// ```
/// use std::sync::Arc;
/// use abi_registry::{Prepared, RegistryState, Rules, pb};
///
/// let prepared = Prepared::new(Arc::new(RegistryState::default()));
/// let req = pb::GetModuleRequest { module_id: "billing".into(), contract_major: 1, ..Default::default() };
/// let err = Rules::default().get_module(&prepared, &req, 100.0).unwrap_err();
/// assert_eq!(err.code(), abi_registry::ErrorCode::ModuleNotFound);
/// ```
#[derive(Debug)]
pub struct Prepared {
    state: Arc<pb::RegistryState>,
    /// The earliest `expires_at` of any record (infinity when empty).
    earliest_expiry: f64,
    /// Whether the stored statuses are the computed ones; checked lazily.
    settled: OnceLock<bool>,
}

impl Prepared {
    /// Prepares `state`, as stored (expired records included).
    pub fn new(state: Arc<pb::RegistryState>) -> Self {
        let earliest_expiry = state
            .records
            .iter()
            .map(|r| record::instance(r).expires_at)
            // A NaN lease never counts as live: no shortcut then.
            .fold(f64::INFINITY, |earliest, e| {
                if e.is_nan() {
                    f64::NEG_INFINITY
                } else {
                    earliest.min(e)
                }
            });
        Self {
            state,
            earliest_expiry,
            settled: OnceLock::new(),
        }
    }

    /// The snapshot, as stored.
    pub fn state(&self) -> &Arc<pb::RegistryState> {
        &self.state
    }

    /// The live records at `now` with their statuses, read from the snapshot
    /// when that gives the computed answer.
    fn live(&self, now: f64) -> Live<'_> {
        if now < self.earliest_expiry
            && *self.settled.get_or_init(|| status::is_settled(&self.state))
            && let Some(live) = Live::stored(&self.state)
        {
            return live;
        }
        Live::new(&self.state, now)
    }
}

/// What a lookup reads: a snapshot as stored, or one [`Prepared`] for
/// repeated lookups. Both give the same answers.
#[derive(Debug, Clone, Copy)]
pub enum LookupSource<'a> {
    /// A snapshot as stored.
    Stored(&'a pb::RegistryState),
    /// A prepared snapshot.
    Prepared(&'a Prepared),
}

impl<'a> From<&'a pb::RegistryState> for LookupSource<'a> {
    fn from(state: &'a pb::RegistryState) -> Self {
        Self::Stored(state)
    }
}

impl<'a> From<&'a Arc<pb::RegistryState>> for LookupSource<'a> {
    fn from(state: &'a Arc<pb::RegistryState>) -> Self {
        Self::Stored(state)
    }
}

impl<'a> From<&'a Prepared> for LookupSource<'a> {
    fn from(prepared: &'a Prepared) -> Self {
        Self::Prepared(prepared)
    }
}

impl<'a> LookupSource<'a> {
    /// The live records at `now`, with their statuses.
    pub(crate) fn live(self, now: f64) -> Live<'a> {
        match self {
            Self::Stored(state) => Live::new(state, now),
            Self::Prepared(prepared) => prepared.live(now),
        }
    }
}

/// The capability an agent must declare to be invoked through the registry.
pub(crate) const AGENT_INVOKE_CAPABILITY: &str = "agent.invoke.v1";

/// The live records of a stored snapshot, with the statuses a lookup sees.
pub(crate) struct Live<'a> {
    /// Records whose lease has not ended, in stored order.
    pub(crate) records: Vec<&'a pb::RegistryRecord>,
    /// The decisions about them (draining marks and statuses).
    pub(crate) evaluation: Evaluation,
}

impl<'a> Live<'a> {
    /// Judges `state` at `now` without copying it.
    pub(crate) fn new(state: &'a pb::RegistryState, now: f64) -> Self {
        let records: Vec<&pb::RegistryRecord> = state
            .records
            .iter()
            .filter(|r| record::instance(r).expires_at > now)
            .collect();
        let evaluation = evaluate(&records);
        Live {
            records,
            evaluation,
        }
    }

    /// Every record with its stored status and draining mark, when each
    /// status is one the rules compute (`None` otherwise).
    fn stored(state: &'a pb::RegistryState) -> Option<Self> {
        let records: Vec<&pb::RegistryRecord> = state.records.iter().collect();
        let statuses = records
            .iter()
            .map(|r| status::known(record::status(r)))
            .collect::<Option<Vec<_>>>()?;
        let draining = records.iter().map(|r| r.draining).collect();
        Some(Live {
            records,
            evaluation: Evaluation { draining, statuses },
        })
    }

    /// The record at `index` as a lookup shows it: a copy with its status.
    pub(crate) fn record(&self, index: usize) -> pb::RegistryRecord {
        let mut copy = self.records[index].clone();
        copy.draining = self.evaluation.draining[index];
        record::instance_mut(&mut copy).status = self.evaluation.statuses[index].to_owned();
        copy
    }

    /// The instance at `index` as a lookup shows it.
    fn instance(&self, index: usize) -> pb::Instance {
        let mut copy = record::instance(self.records[index]).clone();
        copy.status = self.evaluation.statuses[index].to_owned();
        copy
    }
}

/// Live instances of one module at one contract major, ordered by instance id.
pub(crate) fn get_module(
    source: LookupSource<'_>,
    req: &pb::GetModuleRequest,
    now: f64,
) -> Result<pb::GetModuleResponse, Error> {
    require(
        name(&req.module_id) && req.contract_major > 0,
        ErrorCode::InvalidArgument,
        "Module identity and contract required",
    )?;
    let live = source.live(now);
    let of_module: Vec<usize> = (0..live.records.len())
        .filter(|&i| record::module_id(live.records[i]) == req.module_id)
        .collect();
    require(
        !of_module.is_empty(),
        ErrorCode::ModuleNotFound,
        &req.module_id,
    )?;
    let mut matches: Vec<usize> = of_module
        .into_iter()
        .filter(|&i| record::descriptor(live.records[i]).contract_major == req.contract_major)
        .collect();
    require(
        !matches.is_empty(),
        ErrorCode::IncompatibleModule,
        &req.module_id,
    )?;
    matches.sort_by(|&a, &b| {
        record::instance_id(live.records[a]).cmp(record::instance_id(live.records[b]))
    });
    Ok(pb::GetModuleResponse {
        error: None,
        instances: matches.into_iter().map(|i| live.instance(i)).collect(),
    })
}

/// One page of live instances ordered by instance id, after
/// `after_instance_id`; `next_after_instance_id` is empty on the last page.
pub(crate) fn list_modules(
    source: LookupSource<'_>,
    req: &pb::ListModulesRequest,
    now: f64,
) -> Result<pb::ListModulesResponse, Error> {
    require(
        (1..=100).contains(&req.limit),
        ErrorCode::InvalidArgument,
        "Page size must be 1..100",
    )?;
    let live = source.live(now);
    let mut after: Vec<usize> = (0..live.records.len())
        .filter(|&i| record::instance_id(live.records[i]) > req.after_instance_id.as_str())
        .collect();
    after.sort_by(|&a, &b| {
        record::instance_id(live.records[a]).cmp(record::instance_id(live.records[b]))
    });
    // `limit` is at most 100 here, so the conversion cannot truncate.
    let limit = req.limit as usize;
    let more = after.len() > limit;
    after.truncate(limit);
    let instances: Vec<pb::Instance> = after.into_iter().map(|i| live.instance(i)).collect();
    let next = match instances.last() {
        Some(last) if more => last.instance_id.clone(),
        _ => String::new(),
    };
    Ok(pb::ListModulesResponse {
        error: None,
        instances,
        next_after_instance_id: next,
    })
}

/// The live record of `instance_id` (status computed), after checking the
/// caller owns it with `token`.
fn provider(
    source: LookupSource<'_>,
    instance_id: &str,
    token: &str,
    owner: &str,
    now: f64,
) -> Result<pb::RegistryRecord, Error> {
    let live = source.live(now);
    let Some(index) =
        (0..live.records.len()).find(|&i| record::instance_id(live.records[i]) == instance_id)
    else {
        return Err(Error::new(
            ErrorCode::LeaseExpired,
            "Provider registration expired",
        ));
    };
    authorize(live.records[index], token, owner)?;
    Ok(live.record(index))
}

fn require_ready(found: &pb::RegistryRecord) -> Result<(), Error> {
    require(
        record::status(found) == READY,
        ErrorCode::ModuleUnavailable,
        "Provider is not ready",
    )
}

/// Whether a provider may serve an agent call: its lease is live and its
/// own, the agent is declared invocable, and a new invocation needs READY.
pub(crate) fn authorize_agent(
    source: LookupSource<'_>,
    req: &pb::AuthorizeAgentRequest,
    owner: &str,
    now: f64,
) -> Result<pb::AuthorizeAgentResponse, Error> {
    let found = provider(source, &req.instance_id, &req.lease_token, owner, now)?;
    require(
        record::descriptor(&found).agents.iter().any(|a| {
            a.name == req.agent_name && a.capabilities.iter().any(|c| c == AGENT_INVOKE_CAPABILITY)
        }),
        ErrorCode::AgentNotFound,
        &req.agent_name,
    )?;
    if req.new_invocation {
        require_ready(&found)?;
    }
    Ok(pb::AuthorizeAgentResponse::default())
}

/// Whether a provider may serve a chat model: its lease is live and its own,
/// the model is declared, and the provider is READY.
pub(crate) fn authorize_model(
    source: LookupSource<'_>,
    req: &pb::AuthorizeModelRequest,
    owner: &str,
    now: f64,
) -> Result<pb::AuthorizeModelResponse, Error> {
    let found = provider(source, &req.instance_id, &req.lease_token, owner, now)?;
    require(
        record::descriptor(&found)
            .models
            .iter()
            .any(|m| m.name == req.model_name && m.kind == "chat"),
        ErrorCode::ModelNotFound,
        &req.model_name,
    )?;
    require_ready(&found)?;
    Ok(pb::AuthorizeModelResponse::default())
}

/// Whether a provider may serve an app: its lease is live and its own, the
/// app is declared, and the provider is READY.
pub(crate) fn authorize_app(
    source: LookupSource<'_>,
    req: &pb::AuthorizeAppRequest,
    owner: &str,
    now: f64,
) -> Result<pb::AuthorizeAppResponse, Error> {
    let found = provider(source, &req.instance_id, &req.lease_token, owner, now)?;
    require(
        record::descriptor(&found)
            .apps
            .iter()
            .any(|a| a.name == req.app_name),
        ErrorCode::AppNotFound,
        &req.app_name,
    )?;
    require_ready(&found)?;
    Ok(pb::AuthorizeAppResponse::default())
}
