//! What an operator asks of a live registry (`abictl rollouts` and `tree`,
//! the console): which generation of each module serves, which is staged
//! and what its rollout still waits for, which drains; the dependency graph
//! with its missing and incompatible edges; why an instance is DEGRADED.
//! Pure functions of a view whose statuses are computed ([`crate::view`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use abi_proto::discovery::v1 as pb;
use abi_wire::status::{DEGRADED, DRAINING, READY, STAGED, STARTING};

/// The rollout label of an instance in no rollout.
pub const NO_ROLLOUT: &str = "-";

/// An instance's module id (empty without a descriptor).
pub fn module_of(instance: &pb::Instance) -> &str {
    instance
        .descriptor
        .as_ref()
        .map_or("", |d| d.module_id.as_str())
}

/// An instance's contract major (0 without a descriptor).
pub fn major_of(instance: &pb::Instance) -> u32 {
    instance.descriptor.as_ref().map_or(0, |d| d.contract_major)
}

/// A rollout id for display: [`NO_ROLLOUT`] for none.
pub fn rollout_label(rollout: &str) -> &str {
    if rollout.is_empty() {
        NO_ROLLOUT
    } else {
        rollout
    }
}

/// How good a status is, for a module's best status (higher is better).
pub fn rank(status: &str) -> u8 {
    match status {
        READY => 5,
        DEGRADED => 4,
        STAGED => 3,
        STARTING => 2,
        DRAINING => 1,
        _ => 0,
    }
}

/// Which generation an instance belongs to, by its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Generation {
    /// READY or DEGRADED: it takes traffic.
    Serving,
    /// STARTING or STAGED: not serving yet.
    Staged,
    /// DRAINING: leaving.
    Draining,
}

impl Generation {
    /// The generation of an instance with `status`.
    pub fn of(status: &str) -> Self {
        match status {
            READY | DEGRADED => Self::Serving,
            DRAINING => Self::Draining,
            _ => Self::Staged,
        }
    }

    /// Its name for display: `serving`, `staged`, `draining`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Serving => "serving",
            Self::Staged => "staged",
            Self::Draining => "draining",
        }
    }
}

/// What a staged rollout still waits for: a module of its cohort.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Wait {
    /// The cohort module.
    pub module_id: String,
    /// Why it holds the cutover.
    pub reason: WaitReason,
}

/// Why a cohort module holds its rollout's cutover.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum WaitReason {
    /// No instance of it is registered in the rollout.
    NotRegistered,
    /// Its instances in the rollout have not initialized.
    NotInitialized,
}

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self.reason {
            WaitReason::NotRegistered => "not registered",
            WaitReason::NotInitialized => "not initialized",
        };
        write!(f, "{} ({why})", self.module_id)
    }
}

/// The generations of one module id, by rollout label.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Generations {
    /// Rollouts with a READY or DEGRADED instance.
    pub serving: BTreeSet<String>,
    /// Rollouts not serving yet (STAGED, or STARTING).
    pub staged: BTreeSet<String>,
    /// Rollouts leaving (DRAINING).
    pub draining: BTreeSet<String>,
    /// Per staged rollout: the cohort modules it still waits for (empty:
    /// nothing, the cutover is under way).
    pub waiting: BTreeMap<String, Vec<Wait>>,
}

/// The generations of every module id of `view` (statuses computed).
pub fn generations(view: &pb::RegistryState) -> BTreeMap<String, Generations> {
    let mut out: BTreeMap<String, Generations> = BTreeMap::new();
    let instances: Vec<(&pb::RegistryRecord, &pb::Instance)> = view
        .records
        .iter()
        .filter_map(|r| r.instance.as_ref().map(|i| (r, i)))
        .collect();
    for (_, i) in &instances {
        let g = out.entry(module_of(i).to_owned()).or_default();
        let rollout = rollout_label(&i.rollout_id).to_owned();
        match Generation::of(&i.status) {
            Generation::Serving => g.serving.insert(rollout),
            Generation::Draining => g.draining.insert(rollout),
            Generation::Staged => g.staged.insert(rollout),
        };
    }
    for (module, g) in &mut out {
        g.staged
            .retain(|r| !g.serving.contains(r) && !g.draining.contains(r));
        for rollout in g.staged.iter().filter(|r| r.as_str() != NO_ROLLOUT) {
            let in_rollout: Vec<&(&pb::RegistryRecord, &pb::Instance)> = instances
                .iter()
                .filter(|(_, i)| i.rollout_id == *rollout)
                .collect();
            let cohort: BTreeSet<&str> = in_rollout
                .iter()
                .filter(|(_, i)| module_of(i) == module.as_str())
                .flat_map(|(r, _)| r.rollout_modules.iter().map(String::as_str))
                .collect();
            let waits = cohort
                .into_iter()
                .filter_map(|m| {
                    let mine: Vec<_> = in_rollout
                        .iter()
                        .filter(|(_, i)| module_of(i) == m)
                        .collect();
                    let reason = if mine.is_empty() {
                        WaitReason::NotRegistered
                    } else if !mine.iter().any(|(r, _)| r.initialized) {
                        WaitReason::NotInitialized
                    } else {
                        return None;
                    };
                    Some(Wait {
                        module_id: m.to_owned(),
                        reason,
                    })
                })
                .collect();
            g.waiting.insert(rollout.clone(), waits);
        }
    }
    out
}

/// One module id in the dependency graph.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Node {
    /// The best status of any live instance.
    pub best: String,
    /// The contract majors with live instances.
    pub majors: BTreeSet<u32>,
    /// What its instances declare they need: (module id, major).
    pub deps: BTreeSet<(String, u32)>,
}

/// The dependency graph of live instances, by module id.
pub fn graph<'a>(instances: impl IntoIterator<Item = &'a pb::Instance>) -> BTreeMap<String, Node> {
    let mut nodes: BTreeMap<String, Node> = BTreeMap::new();
    for i in instances {
        let node = nodes.entry(module_of(i).to_owned()).or_default();
        if node.best.is_empty() || rank(&i.status) >= rank(&node.best) {
            node.best = i.status.clone();
        }
        node.majors.insert(major_of(i));
        for d in i.descriptor.iter().flat_map(|d| &d.dependencies) {
            node.deps.insert((d.module_id.clone(), d.contract_major));
        }
    }
    nodes
}

/// The state of a dependency edge towards (module id, major).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Edge {
    /// No live instance of the module at all.
    Missing,
    /// The module lives, but not at that contract major.
    Incompatible,
    /// The module lives at that major; its best status.
    Live(String),
}

impl Edge {
    /// The edge from a module needing `(module_id, major)` in `nodes`.
    pub fn to(nodes: &BTreeMap<String, Node>, module_id: &str, major: u32) -> Self {
        match nodes.get(module_id) {
            None => Self::Missing,
            Some(node) if !node.majors.contains(&major) => Self::Incompatible,
            Some(node) => Self::Live(node.best.clone()),
        }
    }

    /// `MISSING`, `INCOMPATIBLE` or the best status.
    pub fn label(&self) -> &str {
        match self {
            Self::Missing => abi_wire::status::edge::MISSING,
            Self::Incompatible => abi_wire::status::edge::INCOMPATIBLE,
            Self::Live(status) => status,
        }
    }
}

/// A dependency with no READY instance: what keeps an instance DEGRADED
/// (or, initialized, from serving at all).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unmet {
    /// The module needed.
    pub module_id: String,
    /// At this contract major.
    pub contract_major: u32,
    /// What the registry has of it instead.
    pub edge: Edge,
}

/// What a view's instances offer each other: the graph and the READY
/// (module, major) pairs, built once, so the unmet dependencies of every
/// instance of a view cost one pass, not one per instance.
#[derive(Debug, Clone, Default)]
pub struct Dependencies {
    nodes: BTreeMap<String, Node>,
    ready: BTreeSet<(String, u32)>,
}

impl Dependencies {
    /// What `instances` offer.
    pub fn of<'a>(instances: impl IntoIterator<Item = &'a pb::Instance> + Clone) -> Self {
        Self {
            nodes: graph(instances.clone()),
            ready: instances
                .into_iter()
                .filter(|i| i.status == READY)
                .map(|i| (module_of(i).to_owned(), major_of(i)))
                .collect(),
        }
    }

    /// The graph of the instances.
    pub fn nodes(&self) -> &BTreeMap<String, Node> {
        &self.nodes
    }

    /// The dependencies of `instance` no READY instance meets, in
    /// declaration order.
    pub fn unmet(&self, instance: &pb::Instance) -> Vec<Unmet> {
        instance
            .descriptor
            .iter()
            .flat_map(|d| &d.dependencies)
            .filter(|d| {
                !self
                    .ready
                    .contains(&(d.module_id.clone(), d.contract_major))
            })
            .map(|d| Unmet {
                module_id: d.module_id.clone(),
                contract_major: d.contract_major,
                edge: Edge::to(&self.nodes, &d.module_id, d.contract_major),
            })
            .collect()
    }
}

/// The dependencies of `instance` that no READY instance of `instances`
/// meets, in declaration order (one instance: [`Dependencies`] for many).
pub fn unmet<'a>(
    instance: &pb::Instance,
    instances: impl IntoIterator<Item = &'a pb::Instance> + Clone,
) -> Vec<Unmet> {
    Dependencies::of(instances).unmet(instance)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(module: &str, rollout: &str, status: &str, deps: &[(&str, u32)]) -> pb::Instance {
        pb::Instance {
            instance_id: format!("{module}-{rollout}"),
            status: status.into(),
            rollout_id: rollout.into(),
            descriptor: Some(pb::ModuleDescriptor {
                module_id: module.into(),
                contract_major: 1,
                dependencies: deps
                    .iter()
                    .map(|(m, major)| pb::Dependency {
                        module_id: (*m).into(),
                        contract_major: *major,
                    })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn rec(
        module: &str,
        rollout: &str,
        status: &str,
        init: bool,
        cohort: &[&str],
    ) -> pb::RegistryRecord {
        pb::RegistryRecord {
            instance: Some(instance(module, rollout, status, &[])),
            initialized: init,
            rollout_id: rollout.into(),
            rollout_modules: cohort.iter().map(|c| (*c).to_owned()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_staged_rollout_names_what_it_waits_for() {
        let cohort = ["a", "b", "c"];
        let view = pb::RegistryState {
            records: vec![
                rec("a", "v1", READY, true, &cohort),
                rec("b", "v1", READY, true, &cohort),
                rec("a", "v2", STAGED, true, &cohort),
                rec("c", "v2", STARTING, false, &cohort),
                rec("d", "", DRAINING, true, &[]),
            ],
        };
        let g = generations(&view);
        let set = |items: &[&str]| {
            items
                .iter()
                .map(|s| (*s).to_owned())
                .collect::<BTreeSet<_>>()
        };
        assert_eq!(g["a"].serving, set(&["v1"]));
        assert_eq!(g["a"].staged, set(&["v2"]));
        let waits: Vec<String> = g["a"].waiting["v2"]
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(waits, ["b (not registered)", "c (not initialized)"]);
        assert!(g["b"].staged.is_empty());
        assert_eq!(g["d"].draining, set(&[NO_ROLLOUT]));
        assert!(g["d"].waiting.is_empty(), "no rollout, nothing to wait for");
    }

    #[test]
    fn edges_and_unmet_dependencies_say_what_is_missing() {
        let instances = [
            instance(
                "api",
                "",
                DEGRADED,
                &[("db", 1), ("cache", 2), ("auth", 1), ("queue", 1)],
            ),
            instance("db", "", READY, &[]),
            instance("cache", "", READY, &[]),
            instance("auth", "", STARTING, &[]),
        ];
        let nodes = graph(&instances);
        type Case<'a> = (&'a str, u32, Edge);
        let cases: [Case; 4] = [
            ("db", 1, Edge::Live(READY.into())),
            ("cache", 2, Edge::Incompatible),
            ("auth", 1, Edge::Live(STARTING.into())),
            ("queue", 1, Edge::Missing),
        ];
        for (module, major, want) in cases {
            assert_eq!(Edge::to(&nodes, module, major), want, "{module}");
        }
        let unmet: Vec<(String, Edge)> = unmet(&instances[0], &instances)
            .into_iter()
            .map(|u| (u.module_id, u.edge))
            .collect();
        assert_eq!(
            unmet,
            [
                ("cache".to_owned(), Edge::Incompatible),
                ("auth".to_owned(), Edge::Live(STARTING.into())),
                ("queue".to_owned(), Edge::Missing),
            ]
        );
        assert!(self::unmet(&instances[1], &instances).is_empty());
        assert_eq!(Edge::Missing.label(), abi_wire::status::edge::MISSING);
        assert_eq!(Edge::Live(READY.into()).label(), READY);
    }

    #[test]
    fn statuses_rank_and_map_to_generations() {
        let table = [
            (READY, 5, Generation::Serving),
            (DEGRADED, 4, Generation::Serving),
            (STAGED, 3, Generation::Staged),
            (STARTING, 2, Generation::Staged),
            (DRAINING, 1, Generation::Draining),
        ];
        for (status, rank_, generation) in table {
            assert_eq!(rank(status), rank_, "{status}");
            assert_eq!(Generation::of(status), generation, "{status}");
        }
        assert_eq!(rank("?"), 0);
    }
}
