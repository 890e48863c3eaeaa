//! Identity and access management inside an organization: its service accounts and their keys,
//! and every key that acts in it, for its owners and admins.

use serde_json::json;

use super::{event, Actor, CreatedApiKey, Forbidden};
use crate::{
    model::{
        timestamp, ApiKey, ApiKeyId, ApiKeyName, AuditAction, EventType, InvitableRole, KeyHolder,
        NewApiKey, Origin, Page, PageRequest, Permission, Role, ServiceAccount, ServiceAccountId,
        ServiceAccountName, TargetKind, TokenKind, MAX_API_KEYS_PER_ORGANIZATION,
        MAX_SERVICE_ACCOUNTS,
    },
    ports::{service_ports, StoreError},
};

/// Why an IAM use case failed.
#[derive(Debug, thiserror::Error)]
pub enum IamError {
    /// The caller's role (narrowed by its token's scopes) lacks the permission.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// The role asked for grants something the caller's own role does not.
    #[error("you cannot give the role {0}: it grants more than your own")]
    RoleAboveYours(Role),
    /// A service account is created by a member, whom it names as its creator.
    #[error("a service account names the member who creates it: create it with a user's token")]
    PersonNeeded,
    /// The owner's role is the owner's alone.
    #[error("a service account cannot be owner: give it admin, member or viewer")]
    OwnerRole,
    /// No such service account (or key) in the organization.
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The organization already holds [`MAX_SERVICE_ACCOUNTS`] service accounts.
    #[error("the organization already has {MAX_SERVICE_ACCOUNTS} service accounts, the most it may; delete one first")]
    TooManyAccounts,
    /// The service account already holds [`MAX_API_KEYS_PER_ORGANIZATION`] keys.
    #[error("the service account already has {MAX_API_KEYS_PER_ORGANIZATION} API keys, the most it may; delete one first")]
    TooManyKeys,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A change to a service account: what is `Some` changes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServiceAccountChange {
    /// Its new name.
    pub name: Option<ServiceAccountName>,
    /// Its new role.
    pub role: Option<Role>,
}

service_ports! {
    /// The ports [`IamService`] uses.
    pub struct IamPorts { service_accounts: ServiceAccountStore, api_keys: ApiKeyStore, clock: Clock, random: Random }
}

/// Service accounts and the organization's keys.
#[derive(Clone)]
pub struct IamService {
    ports: IamPorts,
}

/// The event payload of a service account.
fn payload(account: &ServiceAccount) -> serde_json::Value {
    json!({
        "id": account.id,
        "organization_id": account.organization_id,
        "name": account.name.as_ref(),
        "role": account.role,
        "created_by": account.created_by,
        "created_at": timestamp::format(account.created_at),
    })
}

/// `Ok` when the actor may give `role`: never `owner`, and nothing it grants beyond what the
/// actor itself may do (so an admin gives admin, member or viewer, and no one hands out more
/// than they hold).
fn may_give(actor: &Actor, role: Role) -> Result<Role, IamError> {
    let role = InvitableRole::new(role).ok_or(IamError::OwnerRole)?.role();
    let within = Permission::ALL
        .into_iter()
        .filter(|permission| role.grants(*permission))
        .all(|permission| actor.require(permission).is_ok());
    if within {
        Ok(role)
    } else {
        Err(IamError::RoleAboveYours(role))
    }
}

impl IamService {
    /// A service on these ports.
    pub fn new(ports: IamPorts) -> Self {
        Self { ports }
    }

    /// The organization's service account, or `NotFound`.
    async fn account_of(
        &self,
        actor: &Actor,
        id: ServiceAccountId,
    ) -> Result<ServiceAccount, IamError> {
        self.ports
            .service_accounts
            .service_account(id)
            .await?
            .map(|access| access.account)
            .filter(|account| account.organization_id == actor.organization_id())
            .ok_or(IamError::NotFound("service account"))
    }

    /// Creates a service account with a role no higher than the creator's:
    /// `service_account.created`, audited.
    pub async fn create_service_account(
        &self,
        actor: &Actor,
        name: ServiceAccountName,
        role: Role,
        origin: &Origin,
    ) -> Result<ServiceAccount, IamError> {
        actor.require(Permission::ServiceAccountsManage)?;
        let created_by = actor.user_id().ok_or(IamError::PersonNeeded)?;
        let role = may_give(actor, role)?;
        let now = self.ports.clock.now();
        let random = self.ports.random.as_ref();
        let account = ServiceAccount {
            id: random.uuid().into(),
            organization_id: actor.organization_id(),
            name,
            role,
            created_by,
            created_at: now,
            updated_at: now,
        };
        let created = event(
            random,
            now,
            EventType::ServiceAccountCreated,
            Some(account.organization_id),
            Some(created_by),
            payload(&account),
        );
        let record = actor
            .audit(random, now, AuditAction::ServiceAccountCreated, origin)
            .on(TargetKind::ServiceAccount, account.id);
        if !self
            .ports
            .service_accounts
            .create_service_account(account.clone(), created, record)
            .await?
        {
            return Err(IamError::TooManyAccounts);
        }
        Ok(account)
    }

    /// The organization's service accounts, oldest first.
    pub async fn service_accounts(&self, actor: &Actor) -> Result<Vec<ServiceAccount>, IamError> {
        actor.require(Permission::ServiceAccountsManage)?;
        Ok(self
            .ports
            .service_accounts
            .service_accounts(actor.organization_id())
            .await?)
    }

    /// One service account of the organization.
    pub async fn service_account(
        &self,
        actor: &Actor,
        id: ServiceAccountId,
    ) -> Result<ServiceAccount, IamError> {
        actor.require(Permission::ServiceAccountsManage)?;
        self.account_of(actor, id).await
    }

    /// Renames a service account or changes its role (no higher than the caller's, and not of
    /// an account whose role is above the caller's): `service_account.updated`, audited, when
    /// something changed. Its keys act with the new role from their next request.
    pub async fn update_service_account(
        &self,
        actor: &Actor,
        id: ServiceAccountId,
        change: ServiceAccountChange,
        origin: &Origin,
    ) -> Result<ServiceAccount, IamError> {
        actor.require(Permission::ServiceAccountsManage)?;
        let current = self.account_of(actor, id).await?;
        may_give(actor, current.role)?;
        let role = change.role.map(|role| may_give(actor, role)).transpose()?;
        let name = change.name.filter(|name| *name != current.name);
        let role = role.filter(|role| *role != current.role);
        if name.is_none() && role.is_none() {
            return Ok(current);
        }
        let now = self.ports.clock.now();
        let random = self.ports.random.as_ref();
        let mut updated = current.clone();
        if let Some(name) = &name {
            updated.name = name.clone();
        }
        if let Some(role) = role {
            updated.role = role;
        }
        let mut data = payload(&updated);
        data["previous_role"] = json!(current.role);
        let changed = event(
            random,
            now,
            EventType::ServiceAccountUpdated,
            Some(current.organization_id),
            actor.user_id(),
            data,
        );
        let record = actor
            .audit(random, now, AuditAction::ServiceAccountUpdated, origin)
            .on(TargetKind::ServiceAccount, id);
        self.ports
            .service_accounts
            .update_service_account(
                current.organization_id,
                id,
                name,
                role,
                now,
                changed,
                record,
            )
            .await?
            .ok_or(IamError::NotFound("service account"))
    }

    /// Deletes a service account (not one whose role is above the caller's): its keys stop at
    /// once. `service_account.deleted`, audited.
    pub async fn delete_service_account(
        &self,
        actor: &Actor,
        id: ServiceAccountId,
        origin: &Origin,
    ) -> Result<(), IamError> {
        actor.require(Permission::ServiceAccountsManage)?;
        let account = self.account_of(actor, id).await?;
        may_give(actor, account.role)?;
        let now = self.ports.clock.now();
        let random = self.ports.random.as_ref();
        let mut data = payload(&account);
        data["deleted_at"] = json!(timestamp::format(now));
        let deleted = event(
            random,
            now,
            EventType::ServiceAccountDeleted,
            Some(account.organization_id),
            actor.user_id(),
            data,
        );
        let record = actor
            .audit(random, now, AuditAction::ServiceAccountDeleted, origin)
            .on(TargetKind::ServiceAccount, id);
        if self
            .ports
            .service_accounts
            .delete_service_account(account.organization_id, id, deleted, record)
            .await?
        {
            Ok(())
        } else {
            Err(IamError::NotFound("service account"))
        }
    }

    /// Creates a key for a service account (not one whose role is above the caller's): shown
    /// once, stored hashed, acting as the account. `api_key.created`, audited.
    pub async fn create_service_account_key(
        &self,
        actor: &Actor,
        id: ServiceAccountId,
        name: ApiKeyName,
        origin: &Origin,
    ) -> Result<CreatedApiKey, IamError> {
        actor.require(Permission::ServiceAccountsManage)?;
        let account = self.account_of(actor, id).await?;
        may_give(actor, account.role)?;
        let now = self.ports.clock.now();
        let random = self.ports.random.as_ref();
        let secret = random.secret(TokenKind::ApiKey);
        let key_id: ApiKeyId = random.uuid().into();
        let record = actor
            .audit(random, now, AuditAction::ApiKeyCreated, origin)
            .on(TargetKind::ApiKey, key_id);
        let key = self
            .ports
            .api_keys
            .create_api_key(
                NewApiKey {
                    id: key_id,
                    name,
                    prefix: secret.display_prefix(),
                    key_hash: secret.hash(),
                    organization_id: account.organization_id,
                    holder: KeyHolder::ServiceAccount(account.id),
                    created_at: now,
                },
                record,
            )
            .await?
            .ok_or(IamError::TooManyKeys)?;
        Ok(CreatedApiKey::shown_once(key, &secret))
    }

    /// Every key that acts in the organization, members' and service accounts', newest first,
    /// never with its secret.
    pub async fn organization_keys(
        &self,
        actor: &Actor,
        page: PageRequest,
    ) -> Result<Page<ApiKey>, IamError> {
        actor.require(Permission::ApiKeysManage)?;
        Ok(self
            .ports
            .service_accounts
            .organization_api_keys(actor.organization_id(), page)
            .await?)
    }

    /// Revokes any key that acts in the organization: it stops at once. `api_key.revoked`,
    /// audited.
    pub async fn revoke_key(
        &self,
        actor: &Actor,
        id: ApiKeyId,
        origin: &Origin,
    ) -> Result<(), IamError> {
        actor.require(Permission::ApiKeysManage)?;
        let record = actor
            .audit(
                self.ports.random.as_ref(),
                self.ports.clock.now(),
                AuditAction::ApiKeyRevoked,
                origin,
            )
            .on(TargetKind::ApiKey, id);
        if self
            .ports
            .service_accounts
            .revoke_organization_api_key(actor.organization_id(), id, record)
            .await?
        {
            Ok(())
        } else {
            Err(IamError::NotFound("API key"))
        }
    }
}
