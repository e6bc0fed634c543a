//! `GET /api/events`: server-sent events keeping a page live. The modules
//! view comes first, whole, then every piece of news as it happens; a page
//! that fell behind is told to reload (`lagged`). The stream ends when the
//! console stops, so a stop never waits on an open page.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures::{Stream, StreamExt as _};
use tokio::sync::broadcast::error::RecvError;

use super::State;
use crate::live::EventKind;

/// A comment line this often keeps proxies from closing a quiet stream.
const KEEPALIVE: Duration = Duration::from_secs(15);
/// The event a page that missed some gets: it reloads what it shows.
const LAGGED: &str = "lagged";

/// The event stream.
pub async fn stream(state: State) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let first = state.live.registry().json.clone();
    let news = state.live.subscribe();
    let stop = state.stop.clone();
    let first = futures::stream::once(async move {
        Event::default()
            .event(EventKind::Modules.as_str())
            .data(first.as_ref())
    });
    let rest = futures::stream::unfold(news, |mut news| async move {
        let event = match news.recv().await {
            Ok(event) => Event::default()
                .event(event.kind.as_str())
                .data(event.data.as_ref()),
            Err(RecvError::Lagged(missed)) => {
                Event::default().event(LAGGED).data(missed.to_string())
            }
            Err(RecvError::Closed) => return None,
        };
        Some((event, news))
    });
    let events = first
        .chain(rest)
        .map(Ok)
        .take_until(async move { stop.cancelled().await });
    Sse::new(events).keep_alive(KeepAlive::new().interval(KEEPALIVE))
}
