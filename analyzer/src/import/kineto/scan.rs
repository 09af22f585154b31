//! Finding where a JSON object or array ends, 64 bytes at a time.
//!
//! Stage-1 style structural scanning (as in simdjson): per 64-byte block, bit masks of quotes
//! and brackets; a prefix XOR over the quote mask marks the bytes inside strings, and only
//! brackets outside strings change the depth. Blocks holding a backslash take the byte-by-byte
//! path, which handles escapes. This is what keeps a 300k-event trace's skipped events cheap.

/// Scanner state carried across buffer refills.
#[derive(Debug, Clone, Default)]
pub(crate) struct ScanState {
    pub depth: usize,
    pub in_str: bool,
    /// The previous byte was a backslash inside a string.
    pub escape: bool,
    /// Where the last bracket that opened a member value of the outermost value sat (depth
    /// 1 to 2), and where the last one that closed such a value sat (2 to 1), as offsets in
    /// the buffer scanned. Event import uses them to drop a trailing `args` unparsed.
    pub member_open: Option<usize>,
    pub member_close: Option<usize>,
}

/// Scans `buf[from..]` for the end of the value whose opening bracket is `open`. Returns the
/// index one past the closing bracket, or `None` with `state` updated when `buf` ends first.
pub(crate) fn find_end(
    buf: &[u8],
    mut from: usize,
    state: &mut ScanState,
    open: u8,
    close: u8,
) -> Option<usize> {
    while from + 64 <= buf.len() {
        let block: &[u8; 64] = buf[from..from + 64].try_into().ok()?;
        let m = masks(block, open, close);
        if m.backslash != 0 || state.escape {
            if let Some(end) = scalar_at(block, from, state, open, close) {
                return Some(from + end);
            }
            from += 64;
            continue;
        }
        let inside = prefix_xor(m.quote) ^ if state.in_str { u64::MAX } else { 0 };
        let mut structural = (m.open | m.close) & !inside;
        while structural != 0 {
            let bit = structural.trailing_zeros() as usize;
            if m.open >> bit & 1 == 1 {
                state.depth += 1;
                if state.depth == 2 {
                    state.member_open = Some(from + bit);
                }
            } else {
                if state.depth == 2 {
                    state.member_close = Some(from + bit);
                }
                state.depth = state.depth.saturating_sub(1);
                if state.depth == 0 {
                    return Some(from + bit + 1);
                }
            }
            structural &= structural - 1;
        }
        state.in_str = inside >> 63 == 1;
        from += 64;
    }
    scalar_at(&buf[from..], from, state, open, close).map(|e| from + e)
}

/// Byte-at-a-time reference path; also the one that understands escapes.
#[cfg(test)]
pub(crate) fn scalar(
    buf: &[u8],
    from: usize,
    state: &mut ScanState,
    open: u8,
    close: u8,
) -> Option<usize> {
    let r = scalar_at(&buf[from..], from, state, open, close);
    r.map(|e| from + e)
}

/// [`scalar`] over `buf` whose first byte sits at offset `base` of the caller's buffer
/// (for the member positions); returns the end relative to `buf`.
fn scalar_at(buf: &[u8], base: usize, state: &mut ScanState, open: u8, close: u8) -> Option<usize> {
    for (i, &b) in buf.iter().enumerate() {
        if state.in_str {
            if state.escape {
                state.escape = false;
            } else if b == b'\\' {
                state.escape = true;
            } else if b == b'"' {
                state.in_str = false;
            }
        } else if b == b'"' {
            state.in_str = true;
        } else if b == open {
            state.depth += 1;
            if state.depth == 2 {
                state.member_open = Some(base + i);
            }
        } else if b == close {
            if state.depth == 2 {
                state.member_close = Some(base + i);
            }
            state.depth = state.depth.saturating_sub(1);
            if state.depth == 0 {
                return Some(i + 1);
            }
        }
    }
    None
}

struct Masks {
    quote: u64,
    backslash: u64,
    open: u64,
    close: u64,
}

/// Bit i of each mask is set when byte i of the block is that character.
#[inline]
fn masks(b: &[u8; 64], open: u8, close: u8) -> Masks {
    #[cfg(target_arch = "x86_64")]
    {
        // SSE2 is part of the x86_64 baseline, so no runtime detection is needed.
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is always available on x86_64; loads are unaligned-safe and in bounds
        // (four 16-byte loads from a 64-byte array).
        unsafe {
            let q = _mm_set1_epi8(b'"' as i8);
            let bs = _mm_set1_epi8(b'\\' as i8);
            let op = _mm_set1_epi8(open as i8);
            let cl = _mm_set1_epi8(close as i8);
            let mut m = Masks {
                quote: 0,
                backslash: 0,
                open: 0,
                close: 0,
            };
            for k in 0..4 {
                let v = _mm_loadu_si128(b.as_ptr().add(16 * k) as *const __m128i);
                let sh = 16 * k;
                m.quote |= (_mm_movemask_epi8(_mm_cmpeq_epi8(v, q)) as u16 as u64) << sh;
                m.backslash |= (_mm_movemask_epi8(_mm_cmpeq_epi8(v, bs)) as u16 as u64) << sh;
                m.open |= (_mm_movemask_epi8(_mm_cmpeq_epi8(v, op)) as u16 as u64) << sh;
                m.close |= (_mm_movemask_epi8(_mm_cmpeq_epi8(v, cl)) as u16 as u64) << sh;
            }
            m
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut m = Masks {
            quote: 0,
            backslash: 0,
            open: 0,
            close: 0,
        };
        for (i, &c) in b.iter().enumerate() {
            m.quote |= ((c == b'"') as u64) << i;
            m.backslash |= ((c == b'\\') as u64) << i;
            m.open |= ((c == open) as u64) << i;
            m.close |= ((c == close) as u64) << i;
        }
        m
    }
}

/// Bit i set when an odd number of quote bits are at positions <= i: the bytes from an
/// opening quote up to (not including) its closing quote.
#[inline]
fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(s: &[u8]) -> (Option<usize>, Option<usize>) {
        let (o, c) = if s[0] == b'[' {
            (b'[', b']')
        } else {
            (b'{', b'}')
        };
        let (mut a, mut b) = (ScanState::default(), ScanState::default());
        let fast = find_end(s, 0, &mut a, o, c);
        let slow = scalar(s, 0, &mut b, o, c);
        assert_eq!(
            (a.member_open, a.member_close),
            (b.member_open, b.member_close),
            "{}",
            String::from_utf8_lossy(s)
        );
        (fast, slow)
    }

    #[test]
    fn matches_the_scalar_path_on_generated_json() {
        let mut rng: u64 = 7;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let atoms: [&[u8]; 10] = [
            br#""a}b""#,
            br#""x{{""#,
            br#""esc \" }""#,
            br#""\\""#,
            b"12",
            br#"[1,{"k":"]"}]"#,
            b"{}",
            br#""long string with { and [ brackets inside it, padding padding padding""#,
            b"null",
            br#""\\\"}""#,
        ];
        for _ in 0..3000 {
            let mut s = b"{".to_vec();
            let n = next() % 40;
            for i in 0..n {
                if i > 0 {
                    s.push(b',');
                }
                s.extend_from_slice(format!("\"k{i}\":").as_bytes());
                s.extend_from_slice(atoms[(next() % atoms.len() as u64) as usize]);
            }
            s.push(b'}');
            let expect = s.len();
            s.extend_from_slice(br#",{"next":"}"}"#);
            let (fast, slow) = both(&s);
            assert_eq!(slow, Some(expect), "{}", String::from_utf8_lossy(&s));
            assert_eq!(fast, slow, "{}", String::from_utf8_lossy(&s));
        }
    }

    #[test]
    fn resumes_across_refills() {
        let s = br#"{"name":"void k<{lambda()#1}>(int)","args":{"grid":[1,2,3]},"pad":"0123456789012345678901234567890123456789012345678901234567890123456789"}"#;
        for cut in 1..s.len() {
            let mut st = ScanState::default();
            let first = find_end(&s[..cut], 0, &mut st, b'{', b'}');
            let end = match first {
                Some(e) => e,
                None => find_end(s, cut, &mut st, b'{', b'}').unwrap(),
            };
            assert_eq!(end, s.len(), "cut at {cut}");
        }
    }
}
