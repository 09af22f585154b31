//! What a `--db` value names, and how it is shown in messages.
//!
//! Only `sqlite://`, `postgres://` and `postgresql://` values are URLs; anything else is a
//! file path taken literally (`x?mode=memory` is a file of that name). SQLite's in-memory
//! database (`:memory:`, `sqlite::memory:`, `sqlite://:memory:`, `mode=memory`) is refused:
//! it would keep nothing from one command to the next. A password in a URL is
//! never shown: [`redacted`] masks it for display and [`Secrets`] scrubs it from messages
//! that come back from the database driver.

use std::path::PathBuf;

/// Where a history lives.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Location {
    /// A SQLite file, named by a plain path.
    SqlitePath(PathBuf),
    /// A `sqlite://` URL, handed to SQLite with its query parameters.
    SqliteUrl(String),
    /// A `postgres://` or `postgresql://` URL.
    Postgres(String),
}

/// The scheme of `s` when it starts like a URL (`letters://`), lower-cased.
fn scheme(s: &str) -> Option<String> {
    let (head, _) = s.split_once("://")?;
    let mut chars = head.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
    .then(|| head.to_ascii_lowercase())
}

/// Sorts a `--db` value into a path or a URL; an error message for an empty value or a URL
/// of a database gapscope does not support.
pub(super) fn parse(db: &str) -> Result<Location, String> {
    if db.is_empty() {
        return Err("the database path is empty".into());
    }
    const IN_MEMORY: &str = "an in-memory SQLite database keeps nothing from one command to \
        the next: a history must be a file (write ./:memory: for a file of that name) or a \
        postgres:// URL";
    match scheme(db).as_deref() {
        None if db == ":memory:" || db.eq_ignore_ascii_case("sqlite::memory:") => {
            Err(IN_MEMORY.into())
        }
        None => Ok(Location::SqlitePath(PathBuf::from(db))),
        Some("sqlite") if sqlite_url_in_memory(db) => Err(IN_MEMORY.into()),
        Some("sqlite") => Ok(Location::SqliteUrl(db.to_owned())),
        Some("postgres" | "postgresql") => Ok(Location::Postgres(db.to_owned())),
        Some(other) => Err(format!(
            "unsupported database URL scheme `{other}://`: give a file path (write ./{db} for a \
             file of that name) or a sqlite://, postgres:// or postgresql:// URL"
        )),
    }
}

/// Whether a `sqlite://` URL names SQLite's in-memory database (or no file at all, which
/// SQLite takes for a private temporary database), as sqlx reads it.
fn sqlite_url_in_memory(url: &str) -> bool {
    let rest = &url["sqlite://".len()..];
    let (file, query) = rest.split_once('?').unwrap_or((rest, ""));
    file.is_empty()
        || file == ":memory:"
        || query.split('&').any(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            percent_decode(k) == "mode" && percent_decode(v) == "memory"
        })
}

/// Bounds of a URL's `user:password` part: from after `://` to the last `@` before the
/// authority ends (at `/`, `?` or `#`), as a URL parser splits it.
fn userinfo_by_authority(url: &str) -> Option<(usize, usize)> {
    let start = url.find("://")? + 3;
    let rest = &url[start..];
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let at = rest[..end].rfind('@')?;
    Some((start, start + at))
}

/// The same, taking the last `@` anywhere: covers a password with an unescaped `/`, `?`
/// or `#`, which a URL parser splits elsewhere (the masked part may then be larger).
fn userinfo_by_last_at(url: &str) -> Option<(usize, usize)> {
    let start = url.find("://")? + 3;
    let at = url[start..].rfind('@')?;
    Some((start, start + at))
}

/// Values of `password=` / `sslpassword=` query parameters.
fn query_passwords(url: &str) -> Vec<&str> {
    let Some((_, query)) = url.split_once('?') else {
        return Vec::new();
    };
    query
        .split(['&', '?'])
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| {
            let k = k.to_ascii_lowercase();
            k == "password" || k == "sslpassword"
        })
        .map(|(_, v)| v.split('#').next().unwrap_or(v))
        .filter(|v| !v.is_empty())
        .collect()
}

/// `%XX` decoding, bytes as given otherwise (lossy for invalid UTF-8).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && let (Some(h), Some(l)) = (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `db` as shown in messages: a URL's password (in the user part or a `password=` query
/// parameter) replaced by `***`. Paths are shown as given.
pub fn redacted(db: &str) -> String {
    if !db.contains("://") {
        return db.to_owned();
    }
    let mut out = match userinfo_by_last_at(db) {
        Some((s, at)) => match db[s..at].split_once(':') {
            Some((user, _)) => format!("{}{user}:***{}", &db[..s], &db[at..]),
            None => db.to_owned(),
        },
        None => db.to_owned(),
    };
    for p in query_passwords(db) {
        out = out.replace(&format!("={p}"), "=***");
    }
    out
}

/// The secret strings of a URL, to scrub from driver messages.
#[derive(Debug, Clone, Default)]
pub(super) struct Secrets(Vec<String>);

impl Secrets {
    pub(super) fn of(db: &str) -> Self {
        if !db.contains("://") {
            return Self::default();
        }
        let mut v: Vec<String> = Vec::new();
        for (s, at) in [userinfo_by_authority(db), userinfo_by_last_at(db)]
            .into_iter()
            .flatten()
        {
            if let Some((_, pw)) = db[s..at].split_once(':') {
                v.push(pw.to_owned());
                v.push(percent_decode(pw));
            }
        }
        for p in query_passwords(db) {
            v.push(p.to_owned());
            v.push(percent_decode(p));
        }
        v.retain(|s| !s.is_empty());
        // Longest first, so that a secret containing another is masked whole.
        v.sort_by_key(|s| std::cmp::Reverse(s.len()));
        v.dedup();
        Self(v)
    }

    /// `msg` on one line with every secret replaced by `***`.
    pub(super) fn scrub(&self, msg: &str) -> String {
        let mut out = msg.replace(['\n', '\r'], " ");
        for s in &self.0 {
            out = out.replace(s.as_str(), "***");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_paths_and_only_three_schemes_are_urls() {
        assert_eq!(
            parse("x?mode=memory").unwrap(),
            Location::SqlitePath("x?mode=memory".into())
        );
        for m in [
            ":memory:",
            "sqlite::memory:",
            "sqlite://:memory:",
            "sqlite://",
            "sqlite://?mode=memory",
            "sqlite://h.db?cache=shared&mode=memory",
        ] {
            let e = parse(m).unwrap_err();
            assert!(
                e.contains("in-memory") && e.contains("postgres://"),
                "{m}: {e}"
            );
        }
        assert_eq!(
            parse("./:memory:").unwrap(),
            Location::SqlitePath("./:memory:".into())
        );
        assert_eq!(
            parse("sqlite:h.db").unwrap(),
            Location::SqlitePath("sqlite:h.db".into())
        );
        assert_eq!(
            parse("sqlite://h.db").unwrap(),
            Location::SqliteUrl("sqlite://h.db".into())
        );
        assert!(matches!(
            parse("PostgreSQL://u@h/d").unwrap(),
            Location::Postgres(_)
        ));
        let e = parse("mysql://u:pw@h/d").unwrap_err();
        assert!(e.contains("mysql://") && !e.contains('\n'), "{e}");
        assert!(parse("").is_err());
        assert_eq!(
            parse("dir/a://b").unwrap(),
            Location::SqlitePath("dir/a://b".into()),
            "not a scheme"
        );
    }

    #[test]
    fn passwords_are_masked_in_every_spelling() {
        let cases = [
            ("postgres://u:secret@h:5432/d", "postgres://u:***@h:5432/d"),
            ("postgres://u:se@cret@h/d", "postgres://u:***@h/d"),
            ("postgres://u:se/cr?et@h/d", "postgres://u:***@h/d"),
            (
                "postgres://u@h/d?password=secret",
                "postgres://u@h/d?password=***",
            ),
            ("postgres://u@h/d", "postgres://u@h/d"),
            ("history.sqlite", "history.sqlite"),
        ];
        for (url, want) in cases {
            assert_eq!(redacted(url), want);
        }
        let s = Secrets::of("postgres://u:p%40ss%2Fword@h/d?sslpassword=other");
        let msg = "bad p%40ss%2Fword / p@ss/word, other\nnext";
        assert_eq!(s.scrub(msg), "bad *** / ***, *** next");
    }
}
