//! Hardware ceilings: the built-in datasheet table (`data/hardware.toml`, sources cited
//! there) and lookup by id, alias or the GPU name a trace reports.

use serde::{Deserialize, Serialize};

use crate::config_file::{MAX_CONFIG_BYTES, parse_json, read_config};
use crate::error::{AnalyzerError, Result};

const BUILTIN: &str = include_str!("../../data/hardware.toml");

/// Which ceilings a floor was computed from; reports print it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CeilingSource {
    Datasheet,
    Measured,
}

impl CeilingSource {
    /// `datasheet` or `measured`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Datasheet => "datasheet",
            Self::Measured => "measured",
        }
    }
}

impl std::fmt::Display for CeilingSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One GPU's peak figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HardwareSpec {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub aliases: Vec<String>,
    pub hbm_bytes_per_s: f64,
    /// Dense tensor-core throughput; 0 when the GPU lacks the path.
    pub bf16_tflops: f64,
    pub fp8_tflops: f64,
    pub int8_tops: f64,
    pub sm_count: u32,
    pub l2_bytes: u64,
    /// Key of the citation in `data/hardware.toml`.
    pub source: String,
    #[serde(default = "datasheet")]
    pub ceilings: CeilingSource,
}

fn datasheet() -> CeilingSource {
    CeilingSource::Datasheet
}

#[derive(Deserialize)]
struct Table {
    gpu: Vec<HardwareSpec>,
}

/// The built-in table.
pub fn builtin() -> Vec<HardwareSpec> {
    // The embedded table is covered by tests; a parse failure is a build defect.
    toml::from_str::<Table>(BUILTIN)
        .map(|t| t.gpu)
        .unwrap_or_else(|e| panic!("built-in hardware table is invalid: {e}"))
}

/// Finds a GPU by id (`h100-sxm`), alias, or the exact name a trace reports
/// (`NVIDIA H100 80GB HBM3`), case-insensitively.
pub fn lookup(key: &str) -> Result<HardwareSpec> {
    let k = key.trim().to_ascii_lowercase();
    let table = builtin();
    table
        .iter()
        .find(|h| {
            h.id == k
                || h.name.to_ascii_lowercase() == k
                || h.aliases.iter().any(|a| a.to_ascii_lowercase() == k)
        })
        .cloned()
        .ok_or_else(|| {
            AnalyzerError::Invalid(format!(
                "unknown GPU {key:?}; known: {}",
                table
                    .iter()
                    .map(|h| h.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
}

/// Reads a hardware profile written by `gapscope-engine calibrate` (JSON, same fields as a table
/// entry, `ceilings = "measured"`; at most [`MAX_CONFIG_BYTES`], a regular file). Bandwidth
/// and bf16 throughput must be positive; every figure finite and below a sanity bound.
/// A path the calibration did not measure is 0 (see [`super::compute_peak`]).
pub fn load_profile(path: &std::path::Path) -> Result<HardwareSpec> {
    let text = read_config(path, "hardware profile", MAX_CONFIG_BYTES)?;
    let h: HardwareSpec = parse_json(path, &text, "gapscope hardware profile")?;
    let bad = |m: String| AnalyzerError::parse(path, format!("hardware profile: {m}"));
    if !(h.hbm_bytes_per_s > 0.0 && h.bf16_tflops > 0.0) {
        return Err(bad("lacks bandwidth or bf16 throughput".into()));
    }
    for (k, v, hi) in [
        ("hbm_bytes_per_s", h.hbm_bytes_per_s, 1e15),
        ("bf16_tflops", h.bf16_tflops, 1e6),
        ("fp8_tflops", h.fp8_tflops, 1e6),
        ("int8_tops", h.int8_tops, 1e6),
    ] {
        if !(v.is_finite() && (0.0..=hi).contains(&v)) {
            return Err(bad(format!("{k} = {v} is outside 0..={hi:e}")));
        }
    }
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_covers_the_required_gpus_with_sane_values() {
        let t = builtin();
        for id in [
            "h100-sxm",
            "h100-pcie",
            "h200",
            "a100-40",
            "a100-80",
            "l40s",
            "rtx4090",
            "rtx5090",
            "gb10",
            "b200",
            "mi300x",
        ] {
            let h = t
                .iter()
                .find(|h| h.id == id)
                .unwrap_or_else(|| panic!("{id} missing"));
            assert!(h.hbm_bytes_per_s > 1e11 && h.hbm_bytes_per_s < 1e13, "{id}");
            assert!(h.bf16_tflops > 50.0 && h.bf16_tflops < 5000.0, "{id}");
            assert!(h.int8_tops >= h.bf16_tflops, "{id}");
            assert!(h.sm_count > 0 && h.l2_bytes > 0, "{id}");
            assert!(
                BUILTIN.contains(&format!("[{}]", h.source)),
                "{id}: source cited"
            );
        }
    }

    #[test]
    fn lookup_by_id_alias_and_trace_name() {
        assert_eq!(lookup("h100-sxm").unwrap().hbm_bytes_per_s, 3.35e12);
        assert_eq!(lookup("NVIDIA H100 80GB HBM3").unwrap().id, "h100-sxm");
        assert_eq!(lookup("nvidia h200").unwrap().id, "h200");
        assert!(
            lookup("tpu-v5")
                .unwrap_err()
                .to_string()
                .contains("h100-sxm")
        );
    }
}
