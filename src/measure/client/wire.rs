//! A minimal HTTP/1.1 client for plain-`http` targets.
//!
//! Why not reqwest here: hyper's HTTP/1.1 client decodes the body on a
//! connection task and hands every HTTP chunk to the response through a
//! channel, two task wake-ups per chunk. OpenAI-style servers send one HTTP
//! chunk per SSE event, so at streaming rates that hand-off costs more than
//! parsing the event, and it puts a scheduler hop between the socket read and
//! the timestamp. Here the request's own task reads the socket, stamps the
//! read, decodes the chunked framing in place and hands out slices of its
//! buffer. `https` targets still go through reqwest.
//!
//! Scope: one request at a time per connection (no pipelining), bodies framed
//! by `Transfer-Encoding: chunked`, `Content-Length` or connection close,
//! keep-alive with a LIFO pool of idle connections, each checked for a close
//! by the server before reuse.

use std::io;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Largest response head accepted.
const MAX_HEAD: usize = 64 << 10;
/// Longest chunk-size or trailer line accepted.
const MAX_LINE: usize = 4 << 10;
/// First read buffer of a connection; doubled (up to `MAX_BUF`) when a read fills it.
const INITIAL_BUF: usize = 16 << 10;
const MAX_BUF: usize = 256 << 10;
/// Below this much free space, the buffer is compacted before reading.
const MIN_READ: usize = 4 << 10;
/// Idle connections kept beyond this are closed.
const MAX_IDLE: usize = 4096;
const MAX_HEADERS: usize = 64;

/// Where to connect, and the connections waiting for their next request.
pub(super) struct Pool {
    host: String,
    port: u16,
    connect_timeout: Duration,
    idle: Mutex<Vec<Conn>>,
}

/// Why a request could not be sent or its response head not read.
pub(super) enum SendError {
    /// TCP connect failed or timed out (the message says which).
    Connect(String),
    /// A pooled connection turned out to be closed by the server before it
    /// answered: the client's stale socket, worth one retry on a fresh one.
    Stale,
    Other(String),
}

impl Pool {
    pub(super) fn new(host: String, port: u16, connect_timeout: Duration) -> Pool {
        Pool {
            host,
            port,
            connect_timeout,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Send `request` (head and body, already framed) and read the response
    /// head. `fresh` skips the pool.
    pub(super) async fn send(&self, request: &[u8], fresh: bool) -> Result<Response, SendError> {
        let pooled = if fresh { None } else { self.checkout() };
        let reused = pooled.is_some();
        let mut conn = match pooled {
            Some(c) => c,
            None => self.connect().await?,
        };
        if let Err(e) = conn.sock.write_all(request).await {
            return Err(if reused {
                SendError::Stale
            } else {
                SendError::Other(format!("sending request: {e}"))
            });
        }
        match conn.read_head().await {
            Ok(head) => Ok(Response::new(conn, head)),
            Err(HeadError::ClosedEarly(_)) if reused => Err(SendError::Stale),
            Err(HeadError::ClosedEarly(msg)) | Err(HeadError::Other(msg)) => {
                Err(SendError::Other(msg))
            }
        }
    }

    /// Put a connection whose response was read to its end back for reuse.
    pub(super) fn put(&self, resp: Response) {
        if !(resp.keep_alive && resp.framing == Framing::Done) {
            return;
        }
        let mut conn = resp.conn;
        if conn.lo != conn.hi {
            // Bytes beyond the response: the connection is out of step.
            return;
        }
        conn.lo = 0;
        conn.hi = 0;
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }

    #[cfg(test)]
    pub(super) fn idle_len(&self) -> usize {
        self.idle.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// The most recently used idle connection the server has not closed.
    fn checkout(&self) -> Option<Conn> {
        loop {
            let conn = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop()?;
            if conn.looks_alive() {
                return Some(conn);
            }
        }
    }

    async fn connect(&self) -> Result<Conn, SendError> {
        let connect = TcpStream::connect((self.host.as_str(), self.port));
        let sock = match tokio::time::timeout(self.connect_timeout, connect).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(SendError::Connect(format!("connect error: {e}"))),
            Err(_) => {
                return Err(SendError::Connect(format!(
                    "connect timeout after {:?}",
                    self.connect_timeout
                )));
            }
        };
        // Small requests and SSE reads: Nagle would only add latency.
        let _ = sock.set_nodelay(true);
        Ok(Conn {
            sock,
            buf: vec![0; INITIAL_BUF],
            lo: 0,
            hi: 0,
            read_at: Instant::now(),
        })
    }
}

/// One TCP connection and its read buffer (`buf[lo..hi]` not yet consumed).
struct Conn {
    sock: TcpStream,
    buf: Vec<u8>,
    lo: usize,
    hi: usize,
    /// When the last read returned: the arrival time of the newest buffered bytes.
    read_at: Instant,
}

enum HeadError {
    /// The connection ended before a complete response head.
    ClosedEarly(String),
    Other(String),
}

/// What the response head says, copied out of the buffer.
struct Head {
    status: u16,
    content_type: Option<Vec<u8>>,
    framing: Framing,
    keep_alive: bool,
}

impl Conn {
    /// False when the server has closed its side (or sent something unasked).
    #[cfg(unix)]
    fn looks_alive(&self) -> bool {
        use std::os::fd::AsRawFd;
        let mut b = [0u8; 1];
        // SAFETY: a 1-byte peek into a live local buffer on a descriptor this
        // connection owns; MSG_DONTWAIT keeps it from blocking.
        let n = unsafe {
            libc::recv(
                self.sock.as_raw_fd(),
                b.as_mut_ptr().cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock
    }

    #[cfg(not(unix))]
    fn looks_alive(&self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.sock.try_read(&mut b), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    /// Read more bytes into the buffer; Ok(0) at end of stream.
    async fn fill(&mut self) -> io::Result<usize> {
        if self.lo == self.hi {
            self.lo = 0;
            self.hi = 0;
        } else if self.buf.len() - self.hi < MIN_READ {
            if self.lo > 0 {
                self.buf.copy_within(self.lo..self.hi, 0);
                self.hi -= self.lo;
                self.lo = 0;
            }
            if self.buf.len() - self.hi < MIN_READ && self.buf.len() < MAX_BUF {
                self.buf.resize(self.buf.len() * 2, 0);
            }
        }
        let free = self.buf.len() - self.hi;
        let n = self.sock.read(&mut self.buf[self.hi..]).await?;
        // Stamped as soon as the read returns: the arrival time of what it brought.
        self.read_at = Instant::now();
        self.hi += n;
        // A read that filled all free space suggests the reads should be larger.
        if n == free && self.buf.len() < MAX_BUF {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        Ok(n)
    }

    async fn read_head(&mut self) -> Result<Head, HeadError> {
        let mut got_any = false;
        loop {
            if self.lo < self.hi {
                got_any = true;
                if let Some(head) = self.parse_head()? {
                    // Informational answers (100 Continue, 103 Early Hints) precede the real one.
                    if (100..200).contains(&head.status) && head.status != 101 {
                        continue;
                    }
                    return Ok(head);
                }
                if self.hi - self.lo >= MAX_HEAD {
                    return Err(HeadError::Other("response head too large".into()));
                }
            }
            match self.fill().await {
                Ok(0) if got_any => {
                    return Err(HeadError::Other(
                        "connection closed in the middle of the response head".into(),
                    ));
                }
                Ok(0) => {
                    return Err(HeadError::ClosedEarly(
                        "connection closed before message completed".into(),
                    ));
                }
                Ok(_) => {}
                Err(e) if !got_any => {
                    return Err(HeadError::ClosedEarly(format!(
                        "reading response head: {e}"
                    )));
                }
                Err(e) => return Err(HeadError::Other(format!("reading response head: {e}"))),
            }
        }
    }

    /// Parse a complete head at `buf[lo..]`, consuming it; None when incomplete.
    fn parse_head(&mut self) -> Result<Option<Head>, HeadError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let n = match resp.parse(&self.buf[self.lo..self.hi]) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => return Err(HeadError::Other(format!("invalid response head: {e}"))),
        };
        let status = resp.code.unwrap_or(0);
        let http11 = resp.version == Some(1);
        let mut content_type = None;
        let mut length: Option<u64> = None;
        let mut chunked = false;
        let mut encoded = false;
        let mut close = !http11;
        for h in resp.headers.iter() {
            let name = h.name;
            if name.eq_ignore_ascii_case("content-type") {
                content_type = Some(h.value.to_vec());
            } else if name.eq_ignore_ascii_case("content-length") {
                let v = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok());
                match (v, length) {
                    (Some(v), None) => length = Some(v),
                    (Some(v), Some(prev)) if v == prev => {}
                    _ => return Err(HeadError::Other("invalid content-length".into())),
                }
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                encoded = true;
                // Only the last coding decides: chunked must come last to frame the body.
                chunked = h
                    .value
                    .rsplit(|&b| b == b',')
                    .next()
                    .is_some_and(|c| c.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            } else if name.eq_ignore_ascii_case("connection") {
                for token in h.value.split(|&b| b == b',') {
                    let t = token.trim_ascii();
                    if t.eq_ignore_ascii_case(b"close") {
                        close = true;
                    } else if t.eq_ignore_ascii_case(b"keep-alive") && !http11 {
                        close = false;
                    }
                }
            }
        }
        self.lo += n;
        // RFC 9112 §6.3: no body for 1xx, 204 and 304; then chunked, length, close.
        let framing = if (100..200).contains(&status) || status == 204 || status == 304 {
            Framing::Done
        } else if chunked {
            Framing::Chunked(Chunk::Size)
        } else if encoded {
            Framing::Close
        } else if let Some(len) = length {
            if len == 0 {
                Framing::Done
            } else {
                Framing::Length(len)
            }
        } else {
            Framing::Close
        };
        // A body that ends at close, or a length overridden by an encoding, ends the connection.
        let keep_alive = !close && framing != Framing::Close && !(encoded && length.is_some());
        Ok(Some(Head {
            status,
            content_type,
            framing,
            keep_alive,
        }))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Length(u64),
    Chunked(Chunk),
    /// Until the server closes the connection.
    Close,
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    Size,
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    Trailer,
}

/// A response whose head has been read; the body is read with [`Response::next`].
pub(super) struct Response {
    conn: Conn,
    pub(super) status: u16,
    pub(super) content_type: Option<Vec<u8>>,
    framing: Framing,
    keep_alive: bool,
    /// `buf[a..b]`: the current piece of body.
    piece: (usize, usize),
}

/// What one step of decoding found in the buffer.
enum Step {
    /// Body bytes at `buf[a..b]`.
    Data(usize, usize),
    /// Framing consumed; look again.
    Again,
    /// More bytes are needed.
    NeedMore,
}

impl Response {
    fn new(conn: Conn, head: Head) -> Response {
        Response {
            conn,
            status: head.status,
            content_type: head.content_type,
            framing: head.framing,
            keep_alive: head.keep_alive,
            piece: (0, 0),
        }
    }

    /// Move to the next piece of the body and return when it was read; Ok(None) at the end.
    pub(super) async fn advance(&mut self) -> Result<Option<Instant>, String> {
        self.piece = (0, 0);
        loop {
            match self.step()? {
                Step::Data(a, b) => {
                    self.piece = (a, b);
                    return Ok(Some(self.conn.read_at));
                }
                Step::Again => continue,
                Step::NeedMore => {}
            }
            if self.framing == Framing::Done {
                return Ok(None);
            }
            let n = self
                .conn
                .fill()
                .await
                .map_err(|e| format!("reading response body: {e}"))?;
            if n == 0 {
                if self.framing == Framing::Close {
                    self.framing = Framing::Done;
                    return Ok(None);
                }
                self.keep_alive = false;
                return Err(
                    "reading response body: connection closed before the end of the body".into(),
                );
            }
        }
    }

    /// The piece of body the last `advance` moved to.
    pub(super) fn piece(&self) -> &[u8] {
        &self.conn.buf[self.piece.0..self.piece.1]
    }

    /// Decode framing from what is buffered, without I/O.
    fn step(&mut self) -> Result<Step, String> {
        let c = &mut self.conn;
        let avail = c.hi - c.lo;
        match self.framing {
            Framing::Done => Ok(Step::NeedMore),
            Framing::Close => {
                if avail == 0 {
                    return Ok(Step::NeedMore);
                }
                let a = c.lo;
                c.lo = c.hi;
                Ok(Step::Data(a, c.hi))
            }
            Framing::Length(rem) => {
                if avail == 0 {
                    return Ok(Step::NeedMore);
                }
                let n = avail.min(usize::try_from(rem).unwrap_or(usize::MAX));
                let a = c.lo;
                c.lo += n;
                let rem = rem - n as u64;
                self.framing = if rem == 0 {
                    Framing::Done
                } else {
                    Framing::Length(rem)
                };
                Ok(Step::Data(a, a + n))
            }
            Framing::Chunked(Chunk::Data(rem)) => {
                if avail == 0 {
                    return Ok(Step::NeedMore);
                }
                let n = avail.min(usize::try_from(rem).unwrap_or(usize::MAX));
                let a = c.lo;
                c.lo += n;
                let rem = rem - n as u64;
                self.framing = Framing::Chunked(if rem == 0 {
                    Chunk::DataEnd
                } else {
                    Chunk::Data(rem)
                });
                Ok(Step::Data(a, a + n))
            }
            Framing::Chunked(Chunk::DataEnd) => {
                let s = &c.buf[c.lo..c.hi];
                let skip = match s {
                    [b'\r', b'\n', ..] => 2,
                    [b'\n', ..] => 1,
                    [] | [b'\r'] => return Ok(Step::NeedMore),
                    _ => return Err(bad_chunk("no CRLF after chunk data")),
                };
                c.lo += skip;
                self.framing = Framing::Chunked(Chunk::Size);
                Ok(Step::Again)
            }
            Framing::Chunked(state @ (Chunk::Size | Chunk::Trailer)) => {
                let s = &c.buf[c.lo..c.hi];
                let Some(nl) = s.iter().position(|&b| b == b'\n') else {
                    if s.len() > MAX_LINE {
                        return Err(bad_chunk("line too long"));
                    }
                    return Ok(Step::NeedMore);
                };
                let line = s[..nl].strip_suffix(b"\r").unwrap_or(&s[..nl]);
                let next = if state == Chunk::Trailer {
                    if line.is_empty() {
                        Framing::Done
                    } else {
                        Framing::Chunked(Chunk::Trailer)
                    }
                } else {
                    match chunk_size(line)? {
                        0 => Framing::Chunked(Chunk::Trailer),
                        n => Framing::Chunked(Chunk::Data(n)),
                    }
                };
                c.lo += nl + 1;
                self.framing = next;
                Ok(Step::Again)
            }
        }
    }
}

fn bad_chunk(what: &str) -> String {
    format!("reading response body: invalid chunked encoding ({what})")
}

/// The hex size at the start of a chunk-size line; extensions after `;` are ignored.
fn chunk_size(line: &[u8]) -> Result<u64, String> {
    let digits = line
        .iter()
        .position(|b| !b.is_ascii_hexdigit())
        .unwrap_or(line.len());
    let rest = line[digits..].trim_ascii_start();
    if digits == 0 || !(rest.is_empty() || rest[0] == b';') {
        return Err(bad_chunk("bad chunk size"));
    }
    line[..digits].iter().try_fold(0u64, |acc, &d| {
        let v = (d as char).to_digit(16).unwrap_or(0) as u64;
        acc.checked_mul(16)
            .and_then(|x| x.checked_add(v))
            .ok_or_else(|| bad_chunk("chunk size overflows"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes() {
        assert_eq!(chunk_size(b"1a").ok(), Some(26));
        assert_eq!(chunk_size(b"0").ok(), Some(0));
        assert_eq!(chunk_size(b"FF;name=value").ok(), Some(255));
        assert_eq!(chunk_size(b"10 ; ext").ok(), Some(16));
        assert!(chunk_size(b"").is_err());
        assert!(chunk_size(b"x1").is_err());
        assert!(chunk_size(b"1x").is_err());
        assert!(chunk_size(b"fffffffffffffffff").is_err());
    }

    /// Serve `raw` bytes once on a fresh loopback socket, then close.
    async fn serve(raw: Vec<u8>) -> u16 {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = l.local_addr().expect("addr").port();
        tokio::spawn(async move {
            if let Ok((mut s, _)) = l.accept().await {
                let mut req = [0u8; 4096];
                let _ = s.read(&mut req).await;
                // Dribble the answer a few bytes at a time, so every parser state sees a split.
                for piece in raw.chunks(3) {
                    if s.write_all(piece).await.is_err() {
                        return;
                    }
                    let _ = s.flush().await;
                    tokio::time::sleep(Duration::from_micros(200)).await;
                }
            }
        });
        port
    }

    async fn body_of(raw: &str) -> (u16, Result<Vec<u8>, String>, bool) {
        let port = serve(raw.as_bytes().to_vec()).await;
        let pool = Pool::new("127.0.0.1".into(), port, Duration::from_secs(2));
        let mut resp = match pool.send(b"GET / HTTP/1.1\r\n\r\n", false).await {
            Ok(r) => r,
            Err(SendError::Other(m) | SendError::Connect(m)) => return (0, Err(m), false),
            Err(SendError::Stale) => return (0, Err("stale".into()), false),
        };
        let status = resp.status;
        let mut out = Vec::new();
        loop {
            match resp.advance().await {
                Ok(Some(_)) => out.extend_from_slice(resp.piece()),
                Ok(None) => break,
                Err(e) => return (status, Err(e), false),
            }
        }
        let reusable = resp.keep_alive && resp.framing == Framing::Done;
        (status, Ok(out), reusable)
    }

    #[tokio::test]
    async fn chunked_length_and_close_framed_bodies() {
        let (s, b, reuse) = body_of(
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nTrailer: t\r\n\r\n",
        )
        .await;
        assert_eq!(
            (s, b.as_deref(), reuse),
            (200, Ok(&b"hello world"[..]), true)
        );
        let (s, b, reuse) = body_of("HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy").await;
        assert_eq!((s, b.as_deref(), reuse), (503, Ok(&b"busy"[..]), true));
        let (_, b, reuse) = body_of("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nto the end").await;
        assert_eq!((b.as_deref(), reuse), (Ok(&b"to the end"[..]), false));
        let (_, b, reuse) = body_of("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok").await;
        assert_eq!((b.as_deref(), reuse), (Ok(&b"ok"[..]), false));
    }

    #[tokio::test]
    async fn broken_bodies_are_errors() {
        let (_, b, _) =
            body_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel").await;
        assert!(b.is_err_and(|e| e.contains("before the end of the body")));
        let (_, b, _) =
            body_of("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n").await;
        assert!(b.is_err_and(|e| e.contains("invalid chunked encoding")));
        let (_, b, _) = body_of("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort").await;
        assert!(b.is_err_and(|e| e.contains("before the end of the body")));
        let (_, b, _) = body_of("HTTP/1.1 200 OK\r\nContent-Le").await;
        assert!(b.is_err_and(|e| e.contains("middle of the response head")));
        let (_, b, _) = body_of("").await;
        assert!(b.is_err_and(|e| e.contains("connection closed before message completed")));
    }
}
