//! `gapscope buckets`: list the rules, or `--explain NAME` to see which rule wins and why.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use gapscope_analyzer::RuleSet;
use gapscope_analyzer::rules::{Explanation, RULES_SCHEMA_VERSION};
use serde::Serialize;

#[derive(Args)]
pub struct BucketsArgs {
    /// Kernel name, memop kind (DtoD) or a report's memop name ("[memop] Memset (Device)")
    /// to explain.
    #[arg(long, value_name = "NAME", conflicts_with = "explain_scope")]
    pub explain: Option<String>,
    /// A host scope name (`nn.Module: Qwen3NextGatedDeltaNet_0`, `aten::mm`): the scope
    /// rules it matches, in order; the first decides for kernels launched inside it.
    #[arg(long, value_name = "SCOPE")]
    pub explain_scope: Option<String>,
    /// Extra bucket rules (TOML), tried before the built-in ones [default: GAPSCOPE_RULES,
    /// else `rules` in the config file].
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// JSON output (with schema_version).
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct ExplainJson<'a> {
    schema_version: u32,
    #[serde(flatten)]
    explanation: &'a Explanation,
}

pub fn run(a: BucketsArgs, g: &crate::Global) -> Result<ExitCode> {
    let rules = match &a.rules {
        Some(p) => RuleSet::with_user_file(p)?,
        None => RuleSet::builtin(),
    };
    // A name is explained as reports see it: demangled and in canonical spelling.
    let canonical = a
        .explain
        .as_deref()
        .map(|n| gapscope_analyzer::import::names::canonical_kernel_name(n).into_owned());
    if let Some(scope) = &a.explain_scope {
        let hits = rules.explain_scope(scope);
        let out = if a.json {
            serde_json::to_string_pretty(&serde_json::json!({
                "schema_version": RULES_SCHEMA_VERSION,
                "scope": scope,
                "bucket": hits.first().map(|h| h.bucket),
                "rules": hits,
            }))? + "\n"
        } else {
            let mut t = format!("scope:   {}\n", crate::render::text(scope));
            match hits.first() {
                Some(r) => t.push_str(&format!(
                    "bucket:  {} for kernels launched inside it (unless an earlier kernel rule matches their name)\nrule:    #{} {:?} (set {}, {})\npattern: {}\nmatched: {:?}\n",
                    r.bucket, r.position, r.rule, r.set, r.origin, r.pattern, r.matched
                )),
                None => t.push_str("bucket:  none: no scope rule matches; kernels inside it are filed by their names\n"),
            }
            for r in hits.iter().skip(1) {
                t.push_str(&format!(
                    "also:    #{} {:?} -> {} (loses)\n",
                    r.position, r.rule, r.bucket
                ));
            }
            t
        };
        g.write(&out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let out = match &canonical {
        Some(name) if a.json => {
            let e = rules.explain(name);
            serde_json::to_string_pretty(&ExplainJson {
                schema_version: RULES_SCHEMA_VERSION,
                explanation: &e,
            })? + "\n"
        }
        Some(name) => {
            let given = a.explain.as_deref().unwrap_or_default();
            let mut t = String::new();
            if given != name {
                t.push_str(&format!(
                    "given:   {}
",
                    crate::render::text(given)
                ));
            }
            t + &explain_text(&rules, name)
        }
        None if a.json => serde_json::to_string_pretty(&rules.listing())? + "\n",
        None => list_text(&rules),
    };
    g.write(&out)?;
    Ok(ExitCode::SUCCESS)
}

fn explain_text(rules: &RuleSet, name: &str) -> String {
    let e = rules.explain(name);
    let mut out = format!("name:    {}\n", crate::render::text(name));
    if let Some(k) = &e.memop {
        out.push_str(&format!("memop:   {k}\n"));
    }
    out.push_str(&format!("bucket:  {}\n", e.bucket));
    match &e.rule {
        Some(r) => out.push_str(&format!(
            "rule:    #{} {:?} (set {}, {})\npattern: {}\nmatched: {:?}\n",
            r.position, r.rule, r.set, r.origin, r.pattern, r.matched
        )),
        None => out.push_str(&format!(
            "rule:    none of the {} rules matched, so the {} is `other`; add a rule with --rules FILE\n",
            rules.rules.len(),
            if e.memop.is_some() { "memop" } else { "kernel" }
        )),
    }
    for s in &e.shadowed {
        out.push_str(&format!(
            "also:    #{} {:?} -> {} (loses: first match wins)\n",
            s.position, s.rule, s.bucket
        ));
    }
    out
}

fn list_text(rules: &RuleSet) -> String {
    let l = rules.listing();
    let mut out = String::new();
    for r in &l.rules {
        out.push_str(&format!(
            "{:>3}  {:<16} {:<16} {:?}  {} {}\n",
            r.position,
            r.bucket.as_str(),
            r.set,
            r.name,
            r.kind,
            r.pattern
        ));
    }
    out.push_str("kernels no rule matches: other\n");
    if !l.memops_without_rule.is_empty() {
        out.push_str(&format!(
            "memops no rule lists ({}): other\n",
            l.memops_without_rule.join(", ")
        ));
    }
    out
}
