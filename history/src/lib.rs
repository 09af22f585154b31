//! Run history in SQLite (embedded, the default) or PostgreSQL (`postgres://` URL), through
//! sqlx with runtime-checked, bound queries and versioned migrations. Each `History` owns a
//! small tokio runtime and one connection so callers stay synchronous. The only gapscope
//! library with a database driver and an async runtime: the analyzer (and so the explorer)
//! carries neither.
//!
//! The gate's baseline of stored runs ([`baseline`]) is built here from the rows, as the
//! analyzer's typed [`gapscope_analyzer::gate::RunsBaseline`].
//!
//! [`History::open`] reads: it never creates, migrates or modifies anything (a SQLite file,
//! its `-wal` and `-shm` stay byte for byte as they were, and no file is created beside it),
//! refuses a database that is not a gapscope history, and reads read-only files and
//! directories.
//!
//! Figures are finite numbers: `add` refuses a run with a NaN or infinite figure, and a
//! non-finite value stored by something else reads as `None`, its field named in the row's
//! `invalid` list, so that no consumer takes it for a measurement.
//! [`History::open_or_create`] writes: it creates a missing SQLite file (not its directory)
//! and applies migrations, safely under concurrent first use.

#![forbid(unsafe_code)]

mod baseline;
pub mod error;
mod location;
mod postgres;
mod schema;
mod sqlite;

use std::sync::Mutex;

use gapscope_analyzer::analysis::Report;
use gapscope_analyzer::analysis::ranks::{RanksReport, RanksVerdict};
use serde::Serialize;
use sqlx::postgres::PgConnection;
use sqlx::sqlite::SqliteConnection;
use sqlx::{Connection, Row};

pub use baseline::baseline;
pub use error::{HistoryError, Result};
pub use location::redacted;
use location::{Location, Secrets};

/// One stored run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunSummary {
    pub id: i64,
    pub created_unix_ms: i64,
    pub label: String,
    pub trace_path: String,
    pub gpu: String,
    pub decode_steps: i64,
    pub tpot_median_ms: Option<f64>,
    pub busy_pct: Option<f64>,
    pub accepted: bool,
    /// Speculative runs (schema version 2; `None` for plain runs and older rows): the mean
    /// step period over the tokens, the mean tokens per step, and accepted over verified
    /// candidates.
    pub time_per_token_ms: Option<f64>,
    pub tokens_per_step: Option<f64>,
    pub acceptance_rate: Option<f64>,
    /// Runs of several ranks (schema version 3; `None`: one trace): the rank count, the rank
    /// that set the step (when one did; its buckets are the run's), the run's step (the
    /// slowest rank's, median ms) and the other ranks' mean communication wait, ms/step.
    pub world_size: Option<i64>,
    pub late_rank: Option<i64>,
    pub run_step_ms: Option<f64>,
    pub wait_ms: Option<f64>,
    /// Fields whose stored value is not a finite number (read as `None`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub invalid: Vec<&'static str>,
}

/// A stored bucket row.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunBucket {
    pub bucket: String,
    pub ms_per_step_median: Option<f64>,
    pub calls_per_step: Option<f64>,
    /// Always stored; `None` only when the stored value is not a finite number.
    pub share_of_busy_pct: Option<f64>,
    /// Fields whose stored value is not a finite number (read as `None`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub invalid: Vec<&'static str>,
}

/// A bucket's value over runs, oldest first.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TrendPoint {
    pub id: i64,
    pub created_unix_ms: i64,
    pub label: String,
    pub ms_per_step_median: Option<f64>,
    /// Fields whose stored value is not a finite number (read as `None`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub invalid: Vec<&'static str>,
}

/// A stored figure: `None` when NULL or not finite, the field then named in `invalid`.
fn finite(v: Option<f64>, field: &'static str, invalid: &mut Vec<&'static str>) -> Option<f64> {
    match v {
        Some(x) if !x.is_finite() => {
            invalid.push(field);
            None
        }
        v => v,
    }
}

/// Refuses a run whose figures are not all finite numbers (a NaN or infinity would read back
/// as a figure, or as nothing); the message names the first such figure.
pub fn check_storable(r: &Report) -> std::result::Result<(), String> {
    let mut figures: Vec<(String, Option<f64>)> = vec![
        ("TPOT median".into(), r.steps.tpot_ms.map(|t| t.median)),
        ("busy %".into(), r.devices.first().map(|d| d.busy_pct)),
    ];
    if let Some(sp) = &r.speculative {
        figures.push(("time per token".into(), sp.tpot_per_token_ms));
        figures.push(("tokens per step".into(), sp.tokens_per_step));
        figures.push(("acceptance rate".into(), sp.acceptance_rate));
    }
    for b in &r.buckets {
        let name = b.bucket.as_str();
        figures.push((
            format!("{name} ms/step median"),
            b.ms_per_step.map(|s| s.median),
        ));
        figures.push((format!("{name} calls/step"), b.calls_per_step));
        figures.push((format!("{name} share of busy"), Some(b.share_of_busy_pct)));
    }
    match figures
        .into_iter()
        .find(|(_, v)| v.is_some_and(|x| !x.is_finite()))
    {
        Some((what, Some(v))) => Err(format!(
            "refusing to store the run: its {what} is {v}, not a finite number; nothing was stored"
        )),
        _ => Ok(()),
    }
}

enum Conn {
    /// A SQLite history opened for writing.
    Sqlite(SqliteConnection),
    /// A SQLite history opened for reading: a connection per read.
    SqliteRead(sqlite::Reader),
    Postgres(PgConnection),
}

/// A database's name for messages (password masked) and the secrets to scrub from driver
/// messages.
pub(crate) struct Ctx {
    name: String,
    secrets: Secrets,
    /// Where a read may make a private copy of a SQLite history (`-wal` without `-shm`).
    pub(crate) scratch: Option<std::path::PathBuf>,
}

impl Ctx {
    fn new(db: &str, scratch: Option<&std::path::Path>) -> Self {
        let secrets = Secrets::of(db);
        Self {
            name: secrets.scrub(&redacted(db)),
            secrets,
            scratch: scratch.map(std::path::Path::to_path_buf),
        }
    }

    /// `history DB: WHAT: CAUSE`, on one line, without secrets.
    pub(crate) fn err(&self, what: &str, e: impl std::fmt::Display) -> HistoryError {
        self.fail(&format!("{what}: {e}"))
    }

    /// `history DB: MESSAGE`, on one line, without secrets.
    pub(crate) fn fail(&self, msg: &str) -> HistoryError {
        HistoryError::Database {
            db: self.name.clone(),
            message: self.secrets.scrub(msg),
        }
    }
}

/// The error for a database that does not exist, when reading.
pub(crate) fn missing(ctx: &Ctx) -> HistoryError {
    HistoryError::Missing {
        db: ctx.name.clone(),
    }
}

/// An open history database.
pub struct History {
    rt: tokio::runtime::Runtime,
    /// `None` only while dropping.
    conn: Mutex<Option<Conn>>,
    ctx: Ctx,
    writable: bool,
}

/// Runs `$body` (async, may `.await`) with `$c` bound to the connection, whichever kind.
macro_rules! on_conn {
    ($self:ident, |$c:ident| $body:expr) => {{
        let mut guard = $self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let conn: &mut Option<Conn> = &mut guard;
        $self.rt.block_on(async {
            match conn {
                Some(Conn::Sqlite($c)) => $body,
                Some(Conn::SqliteRead(r)) => {
                    let mut held = r.connect(&$self.ctx).await?;
                    let out = async {
                        let $c = &mut held.conn;
                        $body
                    }
                    .await;
                    held.close().await;
                    out
                }
                Some(Conn::Postgres($c)) => $body,
                None => Err($self.ctx.fail("closed")),
            }
        })
    }};
}

impl History {
    /// Opens an existing history for reading: a SQLite file (any value that is not a URL is a
    /// path, taken literally), a `sqlite://` URL, or a `postgres://` / `postgresql://` URL.
    /// Creates, migrates and modifies nothing; a missing database, or one that is not a
    /// gapscope history, is an error.
    ///
    /// A SQLite history whose `-wal` lost its `-shm` can only be read through a private
    /// copy, which [`History::open_in`] allows; here it is refused with the reason.
    pub fn open(db: &str) -> Result<Self> {
        Self::connect(db, false, None)
    }

    /// [`History::open`], allowed to make a private copy in `scratch` when the file cannot be
    /// read in place without writing beside it.
    pub fn open_in(db: &str, scratch: &std::path::Path) -> Result<Self> {
        Self::connect(db, false, Some(scratch))
    }

    /// Opens a history for writing, creating a missing SQLite file (its directory must exist)
    /// and bringing the schema up to date. Safe when several processes do it at once.
    /// Refuses a database that is not a gapscope history.
    pub fn open_or_create(db: &str) -> Result<Self> {
        Self::connect(db, true, None)
    }

    fn connect(db: &str, writable: bool, scratch: Option<&std::path::Path>) -> Result<Self> {
        let ctx = Ctx::new(db, scratch);
        let location = location::parse(db).map_err(|m| ctx.fail(&m))?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ctx.err("cannot start", e))?;
        let conn = rt.block_on(async {
            Ok::<_, HistoryError>(match (&location, writable) {
                (Location::Postgres(url), false) => {
                    Conn::Postgres(postgres::open_read(url, &ctx).await?)
                }
                (Location::Postgres(url), true) => {
                    Conn::Postgres(postgres::open_write(url, &ctx).await?)
                }
                (Location::SqlitePath(p), w) => {
                    let t = sqlite::Target::Path(p.clone());
                    if w {
                        Conn::Sqlite(sqlite::open_write(&t, &ctx).await?)
                    } else {
                        Conn::SqliteRead(sqlite::open_read(&t, &ctx).await?)
                    }
                }
                (Location::SqliteUrl(u), w) => {
                    let t = sqlite::Target::Url(u.clone());
                    if w {
                        Conn::Sqlite(sqlite::open_write(&t, &ctx).await?)
                    } else {
                        Conn::SqliteRead(sqlite::open_read(&t, &ctx).await?)
                    }
                }
            })
        })?;
        Ok(Self {
            rt,
            conn: Mutex::new(Some(conn)),
            ctx,
            writable,
        })
    }

    /// The database as shown in messages (a URL's password masked).
    pub fn name(&self) -> &str {
        &self.ctx.name
    }

    /// Stores an analysed run and its buckets in one transaction; returns its id. A run
    /// with a figure that is not a finite number is refused ([`check_storable`]).
    pub fn add(&self, r: &Report, label: &str, accepted: bool) -> Result<i64> {
        self.add_run(r, None, label, accepted)
    }

    /// Stores a run; `ranks`, for a run of several ranks, adds its rank count and run-level
    /// figures (`r` is then the report of the rank that sets the step, or of rank 0).
    pub fn add_run(
        &self,
        r: &Report,
        ranks: Option<&RanksReport>,
        label: &str,
        accepted: bool,
    ) -> Result<i64> {
        if !self.writable {
            return Err(self
                .ctx
                .fail("opened for reading; use History::open_or_create to add runs"));
        }
        check_storable(r).map_err(|m| self.ctx.fail(&m))?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        let gpu = r.source.gpus.join("; ");
        let tpot = r.steps.tpot_ms.map(|t| t.median);
        let busy = r.devices.first().map(|d| d.busy_pct);
        let steps = i64::try_from(r.steps.decode_steps).unwrap_or(i64::MAX);
        let sp = r.speculative.as_ref();
        let insert_run = "INSERT INTO runs (created_unix_ms, label, trace_path, gpu, decode_steps, tpot_median_ms, busy_pct, accepted, time_per_token_ms, tokens_per_step, acceptance_rate, world_size, late_rank, run_step_ms, wait_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) RETURNING id";
        let world = ranks.map(|k| k.ranks.len() as i64);
        let late_rank = ranks.and_then(|k| k.verdict.late_rank()).map(i64::from);
        let run_step = ranks.map(|k| k.step_ms_median).filter(|x| x.is_finite());
        let wait = ranks
            .map(|k| match &k.verdict {
                RanksVerdict::Straggler(s) => s.others_wait_ms_per_step,
                _ => {
                    k.per_rank.iter().map(|p| p.wait_ms).sum::<f64>()
                        / k.per_rank.len().max(1) as f64
                }
            })
            .filter(|x| x.is_finite());
        let insert_bucket = "INSERT INTO run_buckets (run_id, bucket, ms_per_step_median, calls_per_step, share_of_busy_pct) VALUES ($1, $2, $3, $4, $5)";
        let ctx = &self.ctx;
        let begin = {
            let guard = self.conn.lock().unwrap_or_else(|p| p.into_inner());
            match &*guard {
                // Take the write lock up front: a deferred transaction that must upgrade
                // its lock fails at once instead of waiting.
                Some(Conn::Sqlite(_)) => "BEGIN IMMEDIATE",
                _ => "BEGIN",
            }
        };
        on_conn!(self, |c| {
            let mut tx = c
                .begin_with(begin)
                .await
                .map_err(|e| ctx.err("cannot write", e))?;
            let id: i64 = sqlx::query(insert_run)
                .bind(now)
                .bind(label)
                .bind(&r.source.path)
                .bind(&gpu)
                .bind(steps)
                .bind(tpot)
                .bind(busy)
                .bind(i64::from(accepted))
                .bind(sp.and_then(|x| x.tpot_per_token_ms))
                .bind(sp.and_then(|x| x.tokens_per_step))
                .bind(sp.and_then(|x| x.acceptance_rate))
                .bind(world)
                .bind(late_rank)
                .bind(run_step)
                .bind(wait)
                .fetch_one(&mut *tx)
                .await
                .and_then(|row| row.try_get(0))
                .map_err(|e| ctx.err("cannot write", e))?;
            for b in &r.buckets {
                sqlx::query(insert_bucket)
                    .bind(id)
                    .bind(b.bucket.as_str())
                    .bind(b.ms_per_step.map(|s| s.median))
                    .bind(b.calls_per_step)
                    .bind(b.share_of_busy_pct)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| ctx.err("cannot write", e))?;
            }
            tx.commit().await.map_err(|e| ctx.err("cannot write", e))?;
            Ok(id)
        })
    }

    /// Latest runs first.
    pub fn list(&self, limit: i64) -> Result<Vec<RunSummary>> {
        self.runs(RunFilter::All, limit)
    }

    /// One run, if stored.
    pub fn run(&self, id: i64) -> Result<Option<RunSummary>> {
        Ok(self.runs(RunFilter::Id(id), 1)?.pop())
    }

    /// Latest runs first, filtered in SQL.
    fn runs(&self, filter: RunFilter, limit: i64) -> Result<Vec<RunSummary>> {
        let q = match filter {
            RunFilter::All => {
                "SELECT id, created_unix_ms, label, trace_path, gpu, decode_steps, tpot_median_ms, busy_pct, accepted, time_per_token_ms, tokens_per_step, acceptance_rate, world_size, late_rank, run_step_ms, wait_ms FROM runs ORDER BY id DESC LIMIT $1"
            }
            RunFilter::Accepted => {
                "SELECT id, created_unix_ms, label, trace_path, gpu, decode_steps, tpot_median_ms, busy_pct, accepted, time_per_token_ms, tokens_per_step, acceptance_rate, world_size, late_rank, run_step_ms, wait_ms FROM runs WHERE accepted <> 0 ORDER BY id DESC LIMIT $1"
            }
            RunFilter::Id(_) => {
                "SELECT id, created_unix_ms, label, trace_path, gpu, decode_steps, tpot_median_ms, busy_pct, accepted, time_per_token_ms, tokens_per_step, acceptance_rate, world_size, late_rank, run_step_ms, wait_ms FROM runs WHERE id = $2 ORDER BY id DESC LIMIT $1"
            }
        };
        let limit = limit.max(0);
        let ctx = &self.ctx;
        on_conn!(self, |c| {
            let mut query = sqlx::query(q).bind(limit);
            if let RunFilter::Id(id) = filter {
                query = query.bind(id);
            }
            let rows = query
                .fetch_all(&mut *c)
                .await
                .map_err(|e| ctx.err("cannot read", e))?;
            rows.iter()
                .map(|r| {
                    let mut invalid = Vec::new();
                    Ok(RunSummary {
                        id: r.try_get(0)?,
                        created_unix_ms: r.try_get(1)?,
                        label: r.try_get(2)?,
                        trace_path: r.try_get(3)?,
                        gpu: r.try_get(4)?,
                        decode_steps: r.try_get(5)?,
                        tpot_median_ms: finite(r.try_get(6)?, "tpot_median_ms", &mut invalid),
                        busy_pct: finite(r.try_get(7)?, "busy_pct", &mut invalid),
                        accepted: r.try_get::<i64, _>(8)? != 0,
                        time_per_token_ms: finite(r.try_get(9)?, "time_per_token_ms", &mut invalid),
                        tokens_per_step: finite(r.try_get(10)?, "tokens_per_step", &mut invalid),
                        acceptance_rate: finite(r.try_get(11)?, "acceptance_rate", &mut invalid),
                        world_size: r.try_get(12)?,
                        late_rank: r.try_get(13)?,
                        run_step_ms: finite(r.try_get(14)?, "run_step_ms", &mut invalid),
                        wait_ms: finite(r.try_get(15)?, "wait_ms", &mut invalid),
                        invalid,
                    })
                })
                .collect::<std::result::Result<Vec<_>, sqlx::Error>>()
                .map_err(|e| ctx.err("cannot read", e))
        })
    }

    /// One run's bucket rows.
    pub fn buckets(&self, id: i64) -> Result<Vec<RunBucket>> {
        let q = "SELECT bucket, ms_per_step_median, calls_per_step, share_of_busy_pct FROM run_buckets WHERE run_id = $1 ORDER BY share_of_busy_pct DESC";
        let ctx = &self.ctx;
        on_conn!(self, |c| {
            let rows = sqlx::query(q)
                .bind(id)
                .fetch_all(&mut *c)
                .await
                .map_err(|e| ctx.err("cannot read", e))?;
            rows.iter()
                .map(|r| {
                    let mut invalid = Vec::new();
                    Ok(RunBucket {
                        bucket: r.try_get(0)?,
                        ms_per_step_median: finite(
                            r.try_get(1)?,
                            "ms_per_step_median",
                            &mut invalid,
                        ),
                        calls_per_step: finite(r.try_get(2)?, "calls_per_step", &mut invalid),
                        share_of_busy_pct: finite(
                            Some(r.try_get(3)?),
                            "share_of_busy_pct",
                            &mut invalid,
                        ),
                        invalid,
                    })
                })
                .collect::<std::result::Result<Vec<_>, sqlx::Error>>()
                .map_err(|e| ctx.err("cannot read", e))
        })
    }

    /// Bucket rows of the last `limit` accepted runs (newest first), for gate baselines.
    pub fn accepted_buckets(&self, limit: i64) -> Result<Vec<(RunSummary, Vec<RunBucket>)>> {
        self.runs(RunFilter::Accepted, limit)?
            .into_iter()
            .map(|r| {
                let b = self.buckets(r.id)?;
                Ok((r, b))
            })
            .collect()
    }

    /// The bucket names stored in any run, sorted.
    pub fn bucket_names(&self) -> Result<Vec<String>> {
        let q = "SELECT DISTINCT bucket FROM run_buckets ORDER BY bucket";
        let ctx = &self.ctx;
        on_conn!(self, |c| {
            sqlx::query(q)
                .fetch_all(&mut *c)
                .await
                .and_then(|rows| rows.iter().map(|r| r.try_get(0)).collect())
                .map_err(|e| ctx.err("cannot read", e))
        })
    }

    /// A bucket's median ms/step over the last `limit` runs, oldest first.
    pub fn trend(&self, bucket: &str, limit: i64) -> Result<Vec<TrendPoint>> {
        let q = "SELECT r.id, r.created_unix_ms, r.label, b.ms_per_step_median FROM runs r JOIN run_buckets b ON b.run_id = r.id WHERE b.bucket = $1 ORDER BY r.id DESC LIMIT $2";
        let limit = limit.max(0);
        let ctx = &self.ctx;
        on_conn!(self, |c| {
            let rows = sqlx::query(q)
                .bind(bucket)
                .bind(limit)
                .fetch_all(&mut *c)
                .await
                .map_err(|e| ctx.err("cannot read", e))?;
            let mut v = rows
                .iter()
                .map(|r| {
                    let mut invalid = Vec::new();
                    Ok(TrendPoint {
                        id: r.try_get(0)?,
                        created_unix_ms: r.try_get(1)?,
                        label: r.try_get(2)?,
                        ms_per_step_median: finite(
                            r.try_get(3)?,
                            "ms_per_step_median",
                            &mut invalid,
                        ),
                        invalid,
                    })
                })
                .collect::<std::result::Result<Vec<_>, sqlx::Error>>()
                .map_err(|e| ctx.err("cannot read", e))?;
            v.reverse();
            Ok(v)
        })
    }
}

impl Drop for History {
    /// Closes the connection and waits for it: after a write, SQLite checkpoints and removes
    /// its WAL files before the caller goes on.
    fn drop(&mut self) {
        let conn = self
            .conn
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(c) = conn {
            self.rt.block_on(async {
                let _ = match c {
                    Conn::Sqlite(c) => c.close().await,
                    Conn::SqliteRead(_) => Ok(()),
                    Conn::Postgres(c) => c.close().await,
                };
            });
        }
    }
}

/// Which runs [`History::runs`] returns.
#[derive(Clone, Copy)]
enum RunFilter {
    All,
    Accepted,
    Id(i64),
}
