//! The integration tests of `abi-sdk-e2e`, in one test binary (one link instead of
//! one per file): each former `tests/<name>.rs` is the module `<name>` here.

mod agents_fixture;
mod agents_host;
mod agents_replicas;
mod agents_upkeep;
mod chain;
mod cluster_leader_loss;
mod cluster_seed_list;
mod drain;
mod interop;
mod jobs_caller;
mod jobs_cancel;
mod jobs_cancel_auth;
mod jobs_claim_check;
mod jobs_coalesce;
mod jobs_early_trigger;
mod jobs_expired;
mod jobs_fixture;
mod jobs_handover;
mod jobs_host;
mod jobs_mixed_fleet;
mod jobs_process;
mod jobs_reaper;
mod jobs_reconnect;
mod jobs_retention;
mod jobs_rollout;
mod jobs_schedules;
mod lease;
mod models_differential;
mod models_drain;
mod models_fixture;
mod models_interop;
mod models_spread;
mod rollout;
mod runner_order;
mod shutdown_budget;
