//! `gapscope numerics`: logits (and hidden-state) dumps of several engines against a
//! reference: per-position KL, top-1 and |Δ log p|, Δppl with its interval, the first layer
//! that diverges, and a verdict (docs/NUMERICS.md).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;

use crate::render::md_text;
use gapscope_numerics::{
    Comparison, NumericsReport, NumericsSettings, Thresholds, Verdict, compare,
};

#[derive(Args)]
pub struct NumericsArgs {
    /// Dumps (safetensors: `tokens`, `logits`, optional `hidden.N`), the reference first
    /// unless --reference names it.
    #[arg(required = true, num_args = 2.., value_name = "DUMP")]
    pub dumps: Vec<PathBuf>,
    /// The reference every other dump is compared against [default: the first].
    #[arg(long, value_name = "DUMP")]
    pub reference: Option<PathBuf>,
    /// Two runs of one engine and setting: their difference is the noise floor [default:
    /// none, the floor is unknown].
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    pub identity: Vec<PathBuf>,
    #[command(flatten)]
    pub thresholds: ThresholdArgs,
    /// Positions listed per comparison, the worst by KL first.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub positions: usize,
    /// JSON output (every position, with schema_version).
    #[arg(long, conflicts_with = "markdown")]
    pub json: bool,
    /// Markdown output.
    #[arg(long)]
    pub markdown: bool,
    /// Also write a self-contained HTML page: the comparisons, the relative error layer by
    /// layer (the identity pair's floor dashed) and each position's KL, as inline SVG.
    #[arg(long, value_name = "OUT.html")]
    pub html: Option<PathBuf>,
}

/// The verdict's thresholds (defaults: ACCEPT at |Δppl| ≤ 1% and top-1 ≥ 95%).
#[derive(Args, Clone, Copy)]
pub struct ThresholdArgs {
    /// ACCEPT at or under this |Δppl|, percent.
    #[arg(long, default_value_t = 1.0, value_name = "PCT")]
    pub max_dppl: f64,
    /// ACCEPT at or over this top-1 agreement, percent.
    #[arg(long, default_value_t = 95.0, value_name = "PCT")]
    pub min_top1: f64,
    /// MARGINAL at or under this |Δppl| (REJECT beyond), percent.
    #[arg(long, default_value_t = 2.0, value_name = "PCT")]
    pub marginal_dppl: f64,
    /// MARGINAL at or over this top-1 agreement (REJECT below), percent.
    #[arg(long, default_value_t = 90.0, value_name = "PCT")]
    pub marginal_top1: f64,
}

impl ThresholdArgs {
    pub fn settings(self) -> Result<NumericsSettings> {
        let t = Thresholds {
            max_dppl_pct: self.max_dppl,
            min_top1_pct: self.min_top1,
            marginal_dppl_pct: self.marginal_dppl,
            marginal_top1_pct: self.marginal_top1,
        };
        let ok = |v: f64, hi: f64| v.is_finite() && (0.0..=hi).contains(&v);
        if !(ok(t.max_dppl_pct, 1e6)
            && ok(t.marginal_dppl_pct, 1e6)
            && ok(t.min_top1_pct, 100.0)
            && ok(t.marginal_top1_pct, 100.0))
            || t.marginal_dppl_pct < t.max_dppl_pct
            || t.marginal_top1_pct > t.min_top1_pct
        {
            anyhow::bail!(
                "numerics thresholds: Δppl limits are 0 or more with --marginal-dppl ≥ --max-dppl, top-1 limits 0..100 with --marginal-top1 ≤ --min-top1"
            );
        }
        Ok(NumericsSettings {
            thresholds: t,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get().min(8)),
            ..NumericsSettings::default()
        })
    }
}

pub fn run(a: NumericsArgs, g: &crate::Global) -> Result<ExitCode> {
    let settings = a.thresholds.settings()?;
    let reference = a.reference.clone().unwrap_or_else(|| a.dumps[0].clone());
    let others: Vec<PathBuf> = a
        .dumps
        .iter()
        .filter(|d| **d != reference)
        .cloned()
        .collect();
    if others.is_empty() {
        anyhow::bail!(
            "numerics: nothing to compare with the reference {}",
            reference.display()
        );
    }
    let identity = match a.identity.as_slice() {
        [x, y] => Some((x.as_path(), y.as_path())),
        _ => None,
    };
    if let Some(out) = &a.html {
        let inputs: Vec<&std::path::Path> = a
            .dumps
            .iter()
            .chain(&a.identity)
            .chain(&a.reference)
            .map(PathBuf::as_path)
            .collect();
        gapscope_traces::check_output(out, &inputs)?;
    }
    let r = compare(&reference, &others, identity, &settings)?;
    if let Some(out) = &a.html {
        let inputs: Vec<&std::path::Path> = a.dumps.iter().map(PathBuf::as_path).collect();
        gapscope_traces::write_output(
            out,
            &inputs,
            crate::render::html::numerics_page(&r).as_bytes(),
        )?;
    }
    let out = if a.json {
        serde_json::to_string_pretty(&r)? + "\n"
    } else if a.markdown {
        markdown(&r)
    } else {
        text(&r, a.positions)
    };
    g.write(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// A figure with the digits it needs: fixed between 0.01 and 1000, else scientific; `n/a`
/// for a value that is not a number.
pub(crate) fn short(x: f64) -> String {
    if !x.is_finite() {
        "n/a".into()
    } else if x == 0.0 {
        "0".into()
    } else if x.abs() >= 0.01 && x.abs() < 1000.0 {
        format!("{x:.4}")
    } else {
        format!("{x:.3e}")
    }
}

/// A signed percentage, `+0.123%`; `n/a` for a value that is not a number (a perplexity
/// past f64's range).
pub(crate) fn signed_pct(x: f64) -> String {
    if x.is_finite() {
        format!("{x:+.3}%")
    } else {
        "n/a".into()
    }
}

/// One comparison's lines (also the noise floor's: `floor_note` false).
pub fn comparison_lines(c: &Comparison, positions: usize, floor_note: bool) -> String {
    let s = &c.summary;
    let mut o = format!(
        "{} ({}): {}\n  KL mean {} nats, max {} at passage {} position {}\n  top-1 agreement {:.2}%{}\n  next token |Δ log p| mean {}, max {}; ppl {} -> {}, Δppl {}{}\n",
        c.other.label(),
        c.other.dtype,
        c.verdict.as_str(),
        short(s.kl_mean),
        short(s.kl_max),
        s.kl_max_at.0,
        s.kl_max_at.1,
        s.top1_agreement_pct,
        s.first_disagreement.map_or(String::new(), |(p, t)| format!(
            " (first differs at passage {p} position {t})"
        )),
        short(s.dlogp_mean),
        short(s.dlogp_max),
        short(s.ppl_reference),
        short(s.ppl_other),
        signed_pct(s.dppl_pct),
        s.dppl_ci_pct.map_or_else(
            || " (one passage: no interval)".to_owned(),
            |(lo, hi)| format!(" (95% CI {} .. {})", signed_pct(lo), signed_pct(hi))
        ),
    );
    if let Some(l) = &c.layers {
        o += &format!(
            "  layers: first diverging {}{}{}\n",
            l.first_diverging
                .map_or_else(|| "none".to_owned(), |n| n.to_string()),
            l.largest_jump.map_or(String::new(), |j| format!(
                "; largest jump at layer {} ({} -> {})",
                j.layer,
                short(j.from),
                short(j.to)
            )),
            l.split.map_or(String::new(), |s| format!(
                "; final error {} = baseline shift {:.0}% + compounding {:.0}%",
                short(s.final_error),
                s.baseline_pct,
                s.compounding_pct
            )),
        );
        if l.floor.is_none() && floor_note {
            o += "  (no identity pair: a layer diverges once its relative error exceeds 1e-6)\n";
        }
    }
    let mut worst: Vec<_> = c.positions.iter().collect();
    worst.sort_by(|a, b| b.kl.total_cmp(&a.kl));
    for p in worst.into_iter().take(positions) {
        o += &format!(
            "    passage {} position {}: KL {}, top-1 {} vs {}{}\n",
            p.passage,
            p.position,
            short(p.kl),
            p.top1_reference,
            p.top1_other,
            p.dlogp()
                .map_or(String::new(), |d| format!(", |Δ log p| {}", short(d))),
        );
    }
    o
}

fn text(r: &NumericsReport, positions: usize) -> String {
    let d = &r.reference;
    let mut o = format!(
        "reference {} ({}, {} passage(s) x {} tokens, vocabulary {}, {} layers): {}\n",
        d.label(),
        d.dtype,
        d.passages,
        d.positions,
        d.vocab,
        d.layers,
        d.path
    );
    let t = &r.thresholds;
    o += &format!(
        "verdict: ACCEPT at |Δppl| <= {}% and top-1 >= {}%, MARGINAL at <= {}% and >= {}%, else REJECT\n",
        t.max_dppl_pct, t.min_top1_pct, t.marginal_dppl_pct, t.marginal_top1_pct
    );
    match &r.identity {
        Some(c) => {
            o += "\nnoise floor (identity pair):\n";
            o += &comparison_lines(c, 0, false);
        }
        None => o += "noise floor: unknown (pass --identity A B, two runs of one setting)\n",
    }
    for c in &r.comparisons {
        o += "\n";
        o += &comparison_lines(c, positions, true);
    }
    o
}

fn markdown(r: &NumericsReport) -> String {
    let mut o = format!(
        "### Numerics against {} ({})\n\n| dump | dtype | verdict | KL mean | top-1 | Δppl | first diverging layer |\n|---|---|---|---|---|---|---|\n",
        md_text(&r.reference.label()),
        md_text(&r.reference.dtype)
    );
    let row = |c: &Comparison, name: String| {
        format!(
            "| {} | {} | **{}** | {} | {:.2}% | {} | {} |\n",
            md_text(&name),
            md_text(&c.other.dtype),
            c.verdict.as_str(),
            short(c.summary.kl_mean),
            c.summary.top1_agreement_pct,
            signed_pct(c.summary.dppl_pct),
            c.layers
                .as_ref()
                .and_then(|l| l.first_diverging)
                .map_or_else(|| "-".to_owned(), |n| n.to_string()),
        )
    };
    if let Some(c) = &r.identity {
        o += &row(c, format!("{} (identity pair)", c.other.label()));
    }
    for c in &r.comparisons {
        o += &row(c, c.other.label());
    }
    o
}

/// `gapscope gate --numerics BASELINE CURRENT`: the current dump against the baseline's;
/// exit 0 when its verdict is `allowed` or better, 1 when worse, 2 on an error.
pub fn gate(
    baseline: &std::path::Path,
    current: &std::path::Path,
    allowed: &str,
    thresholds: ThresholdArgs,
    (json, markdown_out): (bool, bool),
    g: &crate::Global,
) -> Result<ExitCode> {
    let allowed = match Verdict::parse(allowed) {
        Some(v @ (Verdict::Accept | Verdict::Marginal)) => v,
        _ => anyhow::bail!("--numerics-verdict {allowed:?}: accept or marginal"),
    };
    let settings = thresholds.settings()?;
    let r = compare(baseline, &[current.to_owned()], None, &settings)?;
    let c = &r.comparisons[0];
    let pass = c.verdict <= allowed;
    let s = &c.summary;
    let layer = c
        .layers
        .as_ref()
        .and_then(|l| l.first_diverging)
        .map_or_else(
            || "no layer left the floor".to_owned(),
            |n| format!("first diverging layer {n}"),
        );
    let line = format!(
        "numerics gate: {}: {} against {}: {} (allowed: {}); Δppl {}, top-1 {:.2}%, KL mean {}; largest KL at passage {} position {}; {}\n",
        if pass { "PASS" } else { "FAIL" },
        c.other.label(),
        r.reference.label(),
        c.verdict.as_str(),
        allowed.as_str(),
        signed_pct(s.dppl_pct),
        s.top1_agreement_pct,
        short(s.kl_mean),
        s.kl_max_at.0,
        s.kl_max_at.1,
        layer,
    );
    let out = if json {
        let mut v = serde_json::to_value(&r)?;
        v["gate"] = serde_json::json!({"passed": pass, "allowed": allowed, "verdict": c.verdict});
        serde_json::to_string_pretty(&v)? + "\n"
    } else if markdown_out {
        format!("**{}**\n\n{}", line.trim_end(), markdown(&r))
    } else {
        line
    };
    g.write(&out)?;
    Ok(if pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_that_are_not_numbers_print_as_n_a() {
        // A perplexity past f64's range makes Δppl infinite: never printed as `inf%`.
        assert_eq!(signed_pct(f64::INFINITY), "n/a");
        assert_eq!(signed_pct(f64::NAN), "n/a");
        assert_eq!(short(f64::INFINITY), "n/a");
        assert_eq!(signed_pct(-0.0171), "-0.017%");
        assert_eq!(short(5.93e-4), "5.930e-4");
    }
}
