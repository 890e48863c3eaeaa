//! Verified domains: the domains organizations claimed, and the DNS that proves them.

use async_trait::async_trait;
use time::OffsetDateTime;

use super::{BoxError, StoreError};
use crate::model::{
    AuditRecord, DomainId, EmailDomain, NewEvent, OrganizationDomain, OrganizationId,
};

/// The domains organizations claimed. A domain is claimed once per organization, and verified
/// by at most one.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait DomainStore: Send + Sync + 'static {
    /// The organization's domains, oldest first.
    async fn domains(
        &self,
        organization_id: OrganizationId,
    ) -> Result<Vec<OrganizationDomain>, StoreError>;

    /// One domain of the organization.
    async fn domain(
        &self,
        organization_id: OrganizationId,
        id: DomainId,
    ) -> Result<Option<OrganizationDomain>, StoreError>;

    /// Adds a pending domain to a live organization with its audit record. Returns false when
    /// the organization is not live.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the organization claimed the domain already.
    async fn add_domain(
        &self,
        domain: OrganizationDomain,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// Marks the organization's domain verified at `at`, with its event and audit record.
    /// Returns false when there is no such domain (or it was verified already).
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when another organization verified the domain.
    async fn verify_domain(
        &self,
        organization_id: OrganizationId,
        id: DomainId,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// Removes the organization's domain, with its event and audit record. Returns false when
    /// there is no such domain.
    async fn remove_domain(
        &self,
        organization_id: OrganizationId,
        id: DomainId,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// The live organization that verified the domain, if any.
    async fn verifying_organization(
        &self,
        domain: &EmailDomain,
    ) -> Result<Option<OrganizationId>, StoreError>;
}

/// Why the DNS could not be asked (a timeout, a server failure): not an answer.
#[derive(Debug, thiserror::Error)]
#[error("the DNS lookup failed")]
pub struct DnsError(#[source] pub BoxError);

/// The DNS, for TXT records (the `gatehouse-dns` adapter, over `hickory-resolver`).
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait DnsTxt: Send + Sync + 'static {
    /// The TXT records of `name` (a fully qualified name, without the final dot), each as its
    /// strings joined; empty when the name or its records do not exist.
    ///
    /// # Errors
    /// [`DnsError`] when no answer came (timeout, refused, server failure).
    async fn txt_records(&self, name: &str) -> Result<Vec<String>, DnsError>;
}
