//! One measured request: its body built from the cell's shape, streamed,
//! its completion tokens counted when the server gives none, and kept as a
//! record.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::config::suite::{CellEndpoint, CellSpec};
use crate::measure::client::{Client, Endpoint};
use crate::measure::record::{Outcome, RequestRecord};
use crate::measure::tokenizer::TokenizerFile;
use crate::measure::{discover, exact, source, workload};

/// One request of a cell: build its body, stream it, classify it.
/// Counts completion tokens client-side when a server sends no usage.
#[derive(Clone)]
pub(super) struct Estimator {
    pub(super) http: reqwest::Client,
    pub(super) base: String,
    pub(super) key: Option<String>,
    pub(super) tokenizer: Option<Arc<TokenizerFile>>,
}

impl Estimator {
    /// With the model's own tokenizer (the `tokenizer.json` given, else the
    /// server's `/tokenize`), after the stream ended — never in the per-chunk
    /// loop. The value is flagged as estimated.
    async fn fill(&self, cap: &mut crate::measure::record::StreamCapture) {
        if cap.completion_tokens.is_some() || cap.failure.is_some() {
            return;
        }
        let text = format!("{}{}", cap.reasoning, cap.content);
        if let Some(t) = &self.tokenizer {
            if let Ok(n) = t.count(&text) {
                cap.completion_tokens = Some(n);
                cap.completion_tokens_estimated = true;
            }
            return;
        }
        if let Ok(Some(n)) =
            discover::tokenize_with_key(&self.http, &self.base, self.key.as_deref(), &text).await
        {
            cap.completion_tokens = Some(n as u64);
            cap.completion_tokens_estimated = true;
        }
    }
}

/// What every request of a cell shares.
#[derive(Clone)]
pub(super) struct RequestShape {
    pub(super) cell: CellSpec,
    pub(super) model: String,
    /// Plain cells: the filler, and each request's cut of it (none: the sized body).
    pub(super) bodies: Arc<exact::Bodies>,
    pub(super) fits: Option<Arc<exact::Fits>>,
    pub(super) template_prompt_tokens: Option<u64>,
    pub(super) dialect: workload::LengthDialect,
    /// Workload cells: what each request sends.
    pub(super) source: Option<Arc<source::Source>>,
}

pub(super) fn request_job(
    estimator: Estimator,
    client: Arc<Client>,
    shape: RequestShape,
    nonce: String,
    run_t0: Instant,
) -> impl Fn(
    usize,
    Instant,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = RequestRecord> + Send>>
+ Send
+ Sync
+ 'static {
    move |index, scheduled| {
        let (estimator, client, shape, nonce) = (
            estimator.clone(),
            client.clone(),
            shape.clone(),
            nonce.clone(),
        );
        Box::pin(async move {
            let RequestShape {
                cell,
                model,
                bodies,
                fits,
                template_prompt_tokens,
                dialect,
                source,
            } = shape;
            let (req, target, template, turn) = match &source {
                Some(src) => {
                    let p = src.plan(index);
                    let req =
                        workload::messages_body(&cell, &model, p.messages, p.max_tokens, dialect);
                    let template = template_prompt_tokens.filter(|_| p.unique);
                    (req, p.target_prompt_tokens, template, p.turn)
                }
                None => {
                    let pre = workload::prefix(cell.cache, &nonce, &cell.name, index);
                    let fit = fits.as_ref().and_then(|f| f.get(index));
                    let body = bodies.body(fit.unwrap_or(bodies.base));
                    let content = workload::user_content(&pre, &body);
                    let req = workload::request_body(&cell, &model, content, dialect);
                    (req, Some(cell.prompt_tokens), template_prompt_tokens, None)
                }
            };
            let (sent, mut capture) = client
                .stream_sized(endpoint(cell.endpoint), &req, target)
                .await;
            let sent = Instant::from_std(sent);
            estimator.fill(&mut capture).await;
            if let Some(src) = &source {
                src.record_answer(index, &capture);
            }
            let (outcome, detail) = match &capture.failure {
                Some(f) => (f.class, Some(f.message.clone())),
                None => (Outcome::Ok, None),
            };
            RequestRecord {
                cell: cell.name.clone(),
                index,
                send_offset_ms: ms(sent - run_t0),
                queue_ms: ms(sent.saturating_duration_since(scheduled)),
                target_prompt_tokens: target,
                template_prompt_tokens: template,
                turn,
                capture,
                outcome,
                detail,
                capacity: None,
            }
        })
    }
}

/// The client's endpoint for a cell's (config does not know the client).
fn endpoint(e: CellEndpoint) -> Endpoint {
    match e {
        CellEndpoint::Chat => Endpoint::Chat,
        CellEndpoint::Completions => Endpoint::Completions,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
