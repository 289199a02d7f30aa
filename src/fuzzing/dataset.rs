//! The dataset target: text read as a ShareGPT file, OpenAI request lines
//! and a Mooncake trace, as a workload cell reads a user's file.

/// The file name every dataset error must lead with.
const DATASET_FILE: &str = "fuzz/dataset.jsonl";

/// Text read by each dataset reader. A refusal names the file (and, for a
/// bad record, where in it); a dataset read holds something to send; a
/// trace's lines are in time order with lengths within the request limits.
pub fn dataset(data: &[u8]) {
    use crate::config::dataset::{Dataset, DatasetError, openai_text, sharegpt_text, trace_text};
    use crate::config::limits::{MAX_OUTPUT_TOKENS, MAX_PROMPT_TOKENS};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    type Reader = fn(&str, &str) -> Result<Dataset, DatasetError>;
    let readers: [Reader; 3] = [sharegpt_text, openai_text, trace_text];
    for read in readers {
        match read(text, DATASET_FILE) {
            Ok(d) => {
                assert!(d.capacity(1) > 0, "an accepted dataset supplies requests");
                match &d {
                    Dataset::Conversations(c) => assert!(c.iter().all(|c| {
                        !c.turns.is_empty() && c.turns.iter().all(|(u, _)| !u.trim().is_empty())
                    })),
                    Dataset::Requests(r) => assert!(!r.is_empty()),
                    Dataset::Trace(t) => {
                        for w in t.windows(2) {
                            assert!(w[0].timestamp_ms <= w[1].timestamp_ms);
                        }
                        let span = t[t.len() - 1].timestamp_ms - t[0].timestamp_ms;
                        assert!(span <= crate::config::dataset::MAX_TRACE_SPAN_MS);
                        for e in t.iter() {
                            assert!((1..=MAX_PROMPT_TOKENS).contains(&e.input_length));
                            assert!((1..=MAX_OUTPUT_TOKENS).contains(&e.output_length));
                        }
                    }
                }
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.starts_with(DATASET_FILE), "{msg}");
                if let DatasetError::Bad { at, why, .. } = &e {
                    assert!(!at.is_empty() && !why.is_empty(), "{msg}");
                }
            }
        }
    }
}
