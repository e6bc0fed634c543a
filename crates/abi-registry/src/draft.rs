//! A snapshot being changed by a run of mutations, kept cheap to change.
//!
//! Applying a mutation the plain way copies the whole registry (so a refusal
//! leaves it untouched), recomputes every status and measures the encoded
//! snapshot: O(instances) allocations per mutation. A [`Draft`] gives the
//! same results, byte for byte, with less work:
//!
//! - it keeps the snapshot's encoded length, so a change re-measures only
//!   the record it touched;
//! - it knows (after checking once) whether the stored statuses and draining
//!   marks are already what a status computation would produce (*settled*).
//!   A renewal that changes no input of that computation (the common one: an
//!   initialized instance extending its lease) then only moves `expires_at`,
//!   which the computation never reads, so recomputing would change nothing
//!   and is skipped. Every other mutation takes the plain path.

use abi_proto::discovery::v1 as pb;
use prost::Message;

use crate::error::{Error, ErrorCode, require};
use crate::lease::authorize;
use crate::record::{self, remaining};
use crate::{MAX_SNAPSHOT_BYTES, Mutation, Outcome, Rules, mutate, status};

/// A registry state with its encoded length and whether its statuses are
/// settled; see the module docs. Build one per batch of mutations with
/// [`Draft::new`], apply them with [`Draft::apply`], take the result with
/// [`Draft::into_state`].
///
/// ```
/// use abi_registry::{Draft, Mutation, RegistryState, Rules, pb};
/// use prost::Message;
///
/// let rules = Rules::default();
/// let mut draft = Draft::new(RegistryState::default());
/// let register = pb::RegisterRequest {
///     descriptor: Some(pb::ModuleDescriptor {
///         module_id: "billing".into(),
///         contract_major: 1,
///         ..Default::default()
///     }),
///     instance_id: "billing-1".into(),
///     lease_token: "t".repeat(32),
///     ..Default::default()
/// };
/// draft.apply(&rules, &Mutation::Register(register), "billing", 100.0).unwrap();
/// assert_eq!(draft.encoded_len(), draft.state().encoded_len());
/// assert_eq!(draft.into_state().records.len(), 1);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Draft {
    state: pb::RegistryState,
    /// Always `state.encoded_len()`.
    encoded_len: usize,
    /// Whether a status computation would leave `state` as it is; `None`
    /// until checked (after a change that may have unsettled it).
    settled: Option<bool>,
}

impl Draft {
    /// Starts from `state` (live records only, as [`Rules::apply`] expects).
    pub fn new(state: pb::RegistryState) -> Self {
        let encoded_len = state.encoded_len();
        Self {
            state,
            encoded_len,
            settled: None,
        }
    }

    /// The state as changed so far.
    pub fn state(&self) -> &pb::RegistryState {
        &self.state
    }

    /// The state's encoded length in bytes, without re-encoding it.
    pub fn encoded_len(&self) -> usize {
        self.encoded_len
    }

    /// The state as changed so far, by value.
    pub fn into_state(self) -> pb::RegistryState {
        self.state
    }

    /// Exactly [`Rules::apply`] on the draft's state: same outcome, same
    /// error, same resulting bytes. On error the state is left as it was.
    ///
    /// # Errors
    /// The refusal [`Rules::apply`] gives for the same call.
    pub fn apply(
        &mut self,
        rules: &Rules,
        mutation: &Mutation,
        owner: &str,
        now: f64,
    ) -> Result<Outcome, Error> {
        if let Mutation::Renew(req) = mutation
            && let Some(answer) = self.renew_settled(rules, req, owner, now)
        {
            return answer.map(Outcome::Renew);
        }
        self.apply_copy(rules, mutation, owner, now)
    }

    /// The plain path: apply to a copy, keep it if it fits.
    fn apply_copy(
        &mut self,
        rules: &Rules,
        mutation: &Mutation,
        owner: &str,
        now: f64,
    ) -> Result<Outcome, Error> {
        let mut candidate = self.state.clone();
        let outcome = match mutation {
            Mutation::Register(req) => {
                Outcome::Register(mutate::register(rules, &mut candidate, req, owner, now)?)
            }
            Mutation::Renew(req) => {
                Outcome::Renew(mutate::renew(rules, &mut candidate, req, owner, now)?)
            }
            Mutation::Unregister(req) => {
                Outcome::Unregister(mutate::unregister(&mut candidate, req, owner)?)
            }
            Mutation::Evict(req) => {
                Outcome::Evict(mutate::evict(rules, &mut candidate, req, owner)?)
            }
        };
        let encoded_len = candidate.encoded_len();
        fits(encoded_len)?;
        self.state = candidate;
        self.encoded_len = encoded_len;
        self.settled = None;
        Ok(outcome)
    }

    /// A renewal on a settled state that changes no status input, done in
    /// place; `None` when the plain path must decide (nothing changed then).
    ///
    /// The refusals come in the order [`mutate::renew`] gives them.
    fn renew_settled(
        &mut self,
        rules: &Rules,
        req: &pb::RenewRequest,
        owner: &str,
        now: f64,
    ) -> Option<Result<pb::RenewResponse, Error>> {
        let index = record::position(&self.state, &req.instance_id)?;
        let existing = &self.state.records[index];
        if existing.instance.is_none()
            || (req.initialized && !existing.initialized)
            || (req.draining && !existing.draining)
        {
            return None;
        }
        if let Err(refusal) = authorize(existing, &req.lease_token, owner) {
            return Some(Err(refusal));
        }
        if !self.settled() {
            return None;
        }
        let existing = &mut self.state.records[index];
        let old_len = framed_len(existing);
        let instance = record::instance_mut(existing);
        let old_expires_at = instance.expires_at;
        instance.expires_at = now + rules.lease_seconds();
        let encoded_len = self.encoded_len - old_len + framed_len(existing);
        if let Err(full) = fits(encoded_len) {
            record::instance_mut(existing).expires_at = old_expires_at;
            return Some(Err(full));
        }
        self.encoded_len = encoded_len;
        let instance = record::instance(existing).clone();
        Some(Ok(pb::RenewResponse {
            error: None,
            lease_seconds: remaining(instance.expires_at, now),
            instance: Some(instance),
        }))
    }

    /// Whether a status computation would change nothing (checked once, then
    /// remembered until a plain-path change).
    fn settled(&mut self) -> bool {
        *self
            .settled
            .get_or_insert_with(|| status::is_settled(&self.state))
    }
}

/// REGISTRY_FULL unless a snapshot of `encoded_len` bytes may be stored.
fn fits(encoded_len: usize) -> Result<(), Error> {
    require(
        encoded_len <= MAX_SNAPSHOT_BYTES,
        ErrorCode::RegistryFull,
        "Registry snapshot exceeds 512 KiB",
    )
}

/// What one record adds to the encoded state: its tag (field 1, one byte),
/// its length prefix and its bytes.
fn framed_len(record: &pb::RegistryRecord) -> usize {
    let len = record.encoded_len();
    1 + prost::encoding::encoded_len_varint(len as u64) + len
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn register(module: &str, instance: &str, deps: &[&str]) -> Mutation {
        Mutation::Register(pb::RegisterRequest {
            descriptor: Some(pb::ModuleDescriptor {
                module_id: module.into(),
                contract_major: 1,
                dependencies: deps
                    .iter()
                    .map(|d| pb::Dependency {
                        module_id: (*d).into(),
                        contract_major: 1,
                    })
                    .collect(),
                ..Default::default()
            }),
            instance_id: instance.into(),
            lease_token: "t".repeat(32),
            ..Default::default()
        })
    }

    fn renew(instance: &str, initialized: bool) -> Mutation {
        Mutation::Renew(pb::RenewRequest {
            instance_id: instance.into(),
            lease_token: "t".repeat(32),
            initialized,
            ..Default::default()
        })
    }

    #[test]
    fn a_settled_renewal_skips_the_copy_and_answers_the_same() {
        let rules = Rules::default();
        let mut draft = Draft::new(pb::RegistryState::default());
        for (mutation, owner) in [
            (register("a", "a-1", &[]), "a"),
            (register("b", "b-1", &["a"]), "b"),
            (renew("a-1", true), "a"),
            (renew("b-1", true), "b"),
        ] {
            draft.apply(&rules, &mutation, owner, 10.0).unwrap();
        }
        assert_eq!(draft.settled, None);
        for (mutation, owner, now) in [
            (renew("a-1", true), "a", 11.0),
            (renew("b-1", false), "b", 12.0),
            (renew("b-1", true), "intruder", 13.0),
        ] {
            let mut plain = draft.clone();
            let want = plain.apply_copy(&rules, &mutation, owner, now);
            let have = draft.apply(&rules, &mutation, owner, now);
            assert_eq!(have, want);
            assert_eq!(draft.settled, Some(true), "the fast path was taken");
            assert_eq!(draft.state.encode_to_vec(), plain.state.encode_to_vec());
            assert_eq!(draft.encoded_len, draft.state.encoded_len());
        }
        let statuses: Vec<&str> = draft.state.records.iter().map(record::status).collect();
        assert_eq!(statuses, ["READY", "READY"]);
    }

    #[test]
    fn a_renewal_that_would_overflow_is_refused_and_undone() {
        let rules = Rules::default();
        let mut draft = Draft::new(pb::RegistryState::default());
        draft
            .apply(&rules, &register("a", "a-1", &[]), "a", 10.0)
            .unwrap();
        draft.apply(&rules, &renew("a-1", true), "a", 10.0).unwrap();
        // Pretend the rest of the snapshot is full to the byte.
        draft.encoded_len = MAX_SNAPSHOT_BYTES;
        draft.state.records[0].instance.as_mut().unwrap().expires_at = 0.0;
        let before = draft.state.clone();
        let err = draft
            .apply(&rules, &renew("a-1", false), "a", 11.0)
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::RegistryFull);
        assert_eq!(draft.state, before);
    }

    #[test]
    fn a_framed_record_is_what_it_adds_to_the_state() {
        let record = pb::RegistryRecord {
            owner: "x".repeat(300),
            ..Default::default()
        };
        let one = pb::RegistryState {
            records: vec![record.clone()],
        };
        assert_eq!(framed_len(&record), one.encoded_len());
        assert_eq!(pb::RegistryState::default().encoded_len(), 0);
    }
}
