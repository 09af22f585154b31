//! Number formatting shared by the views (counts and cut names: [`gapscope_analyzer::text`]).

pub use gapscope_analyzer::text::{count, cut};

/// A duration in ns as "12.3 µs", "4.56 ms", "1.23 s".
pub fn dur_ns(ns: f64) -> String {
    let a = ns.abs();
    if a >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if a >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if a >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

pub fn ms(v: f64) -> String {
    format!("{v:.3} ms")
}

/// Bytes as "1.5 MiB".
pub fn bytes(b: u64) -> String {
    let b = b as f64;
    if b >= 1024.0 * 1024.0 * 1024.0 {
        format!("{:.2} GiB", b / (1024.0 * 1024.0 * 1024.0))
    } else if b >= 1024.0 * 1024.0 {
        format!("{:.2} MiB", b / (1024.0 * 1024.0))
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

/// A ruler tick at `ns` on a ruler whose ticks are `step` ns apart: the unit of the step,
/// with only the decimals the step needs ("720 ms", "1.25 s", "3.5 µs").
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
