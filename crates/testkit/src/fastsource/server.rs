//! The server loop: accept connections on the source's own runtime, read
//! each request's head and body (keep-alive), and write plain answers.

use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

use super::clock::Timer;
use super::{FastSourceConfig, Heard, Queue, Recorded};

/// Requests larger than this are refused: a 120k-token prompt is well below it.
const MAX_BODY: usize = 64 << 20;
const MAX_HEAD: usize = 64 << 10;
/// Fast mode flushes its buffer at this size.
pub(super) const WRITE_BUF: usize = 64 << 10;

pub(super) async fn serve(
    listener: std::net::TcpListener,
    cfg: Arc<FastSourceConfig>,
    prompts: Recorded,
    heard: Heard,
    queue: Option<Arc<Queue>>,
    mut stop: oneshot::Receiver<()>,
) {
    let Ok(listener) = TcpListener::from_std(listener) else {
        return;
    };
    let counter = Arc::new(AtomicU64::new(0));
    loop {
        tokio::select! {
            _ = &mut stop => return,
            r = listener.accept() => {
                let Ok((sock, _)) = r else { continue };
                // Without NODELAY, Nagle would hold back small scheduled chunks.
                let _ = sock.set_nodelay(true);
                let cfg = cfg.clone();
                let counter = counter.clone();
                let prompts = prompts.clone();
                let heard = heard.clone();
                let queue = queue.clone();
                tokio::spawn(async move {
                    let _ = Conn::new(sock, cfg, counter, prompts, heard, queue).run().await;
                });
            }
        }
    }
}

pub(super) struct Conn {
    pub(super) sock: TcpStream,
    pub(super) cfg: Arc<FastSourceConfig>,
    pub(super) counter: Arc<AtomicU64>,
    pub(super) prompts: Recorded,
    heard: Heard,
    pub(super) queue: Option<Arc<Queue>>,
    /// Unparsed input; may hold the start of the next request.
    pub(super) inbuf: Vec<u8>,
    pub(super) out: Vec<u8>,
    pub(super) timer: Option<Timer>,
}

/// One parsed request head.
pub(super) struct Head {
    pub(super) method_post: bool,
    pub(super) path: String,
    pub(super) content_length: usize,
    pub(super) close: bool,
    pub(super) head_len: usize,
}

impl Conn {
    fn new(
        sock: TcpStream,
        cfg: Arc<FastSourceConfig>,
        counter: Arc<AtomicU64>,
        prompts: Recorded,
        heard: Heard,
        queue: Option<Arc<Queue>>,
    ) -> Self {
        Conn {
            sock,
            cfg,
            counter,
            prompts,
            heard,
            queue,
            inbuf: Vec::with_capacity(8192),
            out: Vec::with_capacity(WRITE_BUF + 4096),
            timer: None,
        }
    }

    async fn run(mut self) -> io::Result<()> {
        loop {
            let Some(head) = self.read_head().await? else {
                return Ok(());
            };
            let method = if head.method_post { "POST" } else { "GET" };
            self.heard
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(format!("{method} {}", head.path));
            if head.content_length > MAX_BODY {
                self.simple(
                    413,
                    "application/json",
                    b"{\"error\":{\"message\":\"body too large\"}}",
                    true,
                )
                .await?;
                return Ok(());
            }
            let body_end = head.head_len + head.content_length;
            while self.inbuf.len() < body_end {
                if self.read_more().await? == 0 {
                    return Ok(());
                }
            }
            // The schedule starts once the whole request is in.
            let t0 = Instant::now();
            let body = self.inbuf[head.head_len..body_end].to_vec();
            self.inbuf.drain(..body_end);
            let keep = self.respond(&head, &body, t0).await?;
            if !keep || head.close {
                let _ = self.sock.shutdown().await;
                return Ok(());
            }
        }
    }

    async fn read_more(&mut self) -> io::Result<usize> {
        if self.inbuf.capacity() - self.inbuf.len() < 4096 {
            self.inbuf.reserve(8192);
        }
        self.sock.read_buf(&mut self.inbuf).await
    }

    /// Read until a complete request head is buffered; None on a clean close.
    async fn read_head(&mut self) -> io::Result<Option<Head>> {
        let mut scanned = 0;
        loop {
            if let Some(p) = find(&self.inbuf[scanned..], b"\r\n\r\n") {
                let head_len = scanned + p + 4;
                return Ok(parse_head(&self.inbuf[..head_len]).or_else(|| {
                    Some(Head {
                        method_post: false,
                        path: String::new(),
                        content_length: 0,
                        close: true,
                        head_len,
                    })
                }));
            }
            scanned = self.inbuf.len().saturating_sub(3);
            if self.inbuf.len() > MAX_HEAD {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "request head too large",
                ));
            }
            if self.read_more().await? == 0 {
                return Ok(None);
            }
        }
    }

    /// A whole answer: `body` as `ctype`, the connection kept or closed.
    pub(super) async fn simple(
        &mut self,
        status: u16,
        ctype: &str,
        body: &[u8],
        close: bool,
    ) -> io::Result<()> {
        let reason = match status {
            200 => "OK",
            400 => "Bad Request",
            404 => "Not Found",
            413 => "Payload Too Large",
            429 => "Too Many Requests",
            500 => "Internal Server Error",
            503 => "Service Unavailable",
            _ => "Status",
        };
        let conn = if close { "close" } else { "keep-alive" };
        let mut out = format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: {conn}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        out.extend_from_slice(body);
        self.sock.write_all(&out).await
    }
}

pub(super) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn parse_head(head: &[u8]) -> Option<Head> {
    let text = std::str::from_utf8(head).ok()?;
    let mut lines = text.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?;
    let target = first.next()?;
    let version = first.next()?;
    let mut content_length = 0;
    // HTTP/1.0 closes by default.
    let mut close = version == "HTTP/1.0";
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            content_length = value.parse().ok()?;
        } else if name.eq_ignore_ascii_case("connection") {
            close = value.eq_ignore_ascii_case("close");
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            // Chunked request bodies are not needed by any client here.
            return None;
        }
    }
    let path = target.split('?').next().unwrap_or(target).to_string();
    Some(Head {
        method_post: method == "POST",
        path,
        content_length,
        close,
        head_len: head.len(),
    })
}
