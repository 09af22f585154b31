//! The optional tokenizer: an HF `tokenizer.json` read by the `tokenizers` crate when one is
//! given or sits in the model directory. Without it, prompts are seeded random token ids
//! (decode timing does not depend on which tokens they are).

use crate::error::{EngineError, Result};
use std::path::{Path, PathBuf};

pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    path: PathBuf,
}

impl Tokenizer {
    pub fn from_file(path: &Path) -> Result<Self> {
        let inner = tokenizers::Tokenizer::from_file(path).map_err(|e| EngineError::Config {
            path: path.to_path_buf(),
            message: format!("not a usable tokenizer.json: {e}"),
        })?;
        Ok(Self {
            inner,
            path: path.to_path_buf(),
        })
    }

    /// `DIR/tokenizer.json` when a model directory has one.
    pub fn find(model_dir: &Path) -> Option<PathBuf> {
        let p = model_dir.join("tokenizer.json");
        p.is_file().then_some(p)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Token ids of `text`, with the tokenizer's special tokens (e.g. BOS) added.
    pub fn encode(&self, text: &str, vocab: usize) -> Result<Vec<i32>> {
        let enc = self
            .inner
            .encode(text, true)
            .map_err(|e| EngineError::Config {
                path: self.path.clone(),
                message: format!("encoding the prompt failed: {e}"),
            })?;
        let ids: Vec<i32> = enc.get_ids().iter().map(|&i| i as i32).collect();
        if let Some(bad) = ids.iter().find(|&&i| i < 0 || i as usize >= vocab) {
            return Err(EngineError::Config {
                path: self.path.clone(),
                message: format!("token id {bad} is outside the model's vocabulary of {vocab}"),
            });
        }
        Ok(ids)
    }

    pub fn decode(&self, ids: &[i32]) -> Result<String> {
        let ids: Vec<u32> = ids.iter().map(|&i| i.max(0) as u32).collect();
        self.inner
            .decode(&ids, true)
            .map_err(|e| EngineError::Config {
                path: self.path.clone(),
                message: format!("decoding failed: {e}"),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A word-level tokenizer.json written by hand, as a user could ship one.
    fn write_tokenizer(dir: &Path) -> PathBuf {
        let json = serde_json::json!({
            "version": "1.0",
            "truncation": null,
            "padding": null,
            "added_tokens": [],
            "normalizer": null,
            "pre_tokenizer": {"type": "Whitespace"},
            "post_processor": null,
            "decoder": null,
            "model": {
                "type": "WordLevel",
                "vocab": {"[UNK]": 0, "the": 1, "gpu": 2, "is": 3, "busy": 4},
                "unk_token": "[UNK]"
            }
        });
        let p = dir.join("tokenizer.json");
        std::fs::write(&p, json.to_string()).unwrap();
        p
    }

    #[test]
    fn encodes_decodes_and_checks_the_vocabulary() {
        let dir = tempfile::tempdir().unwrap();
        let p = write_tokenizer(dir.path());
        assert_eq!(Tokenizer::find(dir.path()), Some(p.clone()));
        let t = Tokenizer::from_file(&p).unwrap();
        let ids = t.encode("the gpu is busy", 5).unwrap();
        assert_eq!(ids, vec![1, 2, 3, 4]);
        assert_eq!(t.decode(&ids).unwrap(), "the gpu is busy");
        assert_eq!(t.encode("the cpu", 5).unwrap(), vec![1, 0]);
        let err = t.encode("busy", 4).unwrap_err().to_string();
        assert!(
            err.contains("outside") && err.contains("tokenizer.json"),
            "{err}"
        );
    }

    #[test]
    fn a_broken_file_names_itself() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tokenizer.json");
        std::fs::write(&p, "{not json").unwrap();
        let err = Tokenizer::from_file(&p).err().unwrap().to_string();
        assert!(err.contains("tokenizer.json"), "{err}");
        assert!(Tokenizer::find(Path::new("/nonexistent")).is_none());
    }
}
