//! Telling this process's dispatcher that a change committed outbox events, so that it turns
//! them into deliveries at once instead of at its next poll.
//!
//! `record_events` marks the store operation it runs in; when that operation has finished
//! without error, the store's [`OutboxSignal`] is notified. The mark is a task-local flag set
//! up around each operation by the store's runtime (`runtime.rs`, `sqlite/inline.rs`), so no
//! query needs to carry it. The signal is a hint: one too many costs the dispatcher an empty
//! look, and one missed (events written by another process, a replica) is found by its poll.

use std::{cell::Cell, future::Future, sync::Arc};

use gatehouse_domain::ports::StoreError;
use tokio::sync::Notify;

tokio::task_local! {
    /// Whether the store operation under way recorded outbox events.
    static RECORDED: Cell<bool>;
    /// Whether the store operation under way queued mail.
    static MAILED: Cell<bool>;
    /// The [`OutboxSignal::tag`] of the store whose operation is under way.
    static SENDER: Arc<str>;
}

/// Stores opened in this process so far, to tell their tags apart.
static OPENED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The tag of the store whose operation is under way (empty outside one): what its `NOTIFY`
/// carries, so that its own listener knows its own store's events from another replica's.
pub(crate) fn sender() -> Arc<str> {
    SENDER
        .try_with(Arc::clone)
        .unwrap_or_else(|_| Arc::from(""))
}

/// Marks the store operation under way as one that recorded outbox events.
pub(crate) fn mark_recorded() {
    // Outside an operation (there is none) nothing is marked.
    let _ = RECORDED.try_with(|recorded| recorded.set(true));
}

/// Marks the store operation under way as one that queued mail.
pub(crate) fn mark_mailed() {
    let _ = MAILED.try_with(|mailed| mailed.set(true));
}

/// Notified after each store operation that recorded outbox events and succeeded; its `mail`
/// after each that queued mail.
#[derive(Clone)]
pub(crate) struct OutboxSignal {
    notify: Arc<Notify>,
    mail: Arc<Notify>,
    tag: Arc<str>,
}

impl Default for OutboxSignal {
    fn default() -> Self {
        let n = OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self {
            notify: Arc::default(),
            mail: Arc::default(),
            tag: Arc::from(format!("{}.{n}", std::process::id())),
        }
    }
}

impl OutboxSignal {
    /// This store's tag: its process and its number in it, unique among the replicas on a
    /// database (their processes run at once, so their ids differ).
    pub(crate) fn tag(&self) -> &str {
        &self.tag
    }

    /// Runs a store operation and notifies when it recorded events and succeeded.
    pub(crate) async fn watch<T>(
        &self,
        operation: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let (result, recorded, mailed) = SENDER
            .scope(
                self.tag.clone(),
                RECORDED.scope(
                    Cell::new(false),
                    MAILED.scope(Cell::new(false), async move {
                        let result = operation.await;
                        (result, RECORDED.with(Cell::get), MAILED.with(Cell::get))
                    }),
                ),
            )
            .await;
        if recorded && result.is_ok() {
            // A permit is kept when nobody waits: a dispatcher busy with the last batch looks
            // again as soon as it is done.
            self.notify.notify_one();
        }
        if mailed && result.is_ok() {
            self.mail.notify_one();
        }
        result
    }

    /// Wakes the dispatcher: another process committed events (PostgreSQL's `NOTIFY`), or it
    /// may have while nobody listened.
    pub(crate) fn wake(&self) {
        self.notify.notify_one();
    }

    /// What the dispatcher waits on.
    pub(crate) fn notify(&self) -> Arc<Notify> {
        self.notify.clone()
    }

    /// What the mail courier waits on.
    pub(crate) fn mail(&self) -> Arc<Notify> {
        self.mail.clone()
    }
}
