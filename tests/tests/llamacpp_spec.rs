//! llama.cpp's speculative decoding (`llama-speculative-simple`, a 4-layer draft of a
//! Llama-3.2-1B-shaped target, k=4) recorded on an H200 with `gapscope-record`
//! (traces/reference/llamacpp-spec/SOURCE.md), read against llama.cpp's own log of the run:
//! one `accepted A/D draft tokens` line per verify.
#![allow(clippy::unwrap_used, reason = "tests")]

use std::io::Read;
use std::path::Path;

use gapscope_analyzer::analysis::spec::{SpecEvidence, TokensSource};
use gapscope_analyzer::import::NoProgress;
use gapscope_analyzer::session::{Knobs, Run, SessionSettings, open_run};
use gapscope_traces::Phase;

fn gunzip(path: &Path) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// The recording unpacked into `dir` (its files are committed gzip-compressed), and the log.
fn unpack(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let src = gapscope_tests::repo("traces/reference/llamacpp-spec");
    let gst = dir.join("spec-k4-s0.1.gst");
    std::fs::create_dir(&gst).unwrap();
    let mut n = 0;
    for e in std::fs::read_dir(src.join("spec-k4-s0.1.gst")).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap();
        let plain = name.strip_suffix(".gz").unwrap();
        std::fs::write(gst.join(plain), gunzip(&p)).unwrap();
        n += 1;
    }
    assert!(n >= 9, "{n} files in the recording");
    let log = dir.join("spec-k4-s0.1.log");
    std::fs::write(&log, gunzip(&src.join("spec-k4-s0.1.log.gz"))).unwrap();
    (gst, log)
}

/// (accepted, drafted) per verify, from llama.cpp's log (parsed here, not by gapscope).
fn truth(log: &Path) -> Vec<(i64, i64)> {
    let bytes = std::fs::read(log).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    text.lines()
        .filter_map(|l| {
            let rest = &l[l.find("accepted ")? + "accepted ".len()..];
            let (counts, tail) = rest.split_once(' ')?;
            tail.starts_with("draft tokens").then_some(())?;
            let (a, d) = counts.split_once('/')?;
            Some((a.parse().ok()?, d.parse().ok()?))
        })
        .collect()
}

#[test]
fn forwards_steps_and_acceptance_equal_llamacpp_s_own_log() {
    let dir = tempfile::tempdir().unwrap();
    let (gst, log) = unpack(dir.path());
    let steps = truth(&log);
    assert_eq!(steps.len(), 60);
    let knobs = Knobs {
        spec_metrics: Some(log.clone()),
        ..Knobs::default()
    };
    let settings = SessionSettings::resolve(&knobs).unwrap();
    let run = open_run(Run::new(&gst), &settings, &NoProgress).unwrap();
    let spec = run.steps.spec.as_ref().expect("speculative steps");
    assert_eq!(spec.evidence, Some(SpecEvidence::ForwardDepths));
    // Without the log, the trace does not show tokens.
    assert_eq!(spec.tokens_source, TokensSource::Unknown);
    // Target: the 60 verifies, the prompt and llama.cpp's two warm-up forwards. Draft: one
    // forward per drafted token (the first sampled from the draft's forward of the pending
    // token, each next from the previous one's), one per verify catching up on the verified
    // batch, one for the prompt and one warm-up.
    let drafted: i64 = steps.iter().map(|s| s.1).sum();
    assert_eq!(drafted, 237);
    assert_eq!(spec.target_forwards, 60 + 3);
    assert_eq!(spec.draft_forwards as i64, drafted + 60 + 2);
    let decode: Vec<_> = spec
        .cycles
        .iter()
        .filter(|c| c.phase == Phase::Decode)
        .collect();
    assert_eq!(decode.len(), steps.len(), "one decode step per verify");
    assert_eq!(spec.cycles.len() - decode.len(), 3, "prefill steps");
    for (i, (c, &(_, d))) in decode.iter().zip(&steps).enumerate() {
        // The verify's rows (from its GEMV names) are the pending token and the drafts.
        assert_eq!(c.candidates(), Some(d), "step {i}");
    }
    let r = run.report.speculative.as_ref().unwrap();
    assert_eq!(r.tokens_source, TokensSource::MetricsPerStep);
    // The last step's period is not in the trace: the figures cover the others.
    let known = &steps[..steps.len() - 1];
    assert_eq!(r.steps_with_tokens, known.len());
    let mean = known.iter().map(|s| s.0 + 1).sum::<i64>() as f64 / known.len() as f64;
    assert!((r.tokens_per_step.unwrap() - mean).abs() < 1e-9);
    // Acceptance by position against llama.cpp's own `#acc rate/pos` over all 60 steps.
    for (p, want) in r.per_position.iter().zip([0.617, 0.333, 0.117, 0.117]) {
        assert!(
            (p.rate - want).abs() <= 0.02,
            "position {}: {} vs {want}",
            p.position,
            p.rate
        );
    }
    // The by-bucket split keeps each forward's kernels in its role: it adds up to the
    // forwards' own kernel time.
    let d: f64 = r.by_bucket.iter().map(|b| b.draft_ms_per_step).sum();
    let v: f64 = r.by_bucket.iter().map(|b| b.verify_ms_per_step).sum();
    assert!(
        (d - r.draft_ms_per_step).abs() < 1e-6,
        "{d} {}",
        r.draft_ms_per_step
    );
    assert!(
        (v - r.verify_ms_per_step).abs() < 1e-6,
        "{v} {}",
        r.verify_ms_per_step
    );
}
