//! The reference's identifier patterns, as [`abi_wire::names`] defines them
//! for every crate.

pub(crate) use abi_wire::names::{app_entry, app_name, chars, instance_id, name, rollout_id};
