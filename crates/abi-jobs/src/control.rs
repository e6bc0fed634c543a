//! Operator controls of one job ([`JobClient`]): pause and resume its
//! schedules, count and purge the triggers still waiting for a host.
//!
//! The reference has none of these; they act on the same stream and
//! subjects, so they work whoever hosts the job, with one limit the README
//! states: a Python host that starts while a job is paused publishes its
//! schedules again (it does not know the pause marker).

use async_nats::jetstream::stream::{ConsumerErrorKind, LastRawMessageErrorKind};
use async_nats::jetstream::{Context, consumer};
use futures::TryStreamExt as _;

use crate::JobClient;
use crate::host::{JobHostError, schedules};
use abi_sdk_core::{Error, kind_display};

/// Why a control of a job failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ControlErrorKind {
    /// Resume needs the job's declared schedules: the client was not made
    /// by [`JobClient::from_discovery`].
    Undeclared,
    /// The jobs stream refused or could not be reached.
    JetStream,
}

kind_display!(ControlErrorKind {
    Undeclared => "job declaration unknown",
    JetStream => "jobs stream error",
});

/// A failed job control.
pub type ControlError = Error<ControlErrorKind>;

fn stream_error(what: &str, e: JobHostError) -> ControlError {
    ControlError::new(ControlErrorKind::JetStream, what).with_source(e)
}

impl JobClient {
    fn jetstream(&self) -> Context {
        async_nats::jetstream::new(self.inner.nats.clone())
    }

    fn stream_name(&self) -> String {
        abi_wire::jobs::stream(&self.inner.project)
    }

    /// Pauses the job's schedules: no tick fires until
    /// [`JobClient::resume_schedules`] (triggers sent by hand still run).
    /// Pausing a paused job changes nothing.
    ///
    /// # Errors
    ///
    /// `JetStream` when the stream refused or is unreachable.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a cancelled call may have stored the marker and not
    /// purged the schedules yet; call it again.
    pub async fn pause_schedules(&self) -> Result<(), ControlError> {
        schedules::pause(&self.jetstream(), &self.stream_name(), self.subjects())
            .await
            .map_err(|e| stream_error("schedules not paused", e))
    }

    /// Resumes the job's schedules as the module declares them; returns how
    /// many schedules it has (0: nothing to tick).
    ///
    /// # Errors
    ///
    /// `Undeclared` for a client not made by [`JobClient::from_discovery`];
    /// `JetStream` when the stream refused or is unreachable.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a cancelled call may have removed the marker and not
    /// published the schedules yet (a host's next start does); call it again.
    pub async fn resume_schedules(&self) -> Result<usize, ControlError> {
        let spec = self.inner.declared.as_ref().ok_or_else(|| {
            ControlError::new(
                ControlErrorKind::Undeclared,
                "resuming needs the job's declared schedules: make the client with JobClient::from_discovery",
            )
        })?;
        schedules::resume(
            &self.jetstream(),
            &self.stream_name(),
            self.subjects(),
            spec.triggers(),
        )
        .await
        .map_err(|e| stream_error("schedules not resumed", e))
    }

    /// When the job's schedules were paused (UTC), or `None` when they run.
    ///
    /// # Errors
    ///
    /// `JetStream` when the stream refused or is unreachable.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn schedules_paused_since(
        &self,
    ) -> Result<Option<async_nats::datetime::DateTime>, ControlError> {
        let read = async {
            let stream = self
                .jetstream()
                .get_stream(self.stream_name())
                .await
                .map_err(|e| JobHostError::JetStream(e.to_string()))?;
            schedules::paused_since(&stream, self.subjects()).await
        };
        read.await
            .map_err(|e| stream_error("pause state not read", e))
    }

    /// How many triggers of the job no host has taken yet (its consumer's
    /// pending count; every stored trigger when no consumer exists yet).
    /// Runs in progress and retries waiting for their delay are not counted.
    ///
    /// # Errors
    ///
    /// `JetStream` when the stream refused or is unreachable.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: it only reads.
    pub async fn queued_triggers(&self) -> Result<u64, ControlError> {
        let failed = |e: String| stream_error("triggers not counted", JobHostError::JetStream(e));
        let js = self.jetstream();
        if let Some(info) = self.consumer_info(&js).await.map_err(failed)? {
            return Ok(info.num_pending);
        }
        let stream = js
            .get_stream(self.stream_name())
            .await
            .map_err(|e| failed(e.to_string()))?;
        let subject = self.subjects().trigger();
        let counts: Vec<(String, usize)> = stream
            .info_with_subjects(&subject)
            .await
            .map_err(|e| failed(e.to_string()))?
            .try_collect()
            .await
            .map_err(|e| failed(e.to_string()))?;
        Ok(counts
            .into_iter()
            .filter(|(s, _)| *s == subject)
            .map(|(_, n)| n as u64)
            .sum())
    }

    /// Removes the triggers of the job no host has taken yet (those stored
    /// after the last one its consumer delivered); runs in progress and
    /// retries waiting for their delay are left alone. Returns how many
    /// were removed. A host fetching meanwhile may still run one it took
    /// just before its removal.
    ///
    /// # Errors
    ///
    /// `JetStream` when the stream refused or is unreachable.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: a cancelled call may have removed some.
    pub async fn purge_queued(&self) -> Result<u64, ControlError> {
        let failed = |e: String| stream_error("triggers not purged", JobHostError::JetStream(e));
        let js = self.jetstream();
        let delivered = self
            .consumer_info(&js)
            .await
            .map_err(failed)?
            .map_or(0, |info| info.delivered.stream_sequence);
        let stream = js
            .get_stream(self.stream_name())
            .await
            .map_err(|e| failed(e.to_string()))?;
        let subject = self.subjects().trigger();
        let mut next = delivered + 1;
        let mut removed = 0;
        loop {
            let found = stream
                .raw_message_builder()
                .sequence(next)
                .next_by_subject(subject.clone())
                .send()
                .await;
            let message = match found {
                Ok(message) => message,
                Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => break,
                Err(e) => return Err(failed(e.to_string())),
            };
            // Gone already (its TTL, another purge): nothing to count.
            if stream
                .delete_message(message.sequence)
                .await
                .unwrap_or(false)
            {
                removed += 1;
            }
            next = message.sequence + 1;
        }
        Ok(removed)
    }

    /// The job's consumer's state, `None` when no host or trigger created it.
    async fn consumer_info(&self, js: &Context) -> Result<Option<consumer::Info>, String> {
        let found = js
            .get_consumer_from_stream::<consumer::pull::Config, _, _>(
                self.subjects().consumer(),
                self.stream_name(),
            )
            .await;
        match found {
            Ok(consumer) => Ok(Some(consumer.cached_info().clone())),
            Err(e)
                if matches!(e.kind(), ConsumerErrorKind::JetStream(ref js)
                    if js.error_code() == async_nats::jetstream::ErrorCode::CONSUMER_NOT_FOUND) =>
            {
                Ok(None)
            }
            Err(e) => Err(e.to_string()),
        }
    }
}
