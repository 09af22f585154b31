//! The gate's policy: thresholds a team sets in a TOML file, checked on load.

use super::*;

/// Version of the JSON gate schema.
pub const GATE_SCHEMA_VERSION: u32 = 1;

/// Gate policy (`--policy gate.toml`); every field has a default.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// Smallest relative change of a bucket's median ms/step that counts, e.g. 0.03 = 3%.
    pub min_effect: f64,
    /// Confidence level of the bootstrap interval.
    pub confidence: f64,
    pub bootstrap_resamples: usize,
    /// Seed of the bootstrap, so a verdict is reproducible.
    pub seed: u64,
    /// Buckets below this share of the baseline's busy time per step on both sides (and idle
    /// metrics below this share of the baseline's step) are reported but never fail; a bucket
    /// that was below it and grows past it is judged.
    pub min_share: f64,
    /// Flag more kernels per step than the baseline by more than this.
    pub max_extra_kernels_per_step: f64,
    /// Flag fewer kernels per step than this share of the baseline's (a run that lost its
    /// GPU work, or whose steps were cut wrong).
    pub min_kernels_ratio: f64,
    /// Also gate the step time (TPOT) and the idle split (launch gaps, host gaps).
    pub gate_step_time: bool,
    /// The widest baseline spread (relative half-width of its median's interval) that can
    /// vouch for a pass: a metric whose baseline is noisier and whose median moved by more
    /// than `min_effect` is inconclusive, and so is the gate, instead of passing "within" a
    /// threshold as wide as the noise.
    pub max_noise: f64,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            min_effect: 0.03,
            confidence: 0.95,
            bootstrap_resamples: 1000,
            seed: 0x5eed,
            min_share: 0.005,
            max_extra_kernels_per_step: 0.5,
            min_kernels_ratio: 0.5,
            gate_step_time: true,
            max_noise: 0.10,
        }
    }
}

impl Policy {
    /// Reads a policy file (TOML, at most [`crate::config_file::MAX_CONFIG_BYTES`]) and checks
    /// its values; errors name the file and the field.
    pub fn from_file(p: &std::path::Path) -> crate::error::Result<Self> {
        use crate::config_file::{MAX_CONFIG_BYTES, parse_toml, read_config};
        let text = read_config(p, "policy", MAX_CONFIG_BYTES)?;
        let policy: Policy = parse_toml(p, &text, "policy")?;
        policy
            .validate()
            .map_err(|e| crate::error::AnalyzerError::parse(p, format!("invalid policy: {e}")))?;
        Ok(policy)
    }

    /// Checks every value's range; the error names the field and its allowed range.
    pub fn validate(&self) -> Result<(), String> {
        let range = |name: &str, v: f64, lo: f64, hi: f64| {
            if v.is_finite() && v >= lo && v <= hi {
                Ok(())
            } else {
                Err(format!("{name} = {v} is outside {lo}..={hi}"))
            }
        };
        range("min_effect", self.min_effect, 0.0, 10.0)?;
        range("confidence", self.confidence, 0.5, 0.999)?;
        range("min_share", self.min_share, 0.0, 1.0)?;
        range(
            "max_extra_kernels_per_step",
            self.max_extra_kernels_per_step,
            0.0,
            1e6,
        )?;
        range("min_kernels_ratio", self.min_kernels_ratio, 0.0, 1.0)?;
        range("max_noise", self.max_noise, 0.0, 10.0)?;
        if !(10..=100_000).contains(&self.bootstrap_resamples) {
            return Err(format!(
                "bootstrap_resamples = {} is outside 10..=100000",
                self.bootstrap_resamples
            ));
        }
        Ok(())
    }
}
