//! The diff page's body: both sides and the gap, the waterfall, the attribution table
//! (the text diff's own cells), what-ifs, structure and the kernels that moved.

use gapscope_analyzer::diff::DiffReport;
use gapscope_analyzer::diff::ranks::RanksDiff;

use super::tables::{Cell, facts, table};
use super::{escape, waterfall};
use crate::diff_cmd::{
    BUCKET_HEAD, bucket_rows, group_line, idle_figures, moved_cells, ratio, shares_line,
    side_figures, spec_lines, what_if_cells,
};
use crate::render::{Names, ms, text};

/// The whole diff: title, headline and sections.
pub fn body(d: &DiffReport) -> String {
    format!("<h1>gapscope diff</h1>\n{}", sections(d))
}

/// Two runs of ranks: the rank comparison (as the text diff words it), then the buckets of
/// the rank that sets A's step, or why they were not compared.
pub fn ranks_body(d: Option<&DiffReport>, ranks: &RanksDiff, refused: Option<&str>) -> String {
    let mut s = String::from("<h1>gapscope diff</h1>\n<h2>Ranks</h2>\n");
    s.push_str(&format!(
        "<pre>{}</pre>\n",
        escape(&crate::render::ranks::diff(ranks, false))
    ));
    if let Some(why) = refused {
        s.push_str(&format!(
            "<div class=\"warn bad\"><b>buckets</b>{}</div>\n",
            escape(why)
        ));
    }
    if let Some(d) = d {
        s.push_str(&sections(d));
    }
    s
}

fn sections(d: &DiffReport) -> String {
    let mut s = headline(d);
    s.push_str("<h2>Where the gap is</h2>\n");
    s.push_str(&waterfall::chart(d));
    s.push_str("<h3>Gap by bucket</h3>\n");
    let rows: Vec<Vec<Cell>> = bucket_rows(d)
        .into_iter()
        .map(|r| {
            r.into_iter()
                .enumerate()
                .map(|(i, c)| {
                    if i == 0 {
                        Cell::Bucket(c)
                    } else {
                        Cell::Num(c)
                    }
                })
                .collect()
        })
        .collect();
    s.push_str(&table("", &BUCKET_HEAD, &rows));
    s.push_str(&format!(
        "<p>{} <code>residual (idle)</code> is the part of the gap no bucket explains: \
         launch and host gaps (GPU idle) and overlap. Idle per step: {}.</p>\n",
        escape(shares_line(d).trim_end()),
        escape(&idle_figures(d))
    ));
    for g in &d.groups {
        let (head, how) = group_line(g, false);
        s.push_str(&format!("<p>{}; {}</p>\n", escape(&head), escape(&how)));
    }
    s.push_str(&what_ifs(d));
    let names = Names::of_diff(d);
    s.push_str(&structure(d, &names));
    s.push_str("<h3>Top kernels that moved</h3>\n");
    let rows: Vec<Vec<Cell>> = d
        .top_moved
        .iter()
        .map(|k| {
            let [name, bucket, a, b, delta] = moved_cells(k, &names);
            vec![
                Cell::Code(text(&name)),
                Cell::Bucket(bucket),
                Cell::Num(a),
                Cell::Num(b),
                Cell::Num(delta),
            ]
        })
        .collect();
    s.push_str(&table(
        "",
        &["kernel", "bucket", "A ms/step", "B ms/step", "delta ms"],
        &rows,
    ));
    s
}

/// Cards (both steps, the gap) and the sides' lines.
fn headline(d: &DiffReport) -> String {
    let cards = [
        ("A step", format!("{} ms", ms(d.a.step_ms))),
        ("B step", format!("{} ms", ms(d.b.step_ms))),
        ("gap A − B", format!("{} ms/step", ms(d.gap_ms))),
        ("A / B", format!("{:.2}×", ratio(d))),
    ];
    let mut s = String::from("<div class=\"cards\">\n");
    for (l, v) in cards {
        s.push_str(&format!(
            "<div class=\"card\"><div class=\"l\">{}</div><div class=\"v\">{}</div></div>\n",
            escape(l),
            escape(&v)
        ));
    }
    s.push_str("</div>\n");
    let mut lines = vec![
        (
            "A".to_owned(),
            format!("{} ({})", text(&d.a.path), side_figures(&d.a)),
        ),
        (
            "B".to_owned(),
            format!("{} ({})", text(&d.b.path), side_figures(&d.b)),
        ),
        (
            "gap".to_owned(),
            format!(
                "A − B = {} ms/step ({:.2}x); graph replays: {}",
                ms(d.gap_ms),
                ratio(d),
                d.structural.graph_replays
            ),
        ),
    ];
    if let Some(sp) = &d.speculative {
        lines.push((
            "speculative".to_owned(),
            spec_lines(sp)
                .trim()
                .trim_start_matches("speculative: ")
                .to_owned(),
        ));
    }
    s.push_str(&facts(&lines));
    s
}

/// The levers that would make A faster.
fn what_ifs(d: &DiffReport) -> String {
    let mut s = String::from(
        "<h3>What-if: A's step if one lever took B's time, disappeared, or ran at its floor</h3>\n",
    );
    let levers = d.gaining();
    if levers.is_empty() {
        s.push_str(
            "<p>No lever: A is not slower than B in any bucket, group or idle part, nor above \
             a floor.</p>\n",
        );
        return s;
    }
    let rows: Vec<Vec<Cell>> = levers
        .into_iter()
        .map(|w| {
            let [lever, rest @ ..] = what_if_cells(w);
            std::iter::once(Cell::Bucket(lever))
                .chain(rest.into_iter().map(Cell::Num))
                .collect()
        })
        .collect();
    s.push_str(&table(
        "",
        &[
            "lever",
            "with B's time, ms",
            "gain, ms",
            "without it, ms",
            "at its floor, ms",
        ],
        &rows,
    ));
    s
}

/// Kernels per step and the names only one side has.
fn structure(d: &DiffReport, names: &Names) -> String {
    let st = &d.structural;
    let mut s = String::from("<h3>Structure per step</h3>\n");
    s.push_str(&format!(
        "<p>Kernels per step: A {:.1}, B {:.1}; extra copies per step in A: {:+.1}; extra \
         gathers per step in A: {:+.1}.</p>\n",
        st.a_kernels_per_step,
        st.b_kernels_per_step,
        st.extra_copies_per_step,
        st.extra_gathers_per_step
    ));
    for (label, list, total) in [
        ("only in A", &st.only_in_a, st.only_in_a_total),
        ("only in B", &st.only_in_b, st.only_in_b_total),
    ] {
        if list.is_empty() {
            continue;
        }
        s.push_str(&format!("<p>{label} ({total}):</p>\n"));
        let rows: Vec<Vec<Cell>> = list
            .iter()
            .map(|(n, c)| {
                vec![
                    Cell::Num(format!("{c:.1}")),
                    Cell::Code(text(&names.get(n))),
                ]
            })
            .collect();
        s.push_str(&table("", &["per step", "kernel"], &rows));
        if total > list.len() {
            s.push_str(&format!(
                "<p class=\"sub\">and {} more (--list N shows more)</p>\n",
                total - list.len()
            ));
        }
    }
    s
}
