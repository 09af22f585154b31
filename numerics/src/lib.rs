//! gapscope numerics: whether two engines say the same thing. Each engine dumps its logits
//! (and, optionally, its residual stream after every decoder layer) over the same
//! teacher-forced tokens into a safetensors file ([`dump`], `docs/NUMERICS.md`); a
//! comparison streams them a few rows at a time and gives per-position KL, top-1 agreement
//! and |Δ log p| ([`positions`]), Δppl with a bootstrap interval ([`summary`]), the
//! per-layer error with the first diverging layer ([`layers`]), and a verdict
//! ([`verdict`]). An identity pair (two runs of one engine and setting) gives the noise
//! floor.

pub mod dtype;
pub mod dump;
pub mod error;
pub mod layers;
pub mod positions;
pub mod summary;
pub mod verdict;
pub mod write;

use std::path::{Path, PathBuf};

pub use dump::Dump;
pub use error::{NumericsError, Result};
pub use layers::LayerReport;
pub use positions::PositionRow;
pub use summary::Summary;
pub use verdict::{Thresholds, Verdict};

/// Version of the JSON numerics schema.
pub const NUMERICS_SCHEMA_VERSION: u32 = 1;

/// How comparisons run.
#[derive(Debug, Clone, Copy)]
pub struct NumericsSettings {
    pub thresholds: Thresholds,
    /// Threads that read and score logits.
    pub threads: usize,
    /// Seed of the bootstrap.
    pub seed: u64,
}

impl Default for NumericsSettings {
    fn default() -> Self {
        Self {
            thresholds: Thresholds::default(),
            threads: 2,
            seed: 0x6761_7073_636f_7065,
        }
    }
}

/// What a dump is, for a report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DumpInfo {
    pub path: String,
    pub engine: Option<String>,
    pub model: Option<String>,
    /// The metadata's `dtype`, else the logits' element type.
    pub dtype: String,
    pub passages: usize,
    pub positions: usize,
    pub vocab: usize,
    pub layers: usize,
}

impl DumpInfo {
    pub fn of(d: &Dump) -> Self {
        Self {
            path: d.path.display().to_string(),
            engine: d.meta.get("engine").cloned(),
            model: d.meta.get("model").cloned(),
            dtype: d
                .meta
                .get("dtype")
                .cloned()
                .unwrap_or_else(|| d.logits.dtype.as_str().to_owned()),
            passages: d.passages,
            positions: d.positions,
            vocab: d.logits.cols,
            layers: d.hidden.len(),
        }
    }

    /// The engine's name, else the file's.
    pub fn label(&self) -> String {
        self.engine.clone().unwrap_or_else(|| {
            Path::new(&self.path)
                .file_name()
                .map_or_else(|| self.path.clone(), |n| n.to_string_lossy().into_owned())
        })
    }
}

/// One dump against the reference.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Comparison {
    /// The dump it was compared against (the reference, or the identity pair's first).
    pub against: String,
    pub other: DumpInfo,
    pub summary: Summary,
    pub verdict: Verdict,
    /// Per-layer errors, when both dumps hold hidden states.
    pub layers: Option<LayerReport>,
    pub positions: Vec<PositionRow>,
}

/// Every dump against the reference, and the identity pair's floor.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NumericsReport {
    pub schema_version: u32,
    pub reference: DumpInfo,
    pub thresholds: Thresholds,
    /// The identity pair (two runs of one engine and setting) compared as any other: its
    /// figures are the noise floor. `None`: the floor is unknown.
    pub identity: Option<Comparison>,
    pub comparisons: Vec<Comparison>,
}

impl NumericsReport {
    /// The worst verdict over the comparisons.
    pub fn worst(&self) -> Option<Verdict> {
        self.comparisons.iter().map(|c| c.verdict).max()
    }
}

fn compare_one(
    reference: &Dump,
    other: &Dump,
    floor: Option<&[f64]>,
    s: &NumericsSettings,
) -> Result<Comparison> {
    let positions = positions::compare_positions(reference, other, s.threads)?;
    let summary = summary::summarise(&positions, reference.passages, s.seed);
    let layers = if reference.hidden.is_empty() || other.hidden.is_empty() {
        None
    } else {
        let errors = layers::relative_errors(reference, other)?;
        let floor = floor
            .filter(|f| f.len() == errors.len())
            .map(<[f64]>::to_vec);
        Some(LayerReport::new(errors, floor))
    };
    Ok(Comparison {
        against: reference.path.display().to_string(),
        other: DumpInfo::of(other),
        verdict: Verdict::of(&summary, &s.thresholds),
        summary,
        layers,
        positions,
    })
}

/// Compares each of `others` against `reference`; `identity`, two runs of one setting, gives
/// the noise floor.
pub fn compare(
    reference: &Path,
    others: &[PathBuf],
    identity: Option<(&Path, &Path)>,
    settings: &NumericsSettings,
) -> Result<NumericsReport> {
    let r = Dump::open(reference)?;
    let identity = match identity {
        Some((a, b)) => {
            let (a, b) = (Dump::open(a)?, Dump::open(b)?);
            Some(compare_one(&a, &b, None, settings)?)
        }
        None => None,
    };
    let floor = identity
        .as_ref()
        .and_then(|c| c.layers.as_ref())
        .map(|l| l.error.clone());
    let mut comparisons = Vec::with_capacity(others.len());
    for o in others {
        let o = Dump::open(o)?;
        comparisons.push(compare_one(&r, &o, floor.as_deref(), settings)?);
    }
    Ok(NumericsReport {
        schema_version: NUMERICS_SCHEMA_VERSION,
        reference: DumpInfo::of(&r),
        thresholds: settings.thresholds,
        identity,
        comparisons,
    })
}
