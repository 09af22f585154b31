//! SQLite fixtures the tests of several crates build (nsys exports in another encoding).

use std::path::Path;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, Row};

/// A copy of `src` whose text is stored as `encoding` (`UTF-16le`, `UTF-16be`): the schema
/// is replayed and every row re-inserted from SQL literals (`quote()`), since SQLite cannot
/// attach a database of another encoding.
pub fn recoded_copy(src: &Path, dst: &Path, encoding: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut from = SqliteConnectOptions::new()
            .filename(src)
            .read_only(true)
            .connect()
            .await
            .expect("open source");
        let tables: Vec<(String, String)> = sqlx::query_as(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'",
        )
        .fetch_all(&mut from)
        .await
        .expect("tables");
        let mut script = format!("PRAGMA encoding = '{encoding}'; BEGIN;");
        for (name, sql) in &tables {
            script.push_str(&format!("{sql};"));
            let cols: Vec<String> = sqlx::query("SELECT name FROM pragma_table_info(?1)")
                .bind(name)
                .fetch_all(&mut from)
                .await
                .expect("columns")
                .iter()
                .map(|r| format!("quote(\"{}\")", r.get::<String, _>(0)))
                .collect();
            let q = format!(
                "SELECT 'INSERT INTO \"{name}\" VALUES(' || {} || ');' FROM \"{name}\"",
                cols.join(" || ',' || ")
            );
            for r in sqlx::query(AssertSqlSafe(q))
                .fetch_all(&mut from)
                .await
                .expect("rows")
            {
                script.push_str(&r.get::<String, _>(0));
            }
        }
        script.push_str("COMMIT;");
        let mut to = SqliteConnectOptions::new()
            .filename(dst)
            .create_if_missing(true)
            .connect()
            .await
            .expect("create copy");
        sqlx::raw_sql(AssertSqlSafe(script))
            .execute(&mut to)
            .await
            .expect("fill copy");
        let (enc,): (String,) = sqlx::query_as("PRAGMA encoding")
            .fetch_one(&mut to)
            .await
            .expect("encoding");
        assert_eq!(enc, encoding);
        to.close().await.expect("close");
    });
}
