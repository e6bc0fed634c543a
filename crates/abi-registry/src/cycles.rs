//! The dependency-cycle check, generation by generation.

use std::collections::{BTreeMap, HashMap, HashSet};

use abi_proto::discovery::v1 as pb;

use crate::error::{Error, ErrorCode, require};
use crate::record::{self, Node};
use crate::status;
use crate::validate::cohort;

/// Edges of a dependency graph: each node to the nodes it needs.
type Graph = HashMap<Node, Vec<Node>>;

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
    let root: Node = (d.module_id.clone(), d.contract_major);
    // The rollout choice as a write would make it, without changing `state`.
    let (serving, drain) = status::plan_rollouts(state);
    let drained: HashSet<usize> = drain.into_iter().collect();

    let mut edges: BTreeMap<String, Graph> = BTreeMap::new();
    let mut cohorts: HashMap<String, HashSet<String>> = HashMap::new();
    for (index, r) in state.records.iter().enumerate() {
        if r.draining || drained.contains(&index) {
            continue;
        }
        let deps = record::descriptor(r)
            .dependencies
            .iter()
            .map(record::dependency_node)
            .collect();
        edges
            .entry(r.rollout_id.clone())
            .or_default()
            .insert(record::node(r), deps);
        cohorts.insert(
            r.rollout_id.clone(),
            r.rollout_modules.iter().cloned().collect(),
        );
    }
    let mut own = edges.remove(&req.rollout_id).unwrap_or_default();
    own.insert(
        root.clone(),
        d.dependencies.iter().map(record::dependency_node).collect(),
    );
    let replaced: HashSet<String> = cohort(req).into_iter().collect();

    let mut current: Graph = HashMap::new();
    for (rollout, nodes) in &edges {
        for (node, deps) in nodes {
            if serving.get(&node.0) == Some(rollout) && !replaced.contains(&node.0) {
                current.insert(node.clone(), deps.clone());
            }
        }
    }
    let mut views = vec![current.clone()];
    for (rollout, nodes) in &edges {
        let declared = cohorts.get(rollout);
        let mut view: Graph = current
            .iter()
            .filter(|(n, _)| !declared.is_some_and(|c| c.contains(&n.0)))
            .map(|(n, deps)| (n.clone(), deps.clone()))
            .collect();
        view.extend(
            nodes
                .iter()
                .filter(|(n, _)| !replaced.contains(&n.0))
                .map(|(n, deps)| (n.clone(), deps.clone())),
        );
        views.push(view);
    }
    for mut view in views {
        view.extend(own.iter().map(|(n, deps)| (n.clone(), deps.clone())));
        require(
            !depends_on_itself(&view, &root),
            ErrorCode::DependencyCycle,
            "Required modules form a cycle",
        )?;
    }
    Ok(())
}

/// Whether `root` reaches itself through `graph`.
fn depends_on_itself(graph: &Graph, root: &Node) -> bool {
    let mut seen: HashSet<&Node> = HashSet::new();
    let mut pending: Vec<&Node> = graph
        .get(root)
        .map(|d| d.iter().collect())
        .unwrap_or_default();
    while let Some(node) = pending.pop() {
        if node == root {
            return true;
        }
        if seen.insert(node)
            && let Some(deps) = graph.get(node)
        {
            pending.extend(deps.iter());
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(m: &str) -> Node {
        (m.to_owned(), 1)
    }

    #[test]
    fn finds_only_cycles_through_the_root() {
        let mut graph = Graph::new();
        graph.insert(n("a"), vec![n("b")]);
        graph.insert(n("b"), vec![n("c")]);
        assert!(!depends_on_itself(&graph, &n("a")));
        graph.insert(n("c"), vec![n("a")]);
        assert!(depends_on_itself(&graph, &n("a")));
        // A cycle elsewhere does not involve "d".
        graph.insert(n("d"), vec![n("a")]);
        assert!(!depends_on_itself(&graph, &n("d")));
        // The same module at another contract major is another node.
        let mut majors = Graph::new();
        majors.insert(n("a"), vec![("a".to_owned(), 2)]);
        assert!(!depends_on_itself(&majors, &n("a")));
        majors.insert(n("a"), vec![n("a")]);
        assert!(depends_on_itself(&majors, &n("a")));
    }
}
