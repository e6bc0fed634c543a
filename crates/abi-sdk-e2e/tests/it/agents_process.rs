//! Real module processes (`agent-module`) serving one agent, two replicas:
//! SIGTERM to one mid-run (the run finishes, new submits go to the other),
//! then kill -9 to another mid-run (the caller sees the owner gone, and the
//! surviving replica's upkeep releases the conversation claim once the dead
//! owner's lease ended, so the conversation goes on there).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;

use abi_sdk::agents::{AgentClient, AgentErrorKind, Invocation, SubmitOptions};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

use super::agents_fixture::{DEADLINE, MODULE, Setup, ready};

fn spawn(setup: &Setup, tag: &str) -> Child {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agent-module"));
    command
        .env_remove("ABI_ROLLOUT_ID")
        .env_remove("ABI_ROLLOUT_MODULES")
        .envs(setup.world.module_env(MODULE))
        .env("E2E_TAG", tag)
        .env("E2E_UPKEEP_MS", "200")
        .env("ABI_SHUTDOWN_GRACE_SECS", "10")
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().unwrap();
    // Keep reading its stdout, so that its prints never block.
    let stdout = child.stdout.take().unwrap();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stdout).lines();
        while let Ok(Some(_)) = lines.next_line().await {}
    });
    child
}

/// Submits `prompt` in a conversation of its own until the run lands on `owner`.
async fn submit_to(setup: &Setup, owner: &str, prompt: &str) -> (AgentClient, Invocation) {
    for _ in 0..20 {
        let agent = setup.agent("caller", "echo").await;
        let mut run = agent
            .submit(prompt, SubmitOptions::default())
            .await
            .unwrap();
        if run.owner_instance_id() == owner {
            return (agent, run);
        }
        run.cancel().await.unwrap();
        let _ = run.result(Some(DEADLINE)).await;
    }
    panic!("no submit landed on {owner}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_the_run_and_kill_releases_the_claim() {
    let setup = Setup::start(3.0).await;
    let mut a = spawn(&setup, "A");
    let a_id = ready(&setup.world, 1).await.remove(0);
    let _b = spawn(&setup, "B");
    let b_id = ready(&setup.world, 2)
        .await
        .into_iter()
        .find(|i| *i != a_id)
        .unwrap();

    // SIGTERM mid-run: the run finishes; new submits go to B.
    let (_, mut sleeping) = submit_to(&setup, &a_id, "sleep:1500").await;
    let pid = a.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let agent = setup.agent("caller", "echo").await;
    for i in 0..4 {
        assert_eq!(
            agent.invoke(&format!("t{i}"), None).await.unwrap(),
            format!("B:t{i}")
        );
    }
    assert_eq!(sleeping.result(Some(DEADLINE)).await.unwrap(), "A:slept");
    let exit = tokio::time::timeout(DEADLINE, a.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(exit.success(), "{exit:?}");

    // kill -9 mid-run: the caller sees the owner gone...
    let mut c = spawn(&setup, "C");
    let c_id = ready(&setup.world, 2)
        .await
        .into_iter()
        .find(|i| *i != a_id && *i != b_id)
        .unwrap();
    let (conversation, mut blocked) = submit_to(&setup, &c_id, "block").await;
    c.kill().await.unwrap();
    let err = blocked.result(Some(DEADLINE)).await.unwrap_err();
    assert!(
        matches!(
            err.kind(),
            AgentErrorKind::OwnerUnavailable | AgentErrorKind::OwnerGone
        ),
        "{err}"
    );
    // ...and B's upkeep releases the claim: FAILED OWNER_GONE, and the
    // same conversation runs again on B.
    let id = blocked.invocation_id().to_owned();
    let until = tokio::time::Instant::now() + DEADLINE;
    loop {
        let status = conversation.invocation(id.clone()).status(0).await.unwrap();
        if status.status == "FAILED" {
            assert_eq!(status.error_code, "OWNER_GONE");
            break;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "the claim was never released: {status:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(conversation.invoke("again", None).await.unwrap(), "B:again");
    setup.stop().await;
}

/// A submit to the only replica, killed (-9) and still registered: the
/// broker delivers it to nobody, so the outcome is known (not "submission
/// uncertain"), and the error names the instance and how to evict it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submit_to_a_dead_registered_replica_names_it() {
    let setup = Setup::start(30.0).await;
    let mut a = spawn(&setup, "A");
    let a_id = ready(&setup.world, 1).await.remove(0);
    a.kill().await.unwrap();
    let agent = setup.agent("caller", "echo").await;
    let err = agent
        .submit("hello", SubmitOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        err.kind(),
        AgentErrorKind::Call(abi_sdk::CallErrorKind::NoResponders),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&a_id) && text.contains(&format!("abictl evict {a_id}")),
        "{text}"
    );
    setup.stop().await;
}
