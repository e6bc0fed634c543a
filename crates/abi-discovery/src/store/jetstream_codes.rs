//! What a JetStream error code means to the snapshot store.
//!
//! A compare-and-swap is a publish with the header
//! `Nats-Expected-Last-Subject-Sequence`. nats-server refuses a failed check
//! with more than one code: 10071 (`JSStreamWrongLastSequenceErrF`, "wrong
//! last sequence: N") on a single replica and whenever it knows the current
//! sequence, and 10164 (`JSStreamWrongLastSequenceConstantErr`, "wrong last
//! sequence") on a replicated stream when another write to the same key is
//! still being replicated. Both mean the same to us: someone else wrote
//! first, nothing of ours was stored. (Read off nats-server's
//! `server/errors.json` and `jetstream_batching.go`, v2.11 to v2.12.)
//! 10163 (`JSStreamExpectedLastSeqPerSubjectNotReady`, HTTP 503: "expected
//! last sequence per subject temporarily unavailable") also stores nothing
//! and asks to try again later.
//!
//! async-nats 0.51 maps only 10071 to `UpdateErrorKind::WrongLastRevision`
//! and reports 10164 as `Other`, which made the writer answer a plain race
//! between two owners as UNAVAILABLE. We map the codes here, in our adapter,
//! rather than in the vendored client: the vendored copy carries exactly one
//! fix (the drain) until upstream takes it, this mapping is a policy of our
//! store (a 10163 is "retry", not "conflict"), and it reads the code through
//! the client's public error chain, so it keeps working when the vendored
//! copy goes. The same change belongs upstream in `PublishAckFuture`
//! (async-nats `jetstream/context.rs`), mapping 10164 to
//! `PublishErrorKind::WrongLastSequence`.

use async_nats::jetstream::ErrorCode;

/// 10164: the expected-sequence check failed while another write to the
/// subject was in flight (replicated streams).
pub const WRONG_LAST_SEQUENCE_CONSTANT: ErrorCode = ErrorCode(10164);
/// 10163: the expected-sequence check could not be made yet (503).
pub const EXPECTED_LAST_SEQUENCE_NOT_READY: ErrorCode = ErrorCode(10163);

/// How a refused conditional write is to be taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The key moved on: nothing was written, re-read before trying again.
    Conflict,
    /// Nothing was written; the same write may be sent again.
    TryAgain,
    /// Anything else: the outcome is what the error says.
    Other,
}

/// How the store takes JetStream error `code` from a conditional write.
pub fn refusal(code: ErrorCode) -> Refusal {
    match code {
        ErrorCode::STREAM_WRONG_LAST_SEQUENCE | WRONG_LAST_SEQUENCE_CONSTANT => Refusal::Conflict,
        EXPECTED_LAST_SEQUENCE_NOT_READY => Refusal::TryAgain,
        _ => Refusal::Other,
    }
}

/// Whether JetStream answered `code` because its cluster is still forming
/// (no meta leader yet, too few peers known to place the replicas): the
/// same request succeeds once the nodes have met, so opening the bucket
/// waits and tries again rather than failing the service's start.
pub fn cluster_settling(code: ErrorCode) -> bool {
    matches!(
        code,
        ErrorCode::CLUSTER_INCOMPLETE
            | ErrorCode::CLUSTER_NO_PEERS
            | ErrorCode::CLUSTER_NOT_ACTIVE
            | ErrorCode::CLUSTER_NOT_AVAILABLE
            | ErrorCode::CLUSTER_NOT_LEADER
    )
}

/// The JetStream error code somewhere in `error`'s source chain.
pub fn code_in(error: &(dyn std::error::Error + 'static)) -> Option<ErrorCode> {
    let mut next = Some(error);
    while let Some(current) = next {
        if let Some(js) = current.downcast_ref::<async_nats::jetstream::Error>() {
            return Some(js.error_code());
        }
        next = current.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failed_expected_sequence_check_is_a_conflict() {
        assert_eq!(refusal(ErrorCode(10071)), Refusal::Conflict);
        assert_eq!(refusal(ErrorCode(10164)), Refusal::Conflict);
        assert_eq!(refusal(ErrorCode(10163)), Refusal::TryAgain);
        // Wrong last message id: not a check our store makes.
        assert_eq!(refusal(ErrorCode(10070)), Refusal::Other);
        assert_eq!(refusal(ErrorCode(10008)), Refusal::Other);
    }

    #[test]
    fn a_cluster_still_forming_is_waited_for_and_a_real_refusal_is_not() {
        let table = [
            (10004, true),  // cluster incomplete
            (10005, true),  // no suitable peers for placement
            (10006, true),  // cluster not active
            (10008, true),  // JetStream system temporarily unavailable
            (10009, true),  // not the leader (an election under way)
            (10023, false), // insufficient resources: no wait fixes it
            (10058, false), // a stream of that name with another config
            (10059, false), // stream not found: the caller decides
            (10074, false), // more replicas than the cluster has
        ];
        for (code, settling) in table {
            assert_eq!(cluster_settling(ErrorCode(code)), settling, "{code}");
        }
    }
}
