//! [`JobHandlers`]: the jobs a module spec declares with their handlers,
//! which the runner turns into one [`JobHost`].

use std::sync::Arc;

use super::{JobHost, JobHostOptions};
use crate::jobs::{JobHandler, JobSpec};

/// The jobs a [`crate::ModuleSpec`] declares with handlers
/// ([`crate::ModuleSpec::job_handler`]); compared by declaration only.
#[derive(Clone, Default)]
pub struct JobHandlers {
    jobs: Vec<(JobSpec, Arc<dyn JobHandler>)>,
    options: Option<JobHostOptions>,
}

impl JobHandlers {
    pub(crate) fn push(&mut self, spec: JobSpec, handler: Arc<dyn JobHandler>) {
        self.jobs.push((spec, handler));
    }

    /// The host's options (default [`JobHostOptions::default`]).
    pub(crate) fn set_options(&mut self, options: JobHostOptions) {
        self.options = Some(options);
    }

    /// One host of every job, `None` when there is none.
    pub(crate) fn host(&self, module_id: &str) -> Option<Arc<JobHost>> {
        if self.jobs.is_empty() {
            return None;
        }
        let mut host = JobHost::new(module_id);
        host.jobs.clone_from(&self.jobs);
        if let Some(options) = &self.options {
            host.options = options.clone();
        }
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    use super::*;
    use crate::jobs::{JobContext, JobResult};

    #[test]
    fn the_module_specs_host_options_reach_its_job_host() {
        let handler = |_cx: JobContext| async { JobResult::Ok(serde_json::json!({})) };
        let options = JobHostOptions {
            heartbeat_interval: Duration::from_secs(3),
            handback_grace: Duration::from_millis(700),
            ..JobHostOptions::default()
        };
        let spec = crate::ModuleSpec::new("m")
            .job_handler(JobSpec::new("j").unwrap(), handler)
            .job_host_options(options);
        let host = spec.job_handlers.host("m").unwrap();
        assert_eq!(host.options.heartbeat_interval, Duration::from_secs(3));
        assert_eq!(host.options.handback_grace, Duration::from_millis(700));
        let plain = crate::ModuleSpec::new("m").job_handler(JobSpec::new("j").unwrap(), handler);
        let host = plain.job_handlers.host("m").unwrap();
        assert_eq!(
            host.options.heartbeat_interval,
            JobHostOptions::default().heartbeat_interval
        );
    }
}
