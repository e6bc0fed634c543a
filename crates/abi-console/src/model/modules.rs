//! The modules view: every module and instance of a registry snapshot,
//! with what an operator asks of them (which generation serves, what a
//! staged rollout waits for, why an instance is DEGRADED, the dependency
//! graph's edges). Pure: built from a view whose statuses are computed
//! ([`abi_registry::view`]) and the time it was taken.

use abi_registry::overview::{self, Edge, Generation};
use abi_registry::pb;
use serde::Serialize;

/// Everything the modules page shows, as JSON.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ModulesView {
    /// The KV revision of the snapshot (0 before the first write).
    pub revision: u64,
    /// When it was read, seconds since the Unix epoch.
    pub read_at: f64,
    /// How many live instances.
    pub instance_count: usize,
    /// Modules by id.
    pub modules: Vec<ModuleRow>,
    /// Dependency edges between module ids.
    pub edges: Vec<EdgeRow>,
}

/// One module id.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ModuleRow {
    /// The module id.
    pub module_id: String,
    /// The best status of its instances.
    pub best_status: String,
    /// The contract majors with live instances.
    pub majors: Vec<u32>,
    /// Rollouts serving now (`-`: no rollout).
    pub serving: Vec<String>,
    /// Rollouts staged, not serving yet.
    pub staged: Vec<String>,
    /// Rollouts draining.
    pub draining: Vec<String>,
    /// Per staged rollout, what it waits for (empty: the cutover is under way).
    pub waiting: Vec<RolloutWait>,
    /// What its instances declare: jobs, agents, models, apps (names).
    pub declares: Declares,
    /// Its live instances.
    pub instances: Vec<InstanceRow>,
}

/// What a staged rollout still waits for.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct RolloutWait {
    /// The rollout id.
    pub rollout_id: String,
    /// `b (not registered)`, `c (not initialized)`.
    pub waits_for: Vec<String>,
}

/// The names a module's instances declare.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Declares {
    /// Jobs and workflows.
    pub jobs: Vec<String>,
    /// Agents.
    pub agents: Vec<String>,
    /// Chat models.
    pub models: Vec<String>,
    /// Web apps.
    pub apps: Vec<String>,
}

/// One live instance.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct InstanceRow {
    /// Its id.
    pub instance_id: String,
    /// Its status, as discovery computed it.
    pub status: String,
    /// `serving`, `staged` or `draining`.
    pub generation: &'static str,
    /// Its rollout (`-`: none).
    pub rollout_id: String,
    /// The module's package version.
    pub package_version: String,
    /// Its contract major.
    pub contract_major: u32,
    /// Seconds until its lease ends unless renewed.
    pub lease_left_secs: f64,
    /// Seconds since it registered.
    pub up_secs: f64,
    /// Whether it reported itself initialized.
    pub initialized: bool,
    /// The dependencies no READY instance meets (why it is DEGRADED, or
    /// what an initialized instance waits for).
    pub unmet: Vec<UnmetRow>,
}

/// A dependency no READY instance meets.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct UnmetRow {
    /// The module needed.
    pub module_id: String,
    /// At this major.
    pub contract_major: u32,
    /// `MISSING`, `INCOMPATIBLE`, or the best status it has.
    pub state: String,
}

/// A dependency edge: `from` needs `to` at `contract_major`.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct EdgeRow {
    /// The module that depends.
    pub from: String,
    /// The module it needs.
    pub to: String,
    /// At this major.
    pub contract_major: u32,
    /// `MISSING`, `INCOMPATIBLE`, or the best status of `to`.
    pub state: String,
}

impl ModulesView {
    /// The view of `live` (statuses computed), stored at KV `revision`,
    /// read at `now` (seconds since the Unix epoch).
    pub fn build(live: &pb::RegistryState, revision: u64, now: f64) -> Self {
        let records: Vec<(&pb::RegistryRecord, &pb::Instance)> = live
            .records
            .iter()
            .filter_map(|r| r.instance.as_ref().map(|i| (r, i)))
            .collect();
        let instances: Vec<&pb::Instance> = records.iter().map(|(_, i)| *i).collect();
        let dependencies = overview::Dependencies::of(instances.iter().copied());
        let nodes = dependencies.nodes();
        let generations = overview::generations(live);
        let mut modules = Vec::with_capacity(nodes.len());
        let mut edges = Vec::new();
        for (module_id, node) in nodes {
            for (to, major) in &node.deps {
                edges.push(EdgeRow {
                    from: module_id.clone(),
                    to: to.clone(),
                    contract_major: *major,
                    state: Edge::to(nodes, to, *major).label().to_owned(),
                });
            }
            let g = generations.get(module_id).cloned().unwrap_or_default();
            let mut rows: Vec<InstanceRow> = records
                .iter()
                .filter(|(_, i)| overview::module_of(i) == module_id.as_str())
                .map(|(r, i)| instance_row(r, i, &dependencies, now))
                .collect();
            // Serving first, then staged, then draining; by rollout and id within.
            rows.sort_by(|a, b| {
                let key = |i: &InstanceRow| {
                    (
                        Generation::of(&i.status),
                        i.rollout_id.clone(),
                        i.instance_id.clone(),
                    )
                };
                key(a).cmp(&key(b))
            });
            let declares = declares(
                records
                    .iter()
                    .filter(|(_, i)| overview::module_of(i) == module_id.as_str())
                    .filter_map(|(_, i)| i.descriptor.as_ref()),
            );
            modules.push(ModuleRow {
                module_id: module_id.clone(),
                best_status: node.best.clone(),
                majors: node.majors.iter().copied().collect(),
                serving: g.serving.into_iter().collect(),
                staged: g.staged.into_iter().collect(),
                draining: g.draining.into_iter().collect(),
                waiting: g
                    .waiting
                    .into_iter()
                    .map(|(rollout_id, waits)| RolloutWait {
                        rollout_id,
                        waits_for: waits.iter().map(ToString::to_string).collect(),
                    })
                    .collect(),
                declares,
                instances: rows,
            });
        }
        Self {
            revision,
            read_at: now,
            instance_count: records.len(),
            modules,
            edges,
        }
    }
}

fn instance_row(
    record: &pb::RegistryRecord,
    instance: &pb::Instance,
    dependencies: &overview::Dependencies,
    now: f64,
) -> InstanceRow {
    let descriptor = instance.descriptor.clone().unwrap_or_default();
    let unmet = if record.initialized {
        dependencies
            .unmet(instance)
            .into_iter()
            .map(|u| UnmetRow {
                module_id: u.module_id,
                contract_major: u.contract_major,
                state: u.edge.label().to_owned(),
            })
            .collect()
    } else {
        Vec::new()
    };
    InstanceRow {
        instance_id: instance.instance_id.clone(),
        status: instance.status.clone(),
        generation: Generation::of(&instance.status).as_str(),
        rollout_id: overview::rollout_label(&instance.rollout_id).to_owned(),
        package_version: descriptor.package_version,
        contract_major: descriptor.contract_major,
        lease_left_secs: round_tenths(instance.expires_at - now),
        up_secs: if record.registered_at > 0.0 {
            round_tenths(now - record.registered_at)
        } else {
            0.0
        },
        initialized: record.initialized,
        unmet,
    }
}

/// What a module's descriptors declare, each name once, sorted.
fn declares<'a>(descriptors: impl Iterator<Item = &'a pb::ModuleDescriptor>) -> Declares {
    let mut out = Declares::default();
    for d in descriptors {
        out.jobs.extend(d.jobs.iter().map(|j| j.name.clone()));
        out.agents.extend(d.agents.iter().map(|a| a.name.clone()));
        out.models.extend(d.models.iter().map(|m| m.name.clone()));
        out.apps.extend(d.apps.iter().map(|a| a.name.clone()));
    }
    for names in [
        &mut out.jobs,
        &mut out.agents,
        &mut out.models,
        &mut out.apps,
    ] {
        names.sort();
        names.dedup();
    }
    out
}

fn round_tenths(secs: f64) -> f64 {
    (secs * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi_wire::status::{DEGRADED, DRAINING, READY, STAGED};

    fn record(
        module: &str,
        id: &str,
        status: &str,
        rollout: &str,
        deps: &[&str],
        initialized: bool,
    ) -> pb::RegistryRecord {
        pb::RegistryRecord {
            instance: Some(pb::Instance {
                instance_id: id.into(),
                status: status.into(),
                rollout_id: rollout.into(),
                expires_at: 120.0,
                descriptor: Some(pb::ModuleDescriptor {
                    module_id: module.into(),
                    contract_major: 1,
                    package_version: "1.2.0".into(),
                    dependencies: deps
                        .iter()
                        .map(|d| pb::Dependency {
                            module_id: (*d).into(),
                            contract_major: 1,
                        })
                        .collect(),
                    jobs: vec![pb::JobDescriptor {
                        name: format!("{module}-job"),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            }),
            initialized,
            rollout_id: rollout.into(),
            registered_at: 90.0,
            ..Default::default()
        }
    }

    #[test]
    fn the_view_says_who_serves_who_drains_and_why_one_is_degraded() {
        let live = pb::RegistryState {
            records: vec![
                record("api", "api-2", STAGED, "v2", &["db"], true),
                record("api", "api-1", DEGRADED, "v1", &["db", "ghost"], true),
                record("api", "api-0", DRAINING, "v0", &[], true),
                record("db", "db-1", READY, "", &[], true),
            ],
        };
        let view = ModulesView::build(&live, 7, 100.0);
        assert_eq!((view.revision, view.instance_count), (7, 4));
        let api = &view.modules[0];
        assert_eq!(api.module_id, "api");
        assert_eq!(api.best_status, DEGRADED);
        assert_eq!(api.serving, ["v1"]);
        assert_eq!(api.staged, ["v2"]);
        assert_eq!(api.draining, ["v0"]);
        assert_eq!(api.waiting.len(), 1);
        assert_eq!(api.declares.jobs, ["api-job"]);
        let order: Vec<(&str, &str)> = api
            .instances
            .iter()
            .map(|i| (i.instance_id.as_str(), i.generation))
            .collect();
        assert_eq!(
            order,
            [
                ("api-1", "serving"),
                ("api-2", "staged"),
                ("api-0", "draining")
            ]
        );
        let degraded = &api.instances[0];
        assert_eq!(degraded.lease_left_secs, 20.0);
        assert_eq!(degraded.up_secs, 10.0);
        assert_eq!(degraded.package_version, "1.2.0");
        assert_eq!(
            degraded.unmet,
            [UnmetRow {
                module_id: "ghost".into(),
                contract_major: 1,
                state: Edge::Missing.label().into(),
            }]
        );
        let edges: Vec<(&str, &str, &str)> = view
            .edges
            .iter()
            .map(|e| (e.from.as_str(), e.to.as_str(), e.state.as_str()))
            .collect();
        assert_eq!(
            edges,
            [
                ("api", "db", READY),
                ("api", "ghost", Edge::Missing.label())
            ]
        );
        assert_eq!(view.modules[1].serving, [overview::NO_ROLLOUT]);
    }
}
