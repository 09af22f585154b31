//! `gapscope diff A B`: where the per-step gap between two traces (maybe two engines) lives.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use gapscope_analyzer::diff::{DiffReport, FloorCeilings, diff_with_floor};
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

fn render(d: &DiffReport, md: bool) -> String {
    let mut s = String::new();
    let line = |s: &mut String, cells: &[String]| {
        if md {
            s.push_str(&format!("| {} |\n", cells.join(" | ")));
        } else {
            s.push_str(&format!(
                "{:<16}{}\n",
                cells[0],
                cells[1..]
                    .iter()
                    .map(|c| format!("{c:>12}"))
                    .collect::<String>()
            ));
        }
    };
    if md {
        s.push_str("## gapscope diff\n\n");
    }
    let b = if md { "- " } else { "" };
    s.push_str(&format!(
        "{b}A: {} ({} decode steps, {} ms/step, busy {} ms/step)\n",
        d.a.path,
        d.a.decode_steps,
        ms(d.a.step_ms),
        ms(d.a.busy_ms)
    ));
    s.push_str(&format!(
        "{b}B: {} ({} decode steps, {} ms/step, busy {} ms/step)\n",
        d.b.path,
        d.b.decode_steps,
        ms(d.b.step_ms),
        ms(d.b.busy_ms)
    ));
    s.push_str(&format!(
        "{b}gap: A - B = {} ms/step ({:.2}x); graph replays: {}\n\n",
        ms(d.gap_ms),
        if d.b.step_ms > 0.0 {
            d.a.step_ms / d.b.step_ms
        } else {
            0.0
        },
        d.structural.graph_replays
    ));
    let head: Vec<String> = [
        "bucket",
        "A ms/step",
        "B ms/step",
        "delta ms",
        "% of gap",
        "A calls",
        "B calls",
    ]
    .iter()
    .map(|x| x.to_string())
    .collect();
    line(&mut s, &head);
    if md {
        s.push_str("|---|---:|---:|---:|---:|---:|---:|\n");
    }
    let mut total = 0.0;
    for x in &d.buckets {
        total += x.share_of_gap_pct;
        line(
            &mut s,
            &[
                x.bucket.to_string(),
                ms(x.a_ms_per_step),
                ms(x.b_ms_per_step),
                ms(x.delta_ms),
                format!("{:.1}%", x.share_of_gap_pct),
                format!("{:.1}", x.a_calls_per_step),
                format!("{:.1}", x.b_calls_per_step),
            ],
        );
    }
    line(
        &mut s,
        &[
            "residual (idle)".into(),
            String::new(),
            String::new(),
            ms(d.residual_ms),
            format!("{:.1}%", d.residual_share_pct),
            String::new(),
            String::new(),
        ],
    );
    s.push_str(&format!(
        "{}shares sum to {:.1}%\n\n",
        if md { "\n" } else { "" },
        total + d.residual_share_pct
    ));
    let st = &d.structural;
    s.push_str(&format!(
        "{b}kernels per step: A {:.1}, B {:.1}; extra copies/step in A: {:+.1}; extra gathers/step in A: {:+.1}\n",
        st.a_kernels_per_step, st.b_kernels_per_step, st.extra_copies_per_step, st.extra_gathers_per_step
    ));
    for (label, list) in [("only in A", &st.only_in_a), ("only in B", &st.only_in_b)] {
        if !list.is_empty() {
            s.push_str(&format!("{b}{label}: "));
            let items: Vec<String> = list
                .iter()
                .take(5)
                .map(|(n, c)| format!("{} ({c:.1}/step)", short(n)))
                .collect();
            s.push_str(&items.join(", "));
            s.push('\n');
        }
    }
    s.push_str(&format!(
        "\n{b}what-if (A's step if one bucket took B's time / disappeared / ran at its floor):\n"
    ));
    for w in d.what_if.iter().take(5) {
        s.push_str(&format!(
            "{}  {:<16} {} ms (gain {}) / {} ms / {}\n",
            if md { "  -" } else { "" },
            w.bucket.to_string(),
            ms(w.as_b_ms),
            ms(w.gain_as_b_ms),
            ms(w.without_ms),
            w.at_floor_ms
                .map(|f| format!("{} ms", ms(f)))
                .unwrap_or_else(|| "-".into())
        ));
    }
    s.push_str(&format!("\n{b}top kernels that moved (ms/step, A vs B):\n"));
    for k in &d.top_moved {
        s.push_str(&format!(
            "{}  {:>9} {:>9} {:>+9.4}  [{}] {}\n",
            if md { "  -" } else { "" },
            ms(k.a_ms_per_step),
            ms(k.b_ms_per_step),
            k.delta_ms,
            k.bucket,
            short(&k.name)
        ));
    }
    s
}
