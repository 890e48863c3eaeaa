//! The audit log's own store port. Records of changes are written by the store port that makes
//! the change, in its transaction (each such method takes the record); this port writes the
//! records that come with no change (a refused sign-in), reads the log and purges it.

use async_trait::async_trait;
use time::OffsetDateTime;

use super::StoreError;
use crate::model::{AuditFilter, AuditRecord, Page, PageRequest};

/// The audit log.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait AuditStore: Send + Sync + 'static {
    /// Writes one record on its own: for something that changed nothing, such as a refused
    /// sign-in.
    async fn record_audit(&self, record: AuditRecord) -> Result<(), StoreError>;

    /// Records matching the filter, newest first (ties by id, newest first).
    async fn audit_log(
        &self,
        filter: AuditFilter,
        page: PageRequest,
    ) -> Result<Page<AuditRecord>, StoreError>;

    /// Deletes at most `limit` of the records older than `before`, oldest first, in one
    /// transaction; returns how many (see [`PURGE_SLICE`](super::PURGE_SLICE)).
    async fn purge_audit(&self, before: OffsetDateTime, limit: u32) -> Result<u64, StoreError>;
}
