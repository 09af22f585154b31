//! `gapscope buckets`: list the rules, or `--explain NAME` to see which rule wins and why.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use gapscope_analyzer::RuleSet;
use gapscope_analyzer::rules::Matcher;

#[derive(Args)]
pub struct BucketsArgs {
    /// Kernel name (or memop kind such as DtoD) to explain.
    #[arg(long, value_name = "NAME")]
    pub explain: Option<String>,
    /// Extra bucket rules (TOML), tried before the built-in ones.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: BucketsArgs) -> Result<ExitCode> {
    let rules = match &a.rules {
        Some(p) => RuleSet::with_user_file(p)?,
        None => RuleSet::builtin(),
    };
    let mut out = String::new();
    if let Some(name) = &a.explain {
        let e = rules.explain(name);
        if a.json {
            out = serde_json::to_string_pretty(&e)? + "\n";
        } else {
            out.push_str(&format!("name:    {name}\nbucket:  {}\n", e.bucket));
            match &e.rule {
                Some(r) => {
                    out.push_str(&format!(
                        "rule:    #{} {:?} (set {}, {})\npattern: {}\nmatched: {:?}\n",
                        r.position, r.rule, r.set, r.origin, r.pattern, r.matched
                    ));
                }
                None => out.push_str(&format!(
                    "rule:    none of the {} rules matched, so the kernel is `other`; add a rule with --rules FILE\n",
                    rules.rules.len()
                )),
            }
            for s in &e.shadowed {
                out.push_str(&format!(
                    "also:    #{} {:?} -> {} (loses: first match wins)\n",
                    s.position, s.rule, s.bucket
                ));
            }
        }
    } else {
        for (i, r) in rules.rules.iter().enumerate() {
            let what = match &r.matcher {
                Matcher::Kernel(re) => format!("regex {}", re.as_str()),
                Matcher::Memop(k) => format!(
                    "memop {}",
                    k.iter().map(|k| k.as_str()).collect::<Vec<_>>().join("|")
                ),
            };
            out.push_str(&format!(
                "{:>3}  {:<16} {:<16} {:?}  {}\n",
                i + 1,
                r.bucket.as_str(),
                r.set,
                r.name,
                what
            ));
        }
    }
    crate::render::write_stdout(&out)?;
    Ok(ExitCode::SUCCESS)
}
