//! A minimal JSON object walker for the flat Kineto event objects: it reads the few fields
//! gapscope keeps and skips the rest without decoding them. It replaced serde for this hot
//! path (measured in docs/BENCHMARKS.md); serde still handles everything else.

use std::borrow::Cow;

use super::decimal::Nanos;
use super::event::{Args, Event, Id, Num};
use super::scan::{ScanState, find_end};

type R<T> = std::result::Result<T, String>;

struct P<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> P<'a> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> R<u8> {
        self.ws();
        self.s
            .get(self.i)
            .copied()
            .ok_or_else(|| format!("unexpected end of event at offset {}", self.i))
    }

    fn expect(&mut self, c: u8) -> R<()> {
        let b = self.peek()?;
        if b != c {
            return Err(format!(
                "expected '{}' at offset {}, found '{}'",
                c as char, self.i, b as char
            ));
        }
        self.i += 1;
        Ok(())
    }

    /// A string's raw bytes (between the quotes) and whether it holds escapes.
    fn raw_string(&mut self) -> R<(&'a [u8], bool)> {
        self.expect(b'"')?;
        let start = self.i;
        let mut escaped = false;
        loop {
            let Some(o) = memchr::memchr2(b'"', b'\\', &self.s[self.i..]) else {
                return Err(format!("unterminated string at offset {start}"));
            };
            self.i += o;
            if self.s[self.i] == b'\\' {
                escaped = true;
                self.i += 2;
                if self.i > self.s.len() {
                    return Err(format!("unterminated string at offset {start}"));
                }
            } else {
                let raw = &self.s[start..self.i];
                self.i += 1;
                return Ok((raw, escaped));
            }
        }
    }

    fn string(&mut self) -> R<Cow<'a, str>> {
        let (raw, escaped) = self.raw_string()?;
        if escaped {
            // Rare (quotes or backslashes in a name): let serde undo the escapes.
            let quoted = &self.s[self.i - raw.len() - 2..self.i];
            serde_json::from_slice::<String>(quoted)
                .map(Cow::Owned)
                .map_err(|e| format!("bad string: {e}"))
        } else {
            std::str::from_utf8(raw)
                .map(Cow::Borrowed)
                .map_err(|e| format!("string is not UTF-8: {e}"))
        }
    }

    fn scalar_token(&mut self) -> R<&'a [u8]> {
        self.ws();
        let start = self.i;
        while self.i < self.s.len()
            && !matches!(self.s[self.i], b',' | b'}' | b']')
            && !self.s[self.i].is_ascii_whitespace()
        {
            self.i += 1;
        }
        if start == self.i {
            return Err(format!("missing value at offset {start}"));
        }
        Ok(&self.s[start..self.i])
    }

    /// A number, or `None` for `null` (as serde reads `Option<f64>`).
    fn number(&mut self) -> R<Option<f64>> {
        if self.peek()? == b'"' {
            let s = self.string()?;
            return s
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| format!("expected a number, found {s:?}"));
        }
        let t = self.scalar_token()?;
        if t == b"null" {
            return Ok(None);
        }
        std::str::from_utf8(t)
            .ok()
            .and_then(|t| t.parse::<f64>().ok())
            .map(Some)
            .ok_or_else(|| format!("bad number {:?}", String::from_utf8_lossy(t)))
    }

    /// Microseconds as exact nanoseconds, or `None` for `null` (and `nan`).
    fn micros(&mut self) -> R<Option<Nanos>> {
        let text: Cow<'a, [u8]> = if self.peek()? == b'"' {
            match self.string()? {
                Cow::Borrowed(s) => Cow::Borrowed(s.trim().as_bytes()),
                Cow::Owned(s) => Cow::Owned(s.trim().as_bytes().to_vec()),
            }
        } else {
            let t = self.scalar_token()?;
            if t == b"null" {
                return Ok(None);
            }
            Cow::Borrowed(t)
        };
        Nanos::from_micros(&text).ok_or_else(|| {
            format!(
                "expected a number of microseconds, found {:?}",
                String::from_utf8_lossy(&text)
            )
        })
    }

    fn num(&mut self) -> R<Option<Num>> {
        Ok(self.number()?.map(Num))
    }

    /// An id, or `None` for `null`.
    fn id(&mut self) -> R<Option<Id>> {
        if self.peek()? != b'"' && self.s[self.i..].starts_with(b"null") {
            self.i += 4;
            return Ok(None);
        }
        self.id_value().map(Some)
    }

    fn id_value(&mut self) -> R<Id> {
        if self.peek()? == b'"' {
            let s = self.string()?;
            let digits: String = s.chars().filter(|c| c.is_ascii_digit()).collect();
            if let Ok(n) = digits.parse::<u64>() {
                return Ok(Id(n));
            }
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in s.bytes() {
                h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
            }
            return Ok(Id(h));
        }
        let t = self.scalar_token()?;
        let t = std::str::from_utf8(t).map_err(|_| "bad id".to_owned())?;
        if let Ok(v) = t.parse::<u64>() {
            Ok(Id(v))
        } else if let Ok(v) = t.parse::<i64>() {
            Ok(Id(v as u64))
        } else {
            t.parse::<f64>()
                .map(|v| Id(v as u64))
                .map_err(|_| format!("bad id {t:?}"))
        }
    }

    fn num_array(&mut self) -> R<Vec<Num>> {
        self.expect(b'[')?;
        let mut v = Vec::with_capacity(3);
        if self.peek()? == b']' {
            self.i += 1;
            return Ok(v);
        }
        loop {
            v.push(Num(self.number()?.unwrap_or(0.0)));
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Ok(v);
                }
                c => {
                    return Err(format!(
                        "expected ',' or ']' in an array, found '{}'",
                        c as char
                    ));
                }
            }
        }
    }

    /// `Input Dims`: a list whose flat number lists are shapes; any other entry (a scalar's
    /// `[]` included) reads as an empty shape, as [`super::event::InputDims`] does.
    fn input_dims(&mut self) -> R<super::event::InputDims> {
        self.expect(b'[')?;
        let mut v = Vec::new();
        if self.peek()? == b']' {
            self.i += 1;
            return Ok(super::event::InputDims(v));
        }
        loop {
            let at = self.i;
            let flat = if self.peek()? == b'[' {
                self.num_array().ok()
            } else {
                None
            };
            match flat {
                Some(n) => v.push(n.into_iter().map(|x| x.0 as i64).collect()),
                None => {
                    self.i = at;
                    self.skip()?;
                    v.push(Vec::new());
                }
            }
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Ok(super::event::InputDims(v));
                }
                c => {
                    return Err(format!(
                        "expected ',' or ']' in an array, found '{}'",
                        c as char
                    ));
                }
            }
        }
    }

    fn skip(&mut self) -> R<()> {
        match self.peek()? {
            b'"' => self.raw_string().map(|_| ()),
            c @ (b'{' | b'[') => {
                let close = if c == b'{' { b'}' } else { b']' };
                match find_end(self.s, self.i, &mut ScanState::default(), c, close) {
                    Some(end) => {
                        self.i = end;
                        Ok(())
                    }
                    None => Err(format!("unterminated value at offset {}", self.i)),
                }
            }
            _ => self.scalar_token().map(|_| ()),
        }
    }

    /// Walks an object, handing each key to `f`, which must consume the value.
    fn object(&mut self, mut f: impl FnMut(&mut Self, &[u8]) -> R<()>) -> R<()> {
        self.expect(b'{')?;
        if self.peek()? == b'}' {
            self.i += 1;
            return Ok(());
        }
        loop {
            let (key, _) = self.raw_string()?;
            self.expect(b':')?;
            f(self, key)?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Ok(());
                }
                c => {
                    return Err(format!(
                        "expected ',' or '}}' at offset {}, found '{}'",
                        self.i, c as char
                    ));
                }
            }
        }
    }
}

/// The raw value of the event's own `"cat"` key (a top-level key of the event object; a
/// `"cat"` inside `args` or any other nested value does not count), without parsing the rest
/// of the event: the CPU-op and flow events that make up most of a trace are skipped after
/// this peek. `None` when there is no top-level string `cat` or the event is malformed
/// before it.
///
/// Fast path: Kineto writes `cat` among the first keys, so the first `"cat"` in the event is
/// found with a SIMD search and only the few bytes before it are checked (outside any
/// string, at depth 1, right after `{` or `,`). Anything else walks the keys.
pub(crate) fn peek_cat(raw: &[u8]) -> Option<&[u8]> {
    static CAT: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"cat\""));
    let at = CAT.find(raw)?;
    if !is_top_level_key(&raw[..at]) {
        return walk_to_cat(raw);
    }
    // `: "value"` by hand: category values are a few bytes, too short for memchr to pay.
    let ws = |mut i: usize| {
        while raw.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        i
    };
    let i = ws(at + 5);
    if raw.get(i) != Some(&b':') {
        return None;
    }
    let i = ws(i + 1);
    if raw.get(i) != Some(&b'"') {
        return None;
    }
    let start = i + 1;
    let len = raw.get(start..)?.iter().position(|&b| b == b'"')?;
    Some(&raw[start..start + len])
}

/// The event without its trailing top-level `"args"` member: the bytes before it, with the
/// separating comma dropped, for the caller to close with `}`. `members` are the scan's
/// positions of the event's last object-valued member (where it opened and closed): `args`
/// is dropped only when it is that member and nothing but whitespace follows its close, so
/// no field before or after it is lost. `None` otherwise (then the whole event is parsed).
pub(crate) fn cut_args(raw: &[u8], members: (Option<usize>, Option<usize>)) -> Option<&[u8]> {
    static ARGS: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"args\""));
    let (Some(open), Some(close)) = members else {
        return None;
    };
    let at = ARGS.find(raw)?;
    if !is_top_level_key(&raw[..at]) {
        return None;
    }
    // `"args"`, optional whitespace, `:`, optional whitespace, then the member's `{`.
    let mut i = at + 6;
    while raw.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    if raw.get(i) != Some(&b':') {
        return None;
    }
    i += 1;
    while raw.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    if i != open || close < open || raw.get(close + 1..)?.trim_ascii() != b"}" {
        return None;
    }
    let head = raw[..at].trim_ascii_end();
    head.strip_suffix(b",")
}

/// Whether a key starting right after `prefix` is a key of the outermost object.
fn is_top_level_key(prefix: &[u8]) -> bool {
    let last = prefix.iter().rev().find(|b| !b.is_ascii_whitespace());
    if !matches!(last, Some(b'{' | b',')) {
        return false;
    }
    // Common case: no bracket or escape after the opening brace, so the depth is 1 and an
    // even number of quotes means the key is outside any string.
    // (One branch-free pass: the prefix is a few dozen bytes, too short for memchr to pay.)
    if let Some((b'{', rest)) = prefix.split_first() {
        let (mut quotes, mut special) = (0u32, false);
        for &b in rest {
            quotes += u32::from(b == b'"');
            special |= b == b'{' || b == b'[' || b == b'\\';
        }
        if !special {
            return quotes % 2 == 0;
        }
    }
    is_top_level_key_slow(prefix)
}

/// [`is_top_level_key`] byte by byte, for prefixes holding brackets or escapes.
fn is_top_level_key_slow(prefix: &[u8]) -> bool {
    let (mut depth, mut in_str, mut escape) = (0usize, false, false);
    let mut last = 0u8;
    for &b in prefix {
        if in_str {
            if escape {
                escape = false;
            } else if b == b'\\' {
                escape = true;
            } else if b == b'"' {
                in_str = false;
                last = b;
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if !b.is_ascii_whitespace() {
            last = b;
        }
    }
    !in_str && depth == 1 && (last == b'{' || last == b',')
}

/// The slow path of [`peek_cat`]: walks the top-level keys.
fn walk_to_cat(raw: &[u8]) -> Option<&[u8]> {
    let mut p = P { s: raw, i: 0 };
    p.expect(b'{').ok()?;
    if p.peek().ok()? == b'}' {
        return None;
    }
    loop {
        let (key, _) = p.raw_string().ok()?;
        p.expect(b':').ok()?;
        if key == b"cat" {
            if p.peek().ok()? != b'"' {
                return None;
            }
            return p.raw_string().ok().map(|(v, _)| v);
        }
        p.skip().ok()?;
        match p.peek().ok()? {
            b',' => p.i += 1,
            _ => return None,
        }
    }
}

/// The fields of a host-scope event (a CPU op or Python function, its args cut off).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct ScopeFields<'a> {
    pub ph: Option<&'a str>,
    /// Unescaped bytes, not yet checked as UTF-8 (the importer's name cache does that).
    pub name: Option<&'a [u8]>,
    pub pid: Option<u64>,
    pub tid: Option<u64>,
    pub ts: Option<Nanos>,
    pub dur: Option<Nanos>,
}

/// A fast reader for the flat host-scope events Kineto writes (string, integer and number
/// values; no escapes, nested values or numeric strings). `None` for anything else, which
/// the caller then reads with [`parse_event`]; where both read an event they agree.
pub(crate) fn parse_scope(raw: &[u8]) -> Option<ScopeFields<'_>> {
    let ws = |mut i: usize| {
        while raw.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        i
    };
    // A string's contents from just after its opening quote; refuses escapes.
    let string = |i: usize| -> Option<(&[u8], usize)> {
        let rest = raw.get(i..)?;
        let o = rest.iter().position(|&b| b == b'"' || b == b'\\')?;
        (rest[o] == b'"').then(|| (&rest[..o], i + o + 1))
    };
    let token = |i: usize| -> (&[u8], usize) {
        let rest = &raw[i..];
        let n = rest
            .iter()
            .position(|&b| matches!(b, b',' | b'}') || b.is_ascii_whitespace())
            .unwrap_or(rest.len());
        (&rest[..n], i + n)
    };
    let mut f = ScopeFields::default();
    let mut i = ws(0);
    if raw.get(i) != Some(&b'{') {
        return None;
    }
    i = ws(i + 1);
    if raw.get(i) == Some(&b'}') {
        return (ws(i + 1) == raw.len()).then_some(f);
    }
    loop {
        if raw.get(i) != Some(&b'"') {
            return None;
        }
        let (key, after) = string(i + 1)?;
        i = ws(after);
        if raw.get(i) != Some(&b':') {
            return None;
        }
        i = ws(i + 1);
        match raw.get(i)? {
            b'"' => {
                let (v, after) = string(i + 1)?;
                match key {
                    b"ph" => f.ph = Some(std::str::from_utf8(v).ok()?),
                    b"name" => f.name = Some(v),
                    b"pid" | b"tid" | b"ts" | b"dur" => return None,
                    _ => {}
                }
                i = after;
            }
            b'{' | b'[' => return None,
            _ => {
                let (t, after) = token(i);
                match key {
                    b"pid" | b"tid" => {
                        if t.is_empty() || !t.iter().all(u8::is_ascii_digit) || t.len() > 19 {
                            return None;
                        }
                        let n = t.iter().fold(0u64, |a, &d| a * 10 + u64::from(d - b'0'));
                        if key == b"pid" {
                            f.pid = Some(n);
                        } else {
                            f.tid = Some(n);
                        }
                    }
                    b"ts" | b"dur" => {
                        let v = if t == b"null" {
                            None
                        } else {
                            Nanos::from_micros(t)??.into()
                        };
                        if key == b"ts" {
                            f.ts = v;
                        } else {
                            f.dur = v;
                        }
                    }
                    b"ph" | b"name" => return None,
                    _ => {}
                }
                i = after;
            }
        }
        i = ws(i);
        match raw.get(i)? {
            b',' => i = ws(i + 1),
            b'}' => return (ws(i + 1) == raw.len()).then_some(f),
            _ => return None,
        }
    }
}

/// Reads one event object.
pub(crate) fn parse_event(raw: &[u8]) -> R<Event<'_>> {
    let mut p = P { s: raw, i: 0 };
    let mut ev = Event {
        ph: None,
        name: None,
        name_raw: None,
        pid: None,
        tid: None,
        ts: None,
        dur: None,
        args: None,
    };
    p.object(|p, key| {
        match key {
            b"ph" => ev.ph = Some(p.string()?),
            b"name" => {
                // Unescaped names stay bytes: the importer checks each distinct name once.
                p.ws();
                let name_at = p.i;
                if p.peek()? == b'"'
                    && let (raw, false) = p.raw_string()?
                {
                    ev.name_raw = Some(raw);
                    ev.name = None;
                } else {
                    p.i = name_at;
                    ev.name = Some(p.string()?);
                }
            }
            b"pid" => ev.pid = p.id()?,
            b"tid" => ev.tid = p.id()?,
            b"ts" => ev.ts = p.micros()?,
            b"dur" => ev.dur = p.micros()?,
            b"args" if p.peek()? == b'{' => {
                let mut a = Args::default();
                p.object(|p, key| {
                    match key {
                        b"device" => a.device = p.id()?,
                        b"context" => a.context = p.id()?,
                        b"stream" => a.stream = p.id()?,
                        b"correlation" => a.correlation = p.id()?,
                        b"External id" => a.external_id = p.id()?,
                        b"registers per thread" => a.registers = p.num()?,
                        b"shared memory" => a.shared_memory = p.num()?,
                        b"grid" if p.peek()? == b'[' => a.grid = Some(p.num_array()?),
                        b"block" if p.peek()? == b'[' => a.block = Some(p.num_array()?),
                        b"bytes" => a.bytes = p.num()?,
                        b"graph id" => a.graph_id = p.id()?,
                        b"graph node id" => a.graph_node_id = p.id()?,
                        b"kind" if p.peek()? == b'"' => a.kind = Some(p.string()?),
                        b"In msg nelems" => a.in_msg_nelems = p.num()?,
                        b"dtype" if p.peek()? == b'"' => a.dtype = Some(p.string()?),
                        b"Input Dims" if p.peek()? == b'[' => {
                            a.input_dims = Some(p.input_dims()?);
                        }
                        b"flops" => a.flops = p.num()?,
                        b"marker source" if p.peek()? == b'"' => {
                            a.marker_source = Some(p.string()?);
                        }
                        b"phase" if p.peek()? == b'"' => a.phase = Some(p.string()?),
                        b"step" => a.step = p.num()?,
                        b"batch size" => a.batch_size = p.num()?,
                        b"tokens" => a.tokens = p.num()?,
                        _ => p.skip()?,
                    }
                    Ok(())
                })?;
                ev.args = Some(a);
            }
            _ => p.skip()?,
        }
        Ok(())
    })?;
    p.ws();
    if p.i != raw.len() {
        return Err(format!("trailing bytes after the event at offset {}", p.i));
    }
    Ok(ev)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The walker must agree with serde on every field it reads.
    #[test]
    fn agrees_with_serde() {
        let cases = [
            r#"{"ph":"X","cat":"kernel","name":"void k<{lambda()#1}>(int) [clone .kd]","pid":0,"tid":7,"ts":4444055082923.272,"dur":5.888,"args":{"External id":299013,"queued":0,"device":0,"context":1,"stream":7,"correlation":2068377,"registers per thread":32,"shared memory":0,"blocks per SM":0.121212,"grid":[16,1,1],"block":[128,1,1],"est. achieved occupancy %":1}}"#,
            r#"{ "ph" : "X" , "name" : "esc \"q\" \\ \u00e9", "pid":"stream 7", "tid":-3, "ts": 1e3, "dur":"2", "args": {"grid": [], "kind":"DtoD", "nested": {"a":[1,{"b":"}"}]}} }"#,
            r#"{"name":"x","args":null,"ts":null}"#,
            r#"{}"#,
            r#"{"ph":"X","cat":"gpu_user_annotation","name":"decode","pid":0,"tid":4294967295,"ts":1.5,"dur":2,"args":{"device":0,"phase":"decode","step":-1,"batch size":8,"tokens":8,"marker source":"engine"}}"#,
            r#"{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":2,"args":{"bucket":"gemv","correlation":3,"bytes":1024,"flops":2048}}"#,
            r#"{"ph":"X","cat":"cpu_op","name":"aten::scaled_dot_product_attention","ts":1,"dur":2,"args":{"External id":3,"Input Dims":[[1, 32, 5, 64], [1, 8, 69, 64], [], [[1,2],[3]], "x", [1.0, 2]],"Input type":["c10::BFloat16"]}}"#,
        ];
        for c in cases {
            let mut a = parse_event(c.as_bytes()).unwrap();
            if let Some(raw) = a.name_raw.take() {
                a.name = Some(Cow::Borrowed(std::str::from_utf8(raw).unwrap()));
            }
            let b: Event = serde_json::from_str(c).unwrap();
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{c}");
        }
    }

    #[test]
    fn peek_cat_takes_only_the_top_level_key() {
        assert_eq!(
            peek_cat(br#"{"ph":"X", "cat" : "kernel","name":"a"}"#),
            Some(&b"kernel"[..])
        );
        assert_eq!(peek_cat(br#"{"name":"\"cat\" x"}"#), None);
        // A "cat" inside args (or any nested value) is not the event's category.
        assert_eq!(
            peek_cat(br#"{"args":{"cat":"kernel"},"cat":"cpu_op","name":"a"}"#),
            Some(&b"cpu_op"[..])
        );
        assert_eq!(peek_cat(br#"{"args":{"cat":"kernel"},"name":"a"}"#), None);
        assert_eq!(peek_cat(br#"{"name":"a","args":[{"cat":"kernel"}]}"#), None);
        assert_eq!(peek_cat(br#"{"cat":7}"#), None);
        assert_eq!(peek_cat(b"{}"), None);
        // "cat" as a value, or inside a string, is not the key.
        assert_eq!(
            peek_cat(br#"{"name":"cat","cat":"kernel"}"#),
            Some(&b"kernel"[..])
        );
        assert_eq!(
            peek_cat(br#"{"name":"a \"cat\": b","cat" :"kernel"}"#),
            Some(&b"kernel"[..])
        );
        assert_eq!(peek_cat(br#"{ "cat": "cpu_op" }"#), Some(&b"cpu_op"[..]));
    }

    #[test]
    fn cut_args_drops_only_a_trailing_top_level_args() {
        let cut = |s: &str| {
            let mut st = ScanState::default();
            find_end(s.as_bytes(), 0, &mut st, b'{', b'}')?;
            cut_args(s.as_bytes(), (st.member_open, st.member_close))
                .map(|h| String::from_utf8_lossy(h).into_owned() + "}")
        };
        assert_eq!(
            cut(r#"{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":1.5,"dur":2,"args":{"Input Dims":[[1,2]],"args":{}}}"#).as_deref(),
            Some(r#"{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":1.5,"dur":2}"#)
        );
        assert_eq!(
            cut(r#"{ "cat" : "cpu_op" , "args" : {"a":"}"} }"#).as_deref(),
            Some(r#"{ "cat" : "cpu_op" }"#)
        );
        // Not last, nested, inside a string, or the only key: parsed whole.
        assert_eq!(cut(r#"{"args":{},"ts":1}"#), None);
        assert_eq!(cut(r#"{"cat":"cpu_op","args":{},"ts":1}"#), None);
        assert_eq!(cut(r#"{"cat":"cpu_op","args":{},"x":{"y":1}}"#), None);
        assert_eq!(
            cut(r#"{"cat":"cpu_op","args":{},"x":{"y":1},"ts":2}"#),
            None
        );
        assert_eq!(cut(r#"{"cat":"cpu_op","args":[1],"ts":2}"#), None);
        assert_eq!(cut(r#"{"x":{"args":{}},"ts":1}"#), None);
        assert_eq!(cut(r#"{"name":"\"args\": {}","ts":1}"#), None);
        assert_eq!(cut(r#"{"args":{}}"#), None);
        // The cut event parses to the same fields gapscope reads for a scope.
        let full = r#"{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":7,"tid":7,"ts":10.5,"dur":2.25,"args":{"External id":3,"Input Dims":[[4096,4096]]}}"#;
        let head = cut(full).unwrap();
        let (a, b) = (
            parse_event(full.as_bytes()).unwrap(),
            parse_event(head.as_bytes()).unwrap(),
        );
        assert_eq!(
            (a.name, a.pid, a.tid, a.ts, a.dur),
            (b.name, b.pid, b.tid, b.ts, b.dur)
        );
    }

    #[test]
    fn the_scope_reader_agrees_with_the_event_reader() {
        let cases = [
            r#"{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 773, "tid": 773,
                "ts": 4771030776922.976, "dur": 21.684}"#,
            r#"{"ph":"X","cat":"python_function","name":"nn.Module: Linear_3","pid":1,"tid":2,"ts":1.5,"dur":0}"#,
            r#"{"name":"x","ts":null}"#,
            r#"{}"#,
            r#"{ "ph" : "i" , "name" : "é" }"#,
        ];
        for c in cases {
            let fast = parse_scope(c.as_bytes()).unwrap_or_else(|| panic!("fast path: {c}"));
            let ev = parse_event(c.as_bytes()).unwrap();
            assert_eq!(fast.ph, ev.ph.as_deref(), "{c}");
            let ev_name = ev
                .name_raw
                .map(|r| std::str::from_utf8(r).unwrap())
                .or(ev.name.as_deref());
            assert_eq!(
                fast.name.map(|n| std::str::from_utf8(n).unwrap()),
                ev_name,
                "{c}"
            );
            assert_eq!(fast.pid, ev.pid.map(|x| x.0), "{c}");
            assert_eq!(fast.tid, ev.tid.map(|x| x.0), "{c}");
            assert_eq!(fast.ts, ev.ts, "{c}");
            assert_eq!(fast.dur, ev.dur, "{c}");
        }
        // What it leaves to the full reader.
        for c in [
            r#"{"name":"a \"quoted\" name","ts":1}"#,
            r#"{"name":"a","pid":"stream 7"}"#,
            r#"{"name":"a","tid":-3}"#,
            r#"{"name":"a","ts":"12"}"#,
            r#"{"name":"a","args":{}}"#,
            r#"{"name":"a","ts":1,}"#,
            r#"{"name":"a","ts":1} x"#,
            r#"{"name":"a","ts":12a}"#,
            r#"{"name":"a""#,
        ] {
            assert_eq!(parse_scope(c.as_bytes()), None, "{c}");
        }
    }

    #[test]
    fn rejects_broken_events() {
        for c in [
            r#"{"ph":"X",,}"#,
            r#"{"ph":"X""#,
            r#"{"name":"unterminated}"#,
            r#"{"ts":12a}"#,
            r#"{"args":{"grid":[1,2}}"#,
            r#"{"a":1} x"#,
        ] {
            assert!(parse_event(c.as_bytes()).is_err(), "{c}");
        }
    }
}
