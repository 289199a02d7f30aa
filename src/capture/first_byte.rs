//! The proxy's own time to first byte: from an answer's head arriving from
//! the upstream to the answer's first write to the client's socket. A
//! connection's answers go out one after another (HTTP/1.1), so the first
//! write after an answer's head arrived is that answer's.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

const NOT_YET: u64 = u64::MAX;

/// One answer's timer, started when its head arrived from the upstream.
#[derive(Debug)]
pub struct FirstByte {
    armed: Instant,
    us: AtomicU64,
}

impl FirstByte {
    /// µs from the head's arrival to the first write; `None` until written.
    pub fn us(&self) -> Option<u64> {
        let v = self.us.load(Ordering::Acquire);
        (v != NOT_YET).then_some(v)
    }
}

/// A client connection's timer for the answer it is about to write.
#[derive(Debug, Default)]
pub struct Conn {
    armed: AtomicBool,
    slot: Mutex<Option<Arc<FirstByte>>>,
}

impl Conn {
    /// An answer's head has arrived: time it to its first write here.
    pub fn arm(&self) -> Arc<FirstByte> {
        let fb = Arc::new(FirstByte {
            armed: Instant::now(),
            us: AtomicU64::new(NOT_YET),
        });
        *self.slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(fb.clone());
        self.armed.store(true, Ordering::Release);
        fb
    }

    fn wrote(&self) {
        // One atomic load per write when nothing is armed.
        if self.armed.swap(false, Ordering::AcqRel)
            && let Some(fb) = self.slot.lock().unwrap_or_else(|e| e.into_inner()).take()
        {
            let us = fb.armed.elapsed().as_micros().min(u128::from(NOT_YET - 1)) as u64;
            fb.us.store(us, Ordering::Release);
        }
    }
}

/// A client connection's socket, its writes timed for [`Conn`].
pub struct Timed<IO> {
    inner: IO,
    conn: Arc<Conn>,
}

impl<IO> Timed<IO> {
    pub fn new(inner: IO, conn: Arc<Conn>) -> Timed<IO> {
        Timed { inner, conn }
    }
}

impl<IO: hyper::rt::Read + Unpin> hyper::rt::Read for Timed<IO> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<IO: hyper::rt::Write + Unpin> hyper::rt::Write for Timed<IO> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let p = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(p, Poll::Ready(Ok(n)) if n > 0) {
            self.conn.wrote();
        }
        p
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let p = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(p, Poll::Ready(Ok(n)) if n > 0) {
            self.conn.wrote();
        }
        p
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_write_after_arming_is_timed() {
        let c = Conn::default();
        c.wrote();
        let fb = c.arm();
        assert_eq!(fb.us(), None);
        std::thread::sleep(std::time::Duration::from_millis(2));
        c.wrote();
        let first = fb.us().unwrap();
        assert!(first >= 2000, "{first}");
        std::thread::sleep(std::time::Duration::from_millis(2));
        c.wrote();
        assert_eq!(fb.us(), Some(first));
    }
}
