//! Exact decimal times. Kineto writes `ts` and `dur` as microseconds with three decimals
//! (`"ts": 4444055082923.272`), sometimes as strings (`"ts": "123.456"`); read through an
//! `f64` a start near 1.7e18 ns lost up to 248 ns, which showed up as false "kernels start
//! before an earlier kernel on the same stream ends" warnings. The text is read here as a
//! decimal instead, so three decimals of microseconds are kept as exact nanoseconds.
//!
//! Rules:
//! - `[-+]digits[.digits][(e|E)[-+]digits]`, as JSON (and Rust's float parser, which strings
//!   used to go through) writes numbers; `.5` and `5.` are accepted too.
//! - Whole nanoseconds are rounded half to even from the text (Kineto's three decimals
//!   need no rounding). A value is kept to the femtosecond (six digits below the
//!   nanosecond) until then, and an end is rounded from the exact `ts + dur`, so two events
//!   that abut in the text abut in the trace. Digits below the femtosecond only tell a tie
//!   from a value just above or below it (they are rounded to odd); in an end they can be
//!   off by one femtosecond, which changes its nanosecond only for a sum that lands within
//!   a femtosecond of a half.
//! - Magnitudes past `i64::MAX` ns saturate there; `import::clamp` then clamps and counts
//!   them with every other importer's times. `i64::MIN` is never produced (marker tables
//!   use it for "no range on this clock").
//! - `inf`/`infinity` (any case, signed) saturate; `nan` reads as absent, as `null` does.

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// Femtoseconds in a nanosecond.
const FS_PER_NS: u32 = 1_000_000;

/// An exact time or duration: `ns + fs / 1e6` nanoseconds, with `0 <= fs < 1e6` (so a
/// negative value has `ns` rounded down).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Nanos {
    pub ns: i64,
    pub fs: u32,
}

impl Nanos {
    /// The largest magnitude, `i64::MAX` ns.
    const MAX: Nanos = Nanos {
        ns: i64::MAX,
        fs: 0,
    };

    /// Microseconds written as decimal text (JSON number or the inside of a string).
    pub(crate) fn from_micros(text: &[u8]) -> Option<Option<Nanos>> {
        parse(text, 3)
    }

    /// Nanoseconds written as decimal text.
    pub(crate) fn from_nanos(text: &[u8]) -> Option<Option<Nanos>> {
        parse(text, 0)
    }

    /// The exact sum, saturating at `i64::MAX` ns either side.
    pub(crate) fn add(self, o: Nanos) -> Nanos {
        let mut fs = self.fs + o.fs;
        let mut ns = self.ns.saturating_add(o.ns);
        if fs >= FS_PER_NS {
            fs -= FS_PER_NS;
            ns = ns.saturating_add(1);
        }
        if ns == i64::MAX || ns == i64::MIN {
            fs = 0;
        }
        Nanos { ns, fs }
    }

    /// Whole nanoseconds, half to even; never `i64::MIN`.
    pub(crate) fn round(self) -> i64 {
        let half = FS_PER_NS / 2;
        let up = self.fs > half || (self.fs == half && self.ns & 1 == 1);
        let ns = if up {
            self.ns.saturating_add(1)
        } else {
            self.ns
        };
        ns.max(i64::MIN + 1)
    }
}

/// `text * 10^shift` nanoseconds. `None` when the text is not a number; `Some(None)` for
/// `nan`.
fn parse(text: &[u8], shift: i64) -> Option<Option<Nanos>> {
    let (neg, body) = match text.split_first() {
        Some((b'-', r)) => (true, r),
        Some((b'+', r)) => (false, r),
        _ => (false, text),
    };
    let int_len = digits_len(body);
    let (ip, rest) = body.split_at(int_len);
    let (fp, rest) = match rest.split_first() {
        Some((b'.', r)) => r.split_at(digits_len(r)),
        _ => (&[][..], rest),
    };
    if ip.is_empty() && fp.is_empty() {
        return non_finite(neg, body);
    }
    let exp = match rest.split_first() {
        None => 0,
        Some((b'e' | b'E', r)) => exponent(r)?,
        _ => return None,
    };
    let (ns, fs) = if exp == 0 && ip.len() <= 15 && fp.len() as i64 <= shift {
        // Kineto's own form (`4444055082923.272` µs): whole nanoseconds, at most 10^18.
        let v = ip
            .iter()
            .chain(fp)
            .fold(0u64, |v, &b| v * 10 + u64::from(b - b'0'));
        (v * 10u64.pow((shift - fp.len() as i64) as u32), 0)
    } else {
        magnitude(ip, fp, ip.len() as i64 + exp + shift)
    };
    let n = if !neg || (ns == 0 && fs == 0) {
        Nanos { ns: ns as i64, fs }
    } else if fs == 0 {
        Nanos {
            ns: -(ns as i64),
            fs: 0,
        }
    } else {
        Nanos {
            ns: -(ns as i64) - 1,
            fs: FS_PER_NS - fs,
        }
    };
    Some(Some(n))
}

fn digits_len(s: &[u8]) -> usize {
    s.iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(s.len())
}

/// `[-+]digits`, saturating far beyond any useful exponent.
fn exponent(s: &[u8]) -> Option<i64> {
    let (neg, d) = match s.split_first() {
        Some((b'-', r)) => (true, r),
        Some((b'+', r)) => (false, r),
        _ => (false, s),
    };
    if d.is_empty() || digits_len(d) != d.len() {
        return None;
    }
    let e = d
        .iter()
        .fold(0i64, |e, &b| (e * 10 + i64::from(b - b'0')).min(1 << 40));
    Some(if neg { -e } else { e })
}

/// `inf`, `infinity` and `nan`, any case, as Rust's float parser reads them.
fn non_finite(neg: bool, body: &[u8]) -> Option<Option<Nanos>> {
    let is = |w: &str| body.eq_ignore_ascii_case(w.as_bytes());
    if is("nan") {
        Some(None)
    } else if is("inf") || is("infinity") {
        let m = Nanos::MAX;
        Some(Some(if neg { Nanos { ns: -m.ns, fs: 0 } } else { m }))
    } else {
        None
    }
}

/// The magnitude of the digits `ip ++ fp` with the decimal point after `point` of them
/// (which may be negative or past the end): whole nanoseconds (at most `i64::MAX`) and
/// femtoseconds, rounded to odd below the femtosecond.
fn magnitude(ip: &[u8], fp: &[u8], point: i64) -> (u64, u32) {
    const CAP: u128 = i64::MAX as u128;
    const SATURATED: (u64, u32) = (i64::MAX as u64, 0);
    let n = (ip.len() + fp.len()) as i64;
    let digit = |k: i64| -> u32 {
        if k < 0 || k >= n {
            0
        } else if (k as usize) < ip.len() {
            u32::from(ip[k as usize] - b'0')
        } else {
            u32::from(fp[k as usize - ip.len()] - b'0')
        }
    };
    // The whole part: the digits above the point, then zeros when the point is past them.
    // At most `CAP` before a step, so `v * 10 + 9` fits.
    let whole = point.clamp(0, n) as usize;
    let (wi, wf) = (whole.min(ip.len()), whole.saturating_sub(ip.len()));
    let mut v: u128 = 0;
    for &b in ip[..wi].iter().chain(&fp[..wf]) {
        v = v * 10 + u128::from(b - b'0');
        if v > CAP {
            return SATURATED;
        }
    }
    if point > n && v != 0 {
        for _ in n..point {
            v *= 10;
            if v > CAP {
                return SATURATED;
            }
        }
    }
    // Six femtosecond digits; anything below them only marks the value inexact, which sets
    // the last digit odd ("round to odd"): then the one rounding to whole nanoseconds is as
    // exact as rounding the full text (a tie is a tie only when nothing follows).
    let mut fs: u32 = 0;
    for k in point..point + 6 {
        fs = fs * 10 + digit(k);
    }
    let rest_start = (point + 6).max(0);
    if rest_start < n && (rest_start..n).any(|k| digit(k) != 0) {
        fs |= 1;
    }
    (v as u64, fs)
}

/// For the serde path (the walker in `fields` is the one the importer uses): integers are
/// exact, floats go through their shortest decimal form (what the text most likely held).
impl<'de> Deserialize<'de> for Nanos {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Nanos;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number of microseconds")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Nanos, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Nanos, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Nanos, E> {
                self.visit_str(&format!("{v:e}"))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Nanos, E> {
                match Nanos::from_micros(v.trim().as_bytes()) {
                    Some(Some(n)) => Ok(n),
                    _ => Err(E::custom(format!("expected a number, found {v:?}"))),
                }
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(s: &str) -> i64 {
        Nanos::from_micros(s.as_bytes()).unwrap().unwrap().round()
    }

    fn exact(s: &str) -> Nanos {
        Nanos::from_micros(s.as_bytes()).unwrap().unwrap()
    }

    /// The whole-nanosecond shortcut gives what the general path gives, on every form it
    /// takes (and the general path the rest).
    #[test]
    fn the_shortcut_agrees_with_the_general_path() {
        let mut texts = Vec::new();
        for ip in [
            "",
            "0",
            "7",
            "0012",
            "4444055082923",
            "999999999999999",
            "1000000000000000",
        ] {
            for fp in ["", ".", ".5", ".27", ".272", ".2725", ".000"] {
                for sign in ["", "-", "+"] {
                    texts.push(format!("{sign}{ip}{fp}"));
                }
            }
        }
        for t in &texts {
            for shift in [0, 3] {
                let general = || -> Option<Option<Nanos>> {
                    let b = t.as_bytes();
                    let (neg, body) = match b.split_first() {
                        Some((b'-', r)) => (true, r),
                        Some((b'+', r)) => (false, r),
                        _ => (false, b),
                    };
                    let (ip, rest) = body.split_at(digits_len(body));
                    let fp = rest.strip_prefix(b".").unwrap_or(rest);
                    if ip.is_empty() && fp.is_empty() {
                        return None;
                    }
                    let (ns, fs) = magnitude(ip, fp, ip.len() as i64 + shift);
                    let n = Nanos { ns: ns as i64, fs };
                    Some(Some(if neg && (ns, fs) != (0, 0) {
                        Nanos { ns: 0, fs: 0 }.add(Nanos {
                            ns: -(ns as i64) - i64::from(fs > 0),
                            fs: if fs > 0 { FS_PER_NS - fs } else { 0 },
                        })
                    } else {
                        n
                    }))
                };
                assert_eq!(parse(t.as_bytes(), shift), general(), "{t:?} shift {shift}");
            }
        }
    }

    /// The values of issue 19: through f64 these lost up to 248 ns.
    #[test]
    fn kineto_microseconds_become_exact_nanoseconds() {
        assert_eq!(us("4444055082923.272"), 4_444_055_082_923_272);
        assert_eq!(us("1000000000000.001"), 1_000_000_000_000_001);
        assert_eq!(us("1790857026123456.789"), 1_790_857_026_123_456_789);
        assert_eq!(us("1700000000000000.123"), 1_700_000_000_000_000_123);
        assert_eq!(us("1700000000000000.125"), 1_700_000_000_000_000_125);
        // Every nanosecond of a range near 1.7e18 ns survives (f64 has a 256 ns step here).
        for frac in 0..1000 {
            let s = format!("1700000000000000.{frac:03}");
            assert_eq!(us(&s), 1_700_000_000_000_000_000 + frac, "{s}");
        }
        assert_eq!(us("0"), 0);
        assert_eq!(us("5.888"), 5_888);
        assert_eq!(us("-2"), -2_000);
        assert_eq!(us("-0.001"), -1);
        assert_eq!(us("-4444055082923.272"), -4_444_055_082_923_272);
        assert_eq!(us("-0"), 0);
        assert_eq!(us(".5"), 500);
        assert_eq!(us("5."), 5_000);
        assert_eq!(us("+7"), 7_000);
    }

    #[test]
    fn more_decimals_round_half_to_even() {
        assert_eq!(us("0.0005"), 0);
        assert_eq!(us("0.0015"), 2);
        assert_eq!(us("0.0025"), 2);
        assert_eq!(us("0.00250001"), 3);
        assert_eq!(us("0.0014999999"), 1);
        assert_eq!(us("-0.0005"), 0);
        assert_eq!(us("-0.0015"), -2);
        assert_eq!(us("-0.0016"), -2);
        assert_eq!(us("4444055082923.2725"), 4_444_055_082_923_272);
        assert_eq!(us("4444055082923.2735"), 4_444_055_082_923_274);
        assert_eq!(us("0.0015000000001"), 2);
        assert_eq!(us("0.0024999999999"), 2);
        assert_eq!(us("0.0025000000001"), 3);
        // Femtoseconds are kept; below them, an inexact value gets an odd last digit.
        assert_eq!(exact("0.001234567"), Nanos { ns: 1, fs: 234_567 });
        assert_eq!(exact("0.0012345685"), Nanos { ns: 1, fs: 234_569 });
        assert_eq!(exact("0.0000000005"), Nanos { ns: 0, fs: 1 });
        assert_eq!(exact("0.0009999999999"), Nanos { ns: 0, fs: 999_999 });
        assert_eq!(
            exact("-1.0000001"),
            Nanos {
                ns: -1001,
                fs: 999_900
            }
        );
    }

    #[test]
    fn ends_are_rounded_from_the_exact_sum() {
        // Rounded separately, 0.0005 + 0.001 gives 0 + 1 = 1; the next event at 0.0015
        // starts at 2. From the exact sum both are 2, so the events still abut.
        let end = exact("0.0005").add(exact("0.001")).round();
        assert_eq!(end, us("0.0015"));
        let end = exact("1700000000000000.1234").add(exact("0.0011")).round();
        assert_eq!(end, us("1700000000000000.1245"));
        assert_eq!(exact("-0.0004").add(exact("0.0004")), Nanos::default());
    }

    #[test]
    fn exponents_and_strings() {
        assert_eq!(us("1.5e3"), 1_500_000);
        assert_eq!(us("1.5E+3"), 1_500_000);
        assert_eq!(us("15e-1"), 1_500);
        assert_eq!(us("4.444055082923272e12"), 4_444_055_082_923_272);
        assert_eq!(us("4444055082923272e-3"), 4_444_055_082_923_272);
        assert_eq!(us("1e-3"), 1);
        assert_eq!(us("1e-9"), 0);
        assert_eq!(exact("1e-9"), Nanos { ns: 0, fs: 1 });
        assert_eq!(us("1e-400"), 0);
        assert_eq!(us("0e999999999999999999999"), 0);
        assert_eq!(us("1e-999999999999999999999"), 0);
        for bad in [
            "", "-", "+", ".", "e3", "1e", "1e+", "1.2.3", "12a", "0x10", "1 2", "--1",
        ] {
            assert_eq!(Nanos::from_micros(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(Nanos::from_micros(b"NaN"), Some(None));
        assert_eq!(us("inf"), i64::MAX);
        assert_eq!(us("-Infinity"), -i64::MAX);
    }

    #[test]
    fn overflow_saturates_for_the_clamp() {
        assert_eq!(us("1e300"), i64::MAX);
        assert_eq!(us("-1e300"), -i64::MAX);
        assert_eq!(us("9223372036854775.807"), i64::MAX);
        assert_eq!(us("9223372036854775.806"), i64::MAX - 1);
        assert_eq!(us("9223372036854775.808"), i64::MAX);
        assert_eq!(us("-9223372036854775.808"), -i64::MAX);
        assert_eq!(us("92233720368547758.07"), i64::MAX);
        assert_eq!(us("18446744073709551616"), i64::MAX);
        assert_eq!(us(&"9".repeat(100)), i64::MAX, "a hundred digits");
        assert_eq!(
            us("0.00000000000000000000000000000000000000000000000001"),
            0
        );
        assert_eq!(us(&format!("0.{}1", "0".repeat(10_000))), 0);
        // Nanoseconds: baseTimeNanoseconds is exact too.
        let base = Nanos::from_nanos(b"1790857026123456789").unwrap().unwrap();
        assert_eq!(base.round(), 1_790_857_026_123_456_789);
        // Sums saturate; the clamp then counts and bounds them.
        let max = exact("1e300");
        assert_eq!(max.add(max).round(), i64::MAX);
        let min = exact("-1e300");
        assert_eq!(min.add(min).round(), i64::MIN + 1);
        assert_eq!(min.add(max).round(), 0);
    }
}
