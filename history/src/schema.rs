//! The history schema, its versioned migrations, and what a database holds before gapscope
//! reads or writes it.
//!
//! The migration texts are part of every database gapscope has written: sqlx stores their
//! checksums in `_sqlx_migrations` and refuses a database whose applied text changed, so the
//! strings below must never be edited; a schema change is a new migration.

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

pub(super) const MIGRATIONS_TABLE: &str = "_sqlx_migrations";

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

// Version 2: speculative decoding's figures (NULL for plain runs).
const SQLITE_SPEC: &str = "
ALTER TABLE runs ADD COLUMN time_per_token_ms REAL;
ALTER TABLE runs ADD COLUMN tokens_per_step REAL;
ALTER TABLE runs ADD COLUMN acceptance_rate REAL;
";

const POSTGRES_SPEC: &str = "
ALTER TABLE runs
    ADD COLUMN time_per_token_ms DOUBLE PRECISION,
    ADD COLUMN tokens_per_step DOUBLE PRECISION,
    ADD COLUMN acceptance_rate DOUBLE PRECISION;
";

// Version 3: runs of several ranks (NULL world size: one trace, as every older row).
const SQLITE_RANKS: &str = "
ALTER TABLE runs ADD COLUMN world_size BIGINT;
ALTER TABLE runs ADD COLUMN late_rank BIGINT;
ALTER TABLE runs ADD COLUMN run_step_ms REAL;
ALTER TABLE runs ADD COLUMN wait_ms REAL;
";

const POSTGRES_RANKS: &str = "
ALTER TABLE runs
    ADD COLUMN world_size BIGINT,
    ADD COLUMN late_rank BIGINT,
    ADD COLUMN run_step_ms DOUBLE PRECISION,
    ADD COLUMN wait_ms DOUBLE PRECISION;
";

fn migrator(init: &'static str, spec: &'static str, ranks: &'static str) -> Migrator {
    let m = |version, name: &str, sql: &'static str| {
        Migration::new(
            version,
            name.to_owned().into(),
            MigrationType::Simple,
            sql.into_sql_str(),
            false,
        )
    };
    Migrator::with_migrations(vec![
        m(1, "init", init),
        m(2, "speculative", spec),
        m(3, "ranks", ranks),
    ])
}

pub(super) fn sqlite_migrator() -> Migrator {
    migrator(SQLITE_INIT, SQLITE_SPEC, SQLITE_RANKS)
}

pub(super) fn postgres_migrator() -> Migrator {
    migrator(POSTGRES_INIT, POSTGRES_SPEC, POSTGRES_RANKS)
}

/// The tables a database holds and the migrations recorded in it.
#[derive(Debug, Clone, Default)]
pub(super) struct Facts {
    pub has_runs: bool,
    pub has_run_buckets: bool,
    pub has_migrations: bool,
    /// Tables that are not gapscope's (SQLite only; a PostgreSQL database is shared).
    pub other_tables: Vec<String>,
    /// `(version, success, checksum)` rows of the migrations table.
    pub applied: Vec<(i64, bool, Vec<u8>)>,
}

impl Facts {
    /// From the table names found; `applied` is filled in afterwards when `has_migrations`.
    pub(super) fn from_tables(names: impl IntoIterator<Item = String>) -> Self {
        let mut f = Self::default();
        for n in names {
            match n.as_str() {
                "runs" => f.has_runs = true,
                "run_buckets" => f.has_run_buckets = true,
                MIGRATIONS_TABLE => f.has_migrations = true,
                _ => f.other_tables.push(n),
            }
        }
        f
    }
}

/// What a database is, for gapscope.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum State {
    /// Every migration this gapscope knows is applied.
    Current,
    /// No history tables yet (an empty SQLite file, a PostgreSQL database without them).
    Empty,
    /// A history whose schema is older than this gapscope's.
    Outdated,
}

/// Judges `f` against `m`'s migrations. `foreign_tables_ok`: other tables do not make a
/// database foreign (PostgreSQL, where the history shares a database). The error is the
/// message, without the database's name.
pub(super) fn assess(f: &Facts, m: &Migrator, foreign_tables_ok: bool) -> Result<State, String> {
    let not_ours = "not a gapscope history database";
    if !f.has_migrations {
        if f.has_runs || f.has_run_buckets {
            return Err(format!(
                "{not_ours} (it has a runs table but no {MIGRATIONS_TABLE} table)"
            ));
        }
        if f.other_tables.is_empty() || foreign_tables_ok {
            return Ok(State::Empty);
        }
        let mut names = f.other_tables.clone();
        names.sort();
        let more = names.len().saturating_sub(3);
        names.truncate(3);
        return Err(format!(
            "{not_ours} (it holds other tables: {}{})",
            names.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }
    let known_max = m.iter().map(|x| x.version).max().unwrap_or(0);
    for (version, success, checksum) in &f.applied {
        if !success {
            return Err(format!(
                "schema migration {version} did not finish; the database needs repair"
            ));
        }
        match m.iter().find(|x| x.version == *version) {
            None if *version > known_max => {
                return Err(format!(
                    "written by a newer gapscope (schema version {version}; this one knows up \
                     to {known_max})"
                ));
            }
            None => return Err(format!("{not_ours} (unknown schema version {version})")),
            Some(x) if x.checksum.as_ref() != checksum.as_slice() => {
                return Err(format!(
                    "{not_ours} (its schema version {version} is not the one gapscope writes)"
                ));
            }
            Some(_) => {}
        }
    }
    if f.applied.is_empty() {
        if f.has_runs || f.has_run_buckets {
            return Err(format!(
                "{not_ours} (a runs table without any recorded migration)"
            ));
        }
        return Ok(State::Empty);
    }
    if m.iter().all(|x| f.applied.iter().any(|a| a.0 == x.version)) {
        if !(f.has_runs && f.has_run_buckets) {
            return Err(format!("{not_ours} (its runs tables are missing)"));
        }
        Ok(State::Current)
    } else {
        Ok(State::Outdated)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(tables: &[&str], applied: &[(i64, bool)]) -> Facts {
        let m = sqlite_migrator();
        let mut f = Facts::from_tables(tables.iter().map(|s| s.to_string()));
        f.applied = applied
            .iter()
            .map(|&(v, ok)| {
                let sum = m
                    .iter()
                    .find(|x| x.version == v)
                    .map(|x| x.checksum.to_vec())
                    .unwrap_or_default();
                (v, ok, sum)
            })
            .collect();
        f
    }

    #[test]
    fn databases_are_judged_before_use() {
        let m = sqlite_migrator();
        let all = ["runs", "run_buckets", MIGRATIONS_TABLE];
        assert_eq!(
            assess(&facts(&all, &[(1, true), (2, true), (3, true)]), &m, false),
            Ok(State::Current)
        );
        // Histories written before the speculative figures, or before runs of several
        // ranks: upgraded by the next writer.
        assert_eq!(
            assess(&facts(&all, &[(1, true)]), &m, false),
            Ok(State::Outdated)
        );
        assert_eq!(
            assess(&facts(&all, &[(1, true), (2, true)]), &m, false),
            Ok(State::Outdated)
        );
        assert_eq!(assess(&facts(&[], &[]), &m, false), Ok(State::Empty));
        let nsys = facts(&["CUPTI_ACTIVITY_KIND_KERNEL", "StringIds"], &[]);
        let e = assess(&nsys, &m, false).unwrap_err();
        assert!(e.contains("not a gapscope history database"), "{e}");
        assert!(e.contains("StringIds"), "{e}");
        assert_eq!(assess(&nsys, &m, true), Ok(State::Empty));
        let e = assess(
            &facts(&all, &[(1, true), (2, true), (3, true), (4, true)]),
            &m,
            false,
        )
        .unwrap_err();
        assert!(e.contains("newer gapscope"), "{e}");
        let e = assess(&facts(&all, &[(1, false)]), &m, false).unwrap_err();
        assert!(e.contains("did not finish"), "{e}");
        let mut changed = facts(&all, &[(1, true)]);
        changed.applied[0].2 = vec![1, 2, 3];
        assert!(assess(&changed, &m, false).is_err());
        assert!(assess(&facts(&["runs"], &[]), &m, true).is_err());
        assert_eq!(
            assess(&facts(&[MIGRATIONS_TABLE], &[]), &m, false),
            Ok(State::Empty),
            "a migrations table created by a writer that has not committed its schema yet"
        );
    }

    #[test]
    fn migration_texts_keep_their_checksums() {
        // Databases written since the first release record these; editing the SQL would make
        // every existing history unreadable.
        let hex = |m: Migrator| {
            m.iter()
                .next()
                .unwrap()
                .checksum
                .iter()
                .take(8)
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        assert_eq!(hex(sqlite_migrator()), "a938899e3eb43618");
        assert_eq!(hex(postgres_migrator()), "adc969dde81973e1");
    }
}
