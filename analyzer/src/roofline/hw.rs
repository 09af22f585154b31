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
    /// The GPU-to-GPU link (NVLink) in one direction, bytes/s; 0 when unknown.
    #[serde(default)]
    pub link_bytes_per_s: f64,
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

/// Physical ranges of a GPU's ceilings: from a small embedded part to well past any GPU
/// announced (1 GB/s to 100 TB/s of memory bandwidth; 0.1 to 100,000 dense TFLOP/s). A
/// figure outside them is a broken profile, and would print floors of `inf` or 0 ms.
pub const HBM_BYTES_PER_S: std::ops::RangeInclusive<f64> = 1e9..=1e14;
pub const TFLOPS: std::ops::RangeInclusive<f64> = 0.1..=1e5;
/// SMs (or CUs) and L2 bytes a GPU can have.
pub const SM_COUNT: std::ops::RangeInclusive<u32> = 0..=10_000;
pub const L2_BYTES: std::ops::RangeInclusive<u64> = 0..=(1 << 34);

impl HardwareSpec {
    /// Why these ceilings cannot be a GPU's, or `Ok`: bandwidth and bf16 throughput within
    /// their physical ranges; fp8 and int8 the same, or 0 for a path the GPU (or the
    /// calibration) lacks.
    pub fn check(&self) -> std::result::Result<(), String> {
        let (lo, hi) = (HBM_BYTES_PER_S.start(), HBM_BYTES_PER_S.end());
        if !HBM_BYTES_PER_S.contains(&self.hbm_bytes_per_s) {
            return Err(format!(
                "hbm_bytes_per_s = {:e} is outside {lo:e}..={hi:e} (1 GB/s to 100 TB/s)",
                self.hbm_bytes_per_s
            ));
        }
        let (lo, hi) = (TFLOPS.start(), TFLOPS.end());
        if !TFLOPS.contains(&self.bf16_tflops) {
            return Err(format!(
                "bf16_tflops = {:e} is outside {lo}..={hi:e}",
                self.bf16_tflops
            ));
        }
        for (k, v) in [
            ("fp8_tflops", self.fp8_tflops),
            ("int8_tops", self.int8_tops),
        ] {
            if v != 0.0 && !TFLOPS.contains(&v) {
                return Err(format!(
                    "{k} = {v:e} is outside {lo}..={hi:e} (0 for a path not measured)"
                ));
            }
        }
        if !SM_COUNT.contains(&self.sm_count) {
            return Err(format!(
                "sm_count = {} is more than {}",
                self.sm_count,
                SM_COUNT.end()
            ));
        }
        if !L2_BYTES.contains(&self.l2_bytes) {
            return Err(format!(
                "l2_bytes = {} is more than {}",
                self.l2_bytes,
                L2_BYTES.end()
            ));
        }
        Ok(())
    }
}

/// Reads a hardware profile written by `gapscope-engine calibrate` (JSON, same fields as a table
/// entry, `ceilings = "measured"`; at most [`MAX_CONFIG_BYTES`], a regular file), checked
/// against the physical ranges ([`HardwareSpec::check`]). A path the calibration did not
/// measure is 0 (see [`super::compute_peak`]).
pub fn load_profile(path: &std::path::Path) -> Result<HardwareSpec> {
    let text = read_config(path, "hardware profile", MAX_CONFIG_BYTES)?;
    let h: HardwareSpec = parse_json(path, &text, "gapscope hardware profile")?;
    h.check()
        .map_err(|m| AnalyzerError::parse(path, format!("hardware profile: {m}")))?;
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
            assert_eq!(h.check(), Ok(()), "{id}");
            assert!(
                BUILTIN.contains(&format!("[{}]", h.source)),
                "{id}: source cited"
            );
        }
    }

    #[test]
    fn profiles_outside_the_physical_ranges_are_refused() {
        let ok = lookup("h200").unwrap();
        assert_eq!(ok.check(), Ok(()));
        type Break = fn(&mut HardwareSpec);
        let cases: [(&str, Break); 9] = [
            ("hbm_bytes_per_s", |h| h.hbm_bytes_per_s = 1e-300),
            ("hbm_bytes_per_s", |h| h.hbm_bytes_per_s = f64::INFINITY),
            ("hbm_bytes_per_s", |h| h.hbm_bytes_per_s = 1e300),
            ("hbm_bytes_per_s", |h| h.hbm_bytes_per_s = f64::NAN),
            ("bf16_tflops", |h| h.bf16_tflops = 1e-300),
            ("bf16_tflops", |h| h.bf16_tflops = -1.0),
            ("fp8_tflops", |h| h.fp8_tflops = 1e-9),
            ("int8_tops", |h| h.int8_tops = f64::NAN),
            ("sm_count", |h| h.sm_count = u32::MAX),
        ];
        for (field, break_it) in cases {
            let mut h = ok.clone();
            break_it(&mut h);
            let e = h.check().unwrap_err();
            assert!(e.starts_with(field), "{field}: {e}");
        }
        let mut h = ok.clone();
        h.fp8_tflops = 0.0;
        assert_eq!(h.check(), Ok(()), "0: a path not measured");
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
