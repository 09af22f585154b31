//! Where a single output file is written (a Chrome JSON, a Parquet file, an SVG chart, a
//! JUnit report, a PNG). The target must be new or a regular file, and must not be one of the
//! command's inputs nor lie inside an input or any native trace directory. The bytes go to a
//! temporary file created fresh beside the target, which is synced and then renamed over the
//! target: a failed write leaves the target as it was, nothing is ever written through a
//! symbolic link, and a FIFO or device is never opened.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Result, TraceError};
use crate::output_dir;

/// Checks that a command reading `inputs` may write `target`; returns the target's
/// canonical path (its folder resolved, the file name kept), which tells two outputs of one
/// command apart. An input that cannot be resolved (a URL, `-`) is passed over.
pub fn check_output(target: &Path, inputs: &[&Path]) -> Result<PathBuf> {
    let refuse = |m: String| Err(TraceError::format(target, m));
    let Some(name) = target.file_name() else {
        return refuse("output path names no file".into());
    };
    let existing = match fs::symlink_metadata(target) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(TraceError::io(target, e)),
    };
    if let Some(m) = &existing {
        let t = m.file_type();
        if t.is_symlink() {
            return refuse("output is a symbolic link; refusing to write through it".into());
        }
        if !t.is_file() {
            return refuse(format!(
                "output exists and is {}, not a regular file; refusing to write to it",
                kind_of(&t)
            ));
        }
        if m.permissions().readonly() {
            return refuse("output exists and is read-only".into());
        }
    }
    let parent = parent_of(target);
    let folder = fs::canonicalize(parent).map_err(|e| {
        TraceError::format(target, format!("output folder {}: {e}", parent.display()))
    })?;
    if crate::is_native_trace(&folder) {
        return refuse(format!(
            "output lies inside the native trace {}; refusing to write into it",
            folder.display()
        ));
    }
    let canonical = folder.join(name);
    for input in inputs {
        let Ok(resolved) = fs::canonicalize(input) else {
            continue;
        };
        if resolved == canonical || existing.as_ref().is_some_and(|m| same_file(m, input)) {
            return refuse(format!(
                "output is the input {}; refusing to overwrite it",
                input.display()
            ));
        }
        if resolved.is_dir() && canonical.starts_with(&resolved) {
            return refuse(format!(
                "output lies inside the input {}; refusing to write into it",
                input.display()
            ));
        }
    }
    Ok(canonical)
}

/// What a file that is not regular is, for an error message.
fn kind_of(t: &fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_block_device() || t.is_char_device() {
            return "a device";
        }
    }
    if t.is_dir() { "a directory" } else { "special" }
}

/// Whether `m` (the target's own metadata) is the file at `input` (a hard link to it).
fn same_file(m: &fs::Metadata, input: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        fs::metadata(input).is_ok_and(|i| i.dev() == m.dev() && i.ino() == m.ino())
    }
    #[cfg(not(unix))]
    {
        let _ = (m, input);
        false
    }
}

fn parent_of(p: &Path) -> &Path {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// An output file being written: a fresh temporary file beside the target, renamed over it
/// by [`OutputFile::commit`]. Dropped without a commit, the temporary file is removed.
#[derive(Debug)]
pub struct OutputFile {
    target: PathBuf,
    tmp: PathBuf,
    file: Option<File>,
}

impl OutputFile {
    /// Checks `target` against `inputs` ([`check_output`]) and creates the temporary file.
    pub fn create(target: &Path, inputs: &[&Path]) -> Result<Self> {
        check_output(target, inputs)?;
        let parent = parent_of(target);
        let name = target.file_name().unwrap_or_default();
        for n in 0..1000u32 {
            let tmp = output_dir::sibling(parent, name, "tmp", n);
            match OpenOptions::new().write(true).create_new(true).open(&tmp) {
                Ok(file) => {
                    // A replaced file keeps its permissions.
                    if let Ok(m) = fs::metadata(target) {
                        let _ = file.set_permissions(m.permissions());
                    }
                    return Ok(Self {
                        target: target.to_owned(),
                        tmp,
                        file: Some(file),
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(TraceError::io(&tmp, e)),
            }
        }
        Err(TraceError::format(
            target,
            "could not create a temporary file beside the output",
        ))
    }

    /// The path the output is written to.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// The temporary file to write into.
    pub fn file(&mut self) -> &mut File {
        self.file
            .as_mut()
            .expect("an output file is written until committed")
    }

    /// Syncs the temporary file and renames it over the target.
    pub fn commit(mut self) -> Result<()> {
        let mut f = self.file.take().expect("committed once");
        let synced = f.flush().and_then(|()| f.sync_all());
        drop(f);
        synced.map_err(|e| TraceError::io(&self.target, e))?;
        fs::rename(&self.tmp, &self.target).map_err(|e| TraceError::io(&self.target, e))?;
        self.tmp = PathBuf::new();
        // The rename itself lasts once the folder is synced (best effort: not every
        // platform lets a folder be opened).
        if let Ok(d) = File::open(parent_of(&self.target)) {
            let _ = d.sync_all();
        }
        Ok(())
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        self.file = None;
        if !self.tmp.as_os_str().is_empty() {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Writes `bytes` to `target` through an [`OutputFile`].
pub fn write_output(target: &Path, inputs: &[&Path], bytes: &[u8]) -> Result<()> {
    let mut out = OutputFile::create(target, inputs)?;
    out.file()
        .write_all(bytes)
        .map_err(|e| TraceError::io(target, e))?;
    out.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    fn refused(target: &Path, inputs: &[&Path], what: &str) {
        let e = write_output(target, inputs, b"new")
            .unwrap_err()
            .to_string();
        assert!(e.contains(what), "{e}");
        assert!(e.starts_with(&target.display().to_string()), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }

    #[test]
    fn writes_a_new_file_and_replaces_a_regular_one() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out.json");
        write_output(&out, &[], b"one").unwrap();
        assert_eq!(fs::read(&out).unwrap(), b"one");
        write_output(&out, &[], b"two").unwrap();
        assert_eq!(fs::read(&out).unwrap(), b"two");
        assert_eq!(entries(d.path()), ["out.json"]);
    }

    #[test]
    fn a_dropped_output_leaves_the_target_and_no_temporary_file() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("out.json");
        fs::write(&out, b"old").unwrap();
        let mut f = OutputFile::create(&out, &[]).unwrap();
        f.file().write_all(b"half").unwrap();
        assert_eq!(entries(d.path()).len(), 2);
        drop(f);
        assert_eq!(fs::read(&out).unwrap(), b"old");
        assert_eq!(entries(d.path()), ["out.json"]);
    }

    #[cfg(unix)]
    #[test]
    fn links_and_files_that_are_not_regular_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        fs::write(&victim, b"keep").unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        refused(&link, &[], "symbolic link");
        let dangling = d.path().join("dangling");
        std::os::unix::fs::symlink(d.path().join("nowhere"), &dangling).unwrap();
        refused(&dangling, &[], "symbolic link");
        assert!(!d.path().join("nowhere").exists());
        let sub = d.path().join("sub");
        fs::create_dir(&sub).unwrap();
        refused(&sub, &[], "a directory");
        let fifo = d.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            refused(&fifo, &[], "a FIFO");
        }
        assert_eq!(fs::read(&victim).unwrap(), b"keep");
        let mut left = entries(d.path());
        left.retain(|n| n.starts_with('.'));
        assert!(left.is_empty(), "{left:?}");
    }

    #[cfg(unix)]
    #[test]
    fn inputs_are_refused_however_they_are_named() {
        let d = tempfile::tempdir().unwrap();
        let input = d.path().join("in.json");
        fs::write(&input, b"input").unwrap();
        refused(&input, &[&input], "is the input");
        // Through a linked folder, and as a hard link.
        let alias = d.path().join("alias");
        std::os::unix::fs::symlink(d.path(), &alias).unwrap();
        refused(&alias.join("in.json"), &[&input], "is the input");
        let hard = d.path().join("hard.json");
        fs::hard_link(&input, &hard).unwrap();
        refused(&hard, &[&input], "is the input");
        // Relative and absolute spellings of one file.
        let cwd_rel = Path::new(".").join("Cargo.toml");
        let abs = fs::canonicalize("Cargo.toml").unwrap();
        assert!(check_output(&cwd_rel, &[&abs]).is_err());
        assert_eq!(fs::read(&input).unwrap(), b"input");
    }

    #[test]
    fn trace_directories_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let trace = d.path().join("t.gst");
        fs::create_dir(&trace).unwrap();
        fs::write(trace.join("manifest.json"), b"{}").unwrap();
        // Inside an input directory, and inside any native trace.
        let plain = d.path().join("dir");
        fs::create_dir(&plain).unwrap();
        refused(&plain.join("x.json"), &[&plain], "inside the input");
        refused(&trace.join("manifest.json"), &[], "native trace");
        refused(&trace.join("new.json"), &[], "native trace");
        assert_eq!(fs::read(trace.join("manifest.json")).unwrap(), b"{}");
        assert_eq!(entries(&trace), ["manifest.json"]);
    }

    #[test]
    fn missing_folders_and_empty_names_are_errors() {
        let d = tempfile::tempdir().unwrap();
        refused(&d.path().join("no/such/out.json"), &[], "output folder");
        assert!(check_output(Path::new(""), &[]).is_err());
        assert!(check_output(&d.path().join(".."), &[]).is_err());
        // An input that does not resolve (a URL) is passed over.
        let out = d.path().join("o");
        assert!(check_output(&out, &[Path::new("postgres://h/db")]).is_ok());
    }

    #[cfg(unix)]
    #[test]
    fn read_only_targets_are_kept() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("ro");
        fs::write(&out, b"keep").unwrap();
        fs::set_permissions(&out, fs::Permissions::from_mode(0o444)).unwrap();
        refused(&out, &[], "read-only");
        assert_eq!(fs::read(&out).unwrap(), b"keep");
    }
}
