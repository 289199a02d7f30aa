//! SGLang on the CPU serving the reference model, for tests of a third
//! engine family (`scripts/setup-sglang.sh`, `engine/sglang-serve.sh`;
//! started as `served` starts every launcher-served family). The tests are
//! ignored unless the SGLang lane is on (`INFERGATE_TEST_SGLANG=1
//! scripts/test.sh`); run, they never skip: without SGLang they fail.
#![allow(dead_code)] // each test binary uses a different part

use std::time::Duration;

use super::served::{self, Family, Served};

/// The model id `engine/sglang-serve.sh` serves (as the llama.cpp profiles do).
pub const MODEL: &str = "SmolLM2-135M-Instruct-Q4_1";

/// Start-up measured here at 56–106 s (imports, model load, KV cache, warm-up).
pub static FAMILY: Family = Family {
    name: "SGLang",
    key: "sglang",
    setup: "setup-sglang.sh",
    serve: "engine/sglang-serve.sh",
    ready_timeout: Duration::from_secs(300),
};

pub fn setup() -> Vec<(String, String)> {
    served::setup(&FAMILY)
}

pub fn shared() -> &'static Served {
    served::shared(&FAMILY)
}
