//! The integration tests of `abi-cli`, in one test binary (one link instead of
//! one per file): each former `tests/<name>.rs` is the module `<name>` here.

mod common;

mod cli_agents;
mod cli_apps;
mod cli_commands;
mod cli_console;
mod cli_jobs;
mod cli_models;
mod cli_new;
mod compose_file;
mod setup_scripts;
mod stack_script;
