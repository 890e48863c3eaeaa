//! A `VACUUM` of the deliveries table after a burst of deliveries (issue 36; `docs/benchmarks.md`,
//! "The eighth pass").
//!
//! Every delivery leaves dead index entries behind it on PostgreSQL: its lease and its record
//! each write a new version of the row, and both change indexed columns, so neither is a
//! heap-only update. The lease reads the due index in order, and the dead entries of the
//! deliveries already made come before the due ones: until a vacuum removes them, every lease of
//! a burst reads past every delivery made since the last one. Autovacuum looks at a database once
//! a minute (`autovacuum_naptime`, the server's setting): a burst of thousands of deliveries is
//! over before it comes, and leased at half the rate it could be.
//!
//! So the store asks for the vacuum itself: once [`TIDY_AFTER`] deliveries have been recorded
//! since the last one, a task of the store's runtime runs `VACUUM (SKIP_LOCKED)
//! webhook_deliveries` on a pooled connection, outside any transaction, at most once per
//! [`TIDY_INTERVAL`] in this process. `SKIP_LOCKED` skips the table while another replica (or
//! autovacuum) vacuums it, instead of waiting for it. What it costs stays in proportion: the
//! vacuum reads only the pages changed since the last one (the visibility map), and PostgreSQL
//! skips the indexes when the dead rows are on few of a large table's pages (`INDEX_CLEANUP
//! AUTO`). A failed vacuum is logged and changes nothing: the leases are only slower until the
//! next one. Stopping the store stops a vacuum under way, which PostgreSQL rolls back harmlessly.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use diesel_async::SimpleAsyncConnection;

use super::DbPool;
use crate::runtime::StoreRuntime;

/// Deliveries recorded since the last vacuum that call for the next one.
pub(crate) const TIDY_AFTER: usize = 2_000;
/// The least time between two vacuums this process starts.
pub(crate) const TIDY_INTERVAL: Duration = Duration::from_secs(1);

/// What this process has recorded since its last vacuum of the deliveries, and whether one is
/// under way (or was started less than [`TIDY_INTERVAL`] ago).
#[derive(Debug, Default)]
pub(crate) struct DeliveryTidy {
    recorded: AtomicUsize,
    busy: AtomicBool,
    /// The pool's statement timeout, which the vacuum lifts for itself and puts back.
    statement_timeout: Option<Duration>,
}

impl DeliveryTidy {
    /// A tidy for a pool whose connections have this statement timeout.
    pub(crate) fn new(statement_timeout: Option<Duration>) -> Self {
        Self {
            statement_timeout,
            ..Self::default()
        }
    }

    /// Counts `n` recorded deliveries, and starts a vacuum on `runtime` when they call for one
    /// and none is under way.
    pub(crate) fn recorded(self: &Arc<Self>, n: usize, pool: &DbPool, runtime: &StoreRuntime) {
        let before = self.recorded.fetch_add(n, Ordering::Relaxed);
        if before.saturating_add(n) < TIDY_AFTER || self.busy.swap(true, Ordering::AcqRel) {
            return;
        }
        self.recorded.store(0, Ordering::Relaxed);
        let busy = Busy(Arc::clone(self));
        let pool = pool.clone();
        let timeout = self.statement_timeout;
        runtime.spawn_background(async move {
            let started = Instant::now();
            if let Err(error) = vacuum(&pool, timeout).await {
                tracing::warn!(%error, "could not vacuum the webhook deliveries");
            }
            tokio::time::sleep_until((started + TIDY_INTERVAL).into()).await;
            drop(busy);
        });
    }
}

/// Marks the tidy idle again when dropped: when the vacuum's task ends, and when it is stopped
/// with the runtime halfway.
struct Busy(Arc<DeliveryTidy>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::Release);
    }
}

/// Vacuums on a pooled connection, without the pool's statement timeout (a vacuum is work of the
/// store's own, not a request's), which it puts back before the connection returns to the pool.
/// A connection whose timeout could not be put back leaves the pool.
async fn vacuum(
    pool: &DbPool,
    timeout: Option<Duration>,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let mut conn = pool.get().await?;
    let Some(timeout) = timeout else {
        // The simple query protocol: `VACUUM` runs outside any transaction block.
        conn.batch_execute("VACUUM (SKIP_LOCKED) webhook_deliveries")
            .await?;
        return Ok(());
    };
    let done = async {
        conn.batch_execute("SET statement_timeout = 0").await?;
        let vacuumed = conn
            .batch_execute("VACUUM (SKIP_LOCKED) webhook_deliveries")
            .await;
        conn.batch_execute(&super::set_statement_timeout(timeout))
            .await?;
        vacuumed
    }
    .await;
    if done.is_err() {
        drop(deadpool::managed::Object::take(conn));
    }
    Ok(done?)
}
