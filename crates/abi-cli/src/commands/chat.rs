//! `abictl chat <module> <model> <message...>`: one chat with a module's chat
//! model through the SDK's caller (a READY instance declaring it, round
//! robin), printing the AI message's text (`--json`: its type and fields).
//!
//! A chat's token is bound to the instance it goes to: with a module key
//! (`ABI_MODULE_KEY` and `--as`) the SDK signs it; with the project secret
//! abictl signs a service token bound to that instance for `--as` (default
//! `api`). An issued `ABI_SERVICE_TOKEN` cannot be bound.

use abi_sdk::models::ModelsExt as _;
use std::time::Duration;

use abi_sdk::models::{ChatMessage, Json};
use serde_json::json;

use super::Ctx;
use crate::connect;
use crate::error::Failure;
use crate::output::print_json;

/// What `abictl chat` sends besides the message.
pub struct ChatArgs<'a> {
    /// The module serving the model.
    pub module: &'a str,
    /// Its contract major.
    pub major: u32,
    /// The model's name.
    pub model: &'a str,
    /// The message's words, joined by spaces.
    pub words: &'a [String],
    /// A system message sent first.
    pub system: Option<&'a str>,
    /// Stop sequences.
    pub stop: &'a [String],
    /// `key=json` options.
    pub options: &'a [String],
}

/// Sends one chat and prints the answer.
///
/// # Errors
///
/// Bad options (exit 2), the model's refusal (exit 1), NATS or discovery
/// unreachable (exit 3).
///
/// # Cancel safety
///
/// Cancel safe: a chat changes nothing; dropped once sent, the model may still answer, and the
/// answer is lost.
pub async fn run(cx: Ctx<'_>, args: ChatArgs<'_>) -> anyhow::Result<()> {
    let options = args
        .options
        .iter()
        .map(|o| parse_option(o))
        .collect::<Result<Vec<_>, _>>()?;
    let client = connect::client(cx.global, cx.env).await?;
    let model = client
        .module(args.module, args.major)
        .chat_model(args.model)
        .timeout(Duration::from_secs(cx.global.timeout_secs.max(1)));
    let mut messages = Vec::new();
    if let Some(system) = args.system {
        messages.push(ChatMessage::system(system));
    }
    messages.push(ChatMessage::human(args.words.join(" ")));
    let mut call = model.request(messages).stop(args.stop.iter().cloned());
    for (key, value) in options {
        call = call.option(key, value);
    }
    let answer = call.send().await?;
    if cx.global.json {
        let data = answer
            .to_pb()
            .map_err(|e| anyhow::anyhow!("{e}"))?
            .data_json;
        let fields: serde_json::Value = serde_json::from_slice(&data)?;
        print_json(&json!({"type": answer.kind().as_str(), "data": fields}));
    } else {
        println!("{}", answer.content_text());
    }
    Ok(())
}

/// `key=json`: the value must be JSON (`0.2`, `true`, `"text"`, `{...}`),
/// so a typo is refused rather than sent as a string.
fn parse_option(text: &str) -> Result<(String, Json), Failure> {
    let Some((key, value)) = text.split_once('=').filter(|(k, _)| !k.is_empty()) else {
        return Err(Failure::usage(format!("--option {text:?} is not KEY=JSON")));
    };
    let value = abi_sdk::models::json::parse(value).map_err(|_| {
        Failure::usage(format!(
            "--option {key}: {value:?} is not JSON (a number, true, false, null, \"a string\", [...] or {{...}})"
        ))
    })?;
    Ok((key.to_owned(), value))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn options_are_json() {
        assert_eq!(
            parse_option("temperature=0.5").unwrap(),
            ("temperature".into(), Json::Float(0.5))
        );
        assert_eq!(
            parse_option("name=\"bob\"").unwrap(),
            ("name".into(), Json::Str("bob".into()))
        );
        let refused = parse_option("name=bob").unwrap_err();
        assert!(
            refused.message.contains("is not JSON"),
            "{}",
            refused.message
        );
        assert!(parse_option("=1").is_err());
        assert!(parse_option("nothing").is_err());
    }
}
