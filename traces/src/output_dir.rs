//! Where a trace is written. The output path must be new, an empty directory or a gapscope
//! trace; a symbolic link there is refused, and files are created fresh, so nothing is ever
//! written through a link planted inside the output directory.

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Result, TraceError};
use crate::manifest::FORMAT_NAME;

/// Makes `dir` ready for a writer: created when missing, else checked and cleared of the
/// files in `ours` (the links themselves are removed, never their targets).
pub(crate) fn prepare(dir: &Path, ours: &[String]) -> Result<()> {
    if !check_target(dir)? {
        return fs::create_dir_all(dir).map_err(|e| TraceError::io(dir, e));
    }
    for name in ours {
        remove_file_if_present(&dir.join(name))?;
    }
    Ok(())
}

/// Runs `write` on a new directory beside `dir`, then renames it to `dir`, replacing the
/// trace there only once the new one is complete.
pub(crate) fn replace_with<T>(dir: &Path, write: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
    let existing = check_target(dir)?;
    let name = dir
        .file_name()
        .ok_or_else(|| TraceError::format(dir, "output path names no directory"))?;
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    fs::create_dir_all(parent).map_err(|e| TraceError::io(parent, e))?;
    let tmp = new_sibling(parent, name, "tmp")?;
    let out = match write(&tmp) {
        Ok(v) => v,
        Err(e) => {
            let _ = fs::remove_dir_all(&tmp);
            return Err(e);
        }
    };
    let swap = || -> Result<()> {
        if !existing {
            return fs::rename(&tmp, dir).map_err(|e| TraceError::io(dir, e));
        }
        let old = unused_sibling(parent, name, "old");
        fs::rename(dir, &old).map_err(|e| TraceError::io(dir, e))?;
        if let Err(e) = fs::rename(&tmp, dir) {
            let _ = fs::rename(&old, dir);
            return Err(TraceError::io(dir, e));
        }
        let _ = fs::remove_dir_all(&old);
        Ok(())
    };
    if let Err(e) = swap() {
        let _ = fs::remove_dir_all(&tmp);
        return Err(e);
    }
    Ok(out)
}

/// Whether `dir` exists (as an empty directory or a gapscope trace); an error for anything
/// else that is there.
fn check_target(dir: &Path) -> Result<bool> {
    let meta = match fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(TraceError::io(dir, e)),
    };
    if meta.file_type().is_symlink() {
        return Err(TraceError::format(
            dir,
            "output is a symbolic link; refusing to write through it",
        ));
    }
    if !meta.is_dir() {
        return Err(TraceError::format(
            dir,
            "output exists and is not a directory; a native trace is a directory",
        ));
    }
    let empty = fs::read_dir(dir)
        .map_err(|e| TraceError::io(dir, e))?
        .next()
        .is_none();
    if !empty && !holds_trace(dir) {
        return Err(TraceError::format(
            dir,
            "output directory is not empty and is not a gapscope trace; refusing to overwrite it",
        ));
    }
    Ok(true)
}

/// A regular (not linked) `manifest.json` that names the gapscope format.
fn holds_trace(dir: &Path) -> bool {
    let p = dir.join("manifest.json");
    let regular = fs::symlink_metadata(&p).is_ok_and(|m| m.is_file() && m.len() < 16 << 20);
    if !regular {
        return false;
    }
    let mut text = Vec::new();
    let read = File::open(&p).and_then(|f| f.take(16 << 20).read_to_end(&mut text));
    read.is_ok()
        && serde_json::from_slice::<serde_json::Value>(&text)
            .is_ok_and(|v| v.get("format").and_then(|f| f.as_str()) == Some(FORMAT_NAME))
}

/// Removes the file or link at `p`, if any.
pub(crate) fn remove_file_if_present(p: &Path) -> Result<()> {
    match fs::remove_file(p) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(TraceError::io(p, e)),
    }
}

/// Creates `p`, failing if anything (a file or a link) is already there.
pub(crate) fn create_new(p: &Path) -> Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(p)
        .map_err(|e| TraceError::io(p, e))
}

/// Creates a new hidden directory `.NAME.WHAT.PID.N` in `parent`.
fn new_sibling(parent: &Path, name: &std::ffi::OsStr, what: &str) -> Result<PathBuf> {
    for n in 0..1000u32 {
        let p = sibling(parent, name, what, n);
        match fs::create_dir(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(TraceError::io(&p, e)),
        }
    }
    Err(TraceError::format(
        parent,
        "could not create a temporary directory for the output",
    ))
}

fn unused_sibling(parent: &Path, name: &std::ffi::OsStr, what: &str) -> PathBuf {
    (0..1000u32)
        .map(|n| sibling(parent, name, what, n))
        .find(|p| fs::symlink_metadata(p).is_err())
        .unwrap_or_else(|| sibling(parent, name, what, 1000))
}

pub(crate) fn sibling(parent: &Path, name: &std::ffi::OsStr, what: &str, n: u32) -> PathBuf {
    let mut s = std::ffi::OsString::from(".");
    s.push(name);
    s.push(format!(".{what}.{}.{n}", std::process::id()));
    parent.join(s)
}
