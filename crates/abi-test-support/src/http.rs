//! One plain HTTP/1.0 exchange over a fresh TCP connection, for tests of
//! the processes that serve HTTP (health probes, the app gateway, the
//! console): the answer ends with the connection, so a body comes
//! unchunked, and nothing here needs an HTTP client crate.

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// An answer: the status, the head (lowercased) and the body as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status (0 when the answer had none).
    pub status: u16,
    /// The status line and headers, lowercased.
    pub head: String,
    /// The body.
    pub body: String,
}

/// Sends `method path` with `body` (a `Content-Type` of JSON when it is
/// not empty) to `addr`, and reads the answer until the connection ends.
///
/// # Errors
///
/// The connection failed, or no answer within `timeout`.
pub async fn exchange(
    addr: &str,
    method: &str,
    path: &str,
    body: &[u8],
    timeout: Duration,
) -> std::io::Result<Answer> {
    let talk = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        let mut head = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\n");
        if !body.is_empty() {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body).await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        Ok::<_, std::io::Error>(answer)
    };
    let answer = tokio::time::timeout(timeout, talk)
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in time"))??;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Ok(Answer {
        status,
        head: head.to_ascii_lowercase(),
        body: body.to_owned(),
    })
}
