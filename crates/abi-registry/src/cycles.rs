//! The dependency-cycle check, generation by generation.

use std::collections::{BTreeMap, HashMap, HashSet};

use abi_proto::discovery::v1 as pb;

use crate::error::{Error, ErrorCode, require};
use crate::record;
use crate::record::NodeRef;
use crate::rollout::{self, cohort};

/// Edges of a dependency graph: each node to the nodes it needs.
type Graph<'a> = HashMap<NodeRef<'a>, Vec<NodeRef<'a>>>;

/// The out-edges of `record`'s node.
fn edges_of(descriptor: &pb::ModuleDescriptor) -> Vec<NodeRef<'_>> {
    descriptor
        .dependencies
        .iter()
        .map(|d| (d.module_id.as_str(), d.contract_major))
        .collect()
}

/// Refuses a registration whose module would depend on itself.
///
/// Generations replace each other, so their edges are never merged into one
/// graph: a rollout may reverse an edge between the modules it replaces. The
/// registering generation is checked with its own edges for the module ids it
/// replaces and the serving generations' edges for the others; then each other
/// live generation in turn stands in for the serving one on the module ids it
/// declares, since it could serve beside the registering one. Only a cycle
/// through the registering module refuses it; draining instances are ignored.
pub(crate) fn refuse_cycles(
    req: &pb::RegisterRequest,
    state: &pb::RegistryState,
) -> Result<(), Error> {
    let d = record::or_empty(req.descriptor.as_ref());
    let root: NodeRef<'_> = (&d.module_id, d.contract_major);
    // The rollout choice as a write would make it, without changing `state`.
    let records: Vec<&pb::RegistryRecord> = state.records.iter().collect();
    let (serving, drain) = rollout::plan_rollouts(&records);
    let drained: HashSet<usize> = drain.into_iter().collect();

    // Per generation (rollout id), its nodes' edges and its declared cohort;
    // the last record of a node or generation wins, as in the reference.
    let mut edges: BTreeMap<&str, Graph<'_>> = BTreeMap::new();
    let mut cohorts: HashMap<&str, HashSet<&str>> = HashMap::new();
    for (index, r) in state.records.iter().enumerate() {
        if r.draining || drained.contains(&index) {
            continue;
        }
        let other = record::descriptor(r);
        edges
            .entry(&r.rollout_id)
            .or_default()
            .insert((&other.module_id, other.contract_major), edges_of(other));
        cohorts.insert(
            &r.rollout_id,
            r.rollout_modules.iter().map(String::as_str).collect(),
        );
    }
    let mut own = edges.remove(req.rollout_id.as_str()).unwrap_or_default();
    own.insert(root, edges_of(d));
    let replaced_modules = cohort(req);
    let replaced: HashSet<&str> = replaced_modules.iter().map(String::as_str).collect();

    let mut current: Graph<'_> = HashMap::new();
    for (rollout, nodes) in &edges {
        for (node, deps) in nodes {
            if serving.get(node.0) == Some(rollout) && !replaced.contains(node.0) {
                current.insert(*node, deps.clone());
            }
        }
    }
    // The serving view, then one view per other generation standing in for
    // the serving one on the module ids it declares. Each view is the
    // registering generation's edges over the generation's (for the module
    // ids not replaced) over the serving ones (for those it does not declare).
    let no_stand_in = Graph::new();
    let nobody = HashSet::new();
    let mut views: Vec<(&Graph<'_>, &HashSet<&str>)> = vec![(&no_stand_in, &nobody)];
    for (rollout, nodes) in &edges {
        views.push((nodes, cohorts.get(rollout).unwrap_or(&nobody)));
    }
    for (stand_in, declared) in views {
        let view = View {
            own: &own,
            stand_in,
            current: &current,
            replaced: &replaced,
            declared,
        };
        require(
            !depends_on_itself(&view, root),
            ErrorCode::DependencyCycle,
            "Required modules form a cycle",
        )?;
    }
    Ok(())
}

/// One way the generations could serve together, as layered edge maps.
struct View<'g, 'a> {
    /// The registering generation's edges: they win.
    own: &'g Graph<'a>,
    /// A generation standing in for the serving one (empty for none).
    stand_in: &'g Graph<'a>,
    /// The serving generations' edges.
    current: &'g Graph<'a>,
    /// Module ids the registering generation replaces.
    replaced: &'g HashSet<&'a str>,
    /// Module ids the stand-in declares (it replaces the serving ones there).
    declared: &'g HashSet<&'a str>,
}

impl<'g, 'a> View<'g, 'a> {
    /// The out-edges of `node` in this view.
    fn edges(&self, node: &NodeRef<'a>) -> Option<&'g Vec<NodeRef<'a>>> {
        if let Some(deps) = self.own.get(node) {
            return Some(deps);
        }
        if !self.replaced.contains(node.0)
            && let Some(deps) = self.stand_in.get(node)
        {
            return Some(deps);
        }
        if self.declared.contains(node.0) {
            return None;
        }
        self.current.get(node)
    }
}

/// Whether `root` reaches itself through `view`.
fn depends_on_itself<'a>(view: &View<'_, 'a>, root: NodeRef<'a>) -> bool {
    let mut seen: HashSet<NodeRef<'a>> = HashSet::new();
    let mut pending: Vec<NodeRef<'a>> = view.edges(&root).cloned().unwrap_or_default();
    while let Some(node) = pending.pop() {
        if node == root {
            return true;
        }
        if seen.insert(node)
            && let Some(deps) = view.edges(&node)
        {
            pending.extend(deps.iter().copied());
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cyclic(graph: &Graph<'_>, root: NodeRef<'_>) -> bool {
        let empty = Graph::new();
        let nobody = HashSet::new();
        let view = View {
            own: graph,
            stand_in: &empty,
            current: &empty,
            replaced: &nobody,
            declared: &nobody,
        };
        depends_on_itself(&view, root)
    }

    #[test]
    fn finds_only_cycles_through_the_root() {
        let mut graph: Graph<'_> = Graph::new();
        graph.insert(("a", 1), vec![("b", 1)]);
        graph.insert(("b", 1), vec![("c", 1)]);
        assert!(!cyclic(&graph, ("a", 1)));
        graph.insert(("c", 1), vec![("a", 1)]);
        assert!(cyclic(&graph, ("a", 1)));
        // A cycle elsewhere does not involve "d".
        graph.insert(("d", 1), vec![("a", 1)]);
        assert!(!cyclic(&graph, ("d", 1)));
        // The same module at another contract major is another node.
        let mut majors: Graph<'_> = Graph::new();
        majors.insert(("a", 1), vec![("a", 2)]);
        assert!(!cyclic(&majors, ("a", 1)));
        majors.insert(("a", 1), vec![("a", 1)]);
        assert!(cyclic(&majors, ("a", 1)));
    }

    #[test]
    fn layers_resolve_in_order() {
        let own: Graph<'_> = [(("a", 1), vec![("b", 1)])].into_iter().collect();
        let stand_in: Graph<'_> = [(("b", 1), vec![("c", 1)]), (("x", 1), vec![("a", 1)])]
            .into_iter()
            .collect();
        let current: Graph<'_> = [(("c", 1), vec![("a", 1)]), (("b", 1), vec![])]
            .into_iter()
            .collect();
        let replaced: HashSet<&str> = ["x"].into_iter().collect();
        let none: HashSet<&str> = HashSet::new();
        let only_c: HashSet<&str> = ["c"].into_iter().collect();
        let view = |declared| View {
            own: &own,
            stand_in: &stand_in,
            current: &current,
            replaced: &replaced,
            declared,
        };
        // b from the stand-in (b -> c), then c from the serving edges (c -> a).
        assert!(depends_on_itself(&view(&none), ("a", 1)));
        // Declaring c hides the serving c: no cycle left.
        assert!(!depends_on_itself(&view(&only_c), ("a", 1)));
        // The stand-in's x is replaced by the registering generation.
        assert!(view(&none).edges(&("x", 1)).is_none());
    }
}
