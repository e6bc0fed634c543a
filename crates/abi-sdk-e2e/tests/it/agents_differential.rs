//! A differential: the same refused requests sent to the reference's
//! `AgentHost` and to ours (one module, both READY, each addressed on its
//! own instance subjects) get the same code and message, case after case:
//! the reference's checks in its order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, SystemTime};

use abi_proto::Message as _;
use abi_proto::agent::v1 as apb;
use abi_proto::common::v1 as common;
use abi_sdk::agents::SubmitOptions;
use abi_sdk_e2e::SECRET;
use abi_wire::agents::{self as wire, Operation};
use async_nats::HeaderMap;

use super::agents_fixture::{DEADLINE, Provider, Setup, options, ready};
use super::agents_interop::python_host;

/// A case: its name, the operation, the caller (none: no token), whether
/// the overflow header is set, and the body.
type Case<'a> = (&'a str, Operation, Option<&'a str>, bool, Vec<u8>);

fn token(identity: &str, instance: &str) -> String {
    let key = abi_auth::module_key(SECRET, identity).unwrap();
    abi_auth::issue_module_token(
        identity,
        &key,
        Duration::from_secs(300),
        SystemTime::now(),
        Some(instance),
    )
    .unwrap()
}

/// Sends `body` to `op` of `instance` as `identity` (none: no token) and
/// returns the refusal's code and message.
async fn refusal(
    nats: &async_nats::Client,
    setup: &Setup,
    instance: &str,
    op: Operation,
    identity: Option<&str>,
    overflow: bool,
    body: Vec<u8>,
) -> (String, String) {
    let mut headers = HeaderMap::new();
    if let Some(identity) = identity {
        headers.insert(abi_wire::AUTH_HEADER, token(identity, instance).as_str());
    }
    if overflow {
        headers.insert(abi_wire::overflow::REQUEST_HEADER, "1");
    }
    let subject = wire::subject(&setup.world.project, instance, "echo", op);
    let request = async_nats::Request::new()
        .headers(headers)
        .payload(body.into())
        .timeout(Some(DEADLINE));
    let reply = nats.send_request(subject, request).await.unwrap();
    let error: Option<common::CallError> = match op {
        Operation::Submit => {
            apb::SubmitResponse::decode(reply.payload.as_ref())
                .unwrap()
                .error
        }
        Operation::Status => {
            apb::StatusResponse::decode(reply.payload.as_ref())
                .unwrap()
                .error
        }
        Operation::Cancel => {
            apb::CancelResponse::decode(reply.payload.as_ref())
                .unwrap()
                .error
        }
        Operation::Event => {
            apb::EventResponse::decode(reply.payload.as_ref())
                .unwrap()
                .error
        }
    };
    let error = error.expect("a refusal");
    (error.code, error.message)
}

fn submit(f: impl FnOnce(&mut apb::SubmitRequest)) -> Vec<u8> {
    let mut r = apb::SubmitRequest {
        invocation_id: "diff-1".into(),
        thread_id: "t".into(),
        prompt: "p".into(),
        mode: "invoke".into(),
        output_format: 2,
        ..Default::default()
    };
    f(&mut r);
    r.encode_to_vec()
}

fn status(id: &str, format: u32) -> Vec<u8> {
    apb::StatusRequest {
        invocation_id: id.into(),
        output_format: format,
        ..Default::default()
    }
    .encode_to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_match_the_reference_case_by_case() {
    let setup = Setup::start(20.0).await;
    let mut py = python_host(&setup, "py").await;
    let py_id = ready(&setup.world, 1).await.remove(0);
    let rust = Provider::start(&setup.world, "rust", options()).await;
    let rust_id = ready(&setup.world, 2)
        .await
        .into_iter()
        .find(|i| *i != py_id)
        .unwrap();
    // A run of "caller" (whoever serves it: both read the shared record).
    let agent = setup.agent("caller", "echo").await;
    let mut run = agent
        .submit(
            "done",
            SubmitOptions {
                invocation_id: Some("owned-1".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    run.result(Some(DEADLINE)).await.unwrap();
    let thread = agent.thread_id();

    let caller = Some("caller");
    let cases: Vec<Case<'_>> = vec![
        (
            "oversized",
            Operation::Submit,
            caller,
            false,
            vec![0; 128 * 1024 + 1],
        ),
        (
            "overflow header",
            Operation::Status,
            caller,
            true,
            status("x", 2),
        ),
        (
            "malformed",
            Operation::Submit,
            caller,
            false,
            vec![0xff, 0xff, 0xff],
        ),
        ("bad id", Operation::Status, caller, false, status("a b", 2)),
        ("empty id", Operation::Cancel, caller, false, Vec::new()),
        ("no token", Operation::Status, None, false, status("x", 2)),
        (
            "old format",
            Operation::Status,
            caller,
            false,
            status("x", 1),
        ),
        (
            "old format submit",
            Operation::Submit,
            caller,
            false,
            submit(|r| r.output_format = 0),
        ),
        (
            "unknown",
            Operation::Status,
            caller,
            false,
            status("nobody-1", 2),
        ),
        (
            "no thread",
            Operation::Submit,
            caller,
            false,
            submit(|r| r.thread_id.clear()),
        ),
        (
            "long thread",
            Operation::Submit,
            caller,
            false,
            submit(|r| r.thread_id = "t".repeat(257)),
        ),
        (
            "big prompt",
            Operation::Submit,
            caller,
            false,
            submit(|r| r.prompt = "p".repeat(64 * 1024 + 1)),
        ),
        (
            "bad mode",
            Operation::Submit,
            caller,
            false,
            submit(|r| r.mode = "chat".into()),
        ),
        (
            "long deadline",
            Operation::Submit,
            caller,
            false,
            submit(|r| r.deadline_seconds = 3601),
        ),
        (
            "bad inbox",
            Operation::Submit,
            caller,
            false,
            submit(|r| r.updates_inbox = "abi.x".into()),
        ),
        (
            "other caller",
            Operation::Status,
            Some("intruder"),
            false,
            status("owned-1", 2),
        ),
        (
            "other caller cancel",
            Operation::Cancel,
            Some("intruder"),
            false,
            apb::CancelRequest {
                invocation_id: "owned-1".into(),
                output_format: 2,
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "other caller submit",
            Operation::Submit,
            Some("intruder"),
            false,
            submit(|r| r.invocation_id = "owned-1".into()),
        ),
        (
            "reused id",
            Operation::Submit,
            caller,
            false,
            submit(|r| {
                r.invocation_id = "owned-1".into();
                r.thread_id = thread.clone();
                r.prompt = "other".into();
            }),
        ),
        (
            "event beyond",
            Operation::Event,
            caller,
            false,
            apb::EventRequest {
                invocation_id: "owned-1".into(),
                sequence: 9,
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "event of unknown",
            Operation::Event,
            caller,
            false,
            apb::EventRequest {
                invocation_id: "nobody-1".into(),
                sequence: 1,
                ..Default::default()
            }
            .encode_to_vec(),
        ),
        (
            "missing part",
            Operation::Event,
            caller,
            false,
            apb::EventRequest {
                invocation_id: "owned-1".into(),
                sequence: 1,
                part: 5,
                ..Default::default()
            }
            .encode_to_vec(),
        ),
    ];
    let nats = async_nats::connect(setup.world.nats.url()).await.unwrap();
    for (name, op, identity, overflow, body) in cases {
        let reference = refusal(&nats, &setup, &py_id, op, identity, overflow, body.clone()).await;
        let ours = refusal(&nats, &setup, &rust_id, op, identity, overflow, body).await;
        assert_eq!(ours, reference, "{name}");
    }

    py.kill().await.unwrap();
    rust.stop().await;
    setup.stop().await;
}
