//! What a run against one runtime is told besides the suite: which metrics
//! endpoints to read, and what to call the runtime's image.

use crate::config::plan::{Driver, ProcessDriver, Runtime};
use crate::measure::scrape::ScrapeOptions;

/// What a runtime's runs scrape: its own `/metrics` unless the plan says
/// not, and the plan's extra endpoints.
pub(super) fn scrape_options(rt: &crate::config::plan::Runtime) -> ScrapeOptions {
    ScrapeOptions {
        target: rt.scrape_metrics,
        extra: rt.metrics_endpoints.clone(),
        ..ScrapeOptions::default()
    }
}

/// What the report names as the runtime's "image": the digest for containers,
/// the executable's path for commands, the engine profile for the reference engine.
pub(super) fn image_label(rt: &Runtime) -> Option<String> {
    match &rt.driver {
        Driver::Container(c) => Some(c.image.to_string()),
        Driver::Process(ProcessDriver::Engine { profile, .. }) => Some(format!(
            "xllamacpp-{} engine profile {profile}",
            crate::driver::engine::XLLAMACPP_VERSION
        )),
        Driver::Process(ProcessDriver::Command(c)) => Some(match &c.sha256 {
            Some(s) => format!("{}@sha256:{s}", c.command),
            None => c.command.clone(),
        }),
        Driver::External { url, .. } => Some(crate::util::redact_url(url)),
    }
}
