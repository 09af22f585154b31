//! How the steps were found and how their phases were, as values: the decisions read these;
//! the sentences a reader sees are their `Display`.

use std::fmt;

use serde::Serialize;

use super::phase_evidence::Evidence;
use crate::text::short;

/// How the steps of a trace were found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StepSource {
    /// Marker ranges delimit the steps (the tiers of engine markers, or the user's pattern).
    Markers {
        ranges: MarkerRanges,
        /// Host ranges mapped to the GPU through launch correlation, and why; `None` for GPU
        /// ranges.
        projected: Option<Projection>,
        /// The markers' distinct names in name order, the first four.
        names: Vec<String>,
        /// Distinct names beyond those.
        more_names: usize,
    },
    /// The periodic kernel sequence, cut at an anchor kernel.
    Periodic {
        /// The anchor kernel's name.
        anchor: String,
        /// Every how many of its occurrences a step starts (1: each).
        stride: usize,
        /// The steps it starts, and its occurrences in all.
        starts: usize,
        occurrences: usize,
        /// Odd segments taken as prefill steps.
        prefills: usize,
    },
    /// Model forwards (module scopes): each step is one forward of the model, and under
    /// speculative decoding one verify forward with the draft forwards since the previous one.
    Forwards {
        /// What shows speculative decoding; `None` for a plain run.
        evidence: Option<crate::analysis::spec::SpecEvidence>,
        /// The target model instance and its forwards; the draft's, when there is one.
        target: String,
        target_forwards: usize,
        draft: Option<String>,
        draft_forwards: usize,
    },
    /// No steps: the trace has no kernels.
    NoKernels,
    /// No steps: no marker delimits steps and the kernel sequence is not periodic.
    #[default]
    NotFound,
}

/// Which marker ranges delimit the steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkerRanges {
    /// GPU ranges of engine markers.
    Engine,
    /// Kineto's `gpu_user_annotation` ranges.
    GpuUserAnnotation,
    /// NVTX ranges' GPU projection.
    NvtxGpu,
    /// Other GPU ranges.
    Gpu,
    /// Kineto's host `user_annotation` ranges.
    UserAnnotation,
    /// NVTX ranges on the host.
    Nvtx,
    /// Other host ranges.
    Host,
}

impl MarkerRanges {
    fn as_str(self) -> &'static str {
        match self {
            Self::Engine => "engine",
            Self::GpuUserAnnotation => "gpu_user_annotation",
            Self::NvtxGpu => "NVTX (GPU projection)",
            Self::Gpu => "GPU ranges",
            Self::UserAnnotation => "user_annotation",
            Self::Nvtx => "NVTX",
            Self::Host => "host ranges",
        }
    }
}

/// Why host ranges were mapped to the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Projection {
    /// The ranges have no GPU-side copies.
    NoGpuRanges,
    /// Their GPU-side copies do not cover the kernels launched inside them (ROCm's Kineto).
    GpuRangesShort,
}

impl StepSource {
    /// Whether automatic periodicity detection found the steps.
    pub fn is_periodic(&self) -> bool {
        matches!(self, Self::Periodic { .. })
    }
}

/// `markers: gpu_user_annotation "decode_step"`, `auto: periodic kernel sequence, anchor …`,
/// `none: …`.
impl fmt::Display for StepSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Markers {
                ranges,
                projected,
                names,
                more_names,
            } => {
                let shown: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
                write!(f, "markers: {} {}", ranges.as_str(), shown.join(", "))?;
                if *more_names > 0 {
                    write!(f, " and {more_names} more names")?;
                }
                match projected {
                    None => Ok(()),
                    Some(Projection::NoGpuRanges) => {
                        f.write_str(" (mapped to the GPU through launch correlation)")
                    }
                    Some(Projection::GpuRangesShort) => f.write_str(
                        " (mapped to the GPU through launch correlation: the GPU-side copies of \
                         these ranges do not cover the kernels launched inside them)",
                    ),
                }
            }
            Self::Periodic {
                anchor,
                stride,
                starts,
                occurrences,
                prefills,
            } => {
                write!(
                    f,
                    "auto: periodic kernel sequence, anchor {:?} (",
                    short(anchor)
                )?;
                match stride {
                    1 => write!(f, "{starts} occurrences")?,
                    m => write!(f, "every {} of its {occurrences} occurrences", ordinal(*m))?,
                }
                match prefills {
                    0 => {}
                    1 => f.write_str(", 1 odd segment taken as prefill")?,
                    x => write!(f, ", {x} odd segments taken as prefill")?,
                }
                f.write_str(")")
            }
            Self::Forwards {
                evidence: None,
                target,
                target_forwards,
                ..
            } => write!(
                f,
                "model forwards: one step per forward of {target:?} ({target_forwards} forwards)"
            ),
            Self::Forwards {
                target,
                target_forwards,
                draft,
                draft_forwards,
                ..
            } => {
                write!(
                    f,
                    "speculative decoding: one step per verify forward, {target_forwards} of {target:?}"
                )?;
                match draft {
                    Some(d) => write!(
                        f,
                        ", with the {draft_forwards} draft forwards of {d:?} before them"
                    ),
                    None => f.write_str(" (no draft model)"),
                }
            }
            Self::NoKernels => f.write_str("none: the trace has no kernels"),
            Self::NotFound => f.write_str("none: no step markers and no periodic kernel sequence"),
        }
    }
}

fn ordinal(m: usize) -> String {
    match m {
        2 => "2nd".into(),
        3 => "3rd".into(),
        m => format!("{m}th"),
    }
}

/// How the steps' phases were found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PhaseSource {
    /// Not described (no steps).
    #[default]
    None,
    /// A training trace: each step is one iteration.
    Training,
    /// The periodic detector's segments: an odd one with more GEMM/attention work is a
    /// prefill.
    Periodic,
    /// Steps from forwards: the first forward from an empty cache (or, without shapes, with
    /// twice the others' kernel time) is the prefill.
    Forwards,
    /// Steps from forwards cut at host reads (`host_reads`): an early forward of twice the
    /// median kernel time is the prompt's, and the engine's warm-up forwards before it are
    /// prefill steps too.
    ForwardDepths,
    /// Each step's own evidence, tallied.
    Evidence {
        /// How many steps each kind of evidence decided, in [`Evidence`] order.
        counts: Vec<EvidenceCount>,
        /// A phase-specific kernel name that decided a step.
        example: Option<String>,
        /// What the markers' names carry (`forward mode and batch size`), when they do.
        says: Option<&'static str>,
    },
}

/// Steps whose phase one kind of evidence decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EvidenceCount {
    pub evidence: Evidence,
    pub steps: usize,
}

impl PhaseSource {
    /// The tally of each step's evidence.
    pub(super) fn from_evidence(
        evidence: &[Evidence],
        example: Option<String>,
        says: Option<&'static str>,
    ) -> Self {
        let mut counts: Vec<EvidenceCount> = Vec::new();
        for &e in evidence {
            match counts.iter_mut().find(|c| c.evidence == e) {
                Some(c) => c.steps += 1,
                None => counts.push(EvidenceCount {
                    evidence: e,
                    steps: 1,
                }),
            }
        }
        counts.sort_by_key(|c| c.evidence);
        Self::Evidence {
            counts,
            example,
            says,
        }
    }
}

/// One line on how the phases were found, e.g. `marker metadata (forward mode and batch
/// size)` or `phase-specific kernel names (e.g. "flash_fwd_splitkv…"): 2, assumed decode
/// (…): 1`; empty for [`PhaseSource::None`].
impl fmt::Display for PhaseSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::None => Ok(()),
            Self::Training => f.write_str("training trace: each step is one iteration"),
            Self::ForwardDepths => f.write_str(
                "the forwards' kernel time (an early target forward of twice the median is the prompt's; the warm-up forwards before it are prefill steps too)",
            ),
            Self::Forwards => f.write_str(
                "the forward's cache (the first forward from an empty cache is the prefill)",
            ),
            Self::Periodic => f.write_str(
                "periodic kernel sequence (an odd segment with more GEMM/attention work is a \
                 prefill)",
            ),
            Self::Evidence {
                counts,
                example,
                says,
            } => {
                let one = counts.len() == 1;
                for (i, c) in counts.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    f.write_str(c.evidence.describe())?;
                    match (c.evidence, example, says) {
                        (Evidence::KernelNames, Some(x), _) => write!(f, " (e.g. {:?})", short(x))?,
                        (Evidence::Marker, _, Some(s)) => write!(f, " ({s})")?,
                        _ => {}
                    }
                    if !one {
                        write!(f, ": {}", c.steps)?;
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_and_phase_lines_read_as_before() {
        let markers = StepSource::Markers {
            ranges: MarkerRanges::UserAnnotation,
            projected: Some(Projection::NoGpuRanges),
            names: ["a", "b", "c", "d"].map(String::from).to_vec(),
            more_names: 2,
        };
        assert_eq!(
            markers.to_string(),
            r#"markers: user_annotation "a", "b", "c", "d" and 2 more names (mapped to the GPU through launch correlation)"#
        );
        let periodic = StepSource::Periodic {
            anchor: "k_get_rows_float".into(),
            stride: 2,
            starts: 8,
            occurrences: 17,
            prefills: 1,
        };
        assert_eq!(
            periodic.to_string(),
            r#"auto: periodic kernel sequence, anchor "k_get_rows_float" (every 2nd of its 17 occurrences, 1 odd segment taken as prefill)"#
        );
        assert_eq!(
            StepSource::NoKernels.to_string(),
            "none: the trace has no kernels"
        );
        let phases = PhaseSource::from_evidence(
            &[
                Evidence::Assumed,
                Evidence::KernelNames,
                Evidence::KernelNames,
            ],
            Some("flash_fwd_splitkv_kernel".into()),
            None,
        );
        assert_eq!(
            phases.to_string(),
            r#"phase-specific kernel names (e.g. "flash_fwd_splitkv_kernel"): 2, assumed decode (no metadata, no phase-specific kernels): 1"#
        );
        let one =
            PhaseSource::from_evidence(&[Evidence::Marker], None, Some("engine step records"));
        assert_eq!(one.to_string(), "marker metadata (engine step records)");
        assert_eq!(PhaseSource::None.to_string(), "");
    }
}
