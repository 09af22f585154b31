//! `report --html` and `diff --html`: a complete document that stands alone (no script, no
//! reference outside the file), one stacked bar per decode step, the bucket and attribution
//! tables, every input string escaped, and the output written only where it is safe. The
//! library renderer Python calls (`render::html::report_fragment`) is checked here too.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use std::path::{Path, PathBuf};

use gapscope_tests::{gzip, one_line_error, repo, run, s, stdout};
use serde_json::Value;

const QWEN: &str = "traces/reference/hf-qwen3-0.6b-npl1.json.gz";
const LLAMA: &str = "traces/reference/hf-llama3.2-1b-npl8.json.gz";
const HOSTILE: &str = "<script>alert(\"x\")</script>&'quoted'";

fn json(args: &[&str]) -> Value {
    let o = run(args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Runs `args` (which write `out`), checks exit 0 and returns stdout and the page.
fn page(args: &[&str], out: &Path) -> (String, String) {
    let o = run(args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (stdout(&o), std::fs::read_to_string(out).unwrap())
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// A complete document that loads nothing from outside itself and runs no script.
fn assert_self_contained(html: &str) {
    assert!(
        html.starts_with("<!DOCTYPE html>\n<html lang=\"en\">"),
        "{}",
        &html[..80]
    );
    assert!(html.trim_end().ends_with("</html>"));
    for tag in [
        "<head>",
        "</head>",
        "<body>",
        "</body>",
        "<meta charset=\"utf-8\">",
    ] {
        assert_eq!(count(html, tag), 1, "{tag}");
    }
    let head = &html[..html.find("</head>").unwrap()];
    assert_eq!(count(head, "<title>gapscope "), 1);
    let external = regex::Regex::new(
        r#"(?i)(\b(src|href|xlink:href|action|poster|srcset)\s*=\s*["']?\s*(https?:|//|ftp:|file:|data:text))|url\(\s*["']?\s*(https?:|//)|@import|@font-face"#,
    )
    .unwrap();
    assert!(external.find(html).is_none(), "{:?}", external.find(html));
    for tag in [
        "<script", "<link", "<iframe", "<object", "<embed", "<img", "<base",
    ] {
        assert!(!html.to_lowercase().contains(tag), "{tag} in the page");
    }
    // Every link is an anchor inside the page.
    let href = regex::Regex::new(r#"href="([^"]*)""#).unwrap();
    for c in href.captures_iter(html) {
        assert!(c[1].starts_with('#'), "{}", &c[1]);
    }
}

/// The rows of the first `<table class="NAME">`'s body.
fn table_rows<'a>(html: &'a str, class: &str) -> Vec<&'a str> {
    let at = html
        .find(&format!("<table class=\"{class}\">"))
        .unwrap_or_else(|| panic!("no {class} table"));
    let body = &html[at..];
    let body = &body[body.find("<tbody>").unwrap()..body.find("</tbody>").unwrap()];
    body.split("<tr").skip(1).collect()
}

#[test]
fn report_page_has_one_bar_per_decode_step_and_the_bucket_table() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.html");
    let (text, html) = page(&["report", "-q", s(&repo(QWEN)), "--html", s(&out)], &out);
    // Standard output is the usual report, --html or not.
    assert_eq!(text, stdout(&run(&["report", "-q", s(&repo(QWEN))])));
    assert_self_contained(&html);
    let r = &json(&["report", "-q", "--json", s(&repo(QWEN))])["reports"][0];
    let decode = r["steps"]["decode_steps"].as_u64().unwrap() as usize;
    assert!(decode > 1);
    assert_eq!(count(&html, "<g class=\"step\" "), decode);
    let steps: Vec<&str> = html.split("<g class=\"step\" ").skip(1).collect();
    assert!(
        steps
            .iter()
            .all(|g| g.starts_with("data-step=") && g.contains("<title>"))
    );
    // The headline: the text report's facts.
    for fact in [
        "trace",
        "gpu",
        "steps",
        "TPOT",
        "decode window",
        "idle cause",
        "lever",
    ] {
        assert!(html.contains(&format!("<tr><th>{fact}</th>")), "{fact}");
    }
    assert!(html.contains("NVIDIA H200"));
    let tpot = r["steps"]["tpot_ms"]["median"].as_f64().unwrap();
    assert!(html.contains(&format!("{tpot:.3} ms")), "TPOT {tpot}");
    // One bucket row per bucket of the report, in its order, each with its colour.
    let buckets = r["buckets"].as_array().unwrap();
    let rows = table_rows(&html, "buckets");
    assert_eq!(rows.len(), buckets.len());
    for (row, b) in rows.iter().zip(buckets) {
        let name = b["bucket"].as_str().unwrap();
        assert!(
            row.contains(&format!("</span>{name}</td>")),
            "{name}: {row}"
        );
        assert!(row.contains("class=\"sw\""), "{row}");
    }
    // The idle causes, and the bars per bucket.
    assert_eq!(
        table_rows(&html, "causes").len(),
        6,
        "five causes and the total"
    );
    assert!(html.contains("host compute"));
    assert!(count(&html, "<g class=\"bar\">") >= buckets.len() / 2);
}

/// The bars are numbered as the report numbers its steps (`--step N`, `worst_stall.step`):
/// the engine trace's prefill is the run's step 0, so its first decode step is the run's
/// step 1 and the report's step 0.
#[test]
fn report_page_numbers_the_bars_as_the_report_does() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.html");
    let trace = repo("traces/reference/engine-llama3-8b-npl1.gst");
    let (_, html) = page(&["report", "-q", s(&trace), "--html", s(&out)], &out);
    let r = &json(&["report", "-q", "--json", s(&trace)])["reports"][0];
    let decode = r["steps"]["decode_steps"].as_u64().unwrap() as usize;
    let steps: Vec<&str> = html.split("<g class=\"step\" ").skip(1).collect();
    assert_eq!(steps.len(), decode);
    for (n, g) in steps.iter().enumerate() {
        assert!(
            g.starts_with(&format!("data-step=\"{n}\"><title>decode step {n}: ")),
            "bar {n}: {}",
            &g[..g.len().min(80)]
        );
    }
    // The worst stall's step is the bar of that number.
    let w = r["steps"]["worst_stall"]["step"].as_u64().unwrap() as usize;
    assert!(steps[w].starts_with(&format!("data-step=\"{w}\"")));
}

/// A rank of a two-rank run against the model it ran: the roofline's floors are one rank's
/// (its world size says 2), and the caption says so.
#[test]
fn the_roofline_of_a_tensor_parallel_rank_says_its_degree() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.html");
    let trace = repo("traces/reference/tp2/host-rank0.json.gz");
    let model = repo("cli/tests/data/tp2-decode-config.json");
    let args = [
        "report",
        "-q",
        s(&trace),
        "--html",
        s(&out),
        "--model",
        s(&model),
    ];
    let (_, html) = page(&[&args[..], &["--hw", "h200"]].concat(), &out);
    assert!(
        html.contains("(bf16 weights, context 4096 tokens, one rank of tensor parallel 2)"),
        "{}",
        &html[html.find("<figcaption>Tokens").unwrap_or(0)..][..300]
    );
}

#[test]
fn report_page_of_several_traces_has_a_section_each_and_the_roofline() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("two.html");
    let model = repo("models/qwen3-0.6b.json");
    let (_, html) = page(
        &[
            "report",
            "-q",
            s(&repo(QWEN)),
            s(&repo(LLAMA)),
            "--html",
            s(&out),
            "--model",
            s(&model),
        ],
        &out,
    );
    assert_self_contained(&html);
    assert_eq!(count(&html, "<section class=\"trace\""), 2);
    assert!(html.contains("href=\"#trace-1\""));
    let decode: usize = [QWEN, LLAMA]
        .iter()
        .map(|t| {
            json(&["report", "-q", "--json", s(&repo(t))])["reports"][0]["steps"]["decode_steps"]
                .as_u64()
                .unwrap() as usize
        })
        .sum();
    assert_eq!(count(&html, "<g class=\"step\" "), decode);
    // The roofline from the traces' GPU (no --hw): the chart and both traces placed.
    let roof = &html[html.find("id=\"roofline\"").expect("a roofline section")..];
    assert!(
        roof.contains("<svg") && roof.contains("H200"),
        "{}",
        &roof[..400]
    );
    assert!(!roof.contains("<?xml"));
    assert_eq!(count(roof, "<td class=\"n\">1</td><td class=\"k\">"), 1);
    assert_eq!(count(roof, "<td class=\"n\">2</td><td class=\"k\">"), 1);
    // Measured ÷ floor and floor ÷ measured, each named; never "% of floor".
    assert!(
        roof.contains("<th class=\"n\">× floor</th>")
            && roof.contains("<th class=\"n\">efficiency</th>"),
        "{roof}"
    );
    assert!(
        roof.contains("× the floor (efficiency "),
        "the chart's legend"
    );
    assert!(!html.contains("% of floor"));
}

#[test]
fn report_page_of_ranks_has_the_verdict_and_a_row_per_rank() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ranks.html");
    let (a, b) = (
        repo("traces/reference/tp2/host-rank0.json.gz"),
        repo("traces/reference/tp2/host-rank1.json.gz"),
    );
    let (text, html) = page(&["report", "-q", s(&a), s(&b), "--html", s(&out)], &out);
    assert_eq!(text, stdout(&run(&["report", "-q", s(&a), s(&b)])));
    assert_self_contained(&html);
    let ranks = &html[html.find("Ranks of one run").expect("the ranks section")..];
    assert!(
        ranks.contains("<b>verdict</b> rank 1 sets the step"),
        "{}",
        &ranks[..600]
    );
    let per_rank = &ranks[ranks.find("<h3>Per rank</h3>").unwrap()..];
    let body = &per_rank[..per_rank.find("</tbody>").unwrap()];
    assert_eq!(count(body, "<tr><td class=\"n\">"), 2);
    assert_eq!(count(&html, "<section class=\"trace\""), 2);
}

#[test]
fn diff_page_has_the_attribution_table_and_the_waterfall() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("diff.html");
    let (text, html) = page(
        &[
            "diff",
            "-q",
            s(&repo(LLAMA)),
            s(&repo(QWEN)),
            "--html",
            s(&out),
        ],
        &out,
    );
    assert_eq!(
        text,
        stdout(&run(&["diff", "-q", s(&repo(LLAMA)), s(&repo(QWEN))]))
    );
    assert_self_contained(&html);
    let d = json(&["diff", "-q", "--json", s(&repo(LLAMA)), s(&repo(QWEN))]);
    let buckets = d["buckets"].as_array().unwrap();
    assert!(html.contains(&format!("{:.3}", d["a"]["step_ms"].as_f64().unwrap())));
    // The attribution table: each bucket, then the residual.
    let table = &html[html.find("<h3>Gap by bucket</h3>").unwrap()..];
    let table = &table[..table.find("</tbody>").unwrap()];
    assert_eq!(
        count(table, "<tr>"),
        buckets.len() + 2,
        "header, buckets, residual"
    );
    assert!(table.contains("residual (idle)"));
    // The waterfall: A, the buckets that moved, the residual, B; then the deltas alone.
    let moved = buckets
        .iter()
        .filter(|b| b["delta_ms"].as_f64().unwrap().abs() >= 5e-5)
        .count();
    let charts =
        &html[html.find("Where the gap is").unwrap()..html.find("<h3>Gap by bucket").unwrap()];
    assert_eq!(
        count(charts, "<g class=\"bar\">"),
        (moved + 3) + (moved + 1)
    );
    assert!(charts.contains(">A step</text>") && charts.contains(">B step</text>"));
}

/// The bundled trace with its most common kernel renamed to markup, saved under a file
/// name that is markup too.
fn hostile_trace(dir: &Path) -> PathBuf {
    let f = std::fs::File::open(repo(QWEN)).unwrap();
    let mut doc: Value = serde_json::from_reader(flate2::read::GzDecoder::new(f)).unwrap();
    let events = doc["traceEvents"].as_array_mut().unwrap();
    let mut counts = std::collections::HashMap::<String, usize>::new();
    for e in events.iter().filter(|e| e["cat"] == "kernel") {
        *counts
            .entry(e["name"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    let common = counts.into_iter().max_by_key(|(_, n)| *n).unwrap().0;
    for e in events
        .iter_mut()
        .filter(|e| e["cat"] == "kernel" && e["name"] == common.as_str())
    {
        e["name"] = Value::String(HOSTILE.to_owned());
    }
    let p = dir.join("<b>bold<&amp;'q'.json.gz");
    let bytes = serde_json::to_vec(&doc).unwrap();
    std::fs::write(&p, gzip(&bytes, flate2::Compression::fast())).unwrap();
    p
}

#[test]
fn names_from_the_input_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let trace = hostile_trace(dir.path());
    let out = dir.path().join("report.html");
    let (_, html) = page(&["report", "-q", s(&trace), "--html", s(&out)], &out);
    assert_self_contained(&html);
    assert!(
        html.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;quoted&#39;")
    );
    assert!(html.contains("&lt;b&gt;bold&lt;&amp;amp;&#39;q&#39;.json.gz"));
    assert!(!html.contains("<b>bold"));
    let out = dir.path().join("diff.html");
    let (_, html) = page(
        &["diff", "-q", s(&trace), s(&repo(QWEN)), "--html", s(&out)],
        &out,
    );
    assert_self_contained(&html);
    assert!(html.contains("&lt;script&gt;alert("));
    assert!(!html.contains("<b>bold"));
}

#[test]
fn the_fragment_stands_alone_with_scoped_styles() {
    use gapscope_analyzer::session::{Knobs, Run, SessionSettings, open_run};
    let settings = SessionSettings::resolve(&Knobs::default()).unwrap();
    let r = open_run(
        Run::new(repo(QWEN)),
        &settings,
        &gapscope_analyzer::import::NoProgress,
    )
    .unwrap();
    let f = gapscope_cli::render::html::report_fragment(&r.report, &r.tables);
    assert!(f.starts_with("<div class=\"gapscope\">\n<style>"));
    assert!(f.trim_end().ends_with("</div>"));
    assert!(!f.contains("<html") && !f.contains("<body"));
    assert_eq!(count(&f, "<g class=\"step\" "), r.report.steps.decode_steps);
    // Every rule of the style sheet is scoped to the fragment.
    let css = &f[f.find("<style>").unwrap() + 7..f.find("</style>").unwrap()];
    for rule in css.split('}').map(str::trim).filter(|r| !r.is_empty()) {
        let selectors = &rule[..rule.find('{').unwrap()];
        assert!(
            selectors
                .split(',')
                .all(|x| x.trim().starts_with(".gapscope")),
            "{selectors}"
        );
    }
}

#[test]
fn html_is_never_written_over_an_input_or_through_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("in.json.gz");
    std::fs::copy(repo(QWEN), &trace).unwrap();
    let before = std::fs::read(&trace).unwrap();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, b"precious").unwrap();
    let link = dir.path().join("link.html");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let q = repo(QWEN);
    for (args, says) in [
        (
            vec!["report", "-q", s(&trace), "--html", s(&trace)],
            "is the input",
        ),
        (
            vec!["report", "-q", s(&trace), "--html", s(&link)],
            "symbolic link",
        ),
        (
            vec!["diff", "-q", s(&q), s(&trace), "--html", s(&trace)],
            "is the input",
        ),
        (
            vec!["diff", "-q", s(&trace), s(&q), "--html", s(&link)],
            "symbolic link",
        ),
        (
            vec!["report", "-q", s(&trace), "--html", "-"],
            "give a path",
        ),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = one_line_error(&o);
        assert!(e.contains(says), "{args:?}: {e}");
    }
    assert_eq!(std::fs::read(&trace).unwrap(), before);
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
    // The model options go with --html (and --hw with --model): never silently ignored.
    for args in [
        vec![
            "report",
            "-q",
            s(&trace),
            "--model",
            "models/qwen3-0.6b.json",
        ],
        vec![
            "report",
            "-q",
            s(&trace),
            "--html",
            "x.html",
            "--hw",
            "h200",
        ],
        vec![
            "diff",
            "-q",
            s(&trace),
            "--what-if",
            "hybrid",
            "--html",
            "x.html",
        ],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(!dir.path().join("x.html").exists());
    }
}

#[test]
fn diff_page_of_two_runs_of_ranks_compares_the_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let mut runs = Vec::new();
    for mode in ["host", "kernel"] {
        let d = dir.path().join(mode);
        std::fs::create_dir(&d).unwrap();
        for r in 0..2 {
            let n = format!("{mode}-rank{r}.json.gz");
            std::fs::copy(repo(&format!("traces/reference/tp2/{n}")), d.join(&n)).unwrap();
        }
        runs.push(d);
    }
    let out = dir.path().join("diff.html");
    let (text, html) = page(
        &["diff", "-q", s(&runs[0]), s(&runs[1]), "--html", s(&out)],
        &out,
    );
    assert_self_contained(&html);
    let pre = &html[html.find("<h2>Ranks</h2>\n<pre>").expect("the ranks")..];
    let pre = &pre[..pre.find("</pre>").unwrap()];
    // The text diff's rank lines, line for line.
    for line in text
        .lines()
        .take_while(|l| !l.starts_with("buckets"))
        .take(4)
    {
        assert!(
            pre.contains(&line.replace('\'', "&#39;")),
            "{line:?} not in {pre}"
        );
    }
    assert!(!html.contains("\\u{a}"));
}
