//! The embedded store's page cache wrapper (`src/store/sqlite/pcache.rs`), installed the
//! way the binary installs it (first, before any other use of SQLite in the process: this
//! file is its own test process with this one test), under a workload that makes SQLite
//! rebalance pages through its scratch key, with rollbacks and a cache small enough to
//! evict. The database must match a model of it after every transaction, and pass
//! SQLite's own integrity check.

use std::collections::BTreeMap;

use floe::store::sqlite::pcache;
use rusqlite::{params, Connection};

/// A small deterministic generator (xorshift), so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn check(conn: &Connection, model: &BTreeMap<i64, Vec<u8>>) {
    let mut stmt = conn.prepare("SELECT k, v FROM t ORDER BY k").unwrap();
    let rows: BTreeMap<i64, Vec<u8>> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), model.len());
    assert!(rows == *model, "the table differs from its model");
}

#[test]
fn rebalancing_through_the_scratch_key_keeps_every_page_right() {
    assert!(
        pcache::install(),
        "the wrapper must go in before SQLite is initialised"
    );
    let dir = tempfile::tempdir().unwrap();
    let mut conn = Connection::open(dir.path().join("t.db")).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA cache_size = 20;
         CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB NOT NULL);
         CREATE INDEX t_v ON t (v);",
    )
    .unwrap();
    let mut model = BTreeMap::new();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for round in 0..300 {
        let tx = conn.transaction().unwrap();
        let mut changed = model.clone();
        for _ in 0..40 {
            let k = rng.below(2_000) as i64;
            if rng.below(4) == 0 {
                tx.execute("DELETE FROM t WHERE k = ?1", params![k])
                    .unwrap();
                changed.remove(&k);
            } else {
                // Values from a few bytes to past a page: splits, merges and overflow.
                let len = 1 + rng.below(5_000) as usize;
                let v: Vec<u8> = (0..len).map(|i| (i as u64 ^ rng.next()) as u8).collect();
                tx.execute(
                    "INSERT INTO t (k, v) VALUES (?1, ?2) ON CONFLICT (k) DO UPDATE SET v = ?2",
                    params![k, v],
                )
                .unwrap();
                changed.insert(k, v);
            }
        }
        // One transaction in five is rolled back: its pages must not survive in the cache.
        if round % 5 == 4 {
            tx.rollback().unwrap();
        } else {
            tx.commit().unwrap();
            model = changed;
        }
        check(&conn, &model);
    }
    let ok: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    assert!(
        pcache::scratch_moves() > 0,
        "no rebalance went through the scratch key: the workload no longer tests the wrapper"
    );
}
