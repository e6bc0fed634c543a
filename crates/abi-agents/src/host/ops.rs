//! One request to an agent, the reference's checks in its order: size,
//! decode, invocation id, authorization, output format; then submit, or the
//! record (INVOCATION_NOT_FOUND) and its caller (PERMISSION_DENIED; admins
//! may cancel), then event, cancel or status; a reply above the limit
//! becomes PAYLOAD_TOO_LARGE. Refusals carry `"CODE: message"` as the
//! reference's `str(RPCError)`.

use abi_proto::agent::v1 as apb;
use abi_proto::common::v1 as common;
use abi_wire::ErrorCode;
use abi_wire::agents::{self as wire, Operation};
use abi_wire::agents::{RunStatus, field};
use abi_wire::rpc::Reply;
use async_nats::Message;
use bytes::Bytes;
use prost::Message as _;
use tracing::warn;

use super::machine::{self, CancelStep};
use super::refusal::Refusal;
use super::{Shared, auth, run, submit, view};
use crate::record;

/// What an answer is.
pub(super) enum Answer {
    Invocation(apb::Invocation),
    Data(Vec<u8>),
}

/// The encoded reply of `op`: `answer`, or `error`.
pub(super) fn refusal(op: Operation, error: common::CallError) -> Vec<u8> {
    match op {
        Operation::Submit => apb::SubmitResponse::with_error(error).encode_to_vec(),
        Operation::Status => apb::StatusResponse::with_error(error).encode_to_vec(),
        Operation::Cancel => apb::CancelResponse::with_error(error).encode_to_vec(),
        Operation::Event => apb::EventResponse::with_error(error).encode_to_vec(),
    }
}

fn encode(op: Operation, answer: Answer) -> Vec<u8> {
    match (op, answer) {
        (Operation::Event, Answer::Data(data)) => apb::EventResponse {
            data,
            ..Default::default()
        }
        .encode_to_vec(),
        (Operation::Submit, Answer::Invocation(i)) => apb::SubmitResponse {
            invocation: Some(i),
            ..Default::default()
        }
        .encode_to_vec(),
        (Operation::Cancel, Answer::Invocation(i)) => apb::CancelResponse {
            invocation: Some(i),
            ..Default::default()
        }
        .encode_to_vec(),
        (_, Answer::Invocation(i)) => apb::StatusResponse {
            invocation: Some(i),
            ..Default::default()
        }
        .encode_to_vec(),
        (_, Answer::Data(_)) => Vec::new(),
    }
}

/// Publishes `payload` to the request's reply subject, without headers.
pub(super) async fn reply(shared: &Shared, msg: &Message, payload: Vec<u8>) {
    let Some(inbox) = &msg.reply else {
        return;
    };
    if let Err(err) = shared
        .links
        .nats
        .publish(inbox.clone(), Bytes::from(payload))
        .await
    {
        warn!(error = %err, "agent reply not sent");
    }
}

/// Handles one request and answers it.
pub(super) async fn handle(
    shared: &std::sync::Arc<Shared>,
    name: &str,
    op: Operation,
    msg: Message,
) {
    let payload = match answer(shared, name, op, &msg).await {
        Ok(answer) => encode(op, answer),
        Err(refusal) => refusal_bytes(op, refusal),
    };
    let max_payload = shared.links.nats.max_payload();
    let payload = if payload.len() > max_payload.min(wire::MAX_REPLY_BYTES) {
        refusal_bytes(
            op,
            Refusal::new(ErrorCode::PayloadTooLarge, "Agent response exceeds limit"),
        )
    } else {
        payload
    };
    reply(shared, &msg, payload).await;
}

fn refusal_bytes(op: Operation, refused: Refusal) -> Vec<u8> {
    refusal(op, refused.into_error())
}

/// Fields every request of an operation shares.
struct Common {
    invocation_id: String,
    output_format: u32,
    after_sequence: u64,
}

enum Request {
    Submit(Box<apb::SubmitRequest>),
    Status,
    Cancel,
    Event { sequence: u64, part: u32 },
}

fn decode(op: Operation, body: &[u8]) -> Result<(Common, Request), prost::DecodeError> {
    Ok(match op {
        Operation::Submit => {
            let r = apb::SubmitRequest::decode(body)?;
            let c = Common {
                invocation_id: r.invocation_id.clone(),
                output_format: r.output_format,
                after_sequence: 0,
            };
            (c, Request::Submit(Box::new(r)))
        }
        Operation::Status => {
            let r = apb::StatusRequest::decode(body)?;
            let c = Common {
                invocation_id: r.invocation_id,
                output_format: r.output_format,
                after_sequence: r.after_sequence,
            };
            (c, Request::Status)
        }
        Operation::Cancel => {
            let r = apb::CancelRequest::decode(body)?;
            let c = Common {
                invocation_id: r.invocation_id,
                output_format: r.output_format,
                after_sequence: 0,
            };
            (c, Request::Cancel)
        }
        Operation::Event => {
            let r = apb::EventRequest::decode(body)?;
            let c = Common {
                invocation_id: r.invocation_id,
                output_format: 0,
                after_sequence: 0,
            };
            (
                c,
                Request::Event {
                    sequence: r.sequence,
                    part: r.part,
                },
            )
        }
    })
}

async fn answer(
    shared: &std::sync::Arc<Shared>,
    name: &str,
    op: Operation,
    msg: &Message,
) -> Result<Answer, Refusal> {
    let overflow = msg
        .headers
        .as_ref()
        .is_some_and(|h| h.get(abi_wire::overflow::REQUEST_HEADER).is_some());
    if msg.payload.len() > wire::MAX_REQUEST_BYTES || overflow {
        return Err(Refusal::new(
            ErrorCode::PayloadTooLarge,
            "Agent request exceeds 128 KiB",
        ));
    }
    let (common, request) = decode(op, &msg.payload)
        .map_err(|_| Refusal::plain(ErrorCode::InvalidArgument.as_str(), "Malformed protobuf"))?;
    if !wire::is_invocation_id(&common.invocation_id) {
        return Err(Refusal::new(
            ErrorCode::InvalidArgument,
            "Invalid invocation ID",
        ));
    }
    let token = msg
        .headers
        .as_ref()
        .and_then(|h| h.get(abi_wire::AUTH_HEADER))
        .map(|v| v.as_str().to_owned())
        .unwrap_or_default();
    let caller = auth::authorize(shared, name, &token, op == Operation::Submit).await?;
    if op != Operation::Event && common.output_format != wire::OUTPUT_FORMAT as u32 {
        return Err(Refusal::new(
            ErrorCode::UpgradeRequired,
            "Agent output requires an SDK supporting output_format=2",
        ));
    }
    let key = wire::invocation_key(name, &common.invocation_id);
    if let Request::Submit(req) = request {
        let doc = submit::submit(shared, name, &key, &caller.identity, *req).await?;
        return Ok(Answer::Invocation(view::view(shared, &doc.data, 0).await?));
    }
    let runs = &shared.collections.runs;
    let mut doc = shared.documents().get(runs, &key).await?;
    // Administrators may stop any run, never read another caller's output.
    if record::text(&doc.data, field::CALLER) != caller.identity
        && !(caller.admin && op == Operation::Cancel)
    {
        return Err(Refusal::new(
            ErrorCode::PermissionDenied,
            "Invocation belongs to another caller",
        ));
    }
    match request {
        Request::Event { sequence, part } => {
            let last = record::last_sequence(&doc.data);
            let seq = i64::try_from(sequence).unwrap_or(i64::MAX);
            if seq > last
                || (sequence == 0 && record::status(&doc.data) != RunStatus::Succeeded.as_str())
            {
                return Err(Refusal::new(ErrorCode::NotFound, "Output is not committed"));
            }
            let fragment = shared
                .documents()
                .get(
                    &shared.collections.events,
                    &wire::part_id(&key, sequence, u64::from(part)),
                )
                .await?;
            return Ok(Answer::Data(record::fragment_bytes(&fragment.data)));
        }
        Request::Cancel => {
            let mut reread = false;
            loop {
                let status = record::status(&doc.data);
                match machine::cancel_step(&status, shared.runs.get(&key), reread) {
                    CancelStep::Answer => break,
                    CancelStep::Stop(live) => {
                        run::cancel(shared, &live, RunStatus::Cancelled).await;
                        doc = shared.documents().get(runs, &key).await?;
                        break;
                    }
                    CancelStep::Reread => {
                        doc = shared.documents().get(runs, &key).await?;
                        reread = true;
                    }
                    CancelStep::Refuse((code, message)) => {
                        return Err(Refusal::new(code, message));
                    }
                }
            }
        }
        _ => {}
    }
    Ok(Answer::Invocation(
        view::view(shared, &doc.data, common.after_sequence).await?,
    ))
}
