//! Answers read whole (discovery, prompt sizing and `/tokenize`,
//! embeddings, metrics scrapes), each under a stated limit: a server that
//! answers without end is refused with the limit named, instead of being
//! held in memory until the process is killed. Streamed answers are bounded
//! per event and per request instead (`client`).

/// `/v1/models`, `/props`, `/version` and the like: small, local answers.
pub const MAX_DISCOVERY_BYTES: usize = 8 << 20;
/// `/tokenize` and the prompt-sizing probe: a token list of the longest
/// prompt a suite may ask for (2,000,000 tokens) fits with room.
pub const MAX_TOKENIZE_BYTES: usize = 64 << 20;
/// One embeddings batch: 2,048 inputs of 4,096 dimensions as JSON text.
pub const MAX_EMBEDDINGS_BYTES: usize = 256 << 20;
/// One metrics scrape (Prometheus text).
pub const MAX_METRICS_BYTES: usize = 16 << 20;

#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("the answer is larger than {limit} bytes, the most read of {what}")]
    TooLarge { what: &'static str, limit: usize },
    #[error("reading the answer: {0}")]
    Read(String),
}

/// The body of `resp`, refused once it passes `limit` bytes (before any of
/// it is read when the server announces a longer one).
pub async fn read_capped(
    mut resp: reqwest::Response,
    limit: usize,
    what: &'static str,
) -> Result<Vec<u8>, AnswerError> {
    let too_large = AnswerError::TooLarge { what, limit };
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_large);
    }
    let mut out = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(piece)) => {
                if out.len() + piece.len() > limit {
                    return Err(too_large);
                }
                out.extend_from_slice(&piece);
            }
            Ok(None) => return Ok(out),
            Err(e) => {
                let timed_out = if e.is_timeout() { "timed out: " } else { "" };
                return Err(AnswerError::Read(format!("{timed_out}{}", e.without_url())));
            }
        }
    }
}

/// [`read_capped`] as text (invalid UTF-8 replaced, as a lenient client would).
pub async fn read_text_capped(
    resp: reqwest::Response,
    limit: usize,
    what: &'static str,
) -> Result<String, AnswerError> {
    let bytes = read_capped(resp, limit, what).await?;
    Ok(match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A loopback listener answering one request with `body` (its length
    /// announced or not), a fault injector for a server that answers without end.
    async fn serve_once(body: Vec<u8>, announce: bool) -> String {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
            let head = if announce {
                format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len())
            } else {
                "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_string()
            };
            let _ = s.write_all(head.as_bytes()).await;
            let _ = s.write_all(&body).await;
        });
        format!("http://{addr}/")
    }

    async fn get(url: &str) -> reqwest::Response {
        reqwest::Client::new().get(url).send().await.unwrap()
    }

    #[tokio::test]
    async fn an_answer_past_its_limit_is_refused_with_the_limit_named() {
        for announce in [true, false] {
            let url = serve_once(vec![b'x'; 5000], announce).await;
            let e = read_capped(get(&url).await, 4096, "a test answer")
                .await
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("4096 bytes") && e.contains("a test answer"),
                "{e}"
            );
            let url = serve_once(vec![b'x'; 4096], announce).await;
            let ok = read_capped(get(&url).await, 4096, "a test answer").await;
            assert_eq!(ok.unwrap().len(), 4096, "announced: {announce}");
        }
    }
}
