//! Report renderers. All read the typed report; the table and Markdown renderers share the
//! same cells so they cannot disagree.

pub mod colour;
pub mod csv;
pub mod html;
pub mod json;
pub mod markdown;
pub mod names;
pub mod ranks;
pub mod roofline_svg;
mod spec;
pub mod table;

use std::io::Write;

use gapscope_analyzer::analysis::telemetry::MinMedianMax;
use gapscope_analyzer::analysis::{BucketRow, Report, TelemetryReport};

/// Writes to stdout, treating a closed pipe (`| head`) as success.
pub fn write_stdout(s: &str) -> anyhow::Result<()> {
    write_stdout_raw(&terminal_safe(s))
}

/// [`write_stdout`] for text already made terminal-safe (with gapscope's own colour).
pub(crate) fn write_stdout_raw(s: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(s.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(anyhow::anyhow!("writing to stdout: {e}")),
    }
}

/// The last guard before a terminal: every control character but newline and tab, as
/// `\uXXXX` (what JSON writes for one, so JSON output stays valid and means the same). Fields
/// taken from input are escaped where they are formatted ([`text`]); this catches any that
/// were not, so nothing from a trace can drive the terminal (C1 controls and DEL included,
/// which JSON itself leaves raw).
pub fn terminal_safe(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

pub use gapscope_analyzer::text::{count, cut};
pub use names::Names;

/// Columns of the terminal stdout writes to; `None` when stdout is not a terminal (pipes
/// and files get whole lines). `COLUMNS` overrides what the terminal reports.
#[expect(
    clippy::disallowed_methods,
    reason = "a binary reads its environment (COLUMNS)"
)]
pub fn terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    if let Some(c) = std::env::var("COLUMNS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        && c > 0
    {
        return Some(c);
    }
    // SAFETY: winsize is plain integers, for which all-zero bytes are a valid value.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    // SAFETY: TIOCGWINSZ writes one winsize into the struct we pass; fd 1 is stdout.
    let ok = unsafe { libc::ioctl(1, libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_col > 0).then_some(ws.ws_col as usize)
}

/// Figures as text: the analyzer's one formatting module, shared with the explorer.
pub use gapscope_analyzer::text::{ms, pct};

fn opt(v: Option<f64>, f: fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".into())
}

/// The CUDA-graph part of the events line: graph launches are host calls, so a trace
/// without launch records says where its graph kernels were recognised instead.
fn graph_note(s: &gapscope_analyzer::analysis::SourceInfo) -> String {
    match (s.graph_launches, s.graph_kernels) {
        (0, 0) => String::new(),
        (0, k) if s.launches == 0 => format!(
            "; {} kernels carry a CUDA graph id (host launches not recorded)",
            count(k as u64)
        ),
        (l, k) => format!(
            "; {} graph launches, {} kernels replayed from graphs",
            count(l as u64),
            count(k as u64)
        ),
    }
}

/// Text from a trace (kernel names, labels, paths) made safe for a terminal: control
/// characters (escape sequences, carriage returns, NULs) are shown as `\u{..}` escapes.
pub fn text(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_owned();
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                format!("\\u{{{:x}}}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Trace text as Markdown prose: control characters escaped as in [`text`], and every
/// character Markdown or an HTML renderer would act on (links, images, emphasis, tables,
/// tags) backslash-escaped.
pub fn md_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in text(s).chars() {
        if matches!(
            c,
            '\\' | '`'
                | '*'
                | '_'
                | '['
                | ']'
                | '('
                | ')'
                | '<'
                | '>'
                | '|'
                | '!'
                | '#'
                | '~'
                | '&'
        ) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Trace text as Markdown inline code: control characters escaped, backticks (which would
/// end the span) shown as `'`, and table pipes escaped.
pub fn md_code(s: &str) -> String {
    format!("`{}`", text(s).replace('`', "'").replace('|', "\\|"))
}

/// Summary lines as (label, value).
#[expect(
    clippy::too_many_lines,
    reason = "one line group after another, in the order the report's text shows them"
)]
pub fn summary(r: &Report) -> Vec<(String, String)> {
    let mut v = Vec::new();
    if !r.plausibility.plausible {
        v.push((
            "WARNING".into(),
            format!(
                "these steps look implausible, so the per-step figures below may mean nothing: {}",
                r.plausibility.summary()
            ),
        ));
    }
    let s = &r.source;
    v.push(("trace".into(), format!("{} ({})", text(&s.path), s.format)));
    if let Some(from) = &s.converted_from {
        v.push(("source".into(), format!("converted from {}", text(from))));
    }
    if !s.gpus.is_empty() {
        let gpus: Vec<String> = s.gpus.iter().map(|g| text(g)).collect();
        v.push(("gpu".into(), gpus.join("; ")));
    }
    v.push((
        "events".into(),
        format!(
            "{} kernels, {} memops, {} launches, {} markers{}{}{}",
            count(s.kernels as u64),
            count(s.memops as u64),
            count(s.launches as u64),
            count(s.markers as u64),
            if s.scopes > 0 {
                format!(", {} host scopes", count(s.scopes as u64))
            } else {
                String::new()
            },
            graph_note(s),
            if s.truncated { " (TRUNCATED)" } else { "" }
        ),
    ));
    for n in &s.notes {
        v.push(("note".into(), text(n)));
    }
    use gapscope_analyzer::analysis::steps::{PhaseSource, StepKind};
    let st = &r.steps;
    let engine = st
        .engine
        .as_deref()
        .map(|e| format!("{}: ", text(e)))
        .unwrap_or_default();
    if st.kind == StepKind::TrainingIterations {
        v.push((
            "steps".into(),
            format!(
                "{} training iterations (a training trace: {}); {engine}{}",
                st.iterations,
                text(st.training.as_deref().unwrap_or("")),
                text(&st.source.to_string())
            ),
        ));
        if let Some(t) = &st.iteration_ms {
            v.push((
                "iteration".into(),
                format!(
                    "median {} ms, p99 {} ms, max {} ms, CV {:.1}% (n={}); not TPOT: iterations \
                     of a training run",
                    ms(t.median),
                    ms(t.p99),
                    ms(t.max),
                    100.0 * t.cv,
                    t.n
                ),
            ));
        }
    } else {
        let mixed = if st.mixed_steps > 0 {
            format!(", {} mixed", st.mixed_steps)
        } else {
            String::new()
        };
        let phases = if st.phase_source == PhaseSource::None {
            String::new()
        } else {
            format!("; phases: {}", text(&st.phase_source.to_string()))
        };
        v.push((
            "steps".into(),
            format!(
                "{} decode, {} prefill{mixed}; {engine}{}{phases}",
                st.decode_steps,
                st.prefill_steps,
                text(&st.source.to_string())
            ),
        ));
    }
    if let Some(t) = &st.tpot_ms {
        v.push((
            "TPOT".into(),
            format!(
                "median {} ms, p99 {} ms, max {} ms, CV {:.1}% (n={})",
                ms(t.median),
                ms(t.p99),
                ms(t.max),
                100.0 * t.cv,
                t.n
            ),
        ));
    } else if let Some(sp) = &st.decode_span_ms {
        v.push((
            "TPOT".into(),
            format!(
                "n/a: TPOT needs two consecutive decode steps; the decode step spans {} ms (n={})",
                ms(sp.median),
                sp.n
            ),
        ));
    } else if st.kind == StepKind::InferenceSteps && (st.prefill_steps > 0 || st.mixed_steps > 0) {
        v.push((
            "TPOT".into(),
            "n/a: no pure decode step (TPOT comes from decode steps only)".into(),
        ));
    }
    if let Some(p) = &st.prefill_ms {
        v.push((
            "prefill".into(),
            format!("median {} ms (n={})", ms(p.median), p.n),
        ));
    }
    if let Some(m) = &st.mixed_ms {
        v.push((
            "mixed".into(),
            format!(
                "median {} ms (n={}); prefill and decode requests in one step, not in TPOT",
                ms(m.median),
                m.n
            ),
        ));
    }
    if let Some(sp) = &r.speculative {
        v.extend(spec::lines(sp, text));
    }
    for d in &r.devices {
        v.push((
            format!("GPU {} busy", d.device),
            format!(
                "{} kernels+memops, {} kernels only (interval union over a {} ms span)",
                pct(d.busy_pct),
                pct(d.kernel_busy_pct),
                ms(d.span_ns as f64 / 1e6)
            ),
        ));
    }
    let training = r.bucket_scope == gapscope_analyzer::analysis::BucketScope::TrainingIterations;
    let (window, unit) = if training {
        ("iteration window", "training iteration")
    } else {
        ("decode window", "decode step")
    };
    if let Some(b) = st.decode_busy_pct {
        v.push((
            window.into(),
            format!(
                "busy {}; idle: inside steps {} ms/step ({}), between steps {} ms/step ({})",
                pct(b),
                opt(st.launch_gap_ms_per_step, ms),
                opt(st.launch_gap_pct, pct),
                opt(st.host_gap_ms_per_step, ms),
                opt(st.host_gap_pct, pct)
            ),
        ));
    }
    if let Some(c) = &r.communication {
        v.push((
            "comm".into(),
            format!(
                "{} ms/step{} in communication kernels, waiting for the other ranks included: one trace cannot tell waiting from transfer (give every rank's trace){}",
                ms(c.ms_per_step),
                opt(c.share_of_step_pct, |p| format!(" ({} of the step)", pct(p))),
                c.floor.map_or(String::new(), |f| format!(
                    "; its messages ({} per step among {} ranks) need {} ms/step at {} GB/s each way (bandwidth alone, no latency)",
                    bytes_label(f.message_bytes_per_step),
                    f.ranks,
                    ms(f.floor_ms_per_step),
                    (f.link_bytes_per_s / 1e9).round()
                )),
            ),
        ));
    }
    if let Some(w) = &st.worst_stall {
        v.push((
            "worst stall".into(),
            format!(
                "{} ms GPU idle {} {unit} {}",
                ms(w.ms),
                if w.between_steps { "before" } else { "inside" },
                w.step
            ),
        ));
    }
    if let Some(h) = &r.host_idle {
        v.extend(host_idle(h));
    }
    v.push((
        "other".into(),
        format!(
            "{} of kernel time{}",
            pct(r.other.share_of_kernel_time_pct),
            if r.other.top.is_empty() {
                String::new()
            } else {
                let names = Names::of_report(r);
                format!(
                    "; top: {}",
                    r.other
                        .top
                        .iter()
                        .take(3)
                        .map(|n| format!("{} ({} ms)", text(&names.get(&n.name)), ms(n.ms)))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        ),
    ));
    v
}

/// The idle-cause lines: what the host was doing while the GPU sat idle inside the steps,
/// the scopes it was in, and the lever.
fn host_idle(h: &gapscope_analyzer::analysis::host::HostIdleReport) -> Vec<(String, String)> {
    let mut v = Vec::new();
    let row = &h.inside_steps;
    if row.idle_ms_per_step <= 0.0 {
        return v;
    }
    let parts: Vec<String> = row
        .ranked()
        .into_iter()
        .filter(|(_, x)| *x > 0.0)
        .map(|(cause, x)| {
            format!(
                "{} {} ({})",
                cause.label(),
                ms(x),
                pct(100.0 * x / row.idle_ms_per_step)
            )
        })
        .collect();
    v.push((
        "idle cause".into(),
        format!(
            "inside steps {} ms/step: {}; {} gaps, {} linked to their launch{}",
            ms(row.idle_ms_per_step),
            parts.join(", "),
            count(h.gaps as u64),
            pct(h.linked_pct),
            if h.scopes == 0 {
                "; no host scopes in the trace".to_owned()
            } else {
                format!("; {} host scopes", count(h.scopes as u64))
            }
        ),
    ));
    for (i, s) in h.top_scopes.iter().take(3).enumerate() {
        let context = s
            .stack
            .iter()
            .skip(1)
            .take(3)
            .map(|c| gapscope_analyzer::text::scope_name(c).into_owned())
            .collect::<Vec<_>>();
        v.push((
            if i == 0 {
                "host scopes".into()
            } else {
                String::new()
            },
            format!(
                "{} ms/step ({} of idle) {} [{}]{}",
                ms(s.ms_per_step),
                pct(s.share_of_idle_pct),
                text(&gapscope_analyzer::text::scope_name(&s.name)),
                s.kind,
                if context.is_empty() {
                    String::new()
                } else {
                    format!(" in {}", text(&context.join(" < ")))
                }
            ),
        ));
    }
    v.push(("lever".into(), text(&h.lever.to_string())));
    v
}

/// The `report --by` table: headers and rows.
pub fn group_cells(
    g: &gapscope_analyzer::analysis::host::GroupReport,
) -> (String, Vec<Vec<String>>) {
    let title = format!(
        "time by {} per step ({}; GPU time of the work each {} launched, host time inside it){}",
        g.by.as_str(),
        g.source,
        g.by.as_str(),
        if g.unattributed_gpu_ms_per_step > 0.0 {
            format!(
                "; {} ms/step of GPU time has no {}{}",
                ms(g.unattributed_gpu_ms_per_step),
                g.by.as_str(),
                if g.graph_gpu_ms_per_step > 0.0 {
                    format!(
                        ", {} ms/step of it replayed from CUDA graphs (one graph launch carries no {} of its own)",
                        ms(g.graph_gpu_ms_per_step.min(g.unattributed_gpu_ms_per_step)),
                        g.by.as_str()
                    )
                } else {
                    String::new()
                }
            )
        } else {
            String::new()
        }
    ) + &g.missing.map(|m| format!("\n{m}")).unwrap_or_default()
        + &g.graph_capture
            .as_ref()
            .map(|c| format!("\n{c}"))
            .unwrap_or_default();
    let rows = g
        .rows
        .iter()
        .map(|r| {
            vec![
                ms(r.gpu_ms_per_step),
                pct(r.gpu_share_pct),
                format!("{:.1}", r.calls_per_step),
                opt(r.host_ms_per_step, ms),
                text(&r.key),
            ]
        })
        .collect();
    (title, rows)
}

/// Headers of the `report --by` table.
pub const GROUP_HEADERS: [&str; 5] = ["GPU ms/step", "% GPU", "calls/step", "host ms/step", "key"];

/// Title of the telemetry section in the table and Markdown outputs.
pub const TELEMETRY_TITLE: &str = "Telemetry (NVML)";

/// Telemetry lines as (label, value): what the GPU's clocks, power and temperature were
/// during the steps, so a slow step can be told apart from a throttled GPU.
pub fn telemetry(t: &TelemetryReport) -> Vec<(String, String)> {
    let scope = t.window.map(|w| w.scope.describe()).unwrap_or("the steps");
    let gpu = t.device.map(|d| format!(" of GPU {d}")).unwrap_or_default();
    let mut v = vec![(
        "samples".to_owned(),
        format!(
            "{} inside {scope}{gpu} ({} in the trace)",
            count(t.samples_in_steps as u64),
            count(t.samples_total as u64)
        ),
    )];
    if t.samples_in_steps == 0 {
        return v;
    }
    let mmm = |r: Option<MinMedianMax>, decimals: usize, unit: &str| match r {
        Some(r) => format!(
            "min {:.d$} / median {:.d$} / max {:.d$} {unit}",
            r.min,
            r.median,
            r.max,
            d = decimals
        ),
        None => "not read".to_owned(),
    };
    v.push(("SM clock".into(), mmm(t.sm_clock_mhz, 0, "MHz")));
    v.push(("memory clock".into(), mmm(t.mem_clock_mhz, 0, "MHz")));
    v.push(("power".into(), mmm(t.power_w, 1, "W")));
    v.push((
        "temperature".into(),
        t.temperature_c_max
            .map(|c| format!("max {c} °C"))
            .unwrap_or_else(|| "not read".into()),
    ));
    v.push((
        "throttling".into(),
        if t.throttle_reasons_seen.is_empty() {
            "none".to_owned()
        } else {
            format!(
                "{} in {} of {} samples",
                t.throttle_reasons_seen.join(", "),
                t.throttled_samples,
                t.samples_in_steps
            )
        },
    ));
    v
}

pub const BUCKET_HEADERS: [&str; 9] = [
    "bucket",
    "ms/step",
    "p10",
    "p90",
    "calls/step",
    "total ms",
    "% busy",
    "% step",
    "top kernel",
];

/// Cells of the bucket table; kernel names as `names` prints them.
pub fn bucket_cells(rows: &[BucketRow], names: &Names) -> Vec<Vec<String>> {
    rows.iter()
        .map(|b| {
            let s = b.ms_per_step;
            vec![
                b.bucket.to_string(),
                opt(s.map(|s| s.median), ms),
                opt(s.map(|s| s.p10), ms),
                opt(s.map(|s| s.p90), ms),
                b.calls_per_step
                    .map(|c| format!("{c:.1}"))
                    .unwrap_or_else(|| b.calls.to_string()),
                ms(b.total_ms),
                pct(b.share_of_busy_pct),
                opt(b.share_of_step_pct, pct),
                b.top
                    .first()
                    .map(|t| text(&names.get(&t.name)))
                    .unwrap_or_default(),
            ]
        })
        .collect()
}

pub const TOP_HEADERS: [&str; 5] = ["bucket", "calls", "total ms", "ms/call", "kernel"];

/// One row per listed kernel name of each bucket: bucket, calls, total, mean, name (last,
/// as in the bucket table: a name column reads left-aligned, and gives way on a narrow
/// terminal).
pub fn top_cells(rows: &[BucketRow], names: &Names) -> Vec<Vec<String>> {
    rows.iter()
        .flat_map(|b| {
            b.top.iter().map(move |t| {
                vec![
                    b.bucket.to_string(),
                    t.calls.to_string(),
                    ms(t.ms),
                    ms(if t.calls > 0 {
                        t.ms / t.calls as f64
                    } else {
                        0.0
                    }),
                    text(&names.get(&t.name)),
                ]
            })
        })
        .collect()
}

/// Bytes with a binary unit: `8.0 KiB`, `1.5 MiB`.
pub fn bytes_label(b: f64) -> String {
    if !b.is_finite() {
        return "n/a".to_owned();
    }
    let (v, u) = if b >= 1024.0 * 1024.0 * 1024.0 {
        (b / (1024.0 * 1024.0 * 1024.0), "GiB")
    } else if b >= 1024.0 * 1024.0 {
        (b / (1024.0 * 1024.0), "MiB")
    } else if b >= 1024.0 {
        (b / 1024.0, "KiB")
    } else {
        return format!("{b:.0} B");
    };
    format!("{v:.1} {u}")
}

/// The roofline's wording against a floor, shared with the explorer.
pub use gapscope_analyzer::text::{pct1, x_floor};
