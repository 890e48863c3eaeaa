//! The write-ahead log's checkpoints, off the writer.
//!
//! In WAL mode a commit appends the changed pages to the log (`<file>-wal`); a checkpoint copies
//! them back into the database file. Left to itself, SQLite checkpoints in the commit that takes
//! the log past `wal_autocheckpoint` pages, on the connection that committed: the store's one
//! writer, while every other write waits for it. In a webhook fan-out that was 8 % of the
//! server's CPU, all of it on the writer (`docs/benchmarks.md`, "Cost bounded by the request,
//! fifth pass"), and the stall of each checkpoint is in the latency of the writes queued behind
//! it.
//!
//! So a thread of its own, with a connection of its own, checkpoints every [`EVERY`]: a
//! `PASSIVE` checkpoint, which copies what no reader still needs and waits for no lock a reader
//! or the writer holds; once it copied everything, the next write starts the log again from its
//! beginning. The writer checkpoints only should the log pass `wal_autocheckpoint` anyway (this
//! thread stuck or gone; [`super::CONNECTION_PRAGMAS`]).
//!
//! The thread ends when the last handle to the store goes.

use std::{
    sync::{
        mpsc::{self, RecvTimeoutError},
        Arc,
    },
    time::Duration,
};

use diesel::{connection::SimpleConnection, sqlite::SqliteConnection, Connection};

/// How often the log is checkpointed.
pub(crate) const EVERY: Duration = Duration::from_millis(250);

/// Keeps the checkpointing thread running: it stops when the last clone is dropped.
#[derive(Clone)]
pub(crate) struct Checkpoints(#[allow(dead_code)] Arc<mpsc::Sender<()>>);

impl Checkpoints {
    /// Starts checkpointing the database at `path` (a file name, as SQLite opens it). Should the
    /// thread not start, or its connection not open, the writer checkpoints as SQLite would.
    pub(crate) fn start(path: &str) -> Self {
        let (keep, stopped) = mpsc::channel();
        let path = path.to_owned();
        let started = std::thread::Builder::new()
            .name("gatehouse-sqlite-checkpoint".into())
            .spawn(move || checkpoint_until_stopped(&path, &stopped));
        if let Err(error) = started {
            tracing::warn!(%error, "could not start the SQLite checkpoint thread; the writer checkpoints");
        }
        Self(Arc::new(keep))
    }
}

fn checkpoint_until_stopped(path: &str, stopped: &mpsc::Receiver<()>) {
    let mut conn = match SqliteConnection::establish(path) {
        Ok(conn) => conn,
        Err(error) => {
            tracing::warn!(%error, "the SQLite checkpoint thread could not open the database; the writer checkpoints");
            return;
        }
    };
    loop {
        match stopped.recv_timeout(EVERY) {
            Err(RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
        }
        // `SQLITE_BUSY` (another checkpoint under way: the writer's, or a backup's) is harmless:
        // the next turn copies what this one did not.
        if let Err(error) = conn.batch_execute("PRAGMA wal_checkpoint(PASSIVE)") {
            tracing::debug!(%error, "a checkpoint of the SQLite log did not run");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use diesel::{connection::SimpleConnection, sqlite::SqliteConnection, Connection};

    /// The frames in the log (`mxFrame`) and those copied into the database (`nBackfill`), as
    /// the `-shm` file has them (SQLite's "WAL-mode file format": the two copies of the
    /// 48-byte index header, then the checkpoint information; native byte order).
    fn log_and_copied(shm: &std::path::Path) -> (u32, u32) {
        let bytes = std::fs::read(shm).expect("the -shm file");
        let at = |offset: usize| {
            u32::from_ne_bytes(bytes[offset..offset + 4].try_into().expect("four bytes"))
        };
        (at(16), at(96))
    }

    #[tokio::test]
    async fn the_log_is_copied_into_the_database_by_the_stores_own_thread() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let file = dir.path().join("g.db");
        let url = format!("sqlite://{}", file.display());
        let options = crate::StoreOptions {
            migrate: false,
            ..crate::StoreOptions::default()
        };
        let store = super::super::DbStore::open(&url, &options)
            .await
            .expect("the store opens");

        // Writes of a connection that never checkpoints itself, as the writer under
        // `wal_autocheckpoint` pages of log.
        let mut conn = SqliteConnection::establish(file.to_str().expect("a UTF-8 path"))
            .expect("a connection of the test's own");
        conn.batch_execute(
            "PRAGMA wal_autocheckpoint = 0;
             CREATE TABLE t (x TEXT NOT NULL);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
             INSERT INTO t SELECT printf('%.200c', 'x') FROM n;",
        )
        .expect("the writes");
        let shm = dir.path().join("g.db-shm");
        let (log, copied) = log_and_copied(&shm);
        assert!(
            log > 50 && copied < log,
            "the writes are in the log only: {log} frames, {copied} copied"
        );

        let deadline = Instant::now() + super::EVERY * 20;
        loop {
            let (log, copied) = log_and_copied(&shm);
            if copied == log {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{copied} of {log} frames copied after {:?}",
                super::EVERY * 20
            );
            tokio::time::sleep(super::EVERY / 5).await;
        }
        drop(store);
    }
}
