//! A Hugging Face `tokenizer.json`, for counting tokens on the client when
//! the user has the model's own tokenizer file (the most exact source: no
//! server round trips, and it works for servers without `/tokenize`).

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow};

pub struct TokenizerFile {
    tok: tokenizers::Tokenizer,
    path: PathBuf,
    sha256: String,
}

impl fmt::Debug for TokenizerFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenizerFile")
            .field("path", &self.path)
            .field("sha256", &self.sha256)
            .finish_non_exhaustive()
    }
}

impl TokenizerFile {
    /// Load `path`; errors name the file and what was wrong with it.
    pub fn load(path: &Path) -> Result<TokenizerFile> {
        let limit = crate::config::limits::MAX_INPUT_FILE_BYTES;
        let bytes = crate::report::files::read_regular_at_most(path, limit)
            .map_err(|e| anyhow!("reading tokenizer {}: {e}", path.display()))?;
        let tok = tokenizers::Tokenizer::from_bytes(&bytes).map_err(|e| {
            anyhow!(
                "tokenizer {}: not a Hugging Face tokenizer.json: {e}",
                path.display()
            )
        })?;
        Ok(TokenizerFile {
            tok,
            path: path.to_path_buf(),
            sha256: crate::util::sha256_hex(&bytes),
        })
    }

    /// Tokens of `text` as the model sees it inside a prompt: no BOS/EOS or
    /// other special tokens added (the chat template's are counted apart).
    pub fn count(&self, text: &str) -> Result<u64> {
        let enc = self
            .tok
            .encode(text, false)
            .map_err(|e| anyhow!("tokenizer {}: cannot encode text: {e}", self.path.display()))?;
        Ok(enc.len() as u64)
    }

    /// The token ids of `text`, counted as [`TokenizerFile::count`] counts.
    pub fn ids(&self, text: &str) -> Result<Vec<u32>> {
        let enc = self
            .tok
            .encode(text, false)
            .map_err(|e| anyhow!("tokenizer {}: cannot encode text: {e}", self.path.display()))?;
        Ok(enc.get_ids().to_vec())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `tokenizer.json <path> (sha256 <first 12>)`, for the artifact's method.
    pub fn describe(&self) -> String {
        format!(
            "tokenizer.json {} (sha256 {})",
            self.path.display(),
            &self.sha256[..12]
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny but real word-level tokenizer.json (the format, not a model's).
    const WORDLEVEL: &str = r#"{
      "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
      "normalizer": null,
      "pre_tokenizer": {"type": "Whitespace"},
      "post_processor": null, "decoder": null,
      "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "the": 1, "cat": 2, ".": 3}, "unk_token": "[UNK]"}
    }"#;

    #[test]
    fn counts_with_the_file_and_describes_it() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tokenizer.json");
        std::fs::write(&p, WORDLEVEL).unwrap();
        let t = TokenizerFile::load(&p).unwrap();
        assert_eq!(t.count("the cat.").unwrap(), 3);
        assert_eq!(
            t.count("the dog sat").unwrap(),
            3,
            "unknown words count as [UNK]"
        );
        assert_eq!(t.count("").unwrap(), 0);
        assert!(
            t.describe()
                .starts_with(&format!("tokenizer.json {}", p.display()))
        );
    }

    #[test]
    fn bad_files_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tokenizer.json");
        std::fs::write(&p, "{\"model\": 3}").unwrap();
        let e = format!("{:#}", TokenizerFile::load(&p).unwrap_err());
        assert!(
            e.contains(&p.display().to_string()) && e.contains("tokenizer.json"),
            "{e}"
        );
        let missing = dir.path().join("nope.json");
        let e = format!("{:#}", TokenizerFile::load(&missing).unwrap_err());
        assert!(e.contains("nope.json"), "{e}");
    }
}
