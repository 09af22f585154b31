//! A dump: one engine's logits (and residual stream) over teacher-forced tokens, in a
//! safetensors file (`docs/NUMERICS.md`). Only the header and the tokens are read when it is
//! opened; logits and hidden states are read a few rows at a time.
//!
//! Tensors: `tokens` (int64 `[T]` or `[P, T]`), `logits` (`[T, V]` or `[P, T, V]`, float32,
//! bfloat16 or float16), `hidden.N` (`[T, H]` or `[P, T, H]`, the residual stream after
//! decoder layer N, N from 0 without gaps). Metadata: `engine`, `model`, `dtype`, free text.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use crate::dtype::DType;
use crate::error::{NumericsError, Result};

/// A header larger than this is not a dump (the header holds names and shapes only).
const MAX_HEADER: u64 = 16 << 20;
/// At most this many passages × positions (the tokens are held in memory).
const MAX_TOKENS: u64 = 1 << 26;

/// A 2-D view of a tensor: `rows` = passages × positions, `cols` = vocabulary or hidden size.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TensorRef {
    pub name: String,
    pub dtype: DType,
    /// Byte offset of the first element in the file.
    #[serde(skip)]
    pub offset: u64,
    pub rows: usize,
    pub cols: usize,
}

impl TensorRef {
    fn row_bytes(&self) -> usize {
        self.cols * self.dtype.size()
    }
}

/// An opened dump.
#[derive(Debug)]
pub struct Dump {
    pub path: PathBuf,
    file: File,
    /// The header's `__metadata__` (engine, model, dtype, anything else).
    pub meta: BTreeMap<String, String>,
    pub passages: usize,
    /// Positions per passage.
    pub positions: usize,
    /// Teacher-forced tokens, passage after passage.
    pub tokens: Vec<i64>,
    pub logits: TensorRef,
    /// `hidden.0`, `hidden.1`, ...: one per decoder layer, in order.
    pub hidden: Vec<TensorRef>,
}

#[derive(serde::Deserialize)]
struct Entry {
    dtype: String,
    shape: Vec<u64>,
    data_offsets: [u64; 2],
}

/// The parsed header: where each tensor lies.
struct Header<'a> {
    path: &'a Path,
    entries: BTreeMap<String, Entry>,
    data_start: u64,
    data_len: u64,
    len: u64,
}

impl Header<'_> {
    /// `name`'s type, shape and absolute offset, checked against the file.
    fn tensor(&self, name: &str) -> Result<Option<(DType, Vec<u64>, u64)>> {
        let path = self.path;
        let Some(e) = self.entries.get(name) else {
            return Ok(None);
        };
        let dtype = DType::parse(&e.dtype).ok_or_else(|| {
            NumericsError::tensor(
                path,
                format!("{name} has element type {}, not read", e.dtype),
            )
        })?;
        let [begin, end] = e.data_offsets;
        let numel = e
            .shape
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .and_then(|n| n.checked_mul(dtype.size() as u64));
        if begin > end || numel != Some(end - begin) {
            return Err(NumericsError::format(
                path,
                format!(
                    "{name}: shape {:?} does not fill bytes {begin}..{end}",
                    e.shape
                ),
            ));
        }
        if end > self.data_len {
            return Err(NumericsError::format(
                path,
                format!(
                    "cut short: {name} ends at byte {} of a {}-byte file",
                    self.data_start + end,
                    self.len
                ),
            ));
        }
        Ok(Some((dtype, e.shape.clone(), self.data_start + begin)))
    }

    /// A float tensor shaped like the tokens plus one axis (`what`: its name in errors).
    fn matrix(
        &self,
        name: &str,
        what: &str,
        passages: u64,
        positions: u64,
    ) -> Result<Option<TensorRef>> {
        let path = self.path;
        let Some((dtype, shape, offset)) = self.tensor(name)? else {
            return Ok(None);
        };
        if !dtype.is_float() {
            return Err(NumericsError::tensor(
                path,
                format!("{name} is {}, not a float tensor", dtype.as_str()),
            ));
        }
        let cols = match (shape.as_slice(), passages) {
            ([t, c], 1) if *t == positions => *c,
            ([p, t, c], _) if *p == passages && *t == positions => *c,
            (s, _) => {
                return Err(NumericsError::tensor(
                    path,
                    format!(
                        "{name} has shape {s:?}; [{positions}, {what}] or [{passages}, {positions}, {what}] expected (the tokens' shape)"
                    ),
                ));
            }
        };
        if cols == 0 {
            return Err(NumericsError::tensor(path, format!("{name} is empty")));
        }
        Ok(Some(TensorRef {
            name: name.to_owned(),
            dtype,
            offset,
            rows: (passages * positions) as usize,
            cols: usize::try_from(cols).unwrap_or(usize::MAX),
        }))
    }
}

/// The header of a safetensors file and its metadata.
fn read_header<'a>(file: &File, path: &'a Path) -> Result<(Header<'a>, BTreeMap<String, String>)> {
    let meta = file.metadata().map_err(|e| NumericsError::io(path, e))?;
    if !meta.is_file() {
        return Err(NumericsError::format(path, "not a regular file"));
    }
    let len = meta.len();
    let mut head = [0u8; 8];
    if len < 8 {
        return Err(NumericsError::format(
            path,
            format!("{len} bytes, no header"),
        ));
    }
    read_at(file, &mut head, 0).map_err(|e| NumericsError::io(path, e))?;
    let n = u64::from_le_bytes(head);
    if n > MAX_HEADER || n > len - 8 {
        return Err(NumericsError::format(
            path,
            format!("a header of {n} bytes in a {len}-byte file (cut short, or not safetensors)"),
        ));
    }
    let mut header = vec![0u8; n as usize];
    read_at(file, &mut header, 8).map_err(|e| NumericsError::io(path, e))?;
    let doc: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&header)
        .map_err(|e| NumericsError::format(path, format!("header is not JSON: {e}")))?;
    let mut meta = BTreeMap::new();
    let mut entries = BTreeMap::new();
    for (name, v) in doc {
        if name == "__metadata__" {
            if let serde_json::Value::Object(m) = v {
                for (k, v) in m {
                    let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
                    meta.insert(k, text);
                }
            }
            continue;
        }
        let e: Entry = serde_json::from_value(v)
            .map_err(|e| NumericsError::format(path, format!("tensor {name:?}: {e}")))?;
        entries.insert(name, e);
    }
    let h = Header {
        path,
        entries,
        data_start: 8 + n,
        data_len: len - 8 - n,
        len,
    };
    Ok((h, meta))
}

impl Dump {
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| NumericsError::io(path, e))?;
        let (h, meta) = read_header(&file, path)?;
        let (tdt, tshape, toff) = h
            .tensor("tokens")?
            .ok_or_else(|| NumericsError::tensor(path, "no `tokens` tensor"))?;
        let (passages, positions) = match tshape.as_slice() {
            [t] => (1, *t),
            [p, t] => (*p, *t),
            s => {
                return Err(NumericsError::tensor(
                    path,
                    format!("tokens has shape {s:?}; [T] or [P, T] expected"),
                ));
            }
        };
        if !matches!(tdt, DType::I64 | DType::I32) {
            return Err(NumericsError::tensor(
                path,
                format!("tokens are {}, not int64", tdt.as_str()),
            ));
        }
        let count = passages.saturating_mul(positions);
        if count == 0 || count > MAX_TOKENS {
            return Err(NumericsError::tensor(
                path,
                format!("{passages} passages of {positions} tokens"),
            ));
        }
        let mut raw = vec![0u8; count as usize * tdt.size()];
        read_at(&file, &mut raw, toff).map_err(|e| NumericsError::io(path, e))?;
        let tokens: Vec<i64> = raw
            .chunks_exact(tdt.size())
            .map(|c| match tdt {
                DType::I32 => i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                _ => i64::from_le_bytes(c.try_into().unwrap_or([0; 8])),
            })
            .collect();
        let logits = h
            .matrix("logits", "V", passages, positions)?
            .ok_or_else(|| NumericsError::tensor(path, "no `logits` tensor"))?;
        let mut hidden: Vec<TensorRef> = Vec::new();
        let layers = h
            .entries
            .keys()
            .filter(|k| k.starts_with("hidden."))
            .count();
        for l in 0..layers {
            let name = format!("hidden.{l}");
            let t = h.matrix(&name, "H", passages, positions)?.ok_or_else(|| {
                NumericsError::tensor(
                    path,
                    format!("{layers} hidden.N tensors but no {name}: layers must run from 0 without gaps"),
                )
            })?;
            if let Some(first) = hidden.first()
                && first.cols != t.cols
            {
                return Err(NumericsError::tensor(
                    path,
                    format!("{name} is {} wide, hidden.0 {}", t.cols, first.cols),
                ));
            }
            hidden.push(t);
        }
        Ok(Self {
            path: path.to_owned(),
            file,
            meta,
            passages: passages as usize,
            positions: positions as usize,
            tokens,
            logits,
            hidden,
        })
    }

    /// `engine` from the metadata, else the file name.
    pub fn label(&self) -> String {
        self.meta.get("engine").cloned().unwrap_or_else(|| {
            self.path
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        })
    }

    /// Rows `first..first + out.len() / t.cols` of `t`, decoded into `out`; `buf` is scratch.
    pub fn read_rows(
        &self,
        t: &TensorRef,
        first: usize,
        buf: &mut Vec<u8>,
        out: &mut [f64],
    ) -> Result<()> {
        let rows = out.len() / t.cols;
        buf.resize(rows * t.row_bytes(), 0);
        let at = t.offset + (first * t.row_bytes()) as u64;
        read_at(&self.file, buf, at).map_err(|e| NumericsError::io(&self.path, e))?;
        t.dtype.decode(buf, out);
        if let Some(i) = out.iter().position(|v| !v.is_finite()) {
            let (row, col) = (first + i / t.cols, i % t.cols);
            return Err(NumericsError::NotFinite {
                path: self.path.clone(),
                tensor: t.name.clone(),
                what: if out[i].is_nan() {
                    "NaN"
                } else {
                    "an infinity"
                },
                at: format!(
                    "passage {}, position {}, index {col}",
                    row / self.positions,
                    row % self.positions
                ),
            });
        }
        Ok(())
    }
}

#[cfg(unix)]
fn read_at(f: &File, buf: &mut [u8], at: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(f, buf, at)
}

#[cfg(not(unix))]
fn read_at(f: &File, buf: &mut [u8], at: u64) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = f.try_clone()?;
    f.seek(SeekFrom::Start(at))?;
    f.read_exact(buf)
}
