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
pub mod answer;
pub mod client;
pub mod discover;
pub mod embeddings;
pub mod exact;
pub mod features;
pub mod fidelity;
pub mod filler;
pub mod interleave;
pub mod journal;
pub mod loadgen;
pub mod pool;
pub mod record;
pub mod runner;
pub mod scrape;
pub mod source;
pub mod sse;
pub mod tokenizer;
pub mod turnover;
pub mod windows;
pub mod workload;

use std::time::Duration;

/// Pooled connections idle this long are dropped: well below the 5 s
/// keep-alive of llama.cpp's and uvicorn's servers, so an unmeasured call
/// (discovery, sizing, a scrape) is never sent on a connection the server
/// is closing. Measured on llama.cpp: an idle connection reused at 5.00 s
/// answered, at 5.01–5.05 s got no response ("Remote end closed connection
/// without response"; reqwest: "error sending request"). The measuring
/// client (`client::wire`) checks and retries a stale socket itself.
pub const POOL_IDLE: Duration = Duration::from_secs(2);

/// The HTTP client for everything but the measured requests: no
/// environment proxy (the target is on loopback, and is what we measure),
/// and no reuse of a connection near the server's keep-alive timeout.
pub fn http_client() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .no_proxy()
        .pool_idle_timeout(POOL_IDLE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A keep-alive HTTP/1.1 listener on loopback that answers every request
    /// with `{}` and counts the connections it accepted.
    async fn counting_listener() -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    while let Ok(n) = sock.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
                        if sock.write_all(reply).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        (url, accepted)
    }

    /// Reuse within the idle limit, a fresh connection past it: the server's
    /// keep-alive (5 s on llama.cpp) is never raced.
    #[tokio::test]
    async fn idle_connections_are_not_reused_past_the_pool_limit() {
        let (url, accepted) = counting_listener().await;
        let http = http_client().build().unwrap();
        let get = || async { http.get(&url).send().await.unwrap().bytes().await.unwrap() };
        get().await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        get().await;
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            1,
            "reused within the limit"
        );
        tokio::time::sleep(POOL_IDLE + Duration::from_millis(500)).await;
        get().await;
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            2,
            "a fresh connection past it"
        );
        assert!(POOL_IDLE < Duration::from_secs(5));
    }
}
