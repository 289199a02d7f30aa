//! Streaming one answer on its schedule: every frame built once per request,
//! each content chunk no earlier than it is due (timed by the connection's
//! timer), and the faults a request's overrides ask for.

use std::io;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::clock::{STAMP_DIGITS, Timer, monotonic_ns};
use super::frames::{Framing, frame, json_string};
use super::reasoning::Reasoning;
use super::request::{Answer, Overrides};
use super::server::{Conn, WRITE_BUF, find};
use super::{FastSourceConfig, TOOL_ARGUMENTS};

/// Every frame of a streamed answer, built once per request; per chunk the
/// source only copies bytes.
struct Frames {
    role: Vec<u8>,
    content: Vec<u8>,
    /// Where the stamp digits sit inside the content frame.
    stamp_at: Option<usize>,
    /// The first chunks carry reasoning instead, when the request asks.
    reasoning: Reasoning,
    fin: Vec<u8>,
    prefix: String,
    usage_json: String,
}

impl Frames {
    fn of(cfg: &FastSourceConfig, a: &Answer, o: &Overrides) -> Frames {
        let stamp = o.stamp.unwrap_or(false);
        // A stamped chunk carries a placeholder that is overwritten as it is sent.
        let token_json = if stamp {
            format!("\"{}\"", "0".repeat(STAMP_DIGITS))
        } else {
            json_string(&cfg.token)
        };
        let f = Framing::of(cfg, a);
        let content = match &a.call {
            Some(name) => f.delta(
                "tool_calls",
                &serde_json::json!([{"index": 0, "id": format!("call_{}", a.seq), "type": "function",
                    "function": {"name": name, "arguments": TOOL_ARGUMENTS}}])
                .to_string(),
            ),
            None => f.delta("content", &token_json),
        };
        let stamp_at = stamp
            .then(|| find(&content, token_json.as_bytes()).map(|p| p + 1))
            .flatten();
        let fin_payload = if a.chat { "{}" } else { "\"\"" };
        Frames {
            role: f.frame("{\"role\":\"assistant\",\"content\":null}", "null"),
            fin: f.frame(fin_payload, &format!("\"{}\"", a.finish)),
            content,
            stamp_at,
            reasoning: Reasoning::of(cfg, a, o, &f),
            usage_json: format!(
                "{{\"prompt_tokens\":{},\"completion_tokens\":{},\"total_tokens\":{}}}",
                a.prompt_tokens,
                a.tokens,
                a.prompt_tokens + a.tokens
            ),
            prefix: f.prefix,
        }
    }

    /// Chunk `i`'s frame, and where its stamp goes.
    fn chunk(&self, i: usize) -> (&[u8], Option<usize>) {
        match self.reasoning.frame(i) {
            Some(f) => (f, None),
            None => (&self.content, self.stamp_at),
        }
    }

    /// The finish, usage and `[DONE]` frames the overrides leave in.
    fn push_tail(&self, out: &mut Vec<u8>, o: &Overrides, cfg: &FastSourceConfig) {
        if !o.no_finish.unwrap_or(false) {
            out.extend_from_slice(&self.fin);
        }
        if o.usage.unwrap_or(cfg.usage) {
            out.extend_from_slice(&frame(&format!(
                "{}[],\"usage\":{}}}",
                self.prefix, self.usage_json
            )));
        }
        if o.done.unwrap_or(cfg.done) {
            out.extend_from_slice(&frame("[DONE]"));
        }
    }
}

impl Conn {
    /// Stream `answer` on its schedule, with the faults `o` asks for.
    pub(super) async fn stream(
        &mut self,
        answer: &Answer,
        o: &Overrides,
        t0: Instant,
    ) -> io::Result<bool> {
        let ms = |v: Option<f64>, d: Duration| {
            v.filter(|x| x.is_finite() && *x >= 0.0)
                .map_or(d, |x| Duration::from_secs_f64(x / 1000.0))
        };
        let ttft = ms(o.ttft_ms, self.cfg.ttft);
        let itl = ms(o.itl_ms, self.cfg.itl);
        let frames = Frames::of(&self.cfg, answer, o);
        let n = answer.tokens;
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        out.extend_from_slice(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        if o.role_chunk.unwrap_or(self.cfg.role_chunk) && answer.chat {
            out.extend_from_slice(&frames.role);
        }
        let stall = o.stall_after.map(|k| k.min(n));
        let error_at = o.error_after.map(|k| k.min(n));
        let sent = stall.or(error_at).unwrap_or(n);
        let r = self
            .send_chunks(&mut out, &frames, sent, t0, ttft, itl)
            .await;
        if let Err(e) = r {
            self.out = out;
            return Err(e);
        }
        if stall.is_some() {
            self.sock.write_all(&out).await?;
            self.out = out;
            // Silent until the client gives up; then the connection is done.
            let mut scratch = [0u8; 1024];
            while self.sock.read(&mut scratch).await? != 0 {}
            return Ok(false);
        }
        if error_at.is_some() {
            out.extend_from_slice(&frame(
                "{\"error\":{\"message\":\"fastsource: injected error\",\"type\":\"server_error\",\"code\":500}}",
            ));
        } else {
            frames.push_tail(&mut out, o, &self.cfg);
        }
        out.extend_from_slice(b"0\r\n\r\n");
        let r = self.sock.write_all(&out).await;
        self.out = out;
        r?;
        Ok(true)
    }

    /// Append `count` copies of `content`, each no earlier than its scheduled
    /// time, writing whenever the next chunk is not due yet (or the buffer is big).
    /// With `stamp_at`, the digits there are set to the time of appending.
    #[allow(clippy::too_many_arguments)]
    async fn send_chunks(
        &mut self,
        out: &mut Vec<u8>,
        frames: &Frames,
        count: usize,
        t0: Instant,
        ttft: Duration,
        itl: Duration,
    ) -> io::Result<()> {
        let paced = !(ttft.is_zero() && itl.is_zero());
        let first = t0 + ttft;
        for i in 0..count {
            if paced {
                let due = first + itl * u32::try_from(i).unwrap_or(u32::MAX);
                if due > Instant::now() {
                    if !out.is_empty() {
                        self.sock.write_all(out).await?;
                        out.clear();
                    }
                    self.sleep_until(due).await?;
                }
            }
            let at = out.len();
            let (chunk, stamp_at) = frames.chunk(i);
            out.extend_from_slice(chunk);
            if let Some(p) = stamp_at {
                let digits = format!("{:0width$}", monotonic_ns(), width = STAMP_DIGITS);
                out[at + p..at + p + STAMP_DIGITS].copy_from_slice(digits.as_bytes());
            }
            // The last chunk goes out with the tail (finish, usage, [DONE]).
            if out.len() >= WRITE_BUF && i + 1 < count {
                self.sock.write_all(out).await?;
                out.clear();
            }
        }
        Ok(())
    }

    async fn sleep_until(&mut self, due: Instant) -> io::Result<()> {
        if self.timer.is_none() {
            self.timer = Some(Timer::new()?);
        }
        match &mut self.timer {
            Some(t) => t.sleep_until(due).await,
            None => Ok(()),
        }
    }
}
