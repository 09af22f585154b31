//! The explorer's command line, as typed settings (no clap: the GUI takes a handful of
//! options, and the dependency rules keep command-line crates in the CLI).

use std::path::PathBuf;

use gapscope_analyzer::roofline::MAX_TP;
use gapscope_analyzer::session::{Knobs, SessionSettings};

use crate::views::View;

pub const USAGE: &str = "\
gapscope-gui: the gapscope trace explorer

usage: gapscope-gui [TRACE...] [options]

TRACE is a native trace (.gst), a PyTorch/Kineto JSON (.json or .json.gz) or an nsys
SQLite export (.sqlite). Open more from the window (Open…, or drop files on it).
Several traces, or a directory of them, that name distinct ranks are opened as the ranks
of one run: each rank's trace opens as usual and the ranks view shows them together.

options:
  --view VIEW          start in timeline | steps | kernels | diff | roofline | telemetry
                       | ranks (the default for the ranks of one run)
  --step-aligned       start the timeline with every step the same width
  --step K             start the timeline zoomed to step K, numbered as gapscope report
                       numbers them (the decode steps from 0; a prefill is not one)
  --model CONFIG.json  the model's Hugging Face config.json, for the roofline
  --hw GPU             the roofline's GPU (h100-sxm, h200, ...; default: the trace's GPU)
  --hw-profile P.json  measured ceilings from `gapscope-engine calibrate` instead
  --weights FMT        bf16 (default), fp8, q8_0, q4_0, q4_k, nvfp4 or mxfp4
  --ctx N              the roofline's context (KV tokens per sequence; default: the
                       trace's own when its markers carry it, else 4096, said assumed)
  --tp N               the roofline's tensor-parallel degree, 1 to 64 (floors per rank;
                       default: the trace's rank count when it says, else 1)
analysis options, as for `gapscope report`:
  --rules FILE         extra bucket rules (TOML), tried before the built-in ones
  --step-regex REGEX   marker names that delimit steps, instead of the automatic choice
  --no-markers         find steps from the periodic kernel sequence, ignoring markers
  --allow-truncated    load what a truncated JSON/gzip file holds instead of refusing it
  --max-events N       refuse inputs with more events than N (default 3,000,000,
                       any format; 0 lifts the limit)
  --max-steps N        analyse at most N steps (default 100,000; 0 lifts the limit)
  --spec-metrics FILE  speculative runs: the engine's acceptance counters (vLLM, SGLang or
                       llama.cpp logs, vllm bench serve output, vLLM's Prometheus text)
  --screenshot OUT.png render --view once, write a PNG of exactly --size and exit: 0 when
                       written, 2 on an error (a smaller screen included). Needs a display;
                       headless: xvfb-run -a -s \"-screen 0 1920x1080x24\" gapscope-gui ...
  --size WxH           window size (default 1600x900)
  --theme THEME        dark (default) or light
  -h, --help           this text
  -V, --version        the version

keys: W/S zoom, A/D pan, F fit, Esc clear the selection; Ctrl+wheel zooms, Shift+wheel
pans, drag selects a box (sums by bucket), right-drag pans, double-click a step zooms to it.
Track labels: click collapses or expands, drag reorders, drag the lower edge resizes,
right-click pins, hides or moves; the layout is kept per kind of trace in
$GAPSCOPE_CONFIG_DIR, else $XDG_CONFIG_HOME/gapscope or ~/.config/gapscope.
";

#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub traces: Vec<PathBuf>,
    pub view: View,
    /// `--view` was given (else the ranks of one run open in the ranks view).
    pub view_given: bool,
    pub step_aligned: bool,
    pub step: Option<usize>,
    pub model: Option<PathBuf>,
    pub hw: Option<String>,
    pub hw_profile: Option<PathBuf>,
    pub weights: Option<String>,
    /// `--ctx`: the roofline's context, tokens.
    pub ctx: Option<u64>,
    /// `--tp`: the roofline's tensor-parallel degree.
    pub tp: Option<u64>,
    /// What changes the analysis, as the CLI's flags set it.
    pub knobs: Knobs,
    pub screenshot: Option<PathBuf>,
    pub size: [u32; 2],
    /// `--theme`: dark (the default) or light.
    pub light: bool,
    /// Where the timeline's track layout is kept per kind of trace (`main` sets it from
    /// the environment; none keeps nothing).
    pub layout_dir: Option<PathBuf>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            traces: Vec::new(),
            view: View::Timeline,
            view_given: false,
            step_aligned: false,
            step: None,
            model: None,
            hw: None,
            hw_profile: None,
            weights: None,
            ctx: None,
            tp: None,
            knobs: Knobs {
                all_columns: true,
                ..Knobs::default()
            },
            screenshot: None,
            size: [1600, 900],
            light: false,
            layout_dir: None,
        }
    }
}

impl Settings {
    /// The session settings the explorer opens traces with; an error (a bad rules file or
    /// step regex) comes with the settings used instead: the built-in rules and automatic
    /// steps, the other options as given.
    pub fn session_settings(&self) -> (SessionSettings, Option<String>) {
        let mut knobs = self.knobs.clone();
        // A binary names where a private copy may go (an nsys export's `-wal` without `-shm`).
        knobs.scratch_dir = Some(std::env::temp_dir());
        match SessionSettings::resolve(&knobs) {
            Ok(s) => (s, None),
            Err(e) => {
                let fallback = Knobs {
                    rules_file: None,
                    step_regex: None,
                    spec_metrics: None,
                    ..knobs
                };
                let s = SessionSettings::resolve(&fallback).unwrap_or_default();
                (s, Some(crate::loader::one_line(&e.to_string())))
            }
        }
    }
}

/// What the command line asks for.
#[derive(Debug, PartialEq)]
pub enum Command {
    Run(Box<Settings>),
    Help,
    Version,
}

/// Parses the arguments after the program name; errors are one line.
pub fn parse(args: &[String]) -> Result<Command, String> {
    let mut s = Settings::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| -> Result<String, String> {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value (see --help)"))
        };
        match a.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "-V" | "--version" => return Ok(Command::Version),
            "--view" => {
                let v = value(a)?;
                s.view_given = true;
                s.view = View::parse(&v).ok_or_else(|| {
                    format!(
                        "--view {v:?}: use timeline, steps, kernels, diff, roofline, telemetry or ranks"
                    )
                })?;
            }
            "--step-aligned" => s.step_aligned = true,
            "--step" => {
                let v = value(a)?;
                s.step = Some(
                    v.parse()
                        .map_err(|_| format!("--step {v:?}: not a step number"))?,
                );
            }
            "--model" => s.model = Some(value(a)?.into()),
            "--hw" => s.hw = Some(value(a)?),
            "--hw-profile" => s.hw_profile = Some(value(a)?.into()),
            "--weights" => s.weights = Some(value(a)?),
            "--ctx" => s.ctx = Some(number(a, &value(a)?)?),
            "--tp" => {
                let v = value(a)?;
                let tp: u64 = number(a, &v)?;
                if !(1..=MAX_TP).contains(&tp) {
                    return Err(format!("--tp {v:?}: the degree is 1..={MAX_TP}"));
                }
                s.tp = Some(tp);
            }
            "--rules" => s.knobs.rules_file = Some(value(a)?.into()),
            "--step-regex" => s.knobs.step_regex = Some(value(a)?),
            "--no-markers" => s.knobs.no_markers = true,
            "--allow-truncated" => s.knobs.allow_truncated = true,
            // 0 lifts either limit, as on the command line.
            "--max-events" => s.knobs.max_events = Some(number(a, &value(a)?)?),
            "--max-steps" => s.knobs.max_steps = Some(number(a, &value(a)?)?),
            "--spec-metrics" => s.knobs.spec_metrics = Some(value(a)?.into()),
            "--screenshot" => s.screenshot = Some(value(a)?.into()),
            "--theme" => {
                let v = value(a)?;
                s.light = match v.as_str() {
                    "light" => true,
                    "dark" => false,
                    _ => return Err(format!("--theme {v:?}: use dark or light")),
                };
            }
            "--size" => {
                let v = value(a)?;
                s.size = parse_size(&v).ok_or_else(|| {
                    format!("--size {v:?}: use WIDTHxHEIGHT, e.g. 1600x900 (each 64..=8192)")
                })?;
            }
            other if other.starts_with('-') && other.len() > 1 => {
                return Err(format!("unknown option {other:?} (see --help)"));
            }
            path => s.traces.push(path.into()),
        }
    }
    if s.screenshot.is_some() && s.traces.is_empty() {
        return Err("--screenshot needs at least one TRACE".into());
    }
    if s.screenshot.is_some() && s.view == View::Diff && s.traces.len() < 2 {
        return Err("--view diff needs two traces".into());
    }
    Ok(Command::Run(Box::new(s)))
}

fn number<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, String> {
    v.parse().map_err(|_| format!("{name} {v:?}: not a number"))
}

fn parse_size(v: &str) -> Option<[u32; 2]> {
    let (w, h) = v.split_once(['x', 'X'])?;
    let (w, h) = (w.trim().parse().ok()?, h.trim().parse().ok()?);
    let ok = |x: u32| (64..=8192).contains(&x);
    (ok(w) && ok(h)).then_some([w, h])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn tp_is_a_degree_from_1_to_64() {
        let Ok(Command::Run(s)) = parse(&args("a.gst --tp 4")) else {
            panic!("should parse")
        };
        assert_eq!(s.tp, Some(4));
        for bad in ["a.gst --tp 0", "a.gst --tp 65", "a.gst --tp x"] {
            assert!(parse(&args(bad)).unwrap_err().contains("--tp"), "{bad}");
        }
    }

    #[test]
    fn parses_screenshot_options_and_rejects_bad_ones() {
        let Ok(Command::Run(s)) = parse(&args(
            "a.gst b.json.gz --view diff --screenshot o.png --size 800x600",
        )) else {
            panic!("should parse")
        };
        assert_eq!(s.traces.len(), 2);
        assert_eq!((s.view, s.size), (View::Diff, [800, 600]));
        assert!(
            parse(&args("a.gst --view nope"))
                .unwrap_err()
                .contains("--view")
        );
        assert!(
            parse(&args("a.gst --size 10x10"))
                .unwrap_err()
                .contains("--size")
        );
        assert!(parse(&args("--screenshot o.png")).is_err());
        assert!(parse(&args("a.gst --view diff --screenshot o.png")).is_err());
        assert_eq!(parse(&args("--help")), Ok(Command::Help));
    }
}
