//! vLLM's CPU build serving the reference model, for tests of a second
//! engine family (`scripts/setup-vllm.sh`, `engine/vllm-serve.sh`; started
//! as `served` starts every launcher-served family).
#![allow(dead_code)] // each test binary uses a different part

use std::time::Duration;

use super::served::{self, Family, Served};

/// The model id `engine/vllm-serve.sh` serves (as the llama.cpp profiles do).
pub const MODEL: &str = "SmolLM2-135M-Instruct-Q4_1";

/// Start-up measured here at 60–80 s (model load, KV cache, warm-up).
pub static FAMILY: Family = Family {
    name: "vLLM",
    key: "vllm",
    setup: "setup-vllm.sh",
    serve: "engine/vllm-serve.sh",
    ready_timeout: Duration::from_secs(300),
};

pub fn setup() -> Vec<(String, String)> {
    served::setup(&FAMILY)
}

pub fn free_port() -> u16 {
    served::free_port()
}

pub fn shared() -> &'static Served {
    served::shared(&FAMILY)
}
