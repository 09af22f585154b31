//! Names and counts as text, the same in the analyzer's notes and in every front end (the
//! CLI's tables, the explorer's labels): one cut, one name length, one thousands separator.

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
}
