//! Writing a dump (tests, gapscope-engine's `logits`, converters): the safetensors layout
//! `Dump` reads, float tensors as float32 or bfloat16.

use std::io::Write;
use std::path::Path;

use crate::dtype::DType;
use crate::error::{NumericsError, Result};

/// A dump held in memory, written in one go.
pub struct DumpData<'a> {
    pub meta: &'a [(&'a str, &'a str)],
    /// `[P, T]` when `passages > 1`, else `[T]`.
    pub passages: usize,
    pub tokens: &'a [i64],
    /// Rows of `vocab` logits, one per token.
    pub logits: &'a [f32],
    pub vocab: usize,
    /// Per layer, rows of `hidden_size`, one per token.
    pub hidden: &'a [Vec<f32>],
    pub hidden_size: usize,
    /// Element type of the float tensors: `F32` or `BF16`.
    pub dtype: DType,
}

/// The dump's bytes: header and tensors.
pub fn encode(d: &DumpData) -> Vec<u8> {
    let t = d.tokens.len() / d.passages.max(1);
    let shape = |cols: usize| -> Vec<usize> {
        if d.passages > 1 {
            vec![d.passages, t, cols]
        } else {
            vec![t, cols]
        }
    };
    let floats = |x: &[f32]| -> Vec<u8> {
        match d.dtype {
            DType::BF16 => x
                .iter()
                .flat_map(|&v| half::bf16::from_f32(v).to_le_bytes())
                .collect(),
            _ => x.iter().flat_map(|&v| v.to_le_bytes()).collect(),
        }
    };
    let dt = if d.dtype == DType::BF16 {
        "BF16"
    } else {
        "F32"
    };
    let mut parts: Vec<(String, &str, Vec<usize>, Vec<u8>)> = vec![(
        "tokens".into(),
        "I64",
        if d.passages > 1 {
            vec![d.passages, t]
        } else {
            vec![t]
        },
        d.tokens.iter().flat_map(|v| v.to_le_bytes()).collect(),
    )];
    parts.push(("logits".into(), dt, shape(d.vocab), floats(d.logits)));
    for (l, h) in d.hidden.iter().enumerate() {
        parts.push((format!("hidden.{l}"), dt, shape(d.hidden_size), floats(h)));
    }
    let mut header = serde_json::Map::new();
    let meta: serde_json::Map<String, serde_json::Value> = d
        .meta
        .iter()
        .map(|(k, v)| ((*k).to_owned(), serde_json::Value::from(*v)))
        .collect();
    header.insert("__metadata__".into(), meta.into());
    let mut at = 0usize;
    for (name, dtype, shape, bytes) in &parts {
        header.insert(
            name.clone(),
            serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [at, at + bytes.len()]}),
        );
        at += bytes.len();
    }
    let mut h = serde_json::Value::Object(header).to_string().into_bytes();
    while !h.len().is_multiple_of(8) {
        h.push(b' ');
    }
    let mut out = Vec::with_capacity(8 + h.len() + at);
    out.extend_from_slice(&(h.len() as u64).to_le_bytes());
    out.extend_from_slice(&h);
    for (_, _, _, bytes) in &parts {
        out.extend_from_slice(bytes);
    }
    out
}

/// Writes the dump to `path`, beside it first and renamed into place; a symbolic link at
/// `path` is refused, not followed.
pub fn write_dump(path: &Path, d: &DumpData) -> Result<()> {
    if std::fs::symlink_metadata(path).is_ok_and(|m| !m.is_file()) {
        return Err(NumericsError::format(
            path,
            "exists and is not a regular file (a link is not written through)",
        ));
    }
    let bytes = encode(d);
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = std::path::PathBuf::from(tmp);
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        NumericsError::io(path, e)
    })
}
