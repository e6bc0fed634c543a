//! One file per subcommand; [`run`] dispatches.

mod agent_runs;
mod agents;
mod apps;
mod chat;
mod console;
mod decode;
mod docs;
mod dump;
mod evict;
mod get;
mod invoke;
mod jobs;
mod keys;
mod kv;
mod ls;
mod micro;
mod models;
mod new;
mod rollouts;
mod runs;
mod schedules;
pub mod serve_apps;
mod steps;
mod traces;
mod tree;
mod wait;
mod watch;

use abi_sdk::pb;
use futures::TryStreamExt as _;

use crate::auth::Env;
use crate::cli::{Cli, Command, Global, KvCommand, MicroCommand};
use crate::output::Style;

/// What every command gets.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    /// The global options.
    pub global: &'a Global,
    /// How to paint tables.
    pub style: Style,
    /// The environment (credentials).
    pub env: Env<'a>,
}

/// Runs the parsed command.
///
/// # Errors
///
/// The command failed; [`crate::error::classify`] gives its exit code.
///
/// # Cancel safety
///
/// Not cancel safe: only as safe as the command it runs; a dropped `trigger`, `evict`, `docs put`,
/// `purge`, ... may have acted with nothing printed.
pub async fn run(cli: &Cli, env: Env<'_>) -> anyhow::Result<()> {
    let cx = Ctx {
        global: &cli.global,
        style: Style::detect(cli.global.json),
        env,
    };
    crate::checks::project(&cli.global.project)?;
    match &cli.command {
        Command::Ls {
            watch: false,
            for_secs: _,
        } => ls::run(cx).await,
        Command::Ls {
            watch: true,
            for_secs,
        } => ls::watch(cx, *for_secs).await,
        Command::Get { module, major } => get::run(cx, module, *major).await,
        Command::Tree => tree::run(cx).await,
        Command::Rollouts => rollouts::run(cx).await,
        Command::Watch { for_secs } => watch::run(cx, *for_secs).await,
        Command::Wait {
            module,
            status,
            rollout,
            gone,
            for_secs,
        } => {
            let target = if *gone {
                wait::Target::Gone
            } else {
                wait::Target::Status(crate::checks::one_of(
                    "--status",
                    status,
                    &abi_wire::status::ALL,
                )?)
            };
            wait::run(cx, module, rollout.as_deref(), target, *for_secs).await
        }
        Command::Evict { instance } => evict::run(cx, instance).await,
        Command::Dump => dump::run(cx).await,
        Command::Decode => decode::run(cx),
        Command::Docs { command } => docs::run(cx, command).await,
        Command::Jobs { module } => jobs::run(cx, module.as_deref(), None).await,
        Command::Workflows { module } => {
            jobs::run(cx, module.as_deref(), Some(abi_wire::workflows::KIND)).await
        }
        Command::Start {
            module,
            workflow,
            input,
            key,
            wait_secs,
        } => runs::trigger(cx, module, workflow, input, key.as_deref(), *wait_secs).await,
        Command::Trigger {
            module,
            job,
            payload,
            key,
            wait_secs,
        } => runs::trigger(cx, module, job, payload, key.as_deref(), *wait_secs).await,
        Command::Runs {
            module,
            job,
            status,
            limit,
        } => {
            let status = status
                .as_deref()
                .map(|s| crate::checks::one_of("--status", s, &abi_wire::jobs::RUN_STATUSES))
                .transpose()?;
            runs::list(cx, module, job, status.as_deref(), *limit).await
        }
        Command::Run { module, run_id } => runs::show(cx, module, run_id).await,
        Command::Steps { module, run_id } => steps::run(cx, module, run_id).await,
        Command::Cancel { module, run_id } => runs::cancel(cx, module, run_id).await,
        Command::Models { module } => models::run(cx, module.as_deref()).await,
        Command::Apps { module } => apps::run(cx, module.as_deref()).await,
        Command::ServeApps { listen, major } => serve_apps::run(cx, *listen, *major).await,
        Command::Traces { listen, json } => traces::run(cx, *listen, *json).await,
        Command::Console {
            listen,
            allow_actions,
        } => console::run(cx, *listen, *allow_actions).await,
        Command::Chat {
            module,
            model,
            message,
            major,
            system,
            stop,
            options,
        } => {
            let args = chat::ChatArgs {
                module,
                major: *major,
                model,
                words: message,
                system: system.as_deref(),
                stop,
                options,
            };
            chat::run(cx, args).await
        }
        Command::Agents { module } => agents::run(cx, module.as_deref()).await,
        Command::Invoke {
            module,
            agent,
            prompt,
            major,
            no_stream,
            run_timeout_secs,
        } => {
            let args = invoke::InvokeArgs {
                module,
                major: *major,
                agent,
                words: prompt,
                no_stream: *no_stream,
                timeout_secs: *run_timeout_secs,
            };
            invoke::run(cx, args).await
        }
        Command::AgentRuns {
            module,
            agent,
            status,
            limit,
        } => {
            let status = status
                .as_deref()
                .map(|s| crate::checks::one_of("--status", s, &abi_wire::agents::RUN_STATUSES))
                .transpose()?;
            agent_runs::run(cx, module, agent.as_deref(), status.as_deref(), *limit).await
        }
        Command::Rerun {
            module,
            run_id,
            wait_secs,
        } => runs::rerun(cx, module, run_id, false, *wait_secs).await,
        Command::Retry {
            module,
            run_id,
            wait_secs,
        } => runs::rerun(cx, module, run_id, true, *wait_secs).await,
        Command::Pause { module, job } => schedules::pause(cx, module, job).await,
        Command::Resume { module, job } => schedules::resume(cx, module, job).await,
        Command::Purge { module, job, yes } => schedules::purge(cx, module, job, *yes).await,
        Command::AgentRun {
            module,
            invocation_id,
        } => agent_runs::show(cx, module, invocation_id).await,
        Command::Micro { command } => match command {
            MicroCommand::Ls { name } => micro::run(cx, micro::Ask::Info, name.as_deref()).await,
            MicroCommand::Stats { name } => {
                micro::run(cx, micro::Ask::Stats, name.as_deref()).await
            }
        },
        Command::Kv { command } => match command {
            KvCommand::Ls => kv::ls(cx).await,
            KvCommand::Info { bucket } => kv::info(cx, bucket.as_deref()).await,
        },
        Command::Completions { shell } => {
            use clap::CommandFactory as _;
            clap_complete::generate(
                *shell,
                &mut Cli::command(),
                "abictl",
                &mut std::io::stdout(),
            );
            Ok(())
        }
        Command::New { module, dir, sdk } => new::run(module, dir.as_deref(), sdk.as_deref()),
        Command::Key { module } => {
            crate::checks::module_id(module)?;
            keys::key(cx, module)
        }
        Command::Token { identity, aud, ttl } => keys::token(cx, identity, aud.as_deref(), *ttl),
    }
}

pub use abi_registry::overview::{major_of, module_of};

/// Every live instance, through the service, sorted for display.
///
/// # Errors
///
/// As [`abi_sdk::DiscoveryClient::list_all`].
///
/// # Cancel safety
///
/// Cancel safe: it only reads; the pages gathered so far are dropped.
pub async fn list_all(client: &abi_sdk::DiscoveryClient) -> anyhow::Result<Vec<pb::Instance>> {
    let mut all: Vec<pb::Instance> = client.list_all().try_collect().await?;
    all.sort_by(|a, b| {
        (module_of(a), major_of(a), &a.rollout_id, &a.instance_id).cmp(&(
            module_of(b),
            major_of(b),
            &b.rollout_id,
            &b.instance_id,
        ))
    });
    Ok(all)
}

/// Declared items by (module, contract major, name): the item and the
/// `(instance id, status)` of each instance declaring it.
pub type Declared<T> =
    std::collections::BTreeMap<(String, u32, String), (T, Vec<(String, String)>)>;

/// What live instances declare (their agents, models, ...), grouped by
/// module, contract major and name, each with the `(instance id, status)`
/// of the instances declaring it; only `module`'s when given.
pub fn declared<T: Clone>(
    instances: &[pb::Instance],
    module: Option<&str>,
    items: impl Fn(&pb::ModuleDescriptor) -> &[T],
    name: impl Fn(&T) -> &str,
) -> Declared<T> {
    let mut found = std::collections::BTreeMap::new();
    for instance in instances {
        let id = module_of(instance);
        if module.is_some_and(|m| m != id) {
            continue;
        }
        for item in instance.descriptor.iter().flat_map(&items) {
            found
                .entry((id.to_owned(), major_of(instance), name(item).to_owned()))
                .or_insert_with(|| (item.clone(), Vec::new()))
                .1
                .push((instance.instance_id.clone(), instance.status.clone()));
        }
    }
    found
}

/// The instances of a [`declared`] item as `id (STATUS), ...`.
pub fn instance_list(instances: &[(String, String)]) -> String {
    instances
        .iter()
        .map(|(id, status)| format!("{id} ({status})"))
        .collect::<Vec<_>>()
        .join(", ")
}
