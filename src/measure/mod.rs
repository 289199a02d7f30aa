//! Measuring one runtime, in the order data flows: [`discover`] the target
//! (model, context window), load a [`tokenizer`], build each cell's
//! [`workload`] (each request fitted to its target: [`exact`]), schedule it with [`loadgen`], send it through the
//! [`client`] (streamed [`sse`]), keep every request as a [`record`] in the
//! [`journal`], and [`aggregate`] the records into a run artifact. Beside
//! the requests, [`scrape`] reads the server's metrics endpoints and
//! [`windows`] turns those scrapes into each cell's server metrics.
//! [`turnover`] runs the churn and canary workloads; [`runner`] is the
//! sequence of those steps for one `infergate run`.

pub mod aggregate;
pub mod client;
pub mod discover;
pub mod exact;
pub mod filler;
pub mod journal;
pub mod loadgen;
pub mod record;
pub mod runner;
pub mod scrape;
pub mod source;
pub mod sse;
pub mod tokenizer;
pub mod turnover;
pub mod windows;
pub mod workload;
