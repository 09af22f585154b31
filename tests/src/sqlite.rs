//! SQLite fixtures the tests of several crates build (nsys exports in another encoding).

use std::path::Path;

use rusqlite::{Connection, OpenFlags};

/// A copy of `src` whose text is stored as `encoding` (`UTF-16le`, `UTF-16be`): the schema
/// is replayed and every row re-inserted from SQL literals (`quote()`), since SQLite cannot
/// attach a database of another encoding.
pub fn recoded_copy(src: &Path, dst: &Path, encoding: &str) {
    let from =
        Connection::open_with_flags(src, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open source");
    let tables: Vec<(String, String)> = from
        .prepare(
            "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'",
        )
        .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .expect("tables");
    let mut script = format!("PRAGMA encoding = '{encoding}'; BEGIN;");
    for (name, sql) in &tables {
        script.push_str(&format!("{sql};"));
        let cols: Vec<String> = from
            .prepare("SELECT name FROM pragma_table_info(?1)")
            .and_then(|mut s| {
                s.query_map([name], |r| {
                    Ok(format!("quote(\"{}\")", r.get::<_, String>(0)?))
                })?
                .collect()
            })
            .expect("columns");
        let q = format!(
            "SELECT 'INSERT INTO \"{name}\" VALUES(' || {} || ');' FROM \"{name}\"",
            cols.join(" || ',' || ")
        );
        let rows: Vec<String> = from
            .prepare(&q)
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .expect("rows");
        for r in rows {
            script.push_str(&r);
        }
    }
    script.push_str("COMMIT;");
    let to = Connection::open(dst).expect("create copy");
    to.execute_batch(&script).expect("fill copy");
    let enc: String = to
        .query_row("PRAGMA encoding", [], |r| r.get(0))
        .expect("encoding");
    assert_eq!(enc, encoding);
    to.close().expect("close");
}
