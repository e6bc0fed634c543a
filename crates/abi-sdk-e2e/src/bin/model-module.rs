//! A module process serving two chat models with a [`ModelHost`], for the
//! model tests that need a real process and real signals: `echo` (no tools)
//! and `tools` (takes tools). Both answer an AI message whose content is
//! the JSON `{"echo": <last content>, "types": [...], "tools": <count>,
//! "stop": [...], "options": {...}, "tag": <E2E_TAG>}`; a last message
//! `slow` first waits `E2E_SLOW_MS` (default 2000) and one `fail` fails.
//!
//! Configured by the SDK's own variables (`NATS_URL`, `ABI_PROJECT`,
//! `ABI_MODULE_KEY`, ...) plus `E2E_ID` (module id) and `E2E_DRAIN_MS` (the
//! drain timeout). Prints `EVENT ready
//! instance=<id>` once initialized, `EVENT chat <content>` when a chat
//! starts, `EVENT exit ok` after a clean stop (exit code 0; 1 otherwise).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use abi_sdk::models::{ChatInput, ChatMessage, ChatModelSpec, Json, ModelHost, json};
use abi_sdk::{BoxError, Config, Context, HookResult, Module, ModuleSpec, Runner};

struct ModelModule;

impl Module for ModelModule {
    async fn on_initialized(&self, cx: &Context) -> HookResult {
        let instance = cx
            .session()
            .map(|s| s.instance_id().to_owned())
            .unwrap_or_default();
        println!("EVENT ready instance={instance}");
        Ok(())
    }
}

/// The answer both models give (see the file's doc).
async fn echo(input: ChatInput, tag: String, slow: Duration) -> Result<ChatMessage, BoxError> {
    let last = input
        .messages
        .last()
        .map(ChatMessage::content_text)
        .unwrap_or_default();
    println!("EVENT chat {last}");
    if last == "slow" {
        tokio::time::sleep(slow).await;
    }
    if last == "fail" {
        return Err("asked to fail".into());
    }
    let content = BTreeMap::from([
        ("echo".to_owned(), Json::Str(last)),
        (
            "types".to_owned(),
            Json::Array(
                input
                    .messages
                    .iter()
                    .map(|m| Json::Str(m.kind().as_str().to_owned()))
                    .collect(),
            ),
        ),
        (
            "tools".to_owned(),
            Json::Int(i64::try_from(input.tools.len()).unwrap_or(0)),
        ),
        (
            "stop".to_owned(),
            Json::Array(input.stop.into_iter().map(Json::Str).collect()),
        ),
        ("options".to_owned(), Json::Object(input.options)),
        ("tag".to_owned(), Json::Str(tag)),
    ]);
    Ok(ChatMessage::ai(json::dumps(&Json::Object(content))))
}

fn host(tag: &str, slow: Duration) -> Result<ModelHost, BoxError> {
    let (echo_tag, tools_tag) = (tag.to_owned(), tag.to_owned());
    Ok(ModelHost::new()
        .model(
            ChatModelSpec::new("echo")?.description("says it back"),
            move |input| echo(input, echo_tag.clone(), slow),
        )?
        .model(
            ChatModelSpec::new("tools")?
                .description("says it back, takes tools")
                .accepts_tools(true),
            move |input| echo(input, tools_tag.clone(), slow),
        )?)
}

#[tokio::main]
async fn main() {
    let _ = abi_process::logs::init("off");
    let id = std::env::var("E2E_ID").unwrap_or_else(|_| "models".into());
    let tag = std::env::var("E2E_TAG").unwrap_or_default();
    let slow = Duration::from_millis(
        std::env::var("E2E_SLOW_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2000),
    );
    let outcome = async {
        let host = host(&tag, slow)?;
        let spec = ModuleSpec::new(&id).serve(Arc::new(host));
        let mut config = Config::from_env(&id)?;
        if let Some(ms) = std::env::var("E2E_DRAIN_MS")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            config = config.drain_timeout(Duration::from_millis(ms));
        }
        Runner::new(spec).config(config).run(ModelModule).await?;
        Ok::<(), BoxError>(())
    };
    match outcome.await {
        Ok(()) => println!("EVENT exit ok"),
        Err(err) => {
            println!("EVENT exit error {err}");
            std::process::exit(1);
        }
    }
}
