//! Opening a PostgreSQL history: one direct connection (so the server's own error, such as
//! "connection refused", is what the user sees, quickly), then a schema check for reading or
//! the migrations for writing. sqlx's PostgreSQL migrator holds an advisory lock on the
//! database while it runs, so concurrent first writers apply each migration once.

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Row};

use super::Ctx;
use super::schema::{self, Facts, State};
use crate::error::Result;

/// How long connecting may take before giving up (a host that drops packets).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

async fn connect(url: &str, ctx: &Ctx) -> Result<PgConnection> {
    let opts = PgConnectOptions::from_str(url).map_err(|e| ctx.err("invalid URL", e))?;
    match tokio::time::timeout(CONNECT_TIMEOUT, opts.connect()).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(ctx.err("cannot connect", e)),
        Err(_) => Err(ctx.fail(&format!(
            "cannot connect: no answer within {} s",
            CONNECT_TIMEOUT.as_secs()
        ))),
    }
}

async fn facts(c: &mut PgConnection) -> std::result::Result<Facts, sqlx::Error> {
    let names: Vec<String> = sqlx::query(
        "SELECT table_name::text FROM information_schema.tables \
         WHERE table_schema = current_schema() AND table_name IN ('runs', 'run_buckets', '_sqlx_migrations')",
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

/// Connects and checks the schema; creates nothing.
pub(super) async fn open_read(url: &str, ctx: &Ctx) -> Result<PgConnection> {
    let mut c = connect(url, ctx).await?;
    let f = facts(&mut c).await.map_err(|e| ctx.err("cannot read", e))?;
    match schema::assess(&f, &schema::postgres_migrator(), true).map_err(|m| ctx.fail(&m))? {
        State::Current => Ok(c),
        State::Empty => Err(ctx.fail(
            "no gapscope history tables in this database; `gapscope history add` creates them",
        )),
        State::Outdated => Err(ctx
            .fail("its schema is older than this gapscope's; `gapscope history add` upgrades it")),
    }
}

/// Session advisory lock that serialises gapscope's writers' schema check and migrations
/// ("gapscope" in ASCII). Without it a writer could read the table list before another
/// writer's migration commits and its migration rows after, and take a half-made history
/// for a foreign database.
const WRITER_LOCK: i64 = 0x6761_7073_636f_7065;

/// Connects, and checks and applies the migrations under gapscope's advisory lock (sqlx's
/// migrator takes its own inside it).
pub(super) async fn open_write(url: &str, ctx: &Ctx) -> Result<PgConnection> {
    let mut c = connect(url, ctx).await?;
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(WRITER_LOCK)
        .execute(&mut c)
        .await
        .map_err(|e| ctx.err("cannot lock the schema", e))?;
    let m = schema::postgres_migrator();
    let f = facts(&mut c).await.map_err(|e| ctx.err("cannot read", e))?;
    if schema::assess(&f, &m, true).map_err(|msg| ctx.fail(&msg))? != State::Current {
        m.run(&mut c)
            .await
            .map_err(|e| ctx.err("schema migration failed", e))?;
        let f = facts(&mut c).await.map_err(|e| ctx.err("cannot read", e))?;
        schema::assess(&f, &m, true).map_err(|msg| ctx.fail(&msg))?;
    }
    // On an error above the connection is dropped, which releases the lock too.
    sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(WRITER_LOCK)
        .execute(&mut c)
        .await
        .map_err(|e| ctx.err("cannot unlock the schema", e))?;
    Ok(c)
}
