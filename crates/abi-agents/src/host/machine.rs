//! What a submit does, decided from what it knows: the request, the record
//! already stored under its invocation key (if any), and whether the host
//! takes work. Pure: every case is a row in a table test; `submit.rs` does
//! the I/O (the record reads and create-only writes, the claim, the run).

use abi_document_model::Data;
use abi_proto::agent::v1 as apb;
use abi_wire::ErrorCode;
use abi_wire::agents::{self as wire, field, is_terminal};

use crate::record;

/// A refusal: the wire code and the reference's message.
pub(super) type Refused = (ErrorCode, &'static str);

/// The request's own checks, in the reference's order.
pub(super) fn check_request(req: &apb::SubmitRequest) -> Result<(), Refused> {
    if req.thread_id.is_empty()
        || req.thread_id.chars().count() > wire::MAX_THREAD_ID_CHARS
        || req.prompt.len() > wire::MAX_PROMPT_BYTES
        || !wire::MODES.contains(&req.mode.as_str())
        || req.deadline_seconds > wire::MAX_DEADLINE_SECS
    {
        return Err((
            ErrorCode::InvalidArgument,
            "Invalid thread, prompt, mode or deadline",
        ));
    }
    if !req.updates_inbox.is_empty() && !wire::is_updates_inbox(&req.updates_inbox) {
        return Err((
            ErrorCode::InvalidArgument,
            "Updates go to an inbox subject only",
        ));
    }
    Ok(())
}

/// How the stored record was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Found {
    /// Read before anything was written.
    Before,
    /// Read after our create-only write lost to another submit.
    AfterRace,
}

/// Whether a submit may rejoin the run stored under its key: only the
/// same caller with the same input (the fingerprint) may.
pub(super) fn rejoin(
    stored: &Data,
    caller: &str,
    fingerprint: &str,
    found: Found,
) -> Result<(), Refused> {
    let same_caller = record::text(stored, field::CALLER) == caller;
    let same_input = record::text(stored, field::FINGERPRINT) == fingerprint;
    match found {
        Found::Before if !same_caller => Err((
            ErrorCode::PermissionDenied,
            "Invocation belongs to another caller",
        )),
        Found::Before if !same_input => Err((
            ErrorCode::InvocationConflict,
            "Invocation ID reused with different input",
        )),
        Found::AfterRace if !(same_caller && same_input) => Err((
            ErrorCode::InvocationConflict,
            "Invocation ID already exists with different input",
        )),
        _ => Ok(()),
    }
}

/// Whether a new run is admitted: not while the host drains, nor past its
/// capacity (`reserved`: a slot was free).
pub(super) fn admit(closing: bool, reserved: bool) -> Result<(), Refused> {
    if closing || !reserved {
        return Err((
            ErrorCode::AgentBusy,
            "Provider is draining or at execution capacity",
        ));
    }
    Ok(())
}

/// What a cancel does next, from the record's status as last read, the
/// run if it is live in this process, and whether the record was already
/// read a second time.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum CancelStep<R> {
    /// The run has ended: answer the record as read.
    Answer,
    /// The run is live here: stop it, then answer the record read again.
    Stop(R),
    /// Not ended when read and not live here: read the record again. A run
    /// of this process saves its end before it leaves the live runs, so one
    /// that ended between the first read and the look at the live runs is
    /// seen ended now, and answered instead of refused.
    Reread,
    /// Read twice, not ended, not live here: another process owns the run,
    /// or none does.
    Refuse(Refused),
}

/// The next step of a cancel (see [`CancelStep`]).
pub(super) fn cancel_step<R>(status: &str, live_here: Option<R>, reread: bool) -> CancelStep<R> {
    if is_terminal(status) {
        return CancelStep::Answer;
    }
    match live_here {
        Some(run) => CancelStep::Stop(run),
        None if reread => CancelStep::Refuse((
            ErrorCode::OwnerUnavailable,
            "This process does not own execution; cancellation is not inferred from lease expiry",
        )),
        None => CancelStep::Reread,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use abi_document_model::Value;

    fn request(edit: impl FnOnce(&mut apb::SubmitRequest)) -> apb::SubmitRequest {
        let mut req = apb::SubmitRequest {
            thread_id: "t".into(),
            prompt: "hi".into(),
            mode: "invoke".into(),
            deadline_seconds: 30,
            ..Default::default()
        };
        edit(&mut req);
        req
    }

    #[test]
    fn a_request_is_checked_as_the_reference_checks_it() {
        let bad = (
            ErrorCode::InvalidArgument,
            "Invalid thread, prompt, mode or deadline",
        );
        let inbox = (
            ErrorCode::InvalidArgument,
            "Updates go to an inbox subject only",
        );
        let rows: [(&str, apb::SubmitRequest, Result<(), Refused>); 8] = [
            ("well formed", request(|_| {}), Ok(())),
            ("no thread", request(|r| r.thread_id.clear()), Err(bad)),
            (
                "thread too long",
                request(|r| r.thread_id = "t".repeat(wire::MAX_THREAD_ID_CHARS + 1)),
                Err(bad),
            ),
            (
                "prompt too large",
                request(|r| r.prompt = "p".repeat(wire::MAX_PROMPT_BYTES + 1)),
                Err(bad),
            ),
            (
                "unknown mode",
                request(|r| r.mode = "batch".into()),
                Err(bad),
            ),
            (
                "deadline too far",
                request(|r| r.deadline_seconds = wire::MAX_DEADLINE_SECS + 1),
                Err(bad),
            ),
            (
                "updates to a non-inbox",
                request(|r| {
                    r.updates_inbox = wire::subject("p", "i", "echo", wire::Operation::Status)
                }),
                Err(inbox),
            ),
            (
                "updates to an inbox",
                request(|r| r.updates_inbox = "_INBOX.abc".into()),
                Ok(()),
            ),
        ];
        for (case, req, expected) in rows {
            assert_eq!(check_request(&req), expected, "{case}");
        }
    }

    #[test]
    fn only_the_same_caller_with_the_same_input_rejoins() {
        let mut stored = Data::new();
        stored.insert(field::CALLER.into(), Value::from("alice"));
        stored.insert(field::FINGERPRINT.into(), Value::from("f1"));
        let denied = Err((
            ErrorCode::PermissionDenied,
            "Invocation belongs to another caller",
        ));
        let reused = Err((
            ErrorCode::InvocationConflict,
            "Invocation ID reused with different input",
        ));
        let raced = Err((
            ErrorCode::InvocationConflict,
            "Invocation ID already exists with different input",
        ));
        let rows = [
            (
                "same caller and input",
                "alice",
                "f1",
                Found::Before,
                Ok(()),
            ),
            ("another caller", "bob", "f1", Found::Before, denied),
            (
                "another caller and input",
                "bob",
                "f2",
                Found::Before,
                denied,
            ),
            ("other input", "alice", "f2", Found::Before, reused),
            (
                "won by the same submit",
                "alice",
                "f1",
                Found::AfterRace,
                Ok(()),
            ),
            (
                "won by another caller",
                "bob",
                "f1",
                Found::AfterRace,
                raced,
            ),
            (
                "won with other input",
                "alice",
                "f2",
                Found::AfterRace,
                raced,
            ),
        ];
        for (case, caller, fingerprint, found, expected) in rows {
            assert_eq!(
                rejoin(&stored, caller, fingerprint, found),
                expected,
                "{case}"
            );
        }
        assert!(admit(false, true).is_ok());
        assert_eq!(admit(true, true).unwrap_err().0, ErrorCode::AgentBusy);
        assert_eq!(admit(false, false).unwrap_err().0, ErrorCode::AgentBusy);
    }

    #[test]
    fn a_cancel_reads_again_before_it_refuses_a_run_not_live_here() {
        use abi_wire::agents::RunStatus;
        let running = RunStatus::Running.as_str();
        let done = RunStatus::Succeeded.as_str();
        let cancelled = RunStatus::Cancelled.as_str();
        let refused = CancelStep::Refuse((
            ErrorCode::OwnerUnavailable,
            "This process does not own execution; cancellation is not inferred from lease expiry",
        ));
        // (status read, live here, read again already) -> step
        let rows = [
            (done, None, false, CancelStep::Answer),
            (cancelled, Some(1), false, CancelStep::Answer),
            (done, None, true, CancelStep::Answer),
            (running, Some(1), false, CancelStep::Stop(1)),
            (running, Some(1), true, CancelStep::Stop(1)),
            (running, None, false, CancelStep::Reread),
            (running, None, true, refused),
        ];
        for (status, live, reread, expected) in rows {
            assert_eq!(
                cancel_step(status, live, reread),
                expected,
                "{status} live {live:?} reread {reread}"
            );
        }
    }
}
