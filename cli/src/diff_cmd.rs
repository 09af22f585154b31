//! `gapscope diff A B`: where the per-step gap between two traces (maybe two engines) lives;
//! `gapscope diff A --what-if hybrid`: the engine levers' effects predicted from A alone.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use gapscope_analyzer::analysis::Report;
use gapscope_analyzer::analysis::ranks::{RanksReport, analyze_ranks};
use gapscope_analyzer::diff::ranks::diff_ranks;
use gapscope_analyzer::diff::{
    DiffReport, DiffSide, FloorCeilings, NameTimes, Refusal, WhatIf, diff_with_floor, refusal,
};
use gapscope_analyzer::roofline::{WeightFormat, hw, peak_flops};
use gapscope_analyzer::session::AnalyzedRun;
use gapscope_analyzer::session::ranks::RankMode;
use gapscope_traces::{check_output, write_output};

use crate::render::markdown::{Align, Cell, table, text_row};
use crate::render::{Names, md_code, md_text, ms, text};
use crate::report_cmd::AnalysisArgs;

#[derive(Args)]
pub struct DiffArgs {
    /// The trace to explain (usually the slower engine).
    pub a: PathBuf,
    /// The reference trace (not with --what-if).
    pub b: Option<PathBuf>,
    /// Predict the named lever set's effects from A alone, a trace of the slow configuration
    /// (`hybrid`: the gapscope-engine levers --state-update, --state-read, --out-proj, one at a
    /// time and together).
    #[arg(long, value_name = "SET", conflicts_with = "b")]
    pub what_if: Option<String>,
    /// With --what-if: a trace measured with one lever switched (`state_update`, `state_read`,
    /// `out_proj`, or `all`), compared with its prediction. Repeatable.
    #[arg(long, value_name = "LEVER=TRACE", value_parser = crate::lever_whatif::parse_measured, requires = "what_if")]
    pub measured: Vec<crate::lever_whatif::Measured>,
    /// JSON output (with schema_version).
    #[arg(long, group = "fmt")]
    pub json: bool,
    /// Markdown report.
    #[arg(long, group = "fmt")]
    pub markdown: bool,
    /// GPU for what-ifs against each bucket's floor (engine traces declare bytes/FLOPs)
    /// [default: GAPSCOPE_HW, else `hw` in the config file; none with --what-if].
    #[arg(long = "hw", value_name = "GPU")]
    pub hardware: Option<String>,
    /// Weight format whose tensor peak bounds the compute floor (with --hw).
    #[arg(long, default_value = "bf16")]
    pub weights: String,
    /// Kernels listed in the structural and top-moved sections.
    #[arg(long = "list", default_value_t = gapscope_analyzer::diff::DEFAULT_LIST, value_name = "N")]
    pub list: usize,
    /// Diff even when a side's steps look implausible (the report says so).
    #[arg(long)]
    pub allow_implausible: bool,
    /// Also write a self-contained HTML page of the diff to this file (headline, waterfall
    /// by bucket, attribution table; inline CSS and SVG, no script, no external file).
    /// Standard output gets the usual output all the same.
    #[arg(long, value_name = "OUT.html", conflicts_with = "what_if")]
    pub html: Option<PathBuf>,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
}

pub fn run(a: DiffArgs, g: &crate::Global) -> Result<ExitCode> {
    // Options that would be ignored are refused: a user must not believe they took effect.
    if a.what_if.is_none() && !a.measured.is_empty() {
        anyhow::bail!("diff: --measured compares with a --what-if prediction; give --what-if SET");
    }
    if a.what_if.is_some() {
        for (given, opt) in [
            (a.hardware.is_some(), "--hw"),
            (a.allow_implausible, "--allow-implausible"),
        ] {
            if given {
                anyhow::bail!("diff: {opt} does not apply to --what-if predictions");
            }
        }
    }
    check_html(&a)?;
    let mut analyser = a.analysis.analyser(g.quiet)?;
    if let Some(set) = &a.what_if {
        let w = crate::lever_whatif::run(set, &a.a, &a.measured, &mut analyser)?;
        let out = if a.json {
            serde_json::to_string_pretty(&w)? + "\n"
        } else if a.markdown {
            crate::lever_whatif::render_markdown(&w)
        } else {
            crate::lever_whatif::render_text(&w)
        };
        g.write(&out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let Some(b) = &a.b else {
        anyhow::bail!("diff: needs a reference trace B, or --what-if SET to predict from A alone");
    };
    // Each side keeps its report and name times; its trace goes as soon as it is analysed.
    // A side may be a run of several ranks (a directory, a recording with per-process
    // traces): then the ranks are compared, and the buckets of the rank that sets A's step.
    let side = |p: &std::path::Path,
                want: Option<u32>|
     -> Result<(Report, NameTimes, Option<RanksReport>, u32)> {
        if p.as_os_str() == "-" {
            let run = analyser.open(p)?;
            return Ok((run.report, run.names, None, 0));
        }
        let set = analyser.open_set(std::slice::from_ref(&p.to_path_buf()), RankMode::Auto)?;
        let ranks = set.as_ranks.then(|| {
            let refs: Vec<&AnalyzedRun> = set.runs.iter().collect();
            analyze_ranks(&refs).report
        });
        let pick = want
            .or_else(|| ranks.as_ref().and_then(|r| r.verdict.late_rank()))
            .unwrap_or(0);
        let n = set.runs.len();
        let run = match set
            .runs
            .into_iter()
            .find(|r| !set.as_ranks || r.run.rank == pick)
        {
            Some(run) if set.as_ranks || n == 1 => run,
            _ => anyhow::bail!(
                "diff: {} holds {n} traces that are not the ranks of one run; give one trace",
                p.display()
            ),
        };
        Ok((run.report, run.names, ranks, run.run.rank))
    };
    let (ra, na, ka, rank) = side(&a.a, None)?;
    // The same rank on both sides.
    let (rb, nb, kb, _) = side(b, ka.is_some().then_some(rank))?;
    let ranks = match (&ka, &kb) {
        (Some(x), Some(y)) => Some(diff_ranks(x, y)),
        (None, None) => None,
        _ => anyhow::bail!(
            "diff: one side is a run of several ranks and the other one trace; compare like with like"
        ),
    };
    let refused = refusal(&ra, &rb, a.allow_implausible);
    if !refused.is_empty() {
        let hint = if refused
            .iter()
            .any(|r| matches!(r, Refusal::Implausible { .. }))
        {
            " (--allow-implausible diffs them anyway)"
        } else {
            ""
        };
        let why: Vec<String> = refused.iter().map(ToString::to_string).collect();
        let why = format!("cannot compare: {}{hint}", text(&why.join("; ")));
        // Two runs of ranks still compare rank by rank; only the buckets are refused.
        let Some(r) = &ranks else {
            anyhow::bail!("diff: {why}");
        };
        write_html(&a, || {
            crate::render::html::diff_ranks_page(None, r, Some(&why))
        })?;
        let out = if a.json {
            serde_json::to_string_pretty(
                &serde_json::json!({"ranks": r, "buckets": null, "buckets_refused": why}),
            )? + "\n"
        } else {
            format!(
                "{}\nbuckets of rank {rank}: {why}\n",
                crate::render::ranks::diff(r, a.markdown)
            )
        };
        g.write(&out)?;
        return Ok(ExitCode::SUCCESS);
    }
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
    let d = diff_with_floor(
        DiffSide {
            report: &ra,
            names: &na,
        },
        DiffSide {
            report: &rb,
            names: &nb,
        },
        a.list,
        floor,
    );
    write_html(&a, || match &ranks {
        Some(r) => crate::render::html::diff_ranks_page(Some(&d), r, None),
        None => crate::render::html::diff_page(&d),
    })?;
    let out = match (&ranks, a.json) {
        (Some(r), true) => {
            serde_json::to_string_pretty(&serde_json::json!({"ranks": r, "buckets": d}))? + "\n"
        }
        (None, true) => serde_json::to_string_pretty(&d)? + "\n",
        (Some(r), false) => {
            crate::render::ranks::diff(r, a.markdown) + "\n" + &render(&d, a.markdown)
        }
        (None, false) => render(&d, a.markdown),
    };
    g.write(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// The files `diff` reads: `--html` may name none of them.
fn inputs(a: &DiffArgs) -> Vec<&std::path::Path> {
    [&a.a]
        .into_iter()
        .chain(&a.b)
        .chain(&a.analysis.trace.rules)
        .chain(&a.analysis.trace.spec_metrics)
        .chain(&a.analysis.trace.graph_capture)
        .map(PathBuf::as_path)
        .collect()
}

/// Refuses `--html`'s target (a link, not a regular file, an input) before anything is read.
fn check_html(a: &DiffArgs) -> Result<()> {
    if let Some(out) = &a.html {
        if out.as_os_str() == "-" {
            anyhow::bail!("--html -: the page is written to a file; give a path");
        }
        check_output(out, &inputs(a))?;
    }
    Ok(())
}

/// Writes `--html`'s page, when asked for, through the safe output path.
fn write_html(a: &DiffArgs, page: impl FnOnce() -> String) -> Result<()> {
    if let Some(out) = &a.html {
        write_output(out, &inputs(a), page().as_bytes())?;
    }
    Ok(())
}

pub(crate) fn ratio(d: &DiffReport) -> f64 {
    if d.b.step_ms > 0.0 {
        d.a.step_ms / d.b.step_ms
    } else {
        0.0
    }
}

fn render(d: &DiffReport, md: bool) -> String {
    let names = Names::of_diff(d);
    if md {
        return markdown(d, &names);
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
    for (label, side) in [("A", &d.a), ("B", &d.b)] {
        s.push_str(&format!(
            "{label}: {} ({})\n",
            text(&side.path),
            side_figures(side)
        ));
    }
    s.push_str(&format!(
        "gap: A - B = {} ms/step ({:.2}x); graph replays: {}\n\
         (diff figures are means over the decode steps, so that bucket deltas add up to the gap; \
         `report` gives medians)\n\n",
        ms(d.gap_ms),
        ratio(d),
        d.structural.graph_replays
    ));
    if let Some(sp) = &d.speculative {
        s.push_str(&spec_lines(sp));
    }
    let head: Vec<String> = BUCKET_HEAD.iter().map(|x| x.to_string()).collect();
    line(&mut s, &head);
    for cells in bucket_rows(d) {
        line(&mut s, &cells);
    }
    s.push_str(&shares_line(d));
    s.push('\n');
    s.push_str(&format!("idle per step: {}\n", idle_figures(d)));
    for g in &d.groups {
        let (head, how) = group_line(g, false);
        s.push_str(&format!("{head}; {how}\n"));
    }
    s.push('\n');
    let st = &d.structural;
    s.push_str(&format!(
        "kernels per step: A {:.1}, B {:.1}; extra copies/step in A: {:+.1}; extra gathers/step in A: {:+.1}\n",
        st.a_kernels_per_step, st.b_kernels_per_step, st.extra_copies_per_step, st.extra_gathers_per_step
    ));
    for (label, list, total) in [
        ("only in A", &st.only_in_a, st.only_in_a_total),
        ("only in B", &st.only_in_b, st.only_in_b_total),
    ] {
        if !list.is_empty() {
            s.push_str(&format!("{label} ({total}):\n"));
            for (n, c) in list {
                s.push_str(&format!("  {c:>7.1}/step  {}\n", text(&names.get(n))));
            }
            if total > list.len() {
                s.push_str(&format!(
                    "  and {} more (--list N shows more)\n",
                    total - list.len()
                ));
            }
        }
    }
    let levers = d.gaining();
    if levers.is_empty() {
        s.push_str(
            "\nwhat-if: no lever; A is not slower than B in any bucket, group or idle part, nor above a floor\n",
        );
    } else {
        s.push_str(
            "\nwhat-if (A's step if one lever took B's time / disappeared / ran at its floor):\n",
        );
        for w in levers {
            let [lever, as_b, gain, without, floor] = what_if_cells(w);
            let floor = if w.at_floor_ms.is_some() {
                format!("{floor} ms")
            } else {
                floor
            };
            s.push_str(&format!(
                "  {lever:<16} {as_b} ms (gain {gain}) / {without} ms / {floor}\n"
            ));
        }
    }
    s.push_str("\ntop kernels that moved (ms/step, A vs B):\n");
    for k in &d.top_moved {
        let [name, bucket, a, b, delta] = moved_cells(k, &names);
        s.push_str(&format!(
            "  {a:>9} {b:>9} {delta:>9}  [{bucket}] {}\n",
            text(&name)
        ));
    }
    s
}

pub(crate) const BUCKET_HEAD: [&str; 7] = [
    "bucket",
    "A ms/step",
    "B ms/step",
    "delta ms",
    "% of gap",
    "A calls",
    "B calls",
];

/// One side's figures: decode steps, step time and GPU busy time.
pub(crate) fn side_figures(side: &gapscope_analyzer::diff::Side) -> String {
    format!(
        "{} decode steps, mean {} ms/step, GPU busy {} ms/step",
        side.decode_steps,
        ms(side.step_ms),
        ms(side.busy_ms)
    )
}

/// The idle per step on both sides: launch gaps and host gaps.
pub(crate) fn idle_figures(d: &DiffReport) -> String {
    format!(
        "launch gaps A {} / B {} ms, host gaps A {} / B {} ms",
        ms(d.idle.a_launch_gap_ms),
        ms(d.idle.b_launch_gap_ms),
        ms(d.idle.a_host_gap_ms),
        ms(d.idle.b_host_gap_ms)
    )
}

/// A what-if's cells: lever, step with B's time, gain, step without it, step at its floor
/// (`-` without one), in ms.
pub(crate) fn what_if_cells(w: &WhatIf) -> [String; 5] {
    [
        w.lever.clone(),
        ms(w.as_b_ms),
        ms(w.gain_as_b_ms),
        ms(w.without_ms),
        w.at_floor_ms.map(ms).unwrap_or_else(|| "-".into()),
    ]
}

/// A moved kernel's cells: name as `names` prints it, bucket, A and B ms/step, delta.
pub(crate) fn moved_cells(k: &gapscope_analyzer::diff::KernelMove, names: &Names) -> [String; 5] {
    [
        names.get(&k.name),
        k.bucket.to_string(),
        ms(k.a_ms_per_step),
        ms(k.b_ms_per_step),
        format!("{:+.4}", k.delta_ms),
    ]
}

/// The bucket rows, then the residual row.
pub(crate) fn bucket_rows(d: &DiffReport) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = d
        .buckets
        .iter()
        .map(|x| {
            vec![
                x.bucket.to_string(),
                ms(x.a_ms_per_step),
                ms(x.b_ms_per_step),
                ms(x.delta_ms),
                x.share_of_gap_pct
                    .map(|p| format!("{p:.1}%"))
                    .unwrap_or_else(|| "-".into()),
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
        d.residual_share_pct
            .map(|p| format!("{p:.1}%"))
            .unwrap_or_else(|| "-".into()),
        String::new(),
        String::new(),
    ]);
    rows
}

/// The shares line: their sum when the gap is meaningful, else why there are none.
pub(crate) fn shares_line(d: &DiffReport) -> String {
    if d.gap_is_meaningful {
        let total = d
            .buckets
            .iter()
            .filter_map(|x| x.share_of_gap_pct)
            .sum::<f64>()
            + d.residual_share_pct.unwrap_or(0.0);
        format!("shares sum to {total:.1}%\n")
    } else {
        format!(
            "no shares: the gap is under {:.1}% of the step, too small to divide\n",
            100.0 * gapscope_analyzer::diff::MIN_GAP_SHARE
        )
    }
}

/// A group's totals, and how the what-ifs treat it, for text or Markdown.
pub(crate) fn group_line(g: &gapscope_analyzer::diff::GroupDelta, md: bool) -> (String, String) {
    let name = if md {
        format!("**{}**", g.group)
    } else {
        g.group.to_owned()
    };
    let head = format!(
        "{name} together ({}): A {} ms/step, B {} ms/step, delta {} ms{}",
        bucket_list(&g.buckets),
        ms(g.a_ms_per_step),
        ms(g.b_ms_per_step),
        ms(g.delta_ms),
        g.share_of_gap_pct
            .map(|p| format!(" ({p:.1}% of the gap)"))
            .unwrap_or_default(),
    );
    let how = if g.grouped {
        let why = if md { md_text(&g.why) } else { g.why.clone() };
        format!("what-ifs take them as one lever: {why}")
    } else {
        "what-ifs take them bucket by bucket (both traces file them alike)".to_owned()
    };
    (head, how)
}

fn bucket_list(b: &[gapscope_analyzer::Bucket]) -> String {
    b.iter().map(|x| x.as_str()).collect::<Vec<_>>().join(" + ")
}

/// A kernel name as Markdown inline code.
fn code(name: &str, names: &Names) -> String {
    md_code(&names.get(name))
}

/// A diff table: the first `names` columns left-aligned, the figures right.
fn md_table(s: &mut String, head: &[&str], names: usize, rows: Vec<Vec<Cell>>) {
    s.push_str(&table(
        head,
        &Align::names_then_figures(names, head.len()),
        &rows,
    ));
}

fn markdown(d: &DiffReport, names: &Names) -> String {
    let mut s = String::from("## gapscope diff\n\n");
    for (label, side) in [("A", &d.a), ("B", &d.b)] {
        s.push_str(&format!(
            "- **{label}**: {}: {}\n",
            md_code(&side.path),
            side_figures(side)
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
    md_table(
        &mut s,
        &BUCKET_HEAD,
        1,
        bucket_rows(d).into_iter().map(text_row).collect(),
    );
    s.push_str(&format!(
        "\n{} `residual (idle)` is the part of the gap no bucket explains: launch and host \
         gaps (GPU idle) and overlap. Idle per step: {}.\n",
        shares_line(d).trim_end().replace("shares", "Shares"),
        idle_figures(d)
    ));
    for g in &d.groups {
        let (head, how) = group_line(g, true);
        s.push_str(&format!("\n{head}. {how}\n"));
    }
    let st = &d.structural;
    s.push_str("\n### Structure per step\n\n");
    s.push_str(&format!(
        "- kernels per step: A {:.1}, B {:.1}\n- extra copies per step in A: {:+.1}; extra gathers per step in A: {:+.1}\n",
        st.a_kernels_per_step, st.b_kernels_per_step, st.extra_copies_per_step, st.extra_gathers_per_step
    ));
    for (label, list, total) in [
        ("only in A", &st.only_in_a, st.only_in_a_total),
        ("only in B", &st.only_in_b, st.only_in_b_total),
    ] {
        if !list.is_empty() {
            let mut items: Vec<String> = list
                .iter()
                .map(|(n, c)| format!("{} ({c:.1}/step)", code(n, names)))
                .collect();
            if total > list.len() {
                items.push(format!("and {} more", total - list.len()));
            }
            s.push_str(&format!("- {label} ({total}): {}\n", items.join(", ")));
        }
    }
    s.push_str("\n### What-if: A's step if one lever changed\n\n");
    let rows = d
        .gaining()
        .into_iter()
        .map(|w| text_row(what_if_cells(w).into()))
        .collect();
    md_table(
        &mut s,
        &[
            "lever",
            "with B's time, ms",
            "gain, ms",
            "without it, ms",
            "at its floor, ms",
        ],
        1,
        rows,
    );
    s.push_str("\n### Top kernels that moved\n\n");
    let rows = d
        .top_moved
        .iter()
        .map(|k| {
            let [name, rest @ ..] = moved_cells(k, names);
            std::iter::once(Cell::Code(name))
                .chain(rest.into_iter().map(Cell::Text))
                .collect()
        })
        .collect();
    md_table(
        &mut s,
        &["kernel", "bucket", "A ms/step", "B ms/step", "delta ms"],
        2,
        rows,
    );
    s
}

/// A speculative side against a plain one: tokens per second and its three factors.
pub(crate) fn spec_lines(sp: &gapscope_analyzer::diff::SpecDelta) -> String {
    let rejected = sp
        .rejected_ms
        .map(|r| format!("; rejected candidates {} ms of kernel time", ms(r)))
        .unwrap_or_default();
    format!(
        "speculative: {} at {:.1} tok/s against {:.1} plain ({:.2}x) = tokens gained x{:.3} \
         (tokens per step) * draft cost x{:.3} ({} ms per step) * verify overhead x{:.3} \
         ({:+.3} ms over a {} ms plain step){rejected}\n\n",
        sp.speculative.as_str(),
        sp.spec_tokens_per_s,
        sp.plain_tokens_per_s,
        sp.speedup,
        sp.tokens_factor,
        sp.draft_factor,
        ms(sp.draft_ms),
        sp.verify_factor,
        sp.verify_overhead_ms,
        ms(sp.plain_step_ms)
    )
}
