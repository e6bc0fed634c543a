//! A request body that follows its request (an upload above the inline
//! limit), as the app's service sees it: pulled from the caller's holder
//! one chunk each time the app asks for more, never ahead of it, so a host
//! holds at most a chunk of any upload however large (the reference's
//! `receive()` reads the same way). Past the limit the app's next read
//! fails and the host answers 413; an app that drops the body unread tells
//! the holder its reader left.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use futures::StreamExt as _;
use tracing::debug;

use crate::service::AppBody;
use crate::stream::Reader;

/// Why an upload's body ended before its last byte.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// More bytes than the app takes.
    #[error("the request body exceeds {limit} bytes")]
    TooLarge {
        /// The limit, in bytes.
        limit: u64,
    },
    /// The caller's holder failed or went away.
    #[error("the request body could not be read: {0}")]
    Holder(String),
}

/// Whether an upload went past its limit: the host answers 413 then,
/// whatever the app answered to the failed read.
#[derive(Debug, Clone, Default)]
pub struct TooLarge(Arc<AtomicBool>);

impl TooLarge {
    /// Whether the body went past its limit.
    pub fn happened(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }

    fn mark(&self) {
        self.0.store(true, Ordering::Release);
    }
}

/// The body of an upload held at the caller's inbox: `first` (the part
/// sent inline), then the chunks pulled one per read, `max_bytes` in all at
/// most. `guard` (the host's upload slot) is held until the body ends or
/// is dropped.
pub fn pulled<G: Send + 'static>(
    reader: Reader,
    first: Bytes,
    max_bytes: u64,
    too_large: TooLarge,
    guard: G,
) -> AppBody {
    let state = Pulling {
        reader: CancelOnDrop(Some(reader)),
        first: (!first.is_empty()).then_some(first),
        read: 0,
        max_bytes,
        too_large,
        _guard: guard,
    };
    let chunks = futures::stream::unfold(Some(state), |state| async move {
        let mut state = state?;
        let frame: Result<_, UploadError> = match state.next().await {
            Ok(Some(chunk)) => Ok(http_body::Frame::data(chunk)),
            Ok(None) => return None,
            Err(err) => Err(err),
        };
        let next = frame.is_ok().then_some(state);
        Some((frame, next))
    });
    AppBody::new(http_body_util::StreamBody::new(chunks.boxed()))
}

struct Pulling<G> {
    reader: CancelOnDrop,
    first: Option<Bytes>,
    read: u64,
    max_bytes: u64,
    too_large: TooLarge,
    _guard: G,
}

impl<G> Pulling<G> {
    async fn next(&mut self) -> Result<Option<Bytes>, UploadError> {
        let chunk = match self.first.take() {
            Some(first) => Some(first),
            None => match self.reader.0.as_mut() {
                Some(reader) => reader
                    .next_chunk()
                    .await
                    .map_err(|refused| UploadError::Holder(refused.message))?,
                None => None,
            },
        };
        let Some(chunk) = chunk else {
            return Ok(None);
        };
        self.read += chunk.len() as u64;
        if self.read > self.max_bytes {
            self.too_large.mark();
            if let Some(mut reader) = self.reader.0.take() {
                reader.cancel().await;
            }
            return Err(UploadError::TooLarge {
                limit: self.max_bytes,
            });
        }
        Ok(Some(chunk))
    }
}

/// A reader that tells its holder it left when dropped before the end, so
/// an app that never reads its upload frees the caller's holder at once.
struct CancelOnDrop(Option<Reader>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(mut reader) = self.0.take().filter(|r| !r.is_done()) else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move { reader.cancel().await });
            }
            // No runtime left (the process is ending): the holder stops at
            // its idle limit instead.
            Err(_) => debug!("an unread upload's holder was not told"),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, clippy::unwrap_used)]

    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use super::*;
    use crate::stream::{Ends, Held, hold};
    use abi_test_support::NatsServer;
    use http_body_util::BodyExt as _;
    use tokio_util::task::TaskTracker;

    const CHUNK: usize = 16 * 1024;
    const CHUNKS: usize = 40;

    /// A caller's body of `CHUNKS` frames of `CHUNK` bytes, counting the
    /// frames its holder has taken from it.
    fn counted_body(taken: Arc<AtomicUsize>) -> crate::ResponseBody {
        let frames = futures::stream::iter(0..CHUNKS).map(move |_| {
            taken.fetch_add(1, Ordering::SeqCst);
            Ok::<_, abi_sdk_core::BoxError>(http_body::Frame::data(Bytes::from(vec![7u8; CHUNK])))
        });
        http_body_util::StreamBody::new(frames).boxed_unsync()
    }

    async fn held(
        nats: &async_nats::Client,
        tasks: &TaskTracker,
        taken: Arc<AtomicUsize>,
    ) -> String {
        let held = Held::Stream {
            body: counted_body(taken),
            ends_at_drain: false,
        };
        hold(nats, held, CHUNK, tasks, Ends::default(), ())
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn an_upload_is_pulled_no_faster_than_the_app_reads_it() {
        let server = NatsServer::start().await;
        let nats = async_nats::connect(server.url()).await.unwrap();
        let tasks = TaskTracker::new();
        let taken = Arc::new(AtomicUsize::new(0));
        let inbox = held(&nats, &tasks, taken.clone()).await;
        let mut body = pulled(
            Reader::new(nats.clone(), inbox),
            Bytes::new(),
            u64::MAX,
            TooLarge::default(),
            (),
        );
        for read in 1..=3 {
            let frame = body.frame().await.unwrap().unwrap();
            assert_eq!(frame.into_data().unwrap().len(), CHUNK);
            // The caller gave up one frame per read: the host holds one
            // chunk, the caller's holder at most one more.
            assert_eq!(
                taken.load(Ordering::SeqCst),
                read,
                "pulled ahead of the app"
            );
        }
        // The app drops the rest unread: the holder is told and ends, having
        // produced nothing more.
        drop(body);
        tasks.close();
        tokio::time::timeout(Duration::from_secs(5), tasks.wait())
            .await
            .expect("an unread upload's holder ends at once");
        assert_eq!(taken.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn an_upload_past_its_limit_fails_the_read_and_marks_it() {
        let server = NatsServer::start().await;
        let nats = async_nats::connect(server.url()).await.unwrap();
        let tasks = TaskTracker::new();
        let taken = Arc::new(AtomicUsize::new(0));
        let inbox = held(&nats, &tasks, taken.clone()).await;
        let too_large = TooLarge::default();
        let limit = (2 * CHUNK + 10) as u64;
        let body = pulled(
            Reader::new(nats.clone(), inbox),
            Bytes::new(),
            limit,
            too_large.clone(),
            (),
        );
        let err = body.collect().await.unwrap_err();
        assert!(err.to_string().contains(&limit.to_string()), "{err}");
        assert!(too_large.happened());
        tasks.close();
        tokio::time::timeout(Duration::from_secs(5), tasks.wait())
            .await
            .expect("the holder is told its reader left");
        assert_eq!(taken.load(Ordering::SeqCst), 3, "no pull past the limit");
    }
}
