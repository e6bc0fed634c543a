//! `abictl tree`: the dependency graph, each module with its best status.

use std::collections::{BTreeMap, BTreeSet};

use abi_registry::overview::Edge;
use serde_json::json;

use super::{Ctx, list_all};
use crate::connect;
use crate::output::{Style, print_json};

pub use abi_registry::overview::{Node, graph};

/// Prints the tree (or the graph as JSON).
///
/// # Errors
///
/// The service call failed.
///
/// # Cancel safety
///
/// Cancel safe: it only lists instances; the tree is printed after the last await.
pub async fn run(cx: Ctx<'_>) -> anyhow::Result<()> {
    let client = connect::client(cx.global, cx.env).await?;
    let nodes = graph(&list_all(&client).await?);
    if cx.global.json {
        let modules: Vec<_> = nodes
            .iter()
            .map(|(id, n)| {
                let deps: Vec<_> = n
                    .deps
                    .iter()
                    .map(|(d, major)| {
                        let edge = Edge::to(&nodes, d, *major);
                        json!({"module_id": d, "contract_major": major, "status": edge.label()})
                    })
                    .collect();
                json!({"module_id": id, "best_status": n.best, "majors": n.majors, "dependencies": deps})
            })
            .collect();
        print_json(&json!({ "modules": modules }));
        return Ok(());
    }
    print!("{}", render(&nodes, cx.style));
    Ok(())
}

/// The graph as an indented tree from its roots (modules nothing depends on;
/// then any module left unprinted, which only a cycle can leave).
pub fn render(nodes: &BTreeMap<String, Node>, style: Style) -> String {
    let depended: BTreeSet<&str> = nodes
        .values()
        .flat_map(|n| n.deps.iter().map(|(d, _)| d.as_str()))
        .collect();
    let mut out = String::new();
    let mut printed: BTreeSet<String> = BTreeSet::new();
    let roots: Vec<&String> = nodes
        .keys()
        .filter(|id| !depended.contains(id.as_str()))
        .collect();
    for root in roots {
        walk(
            nodes,
            root,
            None,
            "",
            &mut Vec::new(),
            &mut printed,
            &mut out,
            style,
        );
    }
    let rest: Vec<String> = nodes
        .keys()
        .filter(|id| !printed.contains(*id))
        .cloned()
        .collect();
    for id in rest {
        if !printed.contains(&id) {
            walk(
                nodes,
                &id,
                None,
                "",
                &mut Vec::new(),
                &mut printed,
                &mut out,
                style,
            );
        }
    }
    if out.is_empty() {
        out.push_str("(no live modules)\n");
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn walk(
    nodes: &BTreeMap<String, Node>,
    id: &str,
    major: Option<u32>,
    indent: &str,
    path: &mut Vec<String>,
    printed: &mut BTreeSet<String>,
    out: &mut String,
    style: Style,
) {
    let label = match major {
        Some(m) => format!("{id}@{m}"),
        None => id.to_owned(),
    };
    let Some(node) = nodes.get(id) else {
        out.push_str(&format!(
            "{indent}{label}  {}\n",
            style.paint(Edge::Missing.label(), Edge::Missing.label())
        ));
        return;
    };
    if path.iter().any(|p| p == id) {
        out.push_str(&format!(
            "{indent}{label}  {}\n",
            style.paint("cycle", "(cycle)")
        ));
        return;
    }
    let majors: Vec<String> = node.majors.iter().map(u32::to_string).collect();
    let compat = match major {
        Some(m) if !node.majors.contains(&m) => {
            format!(
                "  {} (live majors {})",
                Edge::Incompatible.label(),
                majors.join(",")
            )
        }
        _ => String::new(),
    };
    out.push_str(&format!(
        "{indent}{label}  {}{compat}\n",
        style.paint(&node.best, &node.best)
    ));
    printed.insert(id.to_owned());
    path.push(id.to_owned());
    let child_indent = format!("{indent}  ");
    for (dep, m) in &node.deps {
        walk(
            nodes,
            dep,
            Some(*m),
            &child_indent,
            path,
            printed,
            out,
            style,
        );
    }
    path.pop();
}

#[cfg(test)]
mod tests {
    use super::*;
    use abi_sdk::pb;

    fn inst(id: &str, status: &str, deps: &[&str]) -> pb::Instance {
        pb::Instance {
            instance_id: format!("{id}-1"),
            status: status.into(),
            descriptor: Some(pb::ModuleDescriptor {
                module_id: id.into(),
                contract_major: 1,
                dependencies: deps
                    .iter()
                    .map(|d| pb::Dependency {
                        module_id: (*d).into(),
                        contract_major: 1,
                    })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn missing_modules_and_cycles_are_marked() {
        let all = [
            inst("app", "DEGRADED", &["db", "ghost"]),
            inst("db", "READY", &[]),
            inst("x", "STARTING", &["y"]),
            inst("y", "STARTING", &["x"]),
        ];
        let text = render(&graph(&all), Style::plain());
        assert_eq!(
            text,
            "app  DEGRADED\n  db@1  READY\n  ghost@1  MISSING\nx  STARTING\n  y@1  STARTING\n    x@1  (cycle)\n"
        );
    }
}
