//! Opening a SQLite history: read-only for reading (nothing is created, migrated or
//! modified), or for writing, which creates a missing database file atomically.
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
use crate::error::{AnalyzerError, Result};

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

const SQLITE_READONLY: i64 = 8;
const SQLITE_CANTOPEN: i64 = 14;
const SQLITE_NOTADB: i64 = 26;

fn sqlite_err(ctx: &Ctx, what: &str, e: sqlx::Error) -> AnalyzerError {
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
        Err(e) => Err(AnalyzerError::io(p, e)),
    }
}

fn base_options() -> SqliteConnectOptions {
    SqliteConnectOptions::new()
        .busy_timeout(BUSY_TIMEOUT)
        .foreign_keys(true)
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

/// Opens for reading. Never creates or migrates anything, and the connection is
/// `query_only`, so SQLite itself refuses any change. It is opened read-write where the file
/// allows, so that closing it cleans up the WAL files as a writer's would; a read-only file
/// is opened read-only, and a WAL database in a directory this process cannot write (where
/// SQLite cannot make its shared-memory file) is read as immutable.
pub(super) async fn open_read(t: &Target, ctx: &Ctx) -> Result<SqliteConnection> {
    let opts = match t {
        Target::Path(p) => {
            if !check_existing(p, ctx)? {
                return Err(missing(ctx));
            }
            base_options().filename(p)
        }
        Target::Url(u) => {
            let o = SqliteConnectOptions::from_str(u).map_err(|e| ctx.err("invalid URL", e))?;
            let f = o.get_filename();
            if f != Path::new(":memory:") && !check_existing(f, ctx)? {
                return Err(missing(ctx));
            }
            o
        }
    }
    .create_if_missing(false)
    .pragma("query_only", "ON");
    let attempt = |opts: SqliteConnectOptions| async move {
        let mut c = opts.connect().await?;
        let f = facts(&mut c).await?;
        Ok::<_, sqlx::Error>((c, f))
    };
    let retry =
        |e: &sqlx::Error| matches!(primary_code(e), Some(SQLITE_CANTOPEN | SQLITE_READONLY));
    let (conn, f) = match attempt(opts.clone()).await {
        Ok(x) => x,
        Err(e) if retry(&e) => match attempt(opts.clone().read_only(true)).await {
            Ok(x) => x,
            Err(e2) if retry(&e2) => attempt(opts.read_only(true).immutable(true))
                .await
                .map_err(|_| sqlite_err(ctx, "cannot open", e))?,
            Err(e2) => return Err(sqlite_err(ctx, "cannot open", e2)),
        },
        Err(e) => return Err(sqlite_err(ctx, "cannot open", e)),
    };
    match schema::assess(&f, &schema::sqlite_migrator(), false).map_err(|m| ctx.fail(&m))? {
        State::Current => Ok(conn),
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
            let mut c = base_options()
                .filename(p)
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
        let mut c = base_options()
            .filename(&tmp)
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
            base_options()
                .filename(p)
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
