//! Opening a SQLite history: for reading (nothing is created, migrated or modified, not even
//! SQLite's `-wal` and `-shm` files: each read opens the file as
//! `gapscope_analyzer::sqlite_file` describes, under SQLite's shared lock), or for writing, which creates a missing database
//! file atomically.
//!
//! A path is handed to SQLite as a `file:` URI that names it literally, so a path that looks
//! like a URI (`file:x?mode=memory`) is a file of that name.
//!
//! A new file is built under a temporary name in the same directory (WAL mode, schema
//! migrated) and hard-linked into place only if nothing is there yet, so a concurrent reader
//! sees either no database or a complete one, and concurrent first writers never race on the
//! schema: the losers of the link open the winner's file. Migrating an existing file happens
//! under `BEGIN IMMEDIATE`, which other writers wait on (busy timeout).

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqliteJournalMode};
use sqlx::{ConnectOptions, Connection, Row};

use super::schema::{self, Facts, State};
use super::{Ctx, missing};
use crate::error::{HistoryError, Result};
use gapscope_analyzer::sqlite_file::{self, PrepError, ReadOnlyFile, literal_uri};

/// How long a statement waits for another process's lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// A SQLite history named by a path or by a `sqlite://` URL.
pub(super) enum Target {
    Path(PathBuf),
    Url(String),
}

/// SQLite's primary result code of a driver error, when it is one.
fn primary_code(e: &sqlx::Error) -> Option<i64> {
    let code = e.as_database_error()?.code()?;
    code.parse::<i64>().ok().map(|c| c & 0xff)
}

const SQLITE_NOTADB: i64 = 26;

fn sqlite_err(ctx: &Ctx, what: &str, e: sqlx::Error) -> HistoryError {
    if primary_code(&e) == Some(SQLITE_NOTADB) {
        return ctx.fail("not a gapscope history database (not a SQLite file)");
    }
    ctx.err(what, e)
}

/// A regular file at `p`, or the reason not to open it (missing, a directory, a FIFO that
/// would block the open, a device).
fn check_existing(p: &Path, ctx: &Ctx) -> Result<bool> {
    match std::fs::metadata(p) {
        Ok(m) if m.is_file() => Ok(true),
        Ok(m) if m.is_dir() => Err(ctx.fail("is a directory, not a history database")),
        Ok(_) => Err(ctx.fail("not a regular file")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(HistoryError::io(p, e)),
    }
}

fn base_options() -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .busy_timeout(BUSY_TIMEOUT)
        .foreign_keys(true)
}

/// Options for the file at `p`, named literally (no URI parameters: sqlx hands the name to
/// SQLite as given).
fn file_options(p: &Path) -> SqliteConnectOptions {
    base_options().filename(literal_uri(p, ""))
}

/// Table names and applied migrations.
async fn facts(c: &mut SqliteConnection) -> std::result::Result<Facts, sqlx::Error> {
    let names: Vec<String> = sqlx::query(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'",
    )
    .fetch_all(&mut *c)
    .await?
    .iter()
    .map(|r| r.try_get(0))
    .collect::<std::result::Result<_, _>>()?;
    let mut f = Facts::from_tables(names);
    if f.has_migrations {
        f.applied = sqlx::query_as::<_, (i64, bool, Vec<u8>)>(
            "SELECT version, success, checksum FROM _sqlx_migrations ORDER BY version",
        )
        .fetch_all(&mut *c)
        .await?;
    }
    Ok(f)
}

/// A SQLite history opened for reading. Each read opens its own connection
/// ([`Reader::connect`]), so it sees what writers committed since, and closes it.
pub(super) struct Reader {
    path: PathBuf,
}

/// One read's connection, with what keeps the file's state fixed until it is closed.
pub(super) struct ReadConn {
    pub(super) conn: SqliteConnection,
    file: ReadOnlyFile,
}

impl ReadConn {
    /// Closes the connection, then releases the lock (and the private copy).
    pub(super) async fn close(self) {
        let _ = self.conn.close().await;
        drop(self.file);
    }
}

impl Reader {
    /// A read-only, `query_only` connection that writes nothing anywhere.
    pub(super) async fn connect(&self, ctx: &Ctx) -> Result<ReadConn> {
        if !check_existing(&self.path, ctx)? {
            return Err(missing(ctx));
        }
        let file = sqlite_file::prepare(&self.path, Some(BUSY_TIMEOUT), ctx.scratch.as_deref())
            .map_err(|e| match e {
                PrepError::Io(p, e) => ctx.err(&p.display().to_string(), e),
                PrepError::Refused(m) => ctx.fail(&m),
            })?;
        let conn = base_options()
            .filename(&file.uri)
            .read_only(true)
            .pragma("query_only", "ON")
            .connect()
            .await
            .map_err(|e| sqlite_err(ctx, "cannot open", e))?;
        Ok(ReadConn { conn, file })
    }
}

/// The file a `sqlite://` URL names (its parameters do not apply to reading).
fn url_file(u: &str, ctx: &Ctx) -> Result<PathBuf> {
    let o = SqliteConnectOptions::from_str(u).map_err(|e| ctx.err("invalid URL", e))?;
    Ok(o.get_filename().to_owned())
}

/// Opens for reading: checks that the database is a current gapscope history. Never
/// creates, migrates or modifies anything.
pub(super) async fn open_read(t: &Target, ctx: &Ctx) -> Result<Reader> {
    let path = match t {
        Target::Path(p) => p.clone(),
        Target::Url(u) => url_file(u, ctx)?,
    };
    let r = Reader { path };
    let mut held = r.connect(ctx).await?;
    let f = facts(&mut held.conn).await;
    held.close().await;
    let f = f.map_err(|e| sqlite_err(ctx, "cannot read", e))?;
    match schema::assess(&f, &schema::sqlite_migrator(), false).map_err(|m| ctx.fail(&m))? {
        State::Current => Ok(r),
        State::Empty => Err(ctx.fail(
            "not a gapscope history database (it has no tables); `gapscope history add` \
             creates one",
        )),
        State::Outdated => Err(ctx
            .fail("its schema is older than this gapscope's; `gapscope history add` upgrades it")),
    }
}

/// Opens for writing, creating the database file (never its directory) when missing.
pub(super) async fn open_write(t: &Target, ctx: &Ctx) -> Result<SqliteConnection> {
    match t {
        Target::Path(p) => {
            if !check_existing(p, ctx)? {
                create_atomically(p, ctx).await?;
            }
            let mut c = file_options(p)
                .create_if_missing(false)
                .connect()
                .await
                .map_err(|e| sqlite_err(ctx, "cannot open", e))?;
            migrate(&mut c, ctx).await?;
            Ok(c)
        }
        Target::Url(u) => {
            let mut c = SqliteConnectOptions::from_str(u)
                .map_err(|e| ctx.err("invalid URL", e))?
                .busy_timeout(BUSY_TIMEOUT)
                .foreign_keys(true)
                .create_if_missing(true)
                .connect()
                .await
                .map_err(|e| sqlite_err(ctx, "cannot open", e))?;
            migrate(&mut c, ctx).await?;
            Ok(c)
        }
    }
}

/// Brings the schema up to date under a write lock held from the first look to the commit,
/// so concurrent writers apply each migration once. Refuses a database that is not a history.
async fn migrate(c: &mut SqliteConnection, ctx: &Ctx) -> Result<()> {
    let m = schema::sqlite_migrator();
    let mut tx = c
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(|e| sqlite_err(ctx, "cannot lock for writing", e))?;
    let f = facts(&mut tx)
        .await
        .map_err(|e| sqlite_err(ctx, "cannot read", e))?;
    match schema::assess(&f, &m, false).map_err(|msg| ctx.fail(&msg))? {
        State::Current => {}
        State::Empty | State::Outdated => {
            m.run(&mut *tx)
                .await
                .map_err(|e| ctx.err("schema migration failed", e))?;
        }
    }
    tx.commit()
        .await
        .map_err(|e| sqlite_err(ctx, "cannot commit", e))
}

/// The files SQLite may keep beside a database.
fn with_sidecars(p: &Path) -> [PathBuf; 4] {
    let s = |suffix: &str| {
        let mut o = p.as_os_str().to_owned();
        o.push(suffix);
        PathBuf::from(o)
    };
    [p.to_owned(), s("-wal"), s("-shm"), s("-journal")]
}

/// Creates `p`: a complete database (WAL mode, schema applied) is built under a temporary
/// name beside it and hard-linked to `p` unless something is there by then. Where the file
/// system has no hard links, the file is created in place (migrated under the write lock).
async fn create_atomically(p: &Path, ctx: &Ctx) -> Result<()> {
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(ctx.fail(&format!(
            "directory {} does not exist (`gapscope history add` creates the database file, \
             not its directory)",
            dir.display()
        )));
    }
    let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
    let Some(name) = name else {
        return Err(ctx.fail("not a file name"));
    };
    static SERIAL: AtomicU64 = AtomicU64::new(0);
    let tmp = dir.join(format!(
        ".{name}.{}-{}.creating",
        std::process::id(),
        SERIAL.fetch_add(1, Ordering::Relaxed)
    ));
    let cleanup = || {
        for f in with_sidecars(&tmp) {
            let _ = std::fs::remove_file(f);
        }
    };
    // A leftover of a crashed process that had this pid.
    cleanup();
    let built = async {
        let mut c = file_options(&tmp)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .connect()
            .await
            .map_err(|e| sqlite_err(ctx, "cannot create", e))?;
        migrate(&mut c, ctx).await?;
        c.close()
            .await
            .map_err(|e| sqlite_err(ctx, "cannot create", e))
    }
    .await;
    if let Err(e) = built {
        cleanup();
        return Err(e);
    }
    let linked = std::fs::hard_link(&tmp, p);
    cleanup();
    match linked {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(_) => {
            // No hard links here: create in place; `migrate` serialises the schema.
            file_options(p)
                .create_if_missing(true)
                .connect()
                .await
                .map_err(|e| sqlite_err(ctx, "cannot create", e))?
                .close()
                .await
                .map_err(|e| sqlite_err(ctx, "cannot create", e))
        }
    }
}
