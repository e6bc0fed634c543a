//! The command line: global options and one subcommand per job.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use abi_process::NatsArgs;
/// The project when `ABI_PROJECT` is unset (the reference's default).
pub const DEFAULT_PROJECT: &str = "default";
/// The identity tokens assert when signed with the project secret: the
/// engine's API, an admin by default (it may evict).
pub const DEFAULT_IDENTITY: &str = "api";
/// Deadline of one call: a lookup answers in milliseconds; past this the
/// service is not there.
pub const DEFAULT_TIMEOUT_SECS: u64 = 10;

/// `abictl`: inspect and operate the abi discovery registry of one project.
///
/// Credentials (first found wins): ABI_SERVICE_TOKEN (an issued token, sent
/// as is), ABI_MODULE_KEY (signs for --as, a module id), ABI_JWT_SECRET or
/// ABI_JWT_SECRET_FILE (the project secret, signs for --as, default `api`).
///
/// Exit codes: 0 ok, 1 the service refused (the wire code is printed),
/// 2 usage or configuration, 3 NATS or the service unreachable,
/// 4 `wait` (or `trigger --wait`) timed out.
#[derive(Debug, Parser)]
#[command(name = "abictl", version, about, long_about)]
pub struct Cli {
    /// Global options.
    #[command(flatten)]
    pub global: Global,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Options every subcommand takes.
#[derive(Debug, Args)]
pub struct Global {
    /// The NATS connection: URL list, credentials, TLS (the same settings
    /// as every abi process).
    #[command(flatten)]
    pub nats: NatsArgs,
    /// Discovery project (namespaces subjects and the KV bucket).
    #[arg(long, global = true, env = "ABI_PROJECT", default_value = DEFAULT_PROJECT)]
    pub project: String,
    /// Identity the token asserts when abictl signs it.
    #[arg(long = "as", global = true, value_name = "IDENTITY")]
    pub identity: Option<String>,
    /// File holding the project JWT secret (else ABI_JWT_SECRET).
    #[arg(long, global = true, env = "ABI_JWT_SECRET_FILE")]
    pub jwt_secret_file: Option<PathBuf>,
    /// Machine-readable JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
    /// Deadline of each call, in seconds.
    #[arg(long, global = true, default_value_t = DEFAULT_TIMEOUT_SECS)]
    pub timeout_secs: u64,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Every live instance: module, contract major, instance, status, rollout, lease.
    Ls {
        /// Draw the table again at every registry change, until Ctrl-C.
        #[arg(long)]
        watch: bool,
        /// With --watch: stop after this many seconds.
        #[arg(long = "for", value_name = "SECS", requires = "watch")]
        for_secs: Option<f64>,
    },
    /// One module's instances and what they declare.
    Get {
        /// The module id.
        module: String,
        /// Only this contract major (default: every major).
        #[arg(long)]
        major: Option<u32>,
    },
    /// The dependency graph, each module with its best status.
    Tree,
    /// Per module: the serving generation, staged and draining ones.
    Rollouts,
    /// Live registry events until Ctrl-C (or --for).
    Watch {
        /// Stop after this many seconds.
        #[arg(long = "for", value_name = "SECS")]
        for_secs: Option<f64>,
    },
    /// Waits until a module reaches a status (or is gone); for scripts.
    Wait {
        /// The module id.
        module: String,
        /// The status to wait for.
        #[arg(long, default_value = abi_wire::status::READY)]
        status: String,
        /// Only instances of this rollout.
        #[arg(long)]
        rollout: Option<String>,
        /// Wait until no instance is left (of --rollout, if given).
        #[arg(long, conflicts_with = "status")]
        gone: bool,
        /// Give up after this many seconds (exit 4).
        #[arg(long = "for", value_name = "SECS", default_value_t = 60.0)]
        for_secs: f64,
    },
    /// Removes one registration at once (admin identities only).
    Evict {
        /// The instance id.
        instance: String,
    },
    /// The stored snapshot, decoded, with its revision and size.
    Dump,
    /// Decodes a raw snapshot read from stdin.
    Decode,
    /// The document service: namespaces, collections, documents; put and delete.
    Docs {
        /// What to read.
        #[command(subcommand)]
        command: DocsCommand,
    },
    /// Declared jobs per module, with their triggers and schedules (from the
    /// registry: what live instances declare).
    Jobs {
        /// Only this module.
        module: Option<String>,
    },
    /// Declared workflows per module (jobs of kind `workflow`), with their
    /// triggers; `--json` adds their input and output schemas.
    Workflows {
        /// Only this module.
        module: Option<String>,
    },
    /// Starts a workflow run (a trigger of the workflow's job) and prints
    /// its run id; with --wait, waits for its end and prints its record, as
    /// `trigger` does (`abictl steps` shows its journal).
    Start {
        /// The module serving the workflow.
        module: String,
        /// The workflow's name.
        workflow: String,
        /// The input, a JSON object (default `{}`), or `@<path>`.
        #[arg(long, default_value = "{}")]
        input: String,
        /// Idempotency key: a repeat within the stream's duplicate window is
        /// the same run.
        #[arg(long)]
        key: Option<String>,
        /// Wait at most this many seconds for the run to end.
        #[arg(long = "wait", value_name = "SECS")]
        wait_secs: Option<f64>,
    },
    /// Triggers a job (as the reference's `JobProxy.trigger`) and prints its
    /// run id; with --wait, waits for the run's end and prints its record
    /// (exit 1 unless it SUCCEEDED or was SKIPPED, 4 past the deadline).
    Trigger {
        /// The module serving the job.
        module: String,
        /// The job's name.
        job: String,
        /// The payload, a JSON object (default `{}`), or `@<path>` to read
        /// it from a file (above the broker's limit it goes as a claim check).
        #[arg(long, default_value = "{}")]
        payload: String,
        /// Idempotency key: a repeat within the stream's duplicate window
        /// (2 minutes) is the same run.
        #[arg(long)]
        key: Option<String>,
        /// Wait at most this many seconds for the run to end.
        #[arg(long = "wait", value_name = "SECS")]
        wait_secs: Option<f64>,
    },
    /// Recent runs of a job, newest first (from its run records).
    Runs {
        /// The module serving the job.
        module: String,
        /// The job's name.
        job: String,
        /// Only runs in this status (RUNNING, FAILED, ...).
        #[arg(long)]
        status: Option<String>,
        /// At most this many (1 to 1000).
        #[arg(long, default_value_t = 20)]
        limit: i64,
    },
    /// One run's record, with its logs, as JSON (QUEUED while no host took it).
    Run {
        /// The module serving the job.
        module: String,
        /// The run id (`<job>:<sequence>`).
        run_id: String,
    },
    /// A workflow run's step timeline from its journal: key, kind, status,
    /// attempt, duration, child run, error (`--json`: the summaries).
    Steps {
        /// The module serving the workflow.
        module: String,
        /// The run id (`<workflow>:<sequence>`).
        run_id: String,
    },
    /// Asks the module's hosts to cancel a run (cooperative: only a running
    /// run stops).
    Cancel {
        /// The module serving the job.
        module: String,
        /// The run id (`<job>:<sequence>`).
        run_id: String,
    },
    /// Runs an ended run again, as a new run of the same job with the same
    /// payload (prints the new run id; --wait as for `trigger`).
    Rerun {
        /// The module serving the job.
        module: String,
        /// The run id (`<job>:<sequence>`).
        run_id: String,
        /// Wait at most this many seconds for the new run to end.
        #[arg(long = "wait", value_name = "SECS")]
        wait_secs: Option<f64>,
    },
    /// Runs a run that ended FAILED, TIMED_OUT or CANCELLED again, with the
    /// same payload (refuses one that succeeded: see `rerun`).
    Retry {
        /// The module serving the job.
        module: String,
        /// The run id (`<job>:<sequence>`).
        run_id: String,
        /// Wait at most this many seconds for the new run to end.
        #[arg(long = "wait", value_name = "SECS")]
        wait_secs: Option<f64>,
    },
    /// Pauses a job's schedules: no tick fires until `resume` (triggers by
    /// hand still run).
    Pause {
        /// The module serving the job.
        module: String,
        /// The job's name.
        job: String,
    },
    /// Resumes a job's schedules as the module declares them.
    Resume {
        /// The module serving the job.
        module: String,
        /// The job's name.
        job: String,
    },
    /// Removes a job's queued triggers (those no host has taken; runs in
    /// progress and pending retries stay); without --yes, says how many.
    Purge {
        /// The module serving the job.
        module: String,
        /// The job's name.
        job: String,
        /// Really remove them.
        #[arg(long)]
        yes: bool,
    },
    /// Declared web apps per module, with the instances serving them and
    /// their gateway paths (from the registry).
    Apps {
        /// Only this module.
        module: Option<String>,
    },
    /// An HTTP gateway to the project's web apps until Ctrl-C:
    /// `http://<listen>/apps/<module>/<app>/...` reaches a READY instance.
    ServeApps {
        /// The address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: std::net::SocketAddr,
        /// The modules' contract major.
        #[arg(long, default_value_t = 1)]
        major: u32,
    },
    /// A live web console of the project until Ctrl-C: modules and rollouts,
    /// jobs and their runs, workflow steps, agent runs, chats per model.
    Console {
        /// The address to listen on (loopback: the console calls as `--as`
        /// with the project's credentials, so whoever reaches it reads as that).
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: std::net::SocketAddr,
        /// Carry out trigger, cancel and evict from the pages (each one is
        /// logged); without it the console only reads.
        #[arg(long)]
        allow_actions: bool,
    },
    /// A small OTLP receiver (HTTP/protobuf) printing each trace as a tree:
    /// point OTEL_EXPORTER_OTLP_ENDPOINT of every process at it.
    Traces {
        /// The address to listen on.
        #[arg(long, default_value = "127.0.0.1:4318")]
        listen: std::net::SocketAddr,
        /// Print every span as it arrives, one JSON object a line.
        #[arg(long)]
        json: bool,
    },
    /// Declared chat models per module, with the instances serving them and
    /// their statuses (from the registry).
    Models {
        /// Only this module.
        module: Option<String>,
    },
    /// Sends one chat to a module's chat model (a READY instance declaring
    /// it) and prints the AI message.
    Chat {
        /// The module serving the model.
        module: String,
        /// The model's name.
        model: String,
        /// The message (its words are joined by spaces).
        #[arg(required = true, num_args = 1..)]
        message: Vec<String>,
        /// The module's contract major.
        #[arg(long, default_value_t = 1)]
        major: u32,
        /// A system message sent before it.
        #[arg(long)]
        system: Option<String>,
        /// A stop sequence (repeatable).
        #[arg(long)]
        stop: Vec<String>,
        /// An option `KEY=JSON` (`temperature=0.2`; repeatable).
        #[arg(long = "option", value_name = "KEY=JSON")]
        options: Vec<String>,
    },
    /// Declared agents per module, with their capabilities and the
    /// instances serving them (from the registry).
    Agents {
        /// Only this module.
        module: Option<String>,
    },
    /// Runs a module's agent once (a READY instance declaring it), printing
    /// its events as they come, then its result.
    Invoke {
        /// The module serving the agent.
        module: String,
        /// The agent's name.
        agent: String,
        /// The prompt (its words are joined by spaces).
        #[arg(required = true, num_args = 1..)]
        prompt: Vec<String>,
        /// The module's contract major.
        #[arg(long, default_value_t = 1)]
        major: u32,
        /// Use the agent's invoke handler (one message) instead of its stream.
        #[arg(long)]
        no_stream: bool,
        /// The run's deadline, and how long to wait for it (1 to 3600 s).
        #[arg(long = "timeout", value_name = "SECS", default_value_t = 300)]
        run_timeout_secs: u64,
    },
    /// Recent runs of a module's agents, newest first (from their records).
    AgentRuns {
        /// The module serving the agents.
        module: String,
        /// Only this agent's runs.
        agent: Option<String>,
        /// Only runs in this status (RUNNING, SUCCEEDED, FAILED, ...).
        #[arg(long)]
        status: Option<String>,
        /// At most this many (1 to 1000).
        #[arg(long, default_value_t = 20)]
        limit: i64,
    },
    /// One agent invocation's whole record, by its invocation id.
    AgentRun {
        /// The module serving the agent.
        module: String,
        /// The invocation id.
        invocation_id: String,
    },
    /// NATS micro services (`$SRV`): who serves, and their request stats.
    Micro {
        /// What to show.
        #[command(subcommand)]
        command: MicroCommand,
    },
    /// JetStream KV buckets (the registry's by default).
    Kv {
        /// What to show.
        #[command(subcommand)]
        command: KvCommand,
    },
    /// Prints a shell completion script (`source <(abictl completions bash)`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Writes a new module crate (a job, an agent, logs) depending on this
    /// checkout's SDK by path; then `cargo run` in it.
    New {
        /// The module id (`acme.billing`).
        module: String,
        /// Where to write it (default: the crate name, in the current directory).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
        /// The SDK crate to depend on (default: the checkout abictl was built from).
        #[arg(long)]
        sdk: Option<std::path::PathBuf>,
    },
    /// Prints the module key of a module id (needs the project secret).
    Key {
        /// The module id.
        module: String,
    },
    /// Prints a service token for an identity (needs the project secret).
    Token {
        /// The identity the token asserts.
        identity: String,
        /// Binds the token to one instance (audience).
        #[arg(long)]
        aud: Option<String>,
        /// Lifetime in seconds.
        #[arg(long, default_value_t = 3600)]
        ttl: u64,
    },
}

/// The `docs` subcommands.
#[derive(Debug, Subcommand)]
pub enum DocsCommand {
    /// Every namespace holding a collection (platform identities only).
    Namespaces,
    /// A namespace's collections, with their declared fields.
    Collections {
        /// The namespace (a module id).
        namespace: String,
    },
    /// One document, as JSON.
    Get {
        /// The namespace (a module id).
        namespace: String,
        /// The collection.
        collection: String,
        /// The document id.
        id: String,
    },
    /// A page of a collection's documents.
    Find {
        /// The namespace (a module id).
        namespace: String,
        /// The collection.
        collection: String,
        /// At most this many (1 to 1000).
        #[arg(long, default_value_t = 20)]
        limit: i64,
        /// Order by this field (else by id).
        #[arg(long)]
        order_by: Option<String>,
        /// Descending order.
        #[arg(long, requires = "order_by")]
        desc: bool,
    },
    /// Writes one document (a JSON object, or `@<path>`), whole; with
    /// --if-version, only at that version (0: only if it does not exist).
    Put {
        /// The namespace (a module id).
        namespace: String,
        /// The collection.
        collection: String,
        /// The document id.
        id: String,
        /// The data: a JSON object, or `@<path>` to read it from a file.
        data: String,
        /// Write only if the stored version is this (0: create only).
        #[arg(long)]
        if_version: Option<i64>,
    },
    /// Deletes one document; with --if-version, only at that version.
    Delete {
        /// The namespace (a module id).
        namespace: String,
        /// The collection.
        collection: String,
        /// The document id.
        id: String,
        /// Delete only if the stored version is this.
        #[arg(long)]
        if_version: Option<i64>,
    },
    /// How many documents a collection holds.
    Count {
        /// The namespace (a module id).
        namespace: String,
        /// The collection.
        collection: String,
    },
}

/// The `micro` subcommands.
#[derive(Debug, Subcommand)]
pub enum MicroCommand {
    /// Every service instance: name, id, version, endpoints.
    Ls {
        /// Only this service.
        name: Option<String>,
    },
    /// Requests, errors and average processing time per endpoint.
    Stats {
        /// Only this service.
        name: Option<String>,
    },
}

/// The `kv` subcommands.
#[derive(Debug, Subcommand)]
pub enum KvCommand {
    /// Every KV bucket.
    Ls,
    /// A bucket's settings and state: values, bytes, revision, history, TTL.
    Info {
        /// The bucket (default: the project's registry).
        bucket: Option<String>,
    },
}
