//! Answering one request: its route, the injected failures its overrides
//! ask for, the counting mode's prompt count, then a whole answer or a
//! stream.

use std::io;
use std::sync::PoisonError;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::RecordedPrompt;
use super::request::{Answer, ChatBody, RequestBody};
use super::server::{Conn, Head};
use crate::promptcount::PromptCounter;

/// Where a request goes.
enum Route {
    Chat,
    Completions,
    /// Answered already; whether the connection may be reused.
    Answered(bool),
}

impl Conn {
    /// Answer one request. Returns whether the connection may be reused.
    pub(super) async fn respond(
        &mut self,
        head: &Head,
        body: &[u8],
        t0: Instant,
    ) -> io::Result<bool> {
        let chat = match self.route(head).await? {
            Route::Answered(reuse) => return Ok(reuse),
            Route::Chat => true,
            Route::Completions => false,
        };
        let req: RequestBody = match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => {
                return self
                    .error_json(400, "invalid_request_error", format!("bad JSON: {e}"))
                    .await;
            }
        };
        let o = &req.fastsource;
        if let Some(status) = o.status.filter(|s| *s != 200) {
            let why = "fastsource: injected failure".to_string();
            return self.error_json(status, "server_error", why).await;
        }
        let cfg = self.cfg.clone();
        let (prompt_tokens, t0) = match (&cfg.counter, chat) {
            // Counting is the source's prefill: the schedule starts after it,
            // so a paced answer stays paced however long the prompt.
            (Some(counter), true) => match self.count(counter, body, req.stream).await {
                Ok(n) => (usize::try_from(n).unwrap_or(usize::MAX), Instant::now()),
                Err(e) => {
                    return self
                        .error_json(400, "invalid_request_error", format!("fastsource: {e:#}"))
                        .await;
                }
            },
            _ => (body.len() / 4, t0),
        };
        // Queueing mode: held until the answer is written; the schedule
        // starts once a slot is free.
        let queue = self.queue.clone();
        let (_slot, t0) = match &queue {
            None => (None, t0),
            Some(q) => {
                let slot = match q.slots.try_acquire() {
                    Ok(s) => s,
                    Err(_) => {
                        q.waited.fetch_add(1, Ordering::Relaxed);
                        q.slots.acquire().await.map_err(io::Error::other)?
                    }
                };
                (Some(slot), Instant::now())
            }
        };
        let seq = self.counter.fetch_add(1, Ordering::Relaxed);
        let answer = Answer::of(&self.cfg, &req, chat, seq, prompt_tokens);
        if !req.stream {
            let v = answer.whole(&self.cfg);
            self.simple(200, "application/json", v.to_string().as_bytes(), false)
                .await?;
            return Ok(true);
        }
        self.stream(&answer, o, t0).await
    }

    /// What a path answers: a chat or text completion, or (models, health,
    /// not found, a bad request) an answer already written.
    async fn route(&mut self, head: &Head) -> io::Result<Route> {
        match (head.method_post, head.path.as_str()) {
            (true, "/v1/chat/completions") => Ok(Route::Chat),
            (true, "/v1/completions") => Ok(Route::Completions),
            (false, "/v1/models") => {
                let m = serde_json::json!({
                    "object": "list",
                    "data": [{"id": self.cfg.model, "object": "model", "owned_by": "fastsource"}],
                });
                self.simple(200, "application/json", m.to_string().as_bytes(), false)
                    .await?;
                Ok(Route::Answered(true))
            }
            (false, "/health") => {
                self.simple(200, "application/json", b"{\"status\":\"ok\"}", false)
                    .await?;
                Ok(Route::Answered(true))
            }
            (_, "") => {
                self.simple(400, "text/plain", b"bad request", true).await?;
                Ok(Route::Answered(false))
            }
            _ => {
                let body = b"{\"error\":{\"message\":\"not found\"}}";
                self.simple(404, "application/json", body, false).await?;
                Ok(Route::Answered(true))
            }
        }
    }

    /// An error answer with a JSON body; the connection stays usable.
    async fn error_json(&mut self, status: u16, kind: &str, message: String) -> io::Result<bool> {
        let msg = serde_json::json!({"error": {"message": message, "type": kind, "code": status}});
        self.simple(
            status,
            "application/json",
            msg.to_string().as_bytes(),
            false,
        )
        .await?;
        Ok(true)
    }

    /// Counting mode: the prompt tokens of a chat body, counted on a
    /// blocking thread (a 120k-token prompt takes a while), recorded when
    /// asked.
    async fn count(
        &self,
        counter: &PromptCounter,
        body: &[u8],
        stream: bool,
    ) -> anyhow::Result<u64> {
        let chat: ChatBody = serde_json::from_slice(body).map_err(|e| {
            anyhow::anyhow!("counting mode reads messages with string content only: {e}")
        })?;
        let counter = counter.clone();
        let (n, messages) = tokio::task::spawn_blocking(move || {
            counter
                .count_chat(&chat.messages)
                .map(|n| (n, chat.messages))
        })
        .await??;
        if self.cfg.record_prompts {
            self.prompts
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(RecordedPrompt {
                    stream,
                    messages,
                    prompt_tokens: n,
                });
        }
        Ok(n)
    }
}
