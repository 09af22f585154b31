//! Run history in SQLite (embedded, the default) or PostgreSQL (`postgres://` URL), through
//! sqlx with runtime-checked, bound queries and versioned migrations. Each `History` owns a
//! small tokio runtime so callers stay synchronous.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use serde::Serialize;
use sqlx::migrate::{Migration, MigrationType, Migrator};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions};
use sqlx::{Row, SqlSafeStr};

use crate::analysis::Report;
use crate::error::{AnalyzerError, Result};

const SQLITE_INIT: &str = "
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_unix_ms BIGINT NOT NULL,
    label TEXT NOT NULL,
    trace_path TEXT NOT NULL,
    gpu TEXT NOT NULL,
    decode_steps BIGINT NOT NULL,
    tpot_median_ms REAL,
    busy_pct REAL,
    accepted BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE run_buckets (
    run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    bucket TEXT NOT NULL,
    ms_per_step_median REAL,
    calls_per_step REAL,
    share_of_busy_pct REAL NOT NULL,
    PRIMARY KEY (run_id, bucket)
);
CREATE INDEX run_buckets_bucket ON run_buckets(bucket, run_id);
";

const POSTGRES_INIT: &str = "
CREATE TABLE runs (
    id BIGSERIAL PRIMARY KEY,
    created_unix_ms BIGINT NOT NULL,
    label TEXT NOT NULL,
    trace_path TEXT NOT NULL,
    gpu TEXT NOT NULL,
    decode_steps BIGINT NOT NULL,
    tpot_median_ms DOUBLE PRECISION,
    busy_pct DOUBLE PRECISION,
    accepted BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE run_buckets (
    run_id BIGINT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    bucket TEXT NOT NULL,
    ms_per_step_median DOUBLE PRECISION,
    calls_per_step DOUBLE PRECISION,
    share_of_busy_pct DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (run_id, bucket)
);
CREATE INDEX run_buckets_bucket ON run_buckets(bucket, run_id);
";

fn migrator(init: &'static str) -> Migrator {
    Migrator::with_migrations(vec![Migration::new(
        1,
        "init".into(),
        MigrationType::Simple,
        init.into_sql_str(),
        false,
    )])
}

enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

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
}

/// A stored bucket row.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunBucket {
    pub bucket: String,
    pub ms_per_step_median: Option<f64>,
    pub calls_per_step: Option<f64>,
    pub share_of_busy_pct: f64,
}

/// A bucket's value over runs, oldest first.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TrendPoint {
    pub id: i64,
    pub created_unix_ms: i64,
    pub label: String,
    pub ms_per_step_median: Option<f64>,
}

/// An open history database.
pub struct History {
    rt: tokio::runtime::Runtime,
    pool: Pool,
    what: String,
}

fn db_err(what: &str, e: impl std::fmt::Display) -> AnalyzerError {
    AnalyzerError::Invalid(format!(
        "history {what}: {}",
        e.to_string().replace('\n', " ")
    ))
}

impl History {
    /// Opens (creating and migrating when needed) a SQLite file, or a PostgreSQL database
    /// when `db` starts with `postgres://` or `postgresql://`.
    pub fn open(db: &str) -> Result<Self> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| db_err(db, e))?;
        let is_pg = db.starts_with("postgres://") || db.starts_with("postgresql://");
        let what = if is_pg { redact(db) } else { db.to_owned() };
        let pool = rt.block_on(async {
            if is_pg {
                let pool = PgPoolOptions::new()
                    .max_connections(4)
                    .acquire_timeout(Duration::from_secs(5))
                    .connect(db)
                    .await
                    .map_err(|e| db_err(&what, e))?;
                migrator(POSTGRES_INIT)
                    .run(&pool)
                    .await
                    .map_err(|e| db_err(&what, e))?;
                Ok::<Pool, AnalyzerError>(Pool::Postgres(pool))
            } else {
                if let Some(dir) = Path::new(db).parent()
                    && !dir.as_os_str().is_empty()
                {
                    std::fs::create_dir_all(dir).map_err(|e| AnalyzerError::io(dir, e))?;
                }
                let opts = SqliteConnectOptions::from_str(&format!("sqlite://{db}"))
                    .map_err(|e| db_err(&what, e))?
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    .busy_timeout(Duration::from_secs(30))
                    .foreign_keys(true);
                let pool = SqlitePoolOptions::new()
                    .max_connections(1)
                    .connect_with(opts)
                    .await
                    .map_err(|e| db_err(&what, e))?;
                migrator(SQLITE_INIT)
                    .run(&pool)
                    .await
                    .map_err(|e| db_err(&what, e))?;
                Ok(Pool::Sqlite(pool))
            }
        })?;
        Ok(Self { rt, pool, what })
    }

    /// Stores an analysed run and its buckets in one transaction; returns its id.
    pub fn add(&self, r: &Report, label: &str, accepted: bool) -> Result<i64> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        let gpu = r.source.gpus.join("; ");
        let tpot = r.steps.tpot_ms.map(|t| t.median);
        let busy = r.devices.first().map(|d| d.busy_pct);
        let insert_run = "INSERT INTO runs (created_unix_ms, label, trace_path, gpu, decode_steps, tpot_median_ms, busy_pct, accepted) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id";
        let insert_bucket = "INSERT INTO run_buckets (run_id, bucket, ms_per_step_median, calls_per_step, share_of_busy_pct) VALUES ($1, $2, $3, $4, $5)";
        macro_rules! add_with {
            ($pool:expr) => {{
                let mut tx = $pool.begin().await.map_err(|e| db_err(&self.what, e))?;
                let id: i64 = sqlx::query(insert_run)
                    .bind(now)
                    .bind(label)
                    .bind(&r.source.path)
                    .bind(&gpu)
                    .bind(r.steps.decode_steps as i64)
                    .bind(tpot)
                    .bind(busy)
                    .bind(accepted as i64)
                    .fetch_one(&mut *tx)
                    .await
                    .and_then(|row| row.try_get(0))
                    .map_err(|e| db_err(&self.what, e))?;
                for b in &r.buckets {
                    sqlx::query(insert_bucket)
                        .bind(id)
                        .bind(b.bucket.as_str())
                        .bind(b.ms_per_step.map(|s| s.median))
                        .bind(b.calls_per_step)
                        .bind(b.share_of_busy_pct)
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| db_err(&self.what, e))?;
                }
                tx.commit().await.map_err(|e| db_err(&self.what, e))?;
                Ok(id)
            }};
        }
        self.rt.block_on(async {
            match &self.pool {
                Pool::Sqlite(p) => add_with!(p),
                Pool::Postgres(p) => add_with!(p),
            }
        })
    }

    /// Latest runs first.
    pub fn list(&self, limit: i64) -> Result<Vec<RunSummary>> {
        self.runs(false, limit)
    }

    /// Latest runs first, optionally only the accepted ones (filtered in SQL).
    fn runs(&self, accepted_only: bool, limit: i64) -> Result<Vec<RunSummary>> {
        let q = if accepted_only {
            "SELECT id, created_unix_ms, label, trace_path, gpu, decode_steps, tpot_median_ms, busy_pct, accepted FROM runs WHERE accepted <> 0 ORDER BY id DESC LIMIT $1"
        } else {
            "SELECT id, created_unix_ms, label, trace_path, gpu, decode_steps, tpot_median_ms, busy_pct, accepted FROM runs ORDER BY id DESC LIMIT $1"
        };
        macro_rules! list_with {
            ($pool:expr) => {{
                let rows = sqlx::query(q)
                    .bind(limit)
                    .fetch_all($pool)
                    .await
                    .map_err(|e| db_err(&self.what, e))?;
                rows.iter()
                    .map(|r| {
                        Ok(RunSummary {
                            id: r.try_get(0)?,
                            created_unix_ms: r.try_get(1)?,
                            label: r.try_get(2)?,
                            trace_path: r.try_get(3)?,
                            gpu: r.try_get(4)?,
                            decode_steps: r.try_get(5)?,
                            tpot_median_ms: r.try_get(6)?,
                            busy_pct: r.try_get(7)?,
                            accepted: r.try_get::<i64, _>(8)? != 0,
                        })
                    })
                    .collect::<std::result::Result<Vec<_>, sqlx::Error>>()
                    .map_err(|e| db_err(&self.what, e))
            }};
        }
        self.rt.block_on(async {
            match &self.pool {
                Pool::Sqlite(p) => list_with!(p),
                Pool::Postgres(p) => list_with!(p),
            }
        })
    }

    /// One run's bucket rows.
    pub fn buckets(&self, id: i64) -> Result<Vec<RunBucket>> {
        let q = "SELECT bucket, ms_per_step_median, calls_per_step, share_of_busy_pct FROM run_buckets WHERE run_id = $1 ORDER BY share_of_busy_pct DESC";
        macro_rules! with {
            ($pool:expr) => {{
                let rows = sqlx::query(q)
                    .bind(id)
                    .fetch_all($pool)
                    .await
                    .map_err(|e| db_err(&self.what, e))?;
                rows.iter()
                    .map(|r| {
                        Ok(RunBucket {
                            bucket: r.try_get(0)?,
                            ms_per_step_median: r.try_get(1)?,
                            calls_per_step: r.try_get(2)?,
                            share_of_busy_pct: r.try_get(3)?,
                        })
                    })
                    .collect::<std::result::Result<Vec<_>, sqlx::Error>>()
                    .map_err(|e| db_err(&self.what, e))
            }};
        }
        self.rt.block_on(async {
            match &self.pool {
                Pool::Sqlite(p) => with!(p),
                Pool::Postgres(p) => with!(p),
            }
        })
    }

    /// Bucket rows of the last `limit` accepted runs (newest first), for gate baselines.
    pub fn accepted_buckets(&self, limit: i64) -> Result<Vec<(RunSummary, Vec<RunBucket>)>> {
        self.runs(true, limit.max(0))?
            .into_iter()
            .map(|r| {
                let b = self.buckets(r.id)?;
                Ok((r, b))
            })
            .collect()
    }

    /// A bucket's median ms/step over the last `limit` runs, oldest first.
    pub fn trend(&self, bucket: &str, limit: i64) -> Result<Vec<TrendPoint>> {
        let q = "SELECT r.id, r.created_unix_ms, r.label, b.ms_per_step_median FROM runs r JOIN run_buckets b ON b.run_id = r.id WHERE b.bucket = $1 ORDER BY r.id DESC LIMIT $2";
        macro_rules! with {
            ($pool:expr) => {{
                let rows = sqlx::query(q)
                    .bind(bucket)
                    .bind(limit)
                    .fetch_all($pool)
                    .await
                    .map_err(|e| db_err(&self.what, e))?;
                let mut v = rows
                    .iter()
                    .map(|r| {
                        Ok(TrendPoint {
                            id: r.try_get(0)?,
                            created_unix_ms: r.try_get(1)?,
                            label: r.try_get(2)?,
                            ms_per_step_median: r.try_get(3)?,
                        })
                    })
                    .collect::<std::result::Result<Vec<_>, sqlx::Error>>()
                    .map_err(|e| db_err(&self.what, e))?;
                v.reverse();
                Ok(v)
            }};
        }
        self.rt.block_on(async {
            match &self.pool {
                Pool::Sqlite(p) => with!(p),
                Pool::Postgres(p) => with!(p),
            }
        })
    }
}

/// A URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            let user = creds.split(':').next().unwrap_or("");
            format!("{}{}:***{}", &url[..s + 3], user, &url[at..])
        }
        _ => url.to_owned(),
    }
}
