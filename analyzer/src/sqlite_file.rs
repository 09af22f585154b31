//! Reading a SQLite file without writing anything: not the file, not its `-wal` or `-shm`,
//! and no new file beside it. A plain read-only connection does not promise that: SQLite
//! creates and writes the `-shm` (and, for a WAL-mode database, the `-wal`) even then.
//!
//! What is opened depends on what lies beside the file, so that every committed row is read,
//! as SQLite itself would read it:
//! - no `-wal`, or an empty one and no `-shm`: the file alone holds every committed row; it is
//!   opened `immutable`, so SQLite looks at nothing else;
//! - a `-wal` and a `-shm`: read-only with `readonly_shm`, so SQLite reads the WAL's committed
//!   frames (through the `-shm` while a live writer keeps it, else from the WAL itself) and
//!   never writes the `-shm`;
//! - a non-empty `-wal` without a `-shm`: SQLite would have to create the `-shm`, so the file
//!   and its `-wal` are copied into a private temporary directory and the copy is read.
//!
//! With a lock wait, SQLite's shared lock is taken on the file before the sidecars are looked
//! at and held until the read is over, so no writer can checkpoint into the file or delete its
//! `-wal` meanwhile (the run history in `gapscope-history`, which other processes may be
//! writing). An nsys export is written once and read without it.
//!
//! Synchronous and driver-free: the caller opens [`ReadOnlyFile::uri`] with its own SQLite
//! binding (rusqlite for nsys exports here, sqlx for the history).

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How a file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// The file alone.
    Immutable,
    /// The file and its `-wal`, the `-shm` read-only.
    WalReadOnlyShm,
    /// A private copy of the file and its `-wal`.
    PrivateCopy,
}

/// A file ready to be opened for reading; hold it until the connection is closed.
#[derive(Debug)]
pub struct ReadOnlyFile {
    /// The `file:` URI to hand to SQLite (with `SQLITE_OPEN_URI` and read-only flags).
    pub uri: String,
    pub how: How,
    /// The `-wal` file beside the input, and its length (0 when absent).
    pub wal: PathBuf,
    pub wal_bytes: u64,
    /// Our descriptor holding the shared lock (released when it closes), if taken.
    _lock: Option<File>,
    /// The private copy, removed when dropped.
    _copy: Option<tempfile::TempDir>,
}

/// `path` with `suffix` appended to its file name, as SQLite names its sidecars.
pub fn sidecar(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// A `file:` URI that names `path` literally: every byte but unreserved ones and `/` is
/// percent-encoded, so `?`, `#`, `%` and non-UTF-8 bytes are part of the name, and a name
/// that looks like a URI (`file:x?mode=memory`) or `:memory:` is a file. A relative path is
/// given as `./path` (SQLite's `:memory:` test is on the decoded name).
pub fn literal_uri(path: &Path, params: &str) -> String {
    let bytes = path.as_os_str().as_encoded_bytes();
    let mut out = String::with_capacity(bytes.len() + 16);
    if bytes.first() == Some(&b'/') {
        // `file:///abs`: an empty authority, so a path starting `//` stays a path.
        out.push_str("file://");
    } else {
        out.push_str("file:./");
    }
    for &b in bytes {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if !params.is_empty() {
        out.push('?');
        out.push_str(params);
    }
    out
}

/// What a sidecar is.
enum Side {
    Missing,
    File(u64),
    Other,
}

fn side(p: &Path) -> std::io::Result<Side> {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_file() => Ok(Side::File(m.len())),
        Ok(_) => Ok(Side::Other),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Side::Missing),
        Err(e) => Err(e),
    }
}

/// Why a file cannot be prepared: an I/O error on a path, or a one-line reason.
#[derive(Debug)]
pub enum PrepError {
    Io(PathBuf, std::io::Error),
    Refused(String),
}

/// Prepares `path` (a regular file the caller checked) for reading. `lock_wait`: take
/// SQLite's shared lock first, waiting up to that long for a writer that holds the file.
/// `scratch`: where a private copy may be made (a `-wal` without its `-shm`); the caller
/// names it (libraries read no environment), and without one such a file is refused.
pub fn prepare(
    path: &Path,
    lock_wait: Option<Duration>,
    scratch: Option<&Path>,
) -> Result<ReadOnlyFile, PrepError> {
    let io = |p: &Path| {
        let p = p.to_owned();
        move |e| PrepError::Io(p, e)
    };
    // SQLite follows symbolic links to the file and looks for the sidecars beside it.
    let real = std::fs::canonicalize(path).map_err(io(path))?;
    let lock = match lock_wait {
        Some(wait) => {
            let f = File::open(&real).map_err(io(path))?;
            shared_lock(&f, wait).map_err(PrepError::Refused)?;
            Some(f)
        }
        None => None,
    };
    let wal = sidecar(&real, "-wal");
    let shm = sidecar(&real, "-shm");
    let wal_bytes = match side(&wal).map_err(io(&wal))? {
        Side::Missing => None,
        Side::File(n) => Some(n),
        Side::Other => {
            return Err(PrepError::Refused(format!(
                "{} is not a regular file (a link, directory or FIFO), so the committed changes it should hold cannot be read safely",
                wal.display()
            )));
        }
    };
    let shm_file = matches!(side(&shm).map_err(io(&shm))?, Side::File(_));
    let how = match (wal_bytes, shm_file) {
        (None, _) | (Some(0), false) => How::Immutable,
        (Some(_), true) => How::WalReadOnlyShm,
        (Some(_), false) => How::PrivateCopy,
    };
    let (uri, copy) = match how {
        How::Immutable => (literal_uri(&real, "mode=ro&immutable=1"), None),
        How::WalReadOnlyShm => (literal_uri(&real, "mode=ro&readonly_shm=1"), None),
        How::PrivateCopy => {
            let Some(scratch) = scratch else {
                return Err(PrepError::Refused(format!(
                    "{} holds committed changes but there is no {} beside it; reading them \
                     needs a private copy, and no scratch directory was given",
                    wal.display(),
                    shm.display()
                )));
            };
            let dir = tempfile::Builder::new()
                .prefix("gapscope-sqlite-")
                .tempdir_in(scratch)
                .map_err(|e| {
                    PrepError::Refused(format!("cannot make a temporary directory: {e}"))
                })?;
            let db = dir.path().join("db.sqlite");
            let len = std::fs::metadata(&real).map_err(io(path))?.len();
            copy_exactly(&real, &db, len).map_err(io(path))?;
            let n = wal_bytes.unwrap_or(0);
            copy_exactly(&wal, &sidecar(&db, "-wal"), n).map_err(io(&wal))?;
            (literal_uri(&db, "mode=ro"), Some(dir))
        }
    };
    Ok(ReadOnlyFile {
        uri,
        how,
        wal,
        wal_bytes: wal_bytes.unwrap_or(0),
        _lock: lock,
        _copy: copy,
    })
}

/// Copies the first `len` bytes of `from` (what was measured, even if it grows meanwhile).
fn copy_exactly(from: &Path, to: &Path, len: u64) -> std::io::Result<()> {
    let mut src = File::open(from)?.take(len);
    let mut dst = File::create_new(to)?;
    let n = std::io::copy(&mut src, &mut dst)?;
    if n < len {
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("shrank from {len} to {n} bytes while being copied"),
        ));
    }
    Ok(())
}

/// SQLite's lock bytes (`os_unix.c`): a shared lock is a read lock on `SHARED_SIZE` bytes
/// from `SHARED_FIRST`; a writer needs a write lock there to checkpoint on close and delete
/// the `-wal`, or to write a rollback-journal database.
const PENDING_BYTE: i64 = 0x4000_0000;
const SHARED_FIRST: i64 = PENDING_BYTE + 2;
const SHARED_SIZE: i64 = 510;

/// Takes SQLite's shared lock on `f`, retrying while a writer holds the file. A file system
/// without locks is read without one.
#[cfg(unix)]
fn shared_lock(f: &File, wait: Duration) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    let start = Instant::now();
    loop {
        // SAFETY: an all-zero flock is valid; F_SETLK reads the one we pass.
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = libc::F_RDLCK as _;
        fl.l_whence = libc::SEEK_SET as _;
        fl.l_start = SHARED_FIRST as _;
        fl.l_len = SHARED_SIZE as _;
        // SAFETY: fcntl(F_SETLK) on a descriptor we own, with a valid flock.
        if unsafe { libc::fcntl(f.as_raw_fd(), libc::F_SETLK, &fl) } == 0 {
            return Ok(());
        }
        let busy = matches!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(libc::EAGAIN | libc::EACCES | libc::EINTR)
        );
        if !busy {
            return Ok(());
        }
        if start.elapsed() >= wait {
            return Err(format!(
                "another process held the database for writing for more than {} s",
                wait.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(not(unix))]
fn shared_lock(_: &File, _: Duration) -> Result<(), String> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_name_files_literally() {
        assert_eq!(
            literal_uri(Path::new("/a b/x?mode=memory#%"), "mode=ro"),
            "file:///a%20b/x%3Fmode%3Dmemory%23%25?mode=ro"
        );
        assert_eq!(
            literal_uri(Path::new(":memory:"), ""),
            "file:./%3Amemory%3A"
        );
        assert_eq!(literal_uri(Path::new("//h/x"), ""), "file:////h/x");
    }
}
