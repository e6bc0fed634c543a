//! Search: what a query names among what the registry knows (a module, an
//! instance, a job, a run id), each hit with the page that shows it. Agent
//! invocation ids are looked up in the run records by the caller. Pure.

use serde::Serialize;

use super::modules::ModulesView;

/// Hits shown at most.
pub const MAX_HITS: usize = 50;

/// One thing a query names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hit {
    /// `module`, `instance`, `job`, `run` or `agent run`.
    pub kind: &'static str,
    /// What it is, as text.
    pub label: String,
    /// The page that shows it.
    pub href: String,
    /// Its module.
    pub module_id: String,
}

/// What `query` names in `view` (case-insensitive substrings of module ids,
/// instance ids and job names; a run id `<job>:<sequence>` of a declared
/// job, once per module declaring it).
pub fn search(query: &str, view: &ModulesView) -> Vec<Hit> {
    let query = query.trim();
    if query.is_empty() {
        return Vec::new();
    }
    let needle = query.to_lowercase();
    let mut hits = Vec::new();
    let run = abi_wire::jobs::parse_run_id(query);
    for module in &view.modules {
        let id = &module.module_id;
        if id.to_lowercase().contains(&needle) {
            hits.push(Hit {
                kind: "module",
                label: id.clone(),
                href: format!("/modules/{id}"),
                module_id: id.clone(),
            });
        }
        for instance in &module.instances {
            if instance.instance_id.to_lowercase().contains(&needle) {
                hits.push(Hit {
                    kind: "instance",
                    label: format!("{} ({})", instance.instance_id, instance.status),
                    href: format!("/modules/{id}#{}", instance.instance_id),
                    module_id: id.clone(),
                });
            }
        }
        for job in &module.declares.jobs {
            if job.to_lowercase().contains(&needle) && run.is_none() {
                hits.push(Hit {
                    kind: "job",
                    label: format!("{id} {job}"),
                    href: format!("/jobs/{id}/{job}"),
                    module_id: id.clone(),
                });
            }
            if let Some((run_job, _)) = run
                && run_job == job
            {
                hits.push(Hit {
                    kind: "run",
                    label: format!("{id} {query}"),
                    href: format!("/runs/{id}/{query}"),
                    module_id: id.clone(),
                });
            }
        }
    }
    hits.truncate(MAX_HITS);
    hits
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::modules::{Declares, InstanceRow, ModuleRow};

    fn view() -> ModulesView {
        let module = |id: &str, instance: &str, jobs: &[&str]| ModuleRow {
            module_id: id.into(),
            instances: vec![InstanceRow {
                instance_id: instance.into(),
                status: abi_wire::status::READY.into(),
                ..InstanceRow::default()
            }],
            declares: Declares {
                jobs: jobs.iter().map(|j| (*j).to_owned()).collect(),
                ..Declares::default()
            },
            ..ModuleRow::default()
        };
        ModulesView {
            modules: vec![
                module("billing", "billing-7f3a", &["ingest", "report"]),
                module("crm", "crm-0001", &["ingest"]),
            ],
            ..ModulesView::default()
        }
    }

    #[test]
    fn a_query_finds_what_it_names() {
        let hrefs =
            |q: &str| -> Vec<String> { search(q, &view()).into_iter().map(|h| h.href).collect() };
        assert_eq!(
            hrefs("BILL"),
            ["/modules/billing", "/modules/billing#billing-7f3a"]
        );
        assert_eq!(hrefs("7f3a"), ["/modules/billing#billing-7f3a"]);
        assert_eq!(
            hrefs("ingest"),
            ["/jobs/billing/ingest", "/jobs/crm/ingest"]
        );
        assert_eq!(
            hrefs("ingest:42"),
            ["/runs/billing/ingest:42", "/runs/crm/ingest:42"]
        );
        assert_eq!(hrefs("report:1"), ["/runs/billing/report:1"]);
        assert!(hrefs("  ").is_empty());
        assert!(hrefs("nothing").is_empty());
    }
}
