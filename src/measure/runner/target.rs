//! The server a run measures, as discovered: its address, key, model and
//! tokenizer, and the measuring session and provenance built from them.

use std::sync::Arc;

use anyhow::{Context, Result};
use tokio::time::Instant;

use super::identity::side_nonce;
use super::request::Estimator;
use super::session::Session;
use super::{JOURNAL_FILE, RunOptions};
use crate::artifact::Provenance;
use crate::config::suite::Suite;
use crate::measure::client::{Client, ClientConfig};
use crate::measure::discover;
use crate::measure::journal;
use crate::measure::scrape::{SCRAPE_LOG_FILE, Scraper};
use crate::measure::tokenizer::TokenizerFile;
use crate::measure::workload::{self, PromptSizer};
use crate::util::{api_key, hostname, now_rfc3339, redact_url, sha256_hex};

/// The server as discovered, and what every request to it needs.
pub struct Target {
    pub(super) base: String,
    pub(super) key: Option<String>,
    pub(super) http: reqwest::Client,
    pub(super) info: discover::ServerInfo,
    pub(super) tokenizer: Option<Arc<TokenizerFile>>,
    /// What its `/tokenize` has counted, for every run against it.
    pub(super) counted: workload::TokenMemo,
}

impl Target {
    /// Load the tokenizer file (an input error, found before anything is
    /// sent), then discover the server.
    pub(super) async fn reach(opts: &RunOptions, suite: &Suite) -> Result<Target> {
        let key = api_key(opts.api_key_env.as_deref())?;
        let tokenizer = match (&opts.tokenizer, &suite.tokenizer) {
            (Some(p), _) => Some(Arc::new(TokenizerFile::load(p).context("--tokenizer")?)),
            (None, Some(p)) => Some(Arc::new(
                TokenizerFile::load(p).context("the suite's field `tokenizer`")?,
            )),
            (None, None) => None,
        };
        let base = opts.target.trim_end_matches('/').to_string();
        // Sizing and token counts wait what the run's timeouts allow, not a fixed time.
        let http = crate::measure::http_client()
            .connect_timeout(opts.timeouts.connect)
            .timeout(opts.timeouts.unstreamed())
            .build()
            .context("building HTTP client")?;
        let info = discover::discover(
            &http,
            &base,
            key.as_deref(),
            discover::discovery_wait(&opts.timeouts),
        )
        .await
        .with_context(|| format!("discovering the server at {}", redact_url(&base)))?;
        Ok(Target {
            base,
            key,
            http,
            info,
            tokenizer,
            counted: workload::TokenMemo::default(),
        })
    }

    /// The measuring session (client, estimator, scraper, clock) and the
    /// prompt sizer, both talking to this target.
    pub(super) fn session(&self, opts: &RunOptions) -> Result<(Session, PromptSizer)> {
        let client = Arc::new(Client::new(ClientConfig {
            base_url: self.base.clone(),
            api_key: self.key.clone(),
            timeouts: opts.timeouts.clone(),
            capture_cap_bytes: 256 * 1024,
        })?);
        let mut sizer = PromptSizer::new(
            self.http.clone(),
            &self.base,
            self.key.clone(),
            &self.info.model_id,
            self.info.has_tokenize,
            opts.timeouts.clone(),
        );
        if let Some(t) = &self.tokenizer {
            sizer = sizer.with_file(t.clone());
        }
        sizer = sizer.with_memo(self.counted.clone());
        let t0 = Instant::now();
        let scraper = Scraper::new(
            &opts.scrape,
            &self.base,
            self.key.clone(),
            &opts.out_dir.join(SCRAPE_LOG_FILE),
            t0,
        )?;
        let session = Session {
            client,
            estimator: Estimator {
                http: self.http.clone(),
                base: self.base.clone(),
                key: self.key.clone(),
                tokenizer: self.tokenizer.clone(),
            },
            model: self.info.model_id.clone(),
            nonce: side_nonce(opts)?,
            t0,
            scraper,
            dialect: workload::LengthDialect::of_server(self.info.llama_cpp),
        };
        Ok((session, sizer))
    }

    pub(super) fn provenance(
        &self,
        opts: &RunOptions,
        suite: &Suite,
        suite_text: &str,
        started_at: String,
    ) -> Result<Provenance> {
        Ok(Provenance {
            target: redact_url(&self.base),
            model: self.info.model_id.clone(),
            runtime: opts.runtime_label.clone(),
            image: opts.image.clone(),
            server_build: self.info.build.clone(),
            context_window: self.info.context_window,
            api_key_env: opts.api_key_env.clone(),
            suite: suite.name.clone(),
            suite_sha256: Some(sha256_hex(suite_text.as_bytes())),
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            host: hostname(),
            started_at,
            ended_at: now_rfc3339(),
            journal: Some(journal::digest(&opts.out_dir.join(JOURNAL_FILE))?),
        })
    }
}
