//! Small configuration inputs (bucket rules, model `config.json`, hardware profiles, gate
//! policies): read with a size limit, only from regular files, and parsed with errors that
//! stay on one line and keep the reason.

use std::io::Read;
use std::path::Path;

use serde::de::DeserializeOwned;

use crate::error::{AnalyzerError, Result};

/// The size limit for configuration files: 4 MiB. Real ones are a few KiB (a model's
/// `config.json` with a long `layer_types` list stays under 100 KiB).
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;

/// Reads the UTF-8 text of the regular file `path`, at most `max_bytes` long. `what` names
/// the input in errors (`rules file`, `model config`, ...). FIFOs, devices, sockets and
/// directories are refused before they are opened for reading, so a FIFO cannot block and
/// `/dev/zero` is not read; a file over the limit is refused with its size. A leading UTF-8
/// byte-order mark is dropped.
pub fn read_config(path: &Path, what: &str, max_bytes: u64) -> Result<String> {
    let meta = std::fs::metadata(path).map_err(|e| AnalyzerError::io(path, e))?;
    if !meta.is_file() {
        return Err(AnalyzerError::unsupported(
            path,
            format!(
                "{what} must be a regular file, not {}",
                file_kind(&meta.file_type())
            ),
        ));
    }
    let too_big = |len: u64| {
        AnalyzerError::unsupported(
            path,
            format!(
                "{what} is {} bytes; the limit for configuration files is {max_bytes} bytes",
                len
            ),
        )
    };
    if meta.len() > max_bytes {
        return Err(too_big(meta.len()));
    }
    let file = std::fs::File::open(path).map_err(|e| AnalyzerError::io(path, e))?;
    // The path may have been replaced between the two looks; check what was opened.
    let opened = file.metadata().map_err(|e| AnalyzerError::io(path, e))?;
    if !opened.is_file() {
        return Err(AnalyzerError::unsupported(
            path,
            format!("{what} must be a regular file"),
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| AnalyzerError::io(path, e))?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_big(bytes.len() as u64));
    }
    let body = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
    match std::str::from_utf8(body) {
        Ok(s) => Ok(s.to_owned()),
        Err(e) => Err(AnalyzerError::parse(
            path,
            format!(
                "{what} is not UTF-8 text (invalid byte at offset {})",
                e.valid_up_to()
            ),
        )),
    }
}

fn file_kind(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a directory"
    } else {
        "a special file"
    }
}

/// Parses TOML `text` read from `path` into `T`. The error is one line:
/// `PATH: invalid WHAT: REASON (line L, column C)`, where REASON is the parser's message
/// (`unknown field `foo`, expected ...`, `invalid table header`, ...).
pub fn parse_toml<T: DeserializeOwned>(path: &Path, text: &str, what: &str) -> Result<T> {
    toml::from_str(text).map_err(|e| {
        let at = e
            .span()
            .map(|s| {
                let (line, col) = line_col(text, s.start);
                format!(" (line {line}, column {col})")
            })
            .unwrap_or_default();
        AnalyzerError::parse(
            path,
            format!("invalid {what}: {}{at}", one_line(e.message())),
        )
    })
}

/// Parses JSON `text` read from `path` into `T`; the error is one line,
/// `PATH: invalid WHAT: REASON at line L column C`.
pub fn parse_json<T: DeserializeOwned>(path: &Path, text: &str, what: &str) -> Result<T> {
    serde_json::from_str(text).map_err(|e| {
        AnalyzerError::parse(
            path,
            format!("invalid {what}: {}", one_line(&e.to_string())),
        )
    })
}

/// 1-based line and column (in characters) of byte offset `at` in `text`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rfind('\n')
        .map_or(before, |i| &before[i + 1..])
        .chars()
        .count()
        + 1;
    (line, col)
}

/// Joins a multi-line message into one line.
fn one_line(s: &str) -> String {
    s.split(['\n', '\r'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Policy {
        min_effect: f64,
    }

    #[test]
    fn toml_errors_keep_the_reason_on_one_line() {
        let p = Path::new("pol.toml");
        let e = parse_toml::<Policy>(p, "min_effect = 0.10\nfoo = 1\n", "policy")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("pol.toml: invalid policy: ") && e.contains("unknown field `foo`"),
            "{e}"
        );
        assert!(e.contains("line 2, column 1"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        let e = parse_toml::<Policy>(p, "[[rule]\nname = 'x'\n", "rules file")
            .unwrap_err()
            .to_string();
        assert!(!e.contains('\n'), "{e}");
        assert!(e.contains("line 1, column"), "{e}");
        // The reason is there, not only the position.
        let reason = e.split("invalid rules file: ").nth(1).unwrap();
        assert!(!reason.starts_with("(line"), "{e}");
        assert!(reason.len() > "(line 1, column 8)".len() + 3, "{e}");
        let ok: Policy = parse_toml(p, "min_effect = 0.5", "policy").unwrap();
        assert_eq!(ok.min_effect, 0.5);
    }

    #[test]
    fn json_errors_are_one_line() {
        let e = parse_json::<Policy>(Path::new("m.json"), "{\n\"x\": 1\n}", "model config")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("m.json: invalid model config: "), "{e}");
        assert!(e.contains("line 2"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn reads_regular_files_within_the_limit_only() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("r.toml");
        std::fs::write(&f, b"\xEF\xBB\xBFa = 1\n").unwrap();
        assert_eq!(read_config(&f, "rules file", 100).unwrap(), "a = 1\n");
        let e = read_config(&f, "rules file", 4).unwrap_err().to_string();
        assert!(
            e.contains("rules file is 9 bytes") && e.contains("limit"),
            "{e}"
        );
        let e = read_config(dir.path(), "rules file", 100)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a directory"), "{e}");
        std::fs::write(&f, b"a = \xff\n").unwrap();
        let e = read_config(&f, "rules file", 100).unwrap_err().to_string();
        assert!(e.contains("not UTF-8") && e.contains("offset 4"), "{e}");
        let e = read_config(&dir.path().join("none"), "rules file", 100).unwrap_err();
        assert!(matches!(e, AnalyzerError::Io { .. }));
    }

    #[cfg(unix)]
    #[test]
    fn fifos_and_devices_are_refused_without_reading() {
        let e = read_config(Path::new("/dev/zero"), "model config", MAX_CONFIG_BYTES)
            .unwrap_err()
            .to_string();
        assert!(e.contains("/dev/zero") && e.contains("a device"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo runs");
        assert!(made.success(), "mkfifo");
        // Reading a FIFO with no writer would block forever; the refusal comes first.
        let e = read_config(&fifo, "rules file", MAX_CONFIG_BYTES)
            .unwrap_err()
            .to_string();
        assert!(e.contains("a FIFO"), "{e}");
    }
}
