//! [`JobHandlers`]: the jobs a module spec declares with their handlers,
//! which the runner turns into one [`JobHost`].

use std::sync::Arc;

use super::JobHost;
use crate::jobs::{JobHandler, JobSpec};

/// The jobs a [`crate::ModuleSpec`] declares with handlers
/// ([`crate::ModuleSpec::job_handler`]); compared by declaration only.
#[derive(Clone, Default)]
pub struct JobHandlers {
    jobs: Vec<(JobSpec, Arc<dyn JobHandler>)>,
}

impl JobHandlers {
    pub(crate) fn push(&mut self, spec: JobSpec, handler: Arc<dyn JobHandler>) {
        self.jobs.push((spec, handler));
    }

    /// One host of every job, `None` when there is none.
    pub(crate) fn host(&self, module_id: &str) -> Option<Arc<JobHost>> {
        if self.jobs.is_empty() {
            return None;
        }
        let mut host = JobHost::new(module_id);
        host.jobs.clone_from(&self.jobs);
        Some(Arc::new(host))
    }
}

impl std::fmt::Debug for JobHandlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.jobs.iter().map(|(s, _)| s.name()))
            .finish()
    }
}

impl PartialEq for JobHandlers {
    fn eq(&self, other: &Self) -> bool {
        self.jobs.len() == other.jobs.len()
            && self.jobs.iter().zip(&other.jobs).all(|(a, b)| a.0 == b.0)
    }
}
