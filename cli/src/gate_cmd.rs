//! `gapscope gate --baseline B --current C`: the CI gate. Exit 0 pass, 1 regression,
//! 2 error.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use gapscope_analyzer::analysis::Report;
use gapscope_analyzer::analysis::ranks::{RanksReport, analyze_ranks};
use gapscope_analyzer::gate::{
    GateOptions, GateReport, Judgement, Policy, Verdict, gate_runs, gate_with,
};
use gapscope_analyzer::session::AnalyzedRun;
use gapscope_analyzer::session::ranks::RankMode;
use gapscope_history::History;
use gapscope_traces::{check_output, write_output};

use crate::render::colour::Toned;
use crate::render::markdown::{Align, Cell, table};
use crate::render::{md_code, md_text, text};
use crate::report_cmd::TraceArgs;

#[derive(Args)]
pub struct GateArgs {
    /// Baseline trace (the accepted run).
    #[arg(
        long,
        required_unless_present_any = ["baseline_history", "numerics"],
        conflicts_with = "baseline_history"
    )]
    pub baseline: Option<PathBuf>,
    /// Use the last N accepted runs of the history as the baseline instead of a trace.
    #[arg(long, value_name = "N")]
    pub baseline_history: Option<i64>,
    /// History database for --baseline-history (SQLite file or postgres:// URL) [default:
    /// GAPSCOPE_DB, else `db` in the config file, else .gapscope/history.sqlite].
    #[arg(long, value_name = "DB")]
    pub db: Option<String>,
    /// Current trace (the run under test).
    #[arg(long, required_unless_present = "numerics")]
    pub current: Option<PathBuf>,
    /// Gate numerics instead of time: the current run's logits dump against the baseline's
    /// (`gapscope numerics`); fails when its verdict is worse than --numerics-verdict.
    #[arg(
        long,
        num_args = 2,
        value_names = ["BASELINE", "CURRENT"],
        conflicts_with_all = ["baseline", "baseline_history", "current", "junit"]
    )]
    pub numerics: Vec<PathBuf>,
    /// The worst numerics verdict that passes: accept or marginal.
    #[arg(
        long,
        default_value = "accept",
        value_name = "VERDICT",
        requires = "numerics"
    )]
    pub numerics_verdict: String,
    #[command(flatten)]
    pub numerics_thresholds: crate::numerics_cmd::ThresholdArgs,
    /// Policy TOML: min_effect, confidence, bootstrap_resamples, seed, min_share,
    /// max_extra_kernels_per_step, min_kernels_ratio, gate_step_time.
    #[arg(long, value_name = "gate.toml")]
    pub policy: Option<PathBuf>,
    /// Compare anyway when the traces differ in GPU, batch size or step kind, or their
    /// steps look implausible (the differences are listed in the output).
    #[arg(long)]
    pub allow_incomparable: bool,
    /// JSON output.
    #[arg(long, group = "fmt")]
    pub json: bool,
    /// Markdown summary (for a CI step summary).
    #[arg(long, group = "fmt")]
    pub markdown: bool,
    /// Also write a JUnit XML report.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    #[command(flatten)]
    pub analysis: TraceArgs,
}

pub fn run(a: GateArgs, g: &crate::Global) -> Result<ExitCode> {
    if let [baseline, current] = a.numerics.as_slice() {
        return crate::numerics_cmd::gate(
            baseline,
            current,
            &a.numerics_verdict,
            a.numerics_thresholds,
            (a.json, a.markdown),
            g,
        );
    }
    let current = a
        .current
        .clone()
        .ok_or_else(|| anyhow::anyhow!("gate: --current is required"))?;
    let db_name = a.db.as_deref().unwrap_or(crate::config::DEFAULT_DB);
    let db = Path::new(db_name);
    let inputs: Vec<&Path> = [&current]
        .into_iter()
        .chain(&a.baseline)
        .chain(&a.policy)
        .chain(&a.analysis.rules)
        .chain(&a.analysis.graph_capture)
        .map(PathBuf::as_path)
        .chain(a.baseline_history.map(|_| db))
        .collect();
    if let Some(out) = &a.junit {
        check_output(out, &inputs)?;
    }
    let policy = match &a.policy {
        Some(p) => Policy::from_file(p)?,
        None => Policy::default(),
    };
    let analyser = a.analysis.analyser(g.quiet)?;
    let options = GateOptions {
        allow_incomparable: a.allow_incomparable,
    };
    // A run of several ranks (a directory, a recording with per-process traces) is gated
    // rank by rank against a baseline run of the same ranks.
    let side = open_side(&analyser, &current)?;
    if let (Some((_, ranks)), Some(b)) = (&side.ranks, &a.baseline) {
        let Some((_, base)) = open_side(&analyser, b)?.ranks else {
            anyhow::bail!(
                "gate: the current run has {} ranks and the baseline {} is one trace; compare like with like",
                ranks.len(),
                b.display()
            );
        };
        return gate_ranks(&a, &inputs, base, ranks.clone(), &policy, options, g);
    }
    // Against the history: the run's rank count must match the stored runs' (a run of
    // ranks is judged on the rank that sets its step).
    let world = side.ranks.as_ref().map_or(1, |(k, _)| k.ranks.len() as i64);
    let (current, _) = side.pick_run_rank();
    let r = match (&a.baseline, a.baseline_history) {
        (Some(p), _) => {
            let base = open_side(&analyser, p)?;
            if let Some((k, _)) = &base.ranks {
                anyhow::bail!(
                    "gate: the baseline {} has {} ranks and the current run is one trace; compare like with like",
                    p.display(),
                    k.ranks.len()
                );
            }
            gate_with(&base.report, &current, &policy, options)
        }
        (None, Some(n)) => {
            let h = History::open_in(db_name, &crate::import_cmd::scratch_dir())?;
            let runs = h.accepted_buckets(n)?;
            if runs.is_empty() {
                anyhow::bail!(
                    "history {}: no accepted runs to use as a baseline",
                    h.name()
                );
            }
            let other: Vec<String> = runs
                .iter()
                .filter(|(r, _)| r.world_size.unwrap_or(1) != world)
                .map(|(r, _)| format!("run {} ({} ranks)", r.id, r.world_size.unwrap_or(1)))
                .collect();
            if !other.is_empty() && !a.allow_incomparable {
                anyhow::bail!(
                    "gate: the current run has {world} rank(s) and the baseline holds {}: runs of different world sizes are not compared (--allow-incomparable compares them)",
                    other.join(", ")
                );
            }
            // Stored figures that are not finite numbers are left out; a baseline left with
            // nothing to judge against is an error, not a pass.
            if let Some(w) = h.check_baseline(&runs)? {
                eprintln!("gapscope: warning: {}", text(&w));
            }
            gate_runs(
                &gapscope_history::baseline(&runs),
                &current,
                &policy,
                options,
            )
        }
        (None, None) => anyhow::bail!("give --baseline TRACE or --baseline-history N"),
    };
    // The JUnit report is written whatever the verdict, so CI finds a failing case for a
    // gate that could not compare, too.
    if let Some(path) = &a.junit {
        write_output(path, &inputs, junit(&r).as_bytes())?;
    }
    if r.verdict == Verdict::Incomparable {
        anyhow::bail!("gate: {}", r.headline());
    }
    let out = if a.json {
        Toned::from(serde_json::to_string_pretty(&r)? + "\n")
    } else {
        render(&r, a.markdown)
    };
    g.write_toned(&out)?;
    match r.verdict {
        Verdict::Regression => Ok(ExitCode::from(1)),
        // Never exit 0 on a side that misses work: the report above says what is missing.
        Verdict::Inconclusive => anyhow::bail!("gate: {}", r.headline()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// Each rank's report, by rank.
type RankReports = Vec<(u32, Report)>;

/// One side of a gate (or a run to store): one trace's report, or a run of ranks.
pub struct Side {
    /// The one trace's report; for a run of ranks, rank 0's.
    pub report: Report,
    pub ranks: Option<(RanksReport, RankReports)>,
}

impl Side {
    /// The report that stands for the run (the rank that sets the step, else the first
    /// rank's), and the ranks' report.
    pub fn pick_run_rank(self) -> (Report, Option<RanksReport>) {
        match self.ranks {
            None => (self.report, None),
            Some((k, reports)) => {
                let want = k.verdict.late_rank();
                let r = reports
                    .iter()
                    .position(|(r, _)| Some(*r) == want)
                    .unwrap_or(0);
                let report = reports.into_iter().nth(r).map_or(self.report, |(_, x)| x);
                (report, Some(k))
            }
        }
    }
}

/// Opens one side: a trace, or (a directory, a recording of several processes) a run of
/// ranks.
pub fn open_side(analyser: &crate::report_cmd::Analyser, p: &Path) -> Result<Side> {
    if p.as_os_str() == "-" {
        return Ok(Side {
            report: analyser.run(p)?,
            ranks: None,
        });
    }
    let set = analyser.open_set(std::slice::from_ref(&p.to_path_buf()), RankMode::Auto)?;
    if set.as_ranks {
        let refs: Vec<&AnalyzedRun> = set.runs.iter().collect();
        let k = analyze_ranks(&refs).report;
        let ranks: RankReports = set
            .runs
            .into_iter()
            .map(|r| (r.run.rank, r.report))
            .collect();
        let first = ranks[0].1.clone();
        return Ok(Side {
            report: first,
            ranks: Some((k, ranks)),
        });
    }
    let n = set.runs.len();
    match set.runs.into_iter().next() {
        Some(r) if n == 1 => Ok(Side {
            report: r.report,
            ranks: None,
        }),
        _ => anyhow::bail!(
            "{} holds {n} traces that are not the ranks of one run; give one trace",
            p.display()
        ),
    }
}

/// The worst of the ranks' verdicts: a rank that cannot be compared or misses work makes
/// the run so; else one regression fails the run; else an improvement, else a pass.
fn run_verdict(v: &[Verdict]) -> Verdict {
    [
        Verdict::Incomparable,
        Verdict::Inconclusive,
        Verdict::Regression,
        Verdict::Improvement,
    ]
    .into_iter()
    .find(|x| v.contains(x))
    .unwrap_or(Verdict::Pass)
}

/// Gates a run of ranks against a baseline run of the same ranks, rank by rank.
fn gate_ranks(
    a: &GateArgs,
    inputs: &[&Path],
    base: Vec<(u32, Report)>,
    cur: Vec<(u32, Report)>,
    policy: &Policy,
    options: GateOptions,
    g: &crate::Global,
) -> Result<ExitCode> {
    let world = |v: &[(u32, Report)]| v.iter().map(|x| x.0).collect::<Vec<_>>();
    if world(&base) != world(&cur) && !a.allow_incomparable {
        anyhow::bail!(
            "gate: the baseline has ranks {:?} and the current run {:?}: runs of different world sizes are not compared (--allow-incomparable compares the ranks both have)",
            world(&base),
            world(&cur)
        );
    }
    let gated: Vec<(u32, GateReport)> = cur
        .iter()
        .filter_map(|(rank, c)| {
            let (_, b) = base.iter().find(|(r, _)| r == rank)?;
            Some((*rank, gate_with(b, c, policy, options)))
        })
        .collect();
    let verdict = run_verdict(&gated.iter().map(|(_, g)| g.verdict).collect::<Vec<_>>());
    if let Some(path) = &a.junit {
        let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n");
        for (rank, g) in &gated {
            let one = junit(g);
            let body = one.split_once('\n').map_or(one.as_str(), |(_, b)| b);
            x.push_str(&body.replace(
                "<testsuite name=\"gapscope gate\"",
                &format!("<testsuite name=\"gapscope gate rank {rank}\""),
            ));
        }
        x.push_str("</testsuites>\n");
        write_output(path, inputs, x.as_bytes())?;
    }
    if verdict == Verdict::Incomparable {
        let why: Vec<String> = gated
            .iter()
            .filter(|(_, g)| g.verdict == Verdict::Incomparable)
            .map(|(r, g)| format!("rank {r}: {}", g.headline()))
            .collect();
        anyhow::bail!("gate: {}", text(&why.join("; ")));
    }
    let out = if a.json {
        let ranks: Vec<serde_json::Value> = gated
            .iter()
            .map(|(r, g)| serde_json::json!({"rank": r, "gate": g}))
            .collect();
        Toned::from(
            serde_json::to_string_pretty(&serde_json::json!({"verdict": verdict, "ranks": ranks}))?
                + "\n",
        )
    } else {
        let mut s = Toned::default();
        if a.markdown {
            s.push_str(&format!(
                "# gapscope gate, {} ranks: **{verdict}**\n\n",
                gated.len()
            ));
        } else {
            s.push_str("gate: ");
            s.push_verdict(verdict, 0);
            s.push_str(&format!(
                " ({} ranks, the worst rank's verdict)\n\n",
                gated.len()
            ));
        }
        for (rank, gr) in &gated {
            s.push_str(&if a.markdown {
                format!("### rank {rank}\n\n")
            } else {
                format!("== rank {rank} ==\n")
            });
            s.append(render(gr, a.markdown));
            s.push('\n');
        }
        s
    };
    g.write_toned(&out)?;
    match verdict {
        Verdict::Regression => Ok(ExitCode::from(1)),
        Verdict::Inconclusive => anyhow::bail!("gate: a rank misses work (see above)"),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// One table row per judged metric: name, judgement.
fn rows(r: &GateReport) -> Vec<(String, &Judgement)> {
    r.steps
        .iter()
        .map(|s| (s.metric.as_str().to_owned(), &s.judgement))
        .chain(
            r.buckets
                .iter()
                .map(|b| (b.bucket.to_string(), &b.judgement)),
        )
        .collect()
}

/// The gate's text or Markdown output; in text, the verdict words carry their tone.
fn render(r: &GateReport, md: bool) -> Toned {
    let mut s = Toned::default();
    if md {
        s.push_str(&format!("## gapscope gate: **{}**\n\n", r.verdict));
        s.push_str(&format!(
            "baseline `{}`, current `{}`\n\n{}\n\n",
            md_code(&r.baseline),
            md_code(&r.current),
            md_text(&r.headline())
        ));
        for o in &r.overridden {
            s.push_str(&format!(
                "- compared despite: {}\n",
                md_text(&o.to_string())
            ));
        }
        for w in &r.warnings {
            s.push_str(&format!("- **warning**: {}\n", md_text(w)));
        }
        if !r.overridden.is_empty() || !r.warnings.is_empty() {
            s.push('\n');
        }
    } else {
        s.push_str("gate: ");
        s.push_verdict(r.verdict, 0);
        s.push_str(&format!(
            "\nbaseline {}\ncurrent  {}\n{}\n",
            text(&r.baseline),
            text(&r.current),
            text(&r.headline())
        ));
        for o in &r.overridden {
            s.push_str(&format!("compared despite: {}\n", text(&o.to_string())));
        }
        for w in &r.warnings {
            s.push_str(&format!("warning: {}\n", text(w)));
        }
        s.push('\n');
    }
    if md {
        s.push_str(&md_judgements(r));
    } else {
        for (name, j) in rows(r) {
            s.push_str(&format!("{name:<16} "));
            s.push_verdict(j.verdict, 13);
            s.push_str(&format!(
                " {:>9.4} -> {:>9.4} ms/step  {}\n",
                j.baseline_median_ms, j.current_median_ms, j.reason
            ));
        }
    }
    s.push('\n');
    for c in &r.structural {
        s.push_str(&format!(
            "{}{}: {} ({})\n",
            if md { "- " } else { "" },
            c.check,
            if c.failed { "FAILED" } else { "ok" },
            if md {
                md_text(&c.detail)
            } else {
                text(&c.detail)
            }
        ));
    }
    s
}

/// The judgements as a Markdown table.
fn md_judgements(r: &GateReport) -> String {
    use Align::{Left, Right};
    let rows: Vec<Vec<Cell>> = rows(r)
        .into_iter()
        .map(|(name, j)| {
            vec![
                Cell::Text(name),
                Cell::Text(j.verdict.to_string()),
                Cell::Text(format!("{:.4}", j.baseline_median_ms)),
                Cell::Text(format!("{:.4}", j.current_median_ms)),
                Cell::Text(if j.rel_change.is_finite() {
                    format!("{:+.1}%", 100.0 * j.rel_change)
                } else {
                    "new".to_owned()
                }),
                Cell::Prose(j.reason.clone()),
            ]
        })
        .collect();
    table(
        &[
            "metric",
            "verdict",
            "baseline ms/step",
            "current ms/step",
            "change",
            "reason",
        ],
        &[Left, Left, Right, Right, Right, Left],
        &rows,
    )
}

fn xml(s: &str) -> String {
    text(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn junit(r: &GateReport) -> String {
    let judged = rows(r);
    let failures = judged
        .iter()
        .filter(|(_, j)| j.verdict == Verdict::Regression)
        .count()
        + r.structural.iter().filter(|c| c.failed).count()
        + r.incomplete.len()
        + r.incomparable.len();
    let mut s = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"gapscope gate\" tests=\"{}\" failures=\"{failures}\">\n",
        judged.len() + r.structural.len() + r.incomplete.len() + r.incomparable.len()
    );
    // Traces that cannot be compared (the gate judged nothing), and a side that misses work,
    // fail a case each: CI never reads either as a pass.
    let incomparable: Vec<String> = r.incomparable.iter().map(|c| c.to_string()).collect();
    let cases = [
        ("comparability", "traces comparable", &incomparable),
        ("completeness", "trace complete", &r.incomplete),
    ];
    for (class, name, why) in cases {
        for m in why {
            s.push_str(&format!(
                "  <testcase classname=\"{class}\" name=\"{name}\"><failure message=\"{}\"/></testcase>\n",
                xml(m)
            ));
        }
    }
    for (i, (name, j)) in judged.iter().enumerate() {
        let class = if i < r.steps.len() { "step" } else { "bucket" };
        s.push_str(&format!(
            "  <testcase classname=\"{class}\" name=\"{}\">",
            xml(name)
        ));
        if j.verdict == Verdict::Regression {
            s.push_str(&format!("<failure message=\"{}\"/>", xml(&j.reason)));
        } else {
            s.push_str(&format!(
                "<system-out>{}: {}</system-out>",
                j.verdict,
                xml(&j.reason)
            ));
        }
        s.push_str("</testcase>\n");
    }
    for c in &r.structural {
        s.push_str(&format!(
            "  <testcase classname=\"structural\" name=\"{}\">",
            xml(&c.check)
        ));
        if c.failed {
            s.push_str(&format!("<failure message=\"{}\"/>", xml(&c.detail)));
        }
        s.push_str("</testcase>\n");
    }
    s.push_str("</testsuite>\n");
    s
}
