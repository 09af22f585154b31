//! Kernel names as the CLI prints them. On a terminal a long name is cut in the middle,
//! keeping its start (the kernel) and its tail (the template arguments that tell one
//! instantiation from another): `void flash_fwd_kernel<Flash_fwd_ke…_sm90<true, false>`.
//! Names that would print the same are shown around where they first differ instead, so two
//! different names never print alike in one output. Piped output, files and `--wide` get
//! whole names.
//!
//! The width is per thread: the command's entry sets it for its standard output
//! ([`with_width`]), and renderers whose output is a file (the HTML page) set their own.

use std::cell::Cell;
use std::collections::HashMap;

use gapscope_analyzer::analysis::Report;
use gapscope_analyzer::diff::DiffReport;

/// The most characters a name takes on a terminal line.
pub const NAME_CHARS: usize = 80;

/// How names print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    /// Whole names (pipes, files, `--wide`).
    Whole,
    /// At most this many characters, cut in the middle.
    Cut(usize),
}

thread_local! {
    static WIDTH: Cell<Width> = const { Cell::new(Width::Cut(NAME_CHARS)) };
}

/// The width names print at on this thread.
pub fn width() -> Width {
    WIDTH.with(Cell::get)
}

/// Runs `f` with names printed at `w`, then puts the previous width back.
pub fn with_width<T>(w: Width, f: impl FnOnce() -> T) -> T {
    let before = WIDTH.with(|c| c.replace(w));
    let out = f();
    WIDTH.with(|c| c.set(before));
    out
}

/// Characters kept before the first difference when a window is shown.
const CONTEXT: usize = 12;

/// `name` in at most `n` characters: whole when it fits, else its first and last characters
/// with `…` between (the tail one character longer).
pub fn middle_cut(name: &str, n: usize) -> String {
    let chars: Vec<char> = name.chars().collect();
    if chars.len() <= n {
        return name.to_owned();
    }
    if n < 3 {
        return gapscope_analyzer::text::cut(name, n);
    }
    let head = (n - 1) / 2;
    pieces(
        &chars,
        &[0..head, chars.len() - (n - 1 - head)..chars.len()],
    )
}

/// `name` in at most `n` characters showing a window from character `start`: its first and
/// last characters, the window between, joined by `…` where something was left out.
fn window_cut(name: &str, n: usize, start: usize) -> String {
    let chars: Vec<char> = name.chars().collect();
    let len = chars.len();
    if len <= n {
        return name.to_owned();
    }
    if n < 8 {
        return middle_cut(name, n);
    }
    // A quarter each for the head and the tail, the rest for the window (two ellipses).
    let (head, tail) = (n / 4, n / 4);
    let window = n - head - tail - 2;
    let start = start.clamp(head, len - tail - window);
    pieces(&chars, &[0..head, start..start + window, len - tail..len])
}

/// The ranges of `chars` (in order, not overlapping), joined by `…` where they do not touch.
fn pieces(chars: &[char], ranges: &[std::ops::Range<usize>]) -> String {
    let mut out = String::new();
    let mut end = 0;
    for (i, r) in ranges.iter().enumerate() {
        if i > 0 && r.start > end {
            out.push('…');
        }
        out.extend(&chars[r.start.max(end)..r.end.max(end)]);
        end = end.max(r.end);
    }
    out
}

/// Characters `a` and `b` share from their start.
fn common_prefix(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

/// The text each name prints as, for a set of distinct names.
fn shown(names: &[&str], n: usize) -> Vec<String> {
    let mut out: Vec<String> = names.iter().map(|x| middle_cut(x, n)).collect();
    // Names that print alike are shown from where their group first differs; a second round
    // separates those that still share that window; any left print whole.
    for round in 0..3 {
        let groups = collisions(&out);
        if groups.is_empty() {
            return out;
        }
        for g in groups {
            let differ = g
                .iter()
                .skip(1)
                .map(|&i| common_prefix(names[g[0]], names[i]))
                .min()
                .unwrap_or(0);
            for i in g {
                out[i] = if round < 2 {
                    window_cut(names[i], n, differ.saturating_sub(CONTEXT))
                } else {
                    names[i].to_owned()
                };
            }
        }
    }
    // A whole name can only print like a cut one if it holds `…` itself.
    loop {
        let groups = collisions(&out);
        if groups.is_empty() {
            return out;
        }
        for i in groups.into_iter().flatten() {
            out[i] = names[i].to_owned();
        }
    }
}

/// The indices of texts that are alike, in groups of two or more.
fn collisions(texts: &[String]) -> Vec<Vec<usize>> {
    let mut by: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, t) in texts.iter().enumerate() {
        by.entry(t.as_str()).or_default().push(i);
    }
    let mut groups: Vec<Vec<usize>> = by.into_values().filter(|g| g.len() > 1).collect();
    groups.sort();
    groups
}

/// The names of one output and how each prints.
pub struct Names {
    width: Width,
    shown: HashMap<String, String>,
}

impl Names {
    /// `names` as they print at this thread's [`width`].
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let width = width();
        let mut distinct: Vec<&str> = names.into_iter().collect();
        distinct.sort_unstable();
        distinct.dedup();
        let shown = match width {
            Width::Whole => HashMap::new(),
            Width::Cut(n) => distinct
                .iter()
                .map(|x| (*x).to_owned())
                .zip(shown(&distinct, n))
                .collect(),
        };
        Self { width, shown }
    }

    /// Every kernel name a report prints: each bucket's top names (decode and prefill) and
    /// the `other` names.
    pub fn of_report(r: &Report) -> Self {
        Self::new(
            r.buckets
                .iter()
                .chain(&r.prefill_buckets)
                .flat_map(|b| b.top.iter().map(|t| t.name.as_str()))
                .chain(r.other.top.iter().map(|t| t.name.as_str())),
        )
    }

    /// Every kernel name a diff prints: those only in A, only in B, and those that moved.
    pub fn of_diff(d: &DiffReport) -> Self {
        let st = &d.structural;
        Self::new(
            st.only_in_a
                .iter()
                .chain(&st.only_in_b)
                .map(|(n, _)| n.as_str())
                .chain(d.top_moved.iter().map(|k| k.name.as_str())),
        )
    }

    /// How `name` prints (not yet escaped for the terminal: see [`super::text`]).
    pub fn get(&self, name: &str) -> String {
        match (self.shown.get(name), self.width) {
            (Some(s), _) => s.clone(),
            (None, Width::Whole) => name.to_owned(),
            (None, Width::Cut(n)) => middle_cut(name, n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_name_keeps_its_start_and_tail() {
        let name = format!(
            "void flash_fwd_kernel<{}>_sm90<true, false>",
            "x".repeat(100)
        );
        let c = middle_cut(&name, 80);
        assert_eq!(c.chars().count(), 80);
        assert!(c.starts_with("void flash_fwd_kernel<xx"), "{c}");
        assert!(c.ends_with("xxx>_sm90<true, false>"), "{c}");
        assert_eq!(c.matches('…').count(), 1);
        assert_eq!(middle_cut("short", 80), "short");
        assert_eq!(middle_cut("abcdef", 5), "ab…ef");
    }

    #[test]
    fn names_that_would_print_alike_never_do() {
        // Two cuBLAS GEMV kernels of the bundled math-SDPA trace differ only in the middle.
        let args = "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>, \
                    cublasGemvTensorStridedBatched<float const>, \
                    cublasGemvTensorStridedBatched<float>, float>";
        let a = format!(
            "std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, \
             float, float, float, false, true, false, false, 7, false, {args} >({args})"
        );
        let b = a.replace("true, false, false, 7", "true, true, false, 5");
        let c = a.replace("7, false", "7, true");
        assert_eq!(middle_cut(&a, 80), middle_cut(&b, 80));
        let all = [
            a.as_str(),
            b.as_str(),
            c.as_str(),
            "nvjet_sm90_tst_64x8_64x16_2x1_v_bz_TNT",
        ];
        let out = shown(&all, 80);
        for (i, x) in out.iter().enumerate() {
            assert!(x.chars().count() <= 80, "{x}");
            for y in &out[i + 1..] {
                assert_ne!(x, y);
            }
        }
        // Each shows where it differs.
        assert!(out[0].contains("false, false, 7"), "{}", out[0]);
        assert!(out[1].contains("true, false, 5"), "{}", out[1]);
        assert!(out[2].contains("7, true"), "{}", out[2]);
        assert_eq!(out[3], all[3]);
        // A name that is the start of another.
        let long = format!("{}{}", "k".repeat(90), "z".repeat(90));
        let prefix = format!("{}{}", "k".repeat(90), "z".repeat(89));
        let out = shown(&[&long, &prefix], 80);
        assert_ne!(out[0], out[1]);
    }

    #[test]
    fn whole_names_when_asked() {
        let long = "n".repeat(300);
        let cut = Names::new([long.as_str()]);
        assert_eq!(cut.get(&long).chars().count(), NAME_CHARS);
        let whole = with_width(Width::Whole, || Names::new([long.as_str()]));
        assert_eq!(whole.get(&long), long);
        assert_eq!(width(), Width::Cut(NAME_CHARS));
    }
}
