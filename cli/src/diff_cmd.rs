//! `gapscope diff A B`: where the per-step gap between two traces (maybe two engines) lives.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use gapscope_analyzer::diff::{DiffReport, FloorCeilings, diff_with_floor};
use gapscope_analyzer::roofline::bucket_floor::MATMUL_BUCKETS;
use gapscope_analyzer::roofline::{WeightFormat, hw, peak_flops};

use crate::render::{ms, short, write_stdout};
use crate::report_cmd::AnalysisArgs;

#[derive(Args)]
pub struct DiffArgs {
    /// The trace to explain (usually the slower engine).
    pub a: PathBuf,
    /// The reference trace.
    pub b: PathBuf,
    /// JSON output (with schema_version).
    #[arg(long, group = "fmt")]
    pub json: bool,
    /// Markdown report.
    #[arg(long, group = "fmt")]
    pub markdown: bool,
    /// GPU for what-ifs against each bucket's floor (engine traces declare bytes/FLOPs).
    #[arg(long = "hw", value_name = "GPU")]
    pub hardware: Option<String>,
    /// Weight format whose tensor peak bounds the compute floor (with --hw).
    #[arg(long, default_value = "bf16")]
    pub weights: String,
    /// Kernels listed in the structural and top-moved sections.
    #[arg(long = "list", default_value_t = 10, value_name = "N")]
    pub list: usize,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
}

pub fn run(a: DiffArgs, g: &crate::Global) -> Result<ExitCode> {
    let analyser = a.analysis.analyser(g.quiet, true)?;
    let reports = [analyser.run(&a.a)?, analyser.run(&a.b)?];
    let floor = match &a.hardware {
        Some(gpu) => {
            let hw = hw::lookup(gpu)?;
            let fmt = WeightFormat::parse(&a.weights)
                .ok_or_else(|| anyhow::anyhow!("--weights {:?}: unknown format", a.weights))?;
            Some(FloorCeilings {
                bytes_per_s: hw.hbm_bytes_per_s,
                flops_per_s: peak_flops(&hw, fmt),
            })
        }
        None => None,
    };
    let d = diff_with_floor(&reports[0], &reports[1], a.list, floor);
    let out = if a.json {
        serde_json::to_string_pretty(&d)? + "\n"
    } else {
        render(&d, a.markdown)
    };
    write_stdout(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// The matmul buckets taken together: engines split the same linear layers between GEMV
/// and GEMM kernels differently, so across engines their sum is the comparable figure.
/// `(A ms/step, B ms/step, share of the gap %)`, or `None` when neither side has any.
fn matmul_together(d: &DiffReport) -> Option<(f64, f64, f64)> {
    let rows: Vec<_> = d
        .buckets
        .iter()
        .filter(|x| MATMUL_BUCKETS.contains(&x.bucket))
        .collect();
    if rows.len() < 2 {
        return None;
    }
    let a: f64 = rows.iter().map(|x| x.a_ms_per_step).sum();
    let b: f64 = rows.iter().map(|x| x.b_ms_per_step).sum();
    let share: f64 = rows.iter().map(|x| x.share_of_gap_pct).sum();
    Some((a, b, share))
}

fn ratio(d: &DiffReport) -> f64 {
    if d.b.step_ms > 0.0 {
        d.a.step_ms / d.b.step_ms
    } else {
        0.0
    }
}

fn render(d: &DiffReport, md: bool) -> String {
    if md {
        return markdown(d);
    }
    let mut s = String::new();
    let line = |s: &mut String, cells: &[String]| {
        s.push_str(&format!(
            "{:<16}{}\n",
            cells[0],
            cells[1..]
                .iter()
                .map(|c| format!("{c:>12}"))
                .collect::<String>()
        ));
    };
    s.push_str(&format!(
        "A: {} ({} decode steps, {} ms/step, busy {} ms/step)\n",
        d.a.path,
        d.a.decode_steps,
        ms(d.a.step_ms),
        ms(d.a.busy_ms)
    ));
    s.push_str(&format!(
        "B: {} ({} decode steps, {} ms/step, busy {} ms/step)\n",
        d.b.path,
        d.b.decode_steps,
        ms(d.b.step_ms),
        ms(d.b.busy_ms)
    ));
    s.push_str(&format!(
        "gap: A - B = {} ms/step ({:.2}x); graph replays: {}\n\n",
        ms(d.gap_ms),
        ratio(d),
        d.structural.graph_replays
    ));
    let head: Vec<String> = BUCKET_HEAD.iter().map(|x| x.to_string()).collect();
    line(&mut s, &head);
    for cells in bucket_rows(d) {
        line(&mut s, &cells);
    }
    s.push_str(&format!("shares sum to {:.1}%\n", shares_total(d)));
    if let Some((a, b, share)) = matmul_together(d) {
        s.push_str(&format!(
            "gemv + gemm_quant + gemm_dense together: A {} ms/step, B {} ms/step, delta {} ms ({share:.1}% of gap)\n",
            ms(a),
            ms(b),
            ms(a - b)
        ));
    }
    s.push('\n');
    let st = &d.structural;
    s.push_str(&format!(
        "kernels per step: A {:.1}, B {:.1}; extra copies/step in A: {:+.1}; extra gathers/step in A: {:+.1}\n",
        st.a_kernels_per_step, st.b_kernels_per_step, st.extra_copies_per_step, st.extra_gathers_per_step
    ));
    for (label, list) in [("only in A", &st.only_in_a), ("only in B", &st.only_in_b)] {
        if !list.is_empty() {
            s.push_str(&format!("{label}: "));
            let items: Vec<String> = list
                .iter()
                .take(5)
                .map(|(n, c)| format!("{} ({c:.1}/step)", short(n)))
                .collect();
            s.push_str(&items.join(", "));
            s.push('\n');
        }
    }
    s.push_str(
        "\nwhat-if (A's step if one bucket took B's time / disappeared / ran at its floor):\n",
    );
    for w in d.what_if.iter().take(5) {
        s.push_str(&format!(
            "  {:<16} {} ms (gain {}) / {} ms / {}\n",
            w.bucket.to_string(),
            ms(w.as_b_ms),
            ms(w.gain_as_b_ms),
            ms(w.without_ms),
            w.at_floor_ms
                .map(|f| format!("{} ms", ms(f)))
                .unwrap_or_else(|| "-".into())
        ));
    }
    s.push_str("\ntop kernels that moved (ms/step, A vs B):\n");
    for k in &d.top_moved {
        s.push_str(&format!(
            "  {:>9} {:>9} {:>+9.4}  [{}] {}\n",
            ms(k.a_ms_per_step),
            ms(k.b_ms_per_step),
            k.delta_ms,
            k.bucket,
            short(&k.name)
        ));
    }
    s
}

const BUCKET_HEAD: [&str; 7] = [
    "bucket",
    "A ms/step",
    "B ms/step",
    "delta ms",
    "% of gap",
    "A calls",
    "B calls",
];

/// The bucket rows, then the residual row.
fn bucket_rows(d: &DiffReport) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = d
        .buckets
        .iter()
        .map(|x| {
            vec![
                x.bucket.to_string(),
                ms(x.a_ms_per_step),
                ms(x.b_ms_per_step),
                ms(x.delta_ms),
                format!("{:.1}%", x.share_of_gap_pct),
                format!("{:.1}", x.a_calls_per_step),
                format!("{:.1}", x.b_calls_per_step),
            ]
        })
        .collect();
    rows.push(vec![
        "residual (idle)".into(),
        String::new(),
        String::new(),
        ms(d.residual_ms),
        format!("{:.1}%", d.residual_share_pct),
        String::new(),
        String::new(),
    ]);
    rows
}

fn shares_total(d: &DiffReport) -> f64 {
    d.buckets.iter().map(|x| x.share_of_gap_pct).sum::<f64>() + d.residual_share_pct
}

/// A kernel name as Markdown inline code (angle brackets and pipes stay literal).
fn code(name: &str) -> String {
    format!("`{}`", short(name).replace('`', "'").replace('|', "\\|"))
}

/// A Markdown table whose columns from `numeric` on are right-aligned.
fn md_table(s: &mut String, head: &[&str], numeric: usize, rows: &[Vec<String>]) {
    s.push_str(&format!("| {} |\n", head.join(" | ")));
    let align: Vec<&str> = (0..head.len())
        .map(|i| if i < numeric { "---" } else { "---:" })
        .collect();
    s.push_str(&format!("|{}|\n", align.join("|")));
    for r in rows {
        s.push_str(&format!("| {} |\n", r.join(" | ")));
    }
}

fn markdown(d: &DiffReport) -> String {
    let mut s = String::from("## gapscope diff\n\n");
    for (label, side) in [("A", &d.a), ("B", &d.b)] {
        s.push_str(&format!(
            "- **{label}**: `{}`: {} decode steps, {} ms/step, GPU busy {} ms/step\n",
            side.path,
            side.decode_steps,
            ms(side.step_ms),
            ms(side.busy_ms)
        ));
    }
    s.push_str(&format!(
        "- **gap**: A − B = {} ms/step (A's step is {:.2}× B's)\n",
        ms(d.gap_ms),
        ratio(d)
    ));
    s.push_str(&format!(
        "- **CUDA graph replays**: {}\n\n",
        d.structural.graph_replays
    ));
    s.push_str("### Gap by bucket\n\n");
    md_table(&mut s, &BUCKET_HEAD, 1, &bucket_rows(d));
    s.push_str(&format!(
        "\nShares sum to {:.1}%. `residual (idle)` is the part of the gap no bucket explains: \
         launch and host gaps (GPU idle) and overlap.\n",
        shares_total(d)
    ));
    if let Some((a, b, share)) = matmul_together(d) {
        s.push_str(&format!(
            "\nThe matmul buckets together (gemv + gemm_quant + gemm_dense; engines split the \
             same linear layers between them differently): A {} ms/step, B {} ms/step, delta {} \
             ms ({share:.1}% of the gap).\n",
            ms(a),
            ms(b),
            ms(a - b)
        ));
    }
    let st = &d.structural;
    s.push_str("\n### Structure per step\n\n");
    s.push_str(&format!(
        "- kernels per step: A {:.1}, B {:.1}\n- extra copies per step in A: {:+.1}; extra gathers per step in A: {:+.1}\n",
        st.a_kernels_per_step, st.b_kernels_per_step, st.extra_copies_per_step, st.extra_gathers_per_step
    ));
    for (label, list) in [("only in A", &st.only_in_a), ("only in B", &st.only_in_b)] {
        if !list.is_empty() {
            let items: Vec<String> = list
                .iter()
                .take(5)
                .map(|(n, c)| format!("{} ({c:.1}/step)", code(n)))
                .collect();
            s.push_str(&format!("- {label}: {}\n", items.join(", ")));
        }
    }
    s.push_str("\n### What-if: A's step if one bucket changed\n\n");
    let rows: Vec<Vec<String>> = d
        .what_if
        .iter()
        .take(5)
        .map(|w| {
            vec![
                w.bucket.to_string(),
                ms(w.as_b_ms),
                ms(w.gain_as_b_ms),
                ms(w.without_ms),
                w.at_floor_ms.map(ms).unwrap_or_else(|| "-".into()),
            ]
        })
        .collect();
    md_table(
        &mut s,
        &[
            "bucket",
            "with B's time, ms",
            "gain, ms",
            "without it, ms",
            "at its floor, ms",
        ],
        1,
        &rows,
    );
    s.push_str("\n### Top kernels that moved\n\n");
    let rows: Vec<Vec<String>> = d
        .top_moved
        .iter()
        .map(|k| {
            vec![
                code(&k.name),
                k.bucket.to_string(),
                ms(k.a_ms_per_step),
                ms(k.b_ms_per_step),
                format!("{:+.4}", k.delta_ms),
            ]
        })
        .collect();
    md_table(
        &mut s,
        &["kernel", "bucket", "A ms/step", "B ms/step", "delta ms"],
        2,
        &rows,
    );
    s
}
