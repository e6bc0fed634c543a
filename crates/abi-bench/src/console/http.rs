//! The console as a browser meets it, read raw over TCP with HTTP/1.0
//! requests (no keep-alive, no chunking: the body is everything after the
//! head, to the end of the connection): a GET on a fresh connection, timed
//! to its first byte and to its end, and an `/api/events` stream whose
//! events are stamped as their last line arrives.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Room made in a read buffer before each read.
const READ_CHUNK: usize = 64 * 1024;
/// The largest response head accepted.
const MAX_HEAD: usize = 16 * 1024;

/// One GET.
#[derive(Debug, Clone, Copy)]
pub struct Fetched {
    /// From before the connect to the response's first byte.
    pub first_byte: Duration,
    /// From before the connect to the end of the body.
    pub total: Duration,
    /// The body's size, bytes.
    pub body: usize,
}

/// What a stream saw: an event of `name`, stamped when it was whole; the
/// KV watcher sends these too (`data` then names the live instances).
#[derive(Debug)]
pub struct Seen {
    /// When it arrived whole.
    pub at: Instant,
    /// Its data.
    pub data: String,
}

/// A connected socket with an HTTP/1.0 GET of `path` sent.
async fn send_get(addr: SocketAddr, path: &str, accept: &str) -> anyhow::Result<TcpStream> {
    let mut tcp = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connect to {addr}"))?;
    tcp.set_nodelay(true)?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: {accept}\r\n\r\n");
    tcp.write_all(request.as_bytes()).await?;
    Ok(tcp)
}

/// Reads more of `tcp` into `buf`; `false` at the end of the connection.
async fn read_more(tcp: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<bool> {
    buf.reserve(READ_CHUNK);
    Ok(tcp.read_buf(buf).await? > 0)
}

/// Where the body starts in `buf`, once the head is whole and says 200.
fn body_start(buf: &[u8]) -> anyhow::Result<Option<usize>> {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        ensure!(buf.len() <= MAX_HEAD, "no end of the response head");
        return Ok(None);
    };
    let head = String::from_utf8_lossy(&buf[..end]);
    let status = head.lines().next().unwrap_or_default();
    ensure!(
        status.split_whitespace().nth(1) == Some("200"),
        "answered {status:?}"
    );
    Ok(Some(end + 4))
}

/// `GET path` on a fresh connection, timed.
///
/// # Errors
///
/// No connection, a status other than 200, an empty answer.
///
/// # Cancel safety
///
/// Cancel safe: the connection is dropped with it.
pub async fn get(addr: SocketAddr, path: &str) -> anyhow::Result<Fetched> {
    Ok(exchange(addr, path).await?.0)
}

/// The body `GET path` answers.
///
/// # Errors
///
/// As [`get`].
///
/// # Cancel safety
///
/// Cancel safe: the connection is dropped with it.
pub async fn body(addr: SocketAddr, path: &str) -> anyhow::Result<Vec<u8>> {
    let (_, mut answer, start) = exchange(addr, path).await?;
    answer.drain(..start);
    Ok(answer)
}

/// One GET: its times, the whole answer, where the body starts in it.
async fn exchange(addr: SocketAddr, path: &str) -> anyhow::Result<(Fetched, Vec<u8>, usize)> {
    let start = Instant::now();
    let mut tcp = send_get(addr, path, "*/*").await?;
    let mut buf = Vec::new();
    let mut first_byte = None;
    while read_more(&mut tcp, &mut buf).await? {
        first_byte.get_or_insert_with(|| start.elapsed());
    }
    let total = start.elapsed();
    let first_byte = first_byte.with_context(|| format!("GET {path}: empty answer"))?;
    let body = body_start(&buf)?.with_context(|| format!("GET {path}: no whole head"))?;
    let fetched = Fetched {
        first_byte,
        total,
        body: buf.len() - body,
    };
    Ok((fetched, buf, body))
}

/// An open `/api/events` stream, read by a task of its own until dropped.
pub struct EventStream {
    /// `modules` events read whole so far.
    modules: Arc<AtomicU64>,
    /// Bytes of their data.
    bytes: Arc<AtomicU64>,
    /// `lagged` events: news the console dropped for this stream.
    lagged: Arc<AtomicU64>,
    reader: JoinHandle<()>,
}

impl Drop for EventStream {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl EventStream {
    /// Opens the stream; each `modules` event is counted and, with
    /// `forward`, sent there stamped.
    ///
    /// # Errors
    ///
    /// No connection, or a status other than 200.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: nothing is spawned before the head is read.
    pub async fn open(
        addr: SocketAddr,
        forward: Option<mpsc::UnboundedSender<Seen>>,
    ) -> anyhow::Result<Self> {
        let mut tcp = send_get(addr, "/api/events", "text/event-stream").await?;
        let mut buf = Vec::new();
        let start = loop {
            if !read_more(&mut tcp, &mut buf).await? {
                bail!("/api/events ended before its head");
            }
            if let Some(start) = body_start(&buf)? {
                break start;
            }
        };
        buf.drain(..start);
        let [modules, bytes, lagged] = [(); 3].map(|()| Arc::new(AtomicU64::new(0)));
        let mut events = Events {
            modules: modules.clone(),
            bytes: bytes.clone(),
            lagged: lagged.clone(),
            forward,
            name: String::new(),
            data: String::new(),
        };
        let reader = tokio::spawn(async move {
            loop {
                let at = Instant::now();
                events.take_lines(&mut buf, at);
                match read_more(&mut tcp, &mut buf).await {
                    Ok(true) => {}
                    Ok(false) | Err(_) => break,
                }
            }
        });
        Ok(Self {
            modules,
            bytes,
            lagged,
            reader,
        })
    }

    /// `modules` events read so far.
    pub fn modules_seen(&self) -> u64 {
        self.modules.load(Ordering::Relaxed)
    }

    /// Bytes of the `modules` events' data read so far.
    pub fn bytes_seen(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// `lagged` events read so far.
    pub fn lagged_seen(&self) -> u64 {
        self.lagged.load(Ordering::Relaxed)
    }
}

/// The server-sent event being read.
struct Events {
    modules: Arc<AtomicU64>,
    bytes: Arc<AtomicU64>,
    lagged: Arc<AtomicU64>,
    forward: Option<mpsc::UnboundedSender<Seen>>,
    name: String,
    data: String,
}

impl Events {
    /// Takes the whole lines at the front of `buf`; an empty line ends an
    /// event, stamped `at` (when the read that brought it returned).
    fn take_lines(&mut self, buf: &mut Vec<u8>, at: Instant) {
        let mut used = 0;
        while let Some(len) = buf[used..].iter().position(|b| *b == b'\n') {
            let line = String::from_utf8_lossy(&buf[used..used + len]);
            let line = line.strip_suffix('\r').unwrap_or(&line);
            if line.is_empty() {
                self.end(at);
            } else if let Some(name) = line.strip_prefix("event:") {
                self.name = name.trim_start().to_owned();
            } else if let Some(data) = line.strip_prefix("data:") {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(data.strip_prefix(' ').unwrap_or(data));
            }
            used += len + 1;
        }
        buf.drain(..used);
    }

    fn end(&mut self, at: Instant) {
        let data = std::mem::take(&mut self.data);
        match std::mem::take(&mut self.name).as_str() {
            "modules" => {
                self.modules.fetch_add(1, Ordering::Relaxed);
                self.bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
                if let Some(forward) = &self.forward {
                    let _ = forward.send(Seen { at, data });
                }
            }
            "lagged" => {
                self.lagged.fetch_add(1, Ordering::Relaxed);
            }
            _ => {}
        }
    }
}
