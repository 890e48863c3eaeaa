//! Identity and access management of an organization: its service accounts and the keys that
//! act in it.

use async_trait::async_trait;
use time::OffsetDateTime;

use super::{ScimTokenRevocation, StoreError};
use crate::model::{
    ApiKey, ApiKeyId, AssignedRole, AuditRecord, CustomRole, NewEvent, OrganizationId, Page,
    PageRequest, PermissionSet, Plan, RoleDescription, RoleKey, RoleName, ServiceAccount,
    ServiceAccountId, ServiceAccountName, Slice,
};

/// A service account with the plan of its organization, as a request it makes needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceAccountAccess {
    /// The account.
    pub account: ServiceAccount,
    /// Its organization's plan.
    pub plan: Plan,
}

/// Service accounts, and every key of an organization.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait ServiceAccountStore: Send + Sync + 'static {
    /// Stores a new account with its event and audit record; `false`, writing nothing, when
    /// the organization already holds [`MAX_SERVICE_ACCOUNTS`](crate::model::MAX_SERVICE_ACCOUNTS)
    /// (counted in the same transaction). A custom role it gives is held (locked) until the
    /// commit, so a concurrent deletion of the role sees the account.
    ///
    /// # Errors
    /// [`StoreError::Gone`], writing nothing, when the custom role it gives was deleted
    /// meanwhile.
    async fn create_service_account(
        &self,
        account: ServiceAccount,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// The organization's accounts, oldest first.
    async fn service_accounts(
        &self,
        organization_id: OrganizationId,
    ) -> Result<Vec<ServiceAccount>, StoreError>;

    /// One account with its organization's plan, while the organization is live.
    async fn service_account(
        &self,
        id: ServiceAccountId,
    ) -> Result<Option<ServiceAccountAccess>, StoreError>;

    /// Renames the organization's account or changes its role, with the event and the audit
    /// record; `None`, writing nothing, when there is no such account. A custom role it gives
    /// is held (locked) until the commit.
    ///
    /// # Errors
    /// [`StoreError::Gone`], writing nothing, when the custom role it gives was deleted
    /// meanwhile.
    #[allow(clippy::too_many_arguments)]
    async fn update_service_account(
        &self,
        organization_id: OrganizationId,
        id: ServiceAccountId,
        name: Option<ServiceAccountName>,
        role: Option<AssignedRole>,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<Option<ServiceAccount>, StoreError>;

    /// Deletes the organization's account and every key of it, with the event and the audit
    /// record; `false`, writing nothing, when there is no such account.
    async fn delete_service_account(
        &self,
        organization_id: OrganizationId,
        id: ServiceAccountId,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// Every key that acts in the organization (members' and service accounts'), newest first.
    async fn organization_api_keys(
        &self,
        organization_id: OrganizationId,
        page: PageRequest,
    ) -> Result<Page<ApiKey>, StoreError>;

    /// Deletes a key that acts in the organization, whoever holds it, with the audit record;
    /// `false`, writing nothing, when the organization has no such key.
    async fn revoke_organization_api_key(
        &self,
        organization_id: OrganizationId,
        id: ApiKeyId,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;
}

/// A change to a custom role: what is `Some` changes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RoleChange {
    /// Its new name.
    pub name: Option<RoleName>,
    /// Its new description.
    pub description: Option<RoleDescription>,
    /// What it grants from now on.
    pub permissions: Option<PermissionSet>,
}

/// What deleting a custom role did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoleDeletion {
    /// Deleted, with its event and audit record.
    Deleted,
    /// The organization has no such role.
    NotFound,
    /// Members, pending invitations or service accounts hold it (this many): nothing written.
    Held(u64),
}

/// An organization's custom roles. Reading a member, an invitation or a service account gives
/// its role with what the custom role grants now (the store reads the definition with it).
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait RoleStore: Send + Sync + 'static {
    /// Stores a new role with its event and audit record.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the organization already has a role with its key.
    async fn create_role(
        &self,
        role: CustomRole,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<(), StoreError>;

    /// A slice of the organization's custom roles, by key, with how many it has in all.
    async fn roles(
        &self,
        organization_id: OrganizationId,
        slice: Slice,
    ) -> Result<(Vec<CustomRole>, u64), StoreError>;

    /// One custom role of the organization.
    async fn role(
        &self,
        organization_id: OrganizationId,
        key: &RoleKey,
    ) -> Result<Option<CustomRole>, StoreError>;

    /// Changes a role, with the event and the audit record, and revokes the SCIM tokens
    /// `revoked` names (those of its holders, when its new permissions lack `sso.manage`);
    /// `None`, writing nothing, when the organization has no such role.
    #[allow(clippy::too_many_arguments)]
    async fn update_role(
        &self,
        organization_id: OrganizationId,
        key: &RoleKey,
        change: RoleChange,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
        revoked: Vec<ScimTokenRevocation>,
    ) -> Result<Option<CustomRole>, StoreError>;

    /// Deletes a role nobody holds (counted in the same transaction: members, pending
    /// invitations, service accounts), with the event and the audit record.
    async fn delete_role(
        &self,
        organization_id: OrganizationId,
        key: &RoleKey,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<RoleDeletion, StoreError>;
}
