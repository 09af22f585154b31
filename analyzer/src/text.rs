//! Figures and names as text, the one formatting module of every front end (the CLI's
//! tables and Markdown, the explorer's labels and ruler, the analyzer's notes): durations,
//! milliseconds, percentages, bytes, counts and cut names. A value that is not a number
//! prints as `n/a`, never `inf` or `NaN`.

/// The longest kernel name a note or table cell shows, in characters.
pub const SHORT_NAME_CHARS: usize = 80;

/// A kernel name cut to [`SHORT_NAME_CHARS`].
pub fn short(name: &str) -> String {
    cut(name, SHORT_NAME_CHARS)
}

/// `s` cut to at most `n` characters, the last one an ellipsis when cut; empty for `n` 0.
pub fn cut(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else if n == 0 {
        String::new()
    } else {
        let mut c: String = s.chars().take(n - 1).collect();
        c.push('…');
        c
    }
}

/// A host scope's name as reports show it: a Python frame's long path is cut on the left,
/// keeping the file's folder, the file, the line and the function
/// (`/home/u/vllm/v1/worker/gpu_model_runner.py(1352): _prepare_inputs` reads
/// `…/worker/gpu_model_runner.py(1352): _prepare_inputs`). Other names are unchanged.
pub fn scope_name(name: &str) -> std::borrow::Cow<'_, str> {
    // A frame is `PATH.py(LINE): FUNCTION`; the path is everything before the file.
    let Some(py) = name.find(".py(") else {
        return name.into();
    };
    let path = &name[..py];
    let parts: Vec<&str> = path.split('/').collect();
    // Relative paths of up to three parts (`torch/cuda/graphs.py`) are short enough.
    if parts.len() <= 3 && !path.starts_with('/') {
        return name.into();
    }
    let keep = &parts[parts.len().saturating_sub(2)..];
    format!("…/{}{}", keep.join("/"), &name[py..]).into()
}

/// A count with thousands separators: `1234567` as `1,234,567`.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Milliseconds with the digits that matter, no unit (a table cell whose header names it).
pub fn ms(v: f64) -> String {
    if !v.is_finite() {
        "n/a".to_owned()
    } else if v >= 100.0 {
        format!("{v:.1}")
    } else if v >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.4}")
    }
}

/// Milliseconds to the microsecond, with the unit (a label): `0.200 ms`.
pub fn ms_label(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.3} ms")
    } else {
        "n/a".to_owned()
    }
}

/// A percentage to two decimals: `12.34%`.
pub fn pct(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.2}%")
    } else {
        "n/a".to_owned()
    }
}

/// A roofline percentage with one decimal (`55.4%`: an efficiency, floor ÷ measured, or a
/// share of the bandwidth), `n/a` when it is not a number.
pub fn pct1(p: f64) -> String {
    if p.is_finite() {
        format!("{p:.1}%")
    } else {
        "n/a".to_owned()
    }
}

/// How many times its floor a measured time is (`measured ÷ floor`), the roofline's
/// "× floor" figure, with two decimals and no sign; `n/a` when the floor is 0 or a figure is
/// not a number. Its inverse is the efficiency (`floor ÷ measured`, the analyzer's
/// `pct_of_floor`); never "% of floor", which reads the wrong way round.
pub fn x_floor(measured: f64, floor: f64) -> String {
    times_digits(measured, floor, 2).unwrap_or_else(|| "n/a".to_owned())
}

/// `measured ÷ floor` to `decimals`, or `None` without a floor.
fn times_digits(measured: f64, floor: f64, decimals: usize) -> Option<String> {
    let x = measured / floor;
    (floor > 0.0 && x.is_finite()).then(|| format!("{x:.decimals$}"))
}

/// `23.46× the floor`, or `n/a the floor` without one.
pub fn times_floor(ms: f64, floor_ms: f64) -> String {
    match times_digits(ms, floor_ms, 2) {
        Some(x) => format!("{x}× the floor"),
        None => "n/a the floor".to_owned(),
    }
}

/// A measured time against its floor: `73.465 ms = 23.46× the floor (efficiency 4.3%)`,
/// where `×` is measured ÷ floor and the efficiency floor ÷ measured (`pct_of_floor`).
pub fn against_floor(ms: f64, floor_ms: f64, pct_of_floor: f64) -> String {
    format!(
        "{ms:.3} ms = {} (efficiency {})",
        times_floor(ms, floor_ms),
        pct1(pct_of_floor)
    )
}

/// A trace's headline against its floor, the one wording every front end uses:
/// `TPOT median 73.465 ms = 23.46× the floor (efficiency 4.3%)`.
pub fn floor_headline(tpot_ms: f64, floor_ms: f64, pct_of_floor: f64) -> String {
    format!(
        "TPOT median {}",
        against_floor(tpot_ms, floor_ms, pct_of_floor)
    )
}

/// A bucket against its floor, as a chart labels it: `attention 3.4× floor`, or
/// `norm (no floor)`.
pub fn bucket_vs_floor(bucket: &str, ms: f64, floor_ms: f64) -> String {
    match times_digits(ms, floor_ms, 1) {
        Some(x) if floor_ms > 0.0 => format!("{bucket} {x}× floor"),
        _ if floor_ms > 0.0 => format!("{bucket} n/a floor"),
        _ => format!("{bucket} (no floor)"),
    }
}

/// Where a roofline's context comes from, as every front end says it; `given` is the front
/// end's own word for a context it was handed (the CLI's `--ctx`, the explorer's `given`).
pub fn context_from(
    s: crate::roofline::report::ContextSource,
    given: &'static str,
) -> &'static str {
    use crate::roofline::report::ContextSource as C;
    match s {
        C::TraceMarkers => "from the trace's markers",
        C::Given => given,
        C::Assumed => "assumed; pass --ctx",
    }
}

/// Where a roofline's tensor-parallel degree comes from; `given` as in [`context_from`].
pub fn tp_from(s: crate::roofline::report::TpSource, given: &'static str) -> &'static str {
    use crate::roofline::report::TpSource as T;
    match s {
        T::TraceWorldSize => "from the trace's world size",
        T::Given => given,
        T::Assumed => "assumed; pass --tp",
    }
}
/// A duration in ns in the unit that suits it: `12.3 µs`, `4.560 ms`, `1.230 s`.
pub fn dur_ns(ns: f64) -> String {
    let a = ns.abs();
    if !ns.is_finite() {
        "n/a".to_owned()
    } else if a >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if a >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if a >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// Bytes in binary units: `1.50 MiB`.
pub fn bytes(b: u64) -> String {
    let b = b as f64;
    const KIB: f64 = 1024.0;
    if b >= KIB * KIB * KIB {
        format!("{:.2} GiB", b / (KIB * KIB * KIB))
    } else if b >= KIB * KIB {
        format!("{:.2} MiB", b / (KIB * KIB))
    } else if b >= KIB {
        format!("{:.1} KiB", b / KIB)
    } else {
        format!("{b:.0} B")
    }
}

/// A ruler tick at `ns` on a ruler whose ticks are `step` ns apart: the unit of the step,
/// with only the decimals the step needs (`720 ms`, `1.25 s`, `3.5 µs`).
pub fn tick_ns(ns: f64, step: f64) -> String {
    let (div, unit) = if step >= 1e9 {
        (1e9, "s")
    } else if step >= 1e6 {
        (1e6, "ms")
    } else if step >= 1e3 {
        (1e3, "µs")
    } else {
        (1.0, "ns")
    };
    // Decimals for the step in its unit (steps are 1, 2 or 5 times a power of ten).
    let s = step / div;
    let decimals = if s >= 1.0 {
        0
    } else {
        (-s.log10()).ceil() as usize
    };
    format!("{:.*} {unit}", decimals, ns / div)
}

/// Writes a typed decision as two JSON fields: under `text` the sentence every front end
/// shows (its `Display`), under `kind` the value itself, for programs to match. For fields
/// marked `#[serde(flatten, serialize_with = ...)]`, so a report keeps its sentence and
/// gains the type.
pub fn text_and_kind<T, S>(v: &T, s: S, text: &str, kind: &str) -> Result<S::Ok, S::Error>
where
    T: std::fmt::Display + serde::Serialize,
    S: serde::Serializer,
{
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(2))?;
    m.serialize_entry(text, &v.to_string())?;
    m.serialize_entry(kind, v)?;
    m.end()
}

/// [`text_and_kind`] for a list: the sentences under `text`, the values under `kind`.
pub fn texts_and_kinds<T, S>(v: &[T], s: S, text: &str, kind: &str) -> Result<S::Ok, S::Error>
where
    T: std::fmt::Display + serde::Serialize,
    S: serde::Serializer,
{
    use serde::ser::SerializeMap;
    let texts: Vec<String> = v.iter().map(ToString::to_string).collect();
    let mut m = s.serialize_map(Some(2))?;
    m.serialize_entry(text, &texts)?;
    m.serialize_entry(kind, v)?;
    m.end()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_against_its_floor_reads_as_times_and_efficiency() {
        assert_eq!(
            floor_headline(73.465, 3.131, 100.0 * 3.131 / 73.465),
            "TPOT median 73.465 ms = 23.46× the floor (efficiency 4.3%)"
        );
        assert_eq!(
            against_floor(2.0, 0.0, f64::NAN),
            "2.000 ms = n/a the floor (efficiency n/a)"
        );
        assert_eq!(
            (x_floor(5.656, 3.125), x_floor(1.0, 0.0)),
            ("1.81".into(), "n/a".into())
        );
        assert_eq!(times_floor(5.656, 3.125), "1.81× the floor");
        assert_eq!(pct1(55.36), "55.4%");
        assert_eq!(
            bucket_vs_floor("attention", 2.0, 0.5),
            "attention 4.0× floor"
        );
        assert_eq!(bucket_vs_floor("norm", 2.0, 0.0), "norm (no floor)");
    }

    #[test]
    fn cuts_and_counts() {
        assert_eq!(cut("abcdef", 6), "abcdef");
        assert_eq!(cut("abcdef", 4), "abc…");
        assert_eq!(cut("abcdef", 1), "…");
        assert_eq!(cut("abcdef", 0), "");
        assert_eq!(short(&"x".repeat(100)).chars().count(), SHORT_NAME_CHARS);
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1_234_567), "1,234,567");
    }

    #[test]
    fn figures_have_their_units_and_never_print_nan() {
        assert_eq!(
            (ms(123.456), ms(1.5), ms(0.25)),
            ("123.5".into(), "1.500".into(), "0.2500".into())
        );
        assert_eq!(ms_label(0.2), "0.200 ms");
        assert_eq!(pct(12.345), "12.35%");
        for f in [ms, ms_label, pct, |v| dur_ns(v)] {
            assert_eq!(f(f64::NAN), "n/a");
            assert_eq!(f(f64::INFINITY), "n/a");
        }
        assert_eq!(dur_ns(12_300.0), "12.30 µs");
        assert_eq!(dur_ns(4.56e6), "4.560 ms");
        assert_eq!(bytes(1536 * 1024), "1.50 MiB");
        assert_eq!(tick_ns(720e6, 10e6), "720 ms");
        assert_eq!(tick_ns(1.25e9, 0.05e9), "1250 ms");
        assert_eq!(tick_ns(3500.0, 500.0), "3500 ns");
    }
}
