//! An organization's own audit log, for its owners and admins (`audit.read`). The operator
//! reads every organization's through [`ControlService`](super::ControlService).

use super::{heavy, Actor, Busy, Forbidden};
use crate::{
    model::{AuditFilter, AuditRecord, Page, PageRequest, Permission},
    ports::{service_ports, StoreError},
};

service_ports! {
    /// The ports [`AuditLogService`] uses.
    pub struct AuditLogPorts { audit: AuditStore, heavy: HeavyLanes }
}

/// Reading an organization's audit log.
#[derive(Clone)]
pub struct AuditLogService {
    ports: AuditLogPorts,
}

/// Why the audit log could not be read.
#[derive(Debug, thiserror::Error)]
pub enum AuditLogError {
    /// The actor's role does not grant `audit.read`.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// The organization's heavy requests are all under way (a filtered log).
    #[error(transparent)]
    Busy(#[from] Busy),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl AuditLogService {
    /// A service on these ports.
    pub fn new(ports: AuditLogPorts) -> Self {
        Self { ports }
    }

    /// The actor's organization's records, newest first, filtered: whatever organization the
    /// filter names, only the actor's own is read.
    pub async fn organization_log(
        &self,
        actor: &Actor,
        filter: AuditFilter,
        page: PageRequest,
    ) -> Result<Page<AuditRecord>, AuditLogError> {
        actor.require(Permission::AuditRead)?;
        // Filtered by actor, action or time, the log counts what it matches: a heavy request.
        let _lane = if filter.narrows() {
            Some(heavy::lane(&*self.ports.heavy, actor.organization_id()).await?)
        } else {
            None
        };
        let filter = AuditFilter {
            organization_id: Some(actor.organization_id()),
            ..filter
        };
        Ok(self.ports.audit.audit_log(filter, page).await?)
    }
}
