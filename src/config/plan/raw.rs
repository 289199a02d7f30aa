//! The plan file's TOML shape, as serde reads it (spans kept, so an error
//! names the line); `Plan::parse` checks it section by section.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPlan {
    pub(super) name: Option<String>,
    pub(super) suite: Spanned<String>,
    // Not `Spanned`: toml 0.8 cannot deserialize a spanned value holding a
    // sub-table (`[policy.gate]`), and a policy has sections.
    #[serde(default)]
    pub(super) policy: Option<toml::Value>,
    #[serde(default)]
    pub(super) repeats: Option<Spanned<i64>>,
    #[serde(default)]
    pub(super) schedule: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) window: Option<RawWindow>,
    #[serde(default)]
    pub(super) adaptive: Option<Spanned<RawAdaptive>>,
    #[serde(default)]
    pub(super) skip_turnover: bool,
    pub(super) baseline: Spanned<RawRuntime>,
    pub(super) candidate: Spanned<RawRuntime>,
    #[serde(default)]
    pub(super) readmission: Option<RawReadmission>,
    pub(super) hooks: Option<RawHooks>,
    #[serde(default)]
    pub(super) decision: Option<RawDecision>,
    #[serde(default)]
    pub(super) after: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) docker: Option<RawDocker>,
    #[serde(default)]
    pub(super) timeouts: Option<RawTimeouts>,
    #[serde(default)]
    pub(super) ledger: Option<Spanned<String>>,
}

/// `window = 4` or `[window]` with a size per cell name. Read by hand:
/// serde's untagged enums buffer the value and lose the spans.
pub(super) enum RawWindow {
    All(i64),
    ByCell(BTreeMap<String, Spanned<i64>>),
}

impl<'de> Deserialize<'de> for RawWindow {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawWindow;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("requests per block (an integer) or a table of them by cell name")
            }
            fn visit_i64<E>(self, v: i64) -> Result<RawWindow, E> {
                Ok(RawWindow::All(v))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RawWindow, A::Error> {
                let mut out = BTreeMap::new();
                while let Some(cell) = map.next_key::<String>()? {
                    let w = map.next_value::<Spanned<i64>>()?;
                    out.insert(cell, w);
                }
                Ok(RawWindow::ByCell(out))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAdaptive {
    #[serde(default)]
    pub(super) enabled: bool,
    pub(super) max_requests: Option<Spanned<i64>>,
    pub(super) max_minutes: Option<Spanned<f64>>,
    pub(super) looks_by: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTimeouts {
    pub(super) connect_s: Option<Spanned<f64>>,
    pub(super) first_byte_s: Option<Spanned<f64>>,
    pub(super) idle_s: Option<Spanned<f64>>,
    pub(super) total_s: Option<Spanned<f64>>,
    pub(super) per_1k_prompt_tokens_s: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRuntime {
    pub(super) driver: Spanned<String>,
    // external
    pub(super) url: Option<String>,
    // process
    pub(super) engine_profile: Option<String>,
    pub(super) engine_profiles: Option<String>,
    pub(super) command: Option<String>,
    #[serde(default)]
    pub(super) args: Option<Vec<String>>,
    #[serde(default)]
    pub(super) env: Option<BTreeMap<String, String>>,
    pub(super) cwd: Option<String>,
    pub(super) base_url: Option<String>,
    pub(super) health_url: Option<String>,
    pub(super) sha256: Option<String>,
    // container
    pub(super) image: Option<Spanned<String>>,
    pub(super) entrypoint: Option<Vec<String>>,
    pub(super) env_from_host: Option<Vec<String>>,
    pub(super) binds: Option<Vec<String>>,
    pub(super) port: Option<Spanned<i64>>,
    pub(super) health_path: Option<String>,
    pub(super) gpus: Option<Spanned<toml::Value>>,
    pub(super) devices: Option<Vec<String>>,
    pub(super) shm_size: Option<Spanned<toml::Value>>,
    pub(super) ipc: Option<String>,
    pub(super) ulimits: Option<BTreeMap<String, toml::Value>>,
    pub(super) runtime: Option<String>,
    pub(super) user: Option<String>,
    // any
    pub(super) expected_model: Option<String>,
    pub(super) api_key_env: Option<String>,
    pub(super) ready_timeout_s: Option<Spanned<f64>>,
    pub(super) stop_grace_s: Option<Spanned<f64>>,
    pub(super) scrape_metrics: Option<bool>,
    pub(super) metrics_endpoints: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReadmission {
    pub(super) expected_model: Option<String>,
    #[serde(default = "yes")]
    pub(super) canary: bool,
    pub(super) timeout_s: Option<Spanned<f64>>,
    pub(super) hook: Option<Spanned<RawHook>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHooks {
    #[serde(default)]
    pub(super) on_verdict: Vec<Spanned<RawHook>>,
    #[serde(default)]
    pub(super) on_decision: Vec<Spanned<RawHook>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHook {
    pub(super) command: Option<Vec<String>>,
    pub(super) url: Option<String>,
    pub(super) bearer_env: Option<String>,
    pub(super) timeout_s: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDecision {
    pub(super) on_pass: Option<Spanned<String>>,
    pub(super) on_fail: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDocker {
    pub(super) socket: Option<String>,
    pub(super) registry: Option<String>,
    pub(super) auth_env: Option<String>,
    pub(super) pull: Option<Spanned<String>>,
}

fn yes() -> bool {
    true
}
