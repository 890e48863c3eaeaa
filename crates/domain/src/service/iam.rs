//! Identity and access management inside an organization: its service accounts and their keys,
//! and every key that acts in it, for its owners and admins.

use super::payloads;

use super::{maker_right, Actor, CreatedApiKey, Forbidden};
use crate::{
    model::{
        ApiKey, ApiKeyId, ApiKeyName, AssignedRole, AuditAction, CustomRole, Feature,
        InvitableRole, KeyHolder, ListedRole, NewApiKey, OrganizationId, Origin, Page, PageRequest,
        Permission, PermissionSet, Role, RoleDescription, RoleKey, RoleName, RoleRef,
        ServiceAccount, ServiceAccountId, ServiceAccountName, TargetKind, TokenKind,
        MAX_API_KEYS_PER_ORGANIZATION, MAX_SERVICE_ACCOUNTS,
    },
    ports::{service_ports, RoleChange, RoleDeletion, RoleStore, ScimTokenRevocation, StoreError},
};

/// A role asked for by name, as the organization has it: a built-in one, or one of its custom
/// roles with what it grants now; `None` for a key the organization has no role for.
pub(crate) async fn resolve_role(
    roles: &dyn RoleStore,
    organization_id: OrganizationId,
    role: RoleRef,
) -> Result<Option<AssignedRole>, StoreError> {
    Ok(match role {
        RoleRef::BuiltIn(role) => Some(AssignedRole::BuiltIn(role)),
        RoleRef::Custom(key) => roles
            .role(organization_id, &key)
            .await?
            .map(|role| AssignedRole::of(&role)),
    })
}

/// Why an IAM use case failed.
#[derive(Debug, thiserror::Error)]
pub enum IamError {
    /// The caller's role (narrowed by its token's scopes) lacks the permission.
    #[error(transparent)]
    Forbidden(#[from] Forbidden),
    /// The role asked for grants something the caller's own role does not.
    #[error("you cannot give or take the role {0}: it grants more than your own")]
    RoleAboveYours(String),
    /// The organization has no custom role with this key.
    #[error("the organization has no role {0}: give owner, admin, member, viewer or one of its custom roles")]
    UnknownRole(String),
    /// The organization's plan does not include custom roles.
    #[error("custom roles need the business or enterprise plan")]
    PlanRequired,
    /// A custom role with this key already exists.
    #[error("the organization already has a role {0}")]
    RoleTaken(String),
    /// Members, invitations or service accounts hold the role.
    #[error("{0} members, pending invitations or service accounts hold this role: give them another one first")]
    RoleHeld(u64),
    /// A service account, and a key of one, is created by a member signed in (whom the account
    /// names as its creator): never by a key, so that a leaked key cannot make spares of
    /// itself before it is revoked, nor a key made before single sign-on keep making them.
    #[error("service accounts and their keys are created by a member signed in: use a user's access token, not an API key")]
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
    pub role: Option<RoleRef>,
}

/// A new custom role, as asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct NewRole {
    /// Its key.
    pub key: RoleKey,
    /// Its name.
    pub name: RoleName,
    /// What it is for.
    pub description: RoleDescription,
    /// What it grants (never one of the owner's own permissions: see
    /// [`custom_permissions`](crate::model::custom_permissions)).
    pub permissions: PermissionSet,
}

service_ports! {
    /// The ports [`IamService`] uses.
    pub struct IamPorts { service_accounts: ServiceAccountStore, roles: RoleStore, api_keys: ApiKeyStore, memberships: MembershipStore, directory: DirectoryStore, clock: Clock, random: Random }
}

/// Service accounts and the organization's keys.
#[derive(Clone)]
pub struct IamService {
    ports: IamPorts,
}

/// `Ok` when the actor may give `role` to a service account: never `owner`, and nothing it
/// grants beyond what the actor's own role does ([`Actor::may_give`]).
fn may_give(actor: &Actor, role: AssignedRole) -> Result<AssignedRole, IamError> {
    let role = InvitableRole::new(role)
        .ok_or(IamError::OwnerRole)?
        .into_role();
    if actor.may_give(&role) {
        Ok(role)
    } else {
        Err(IamError::RoleAboveYours(role.name().to_owned()))
    }
}

impl IamService {
    /// A service on these ports.
    pub fn new(ports: IamPorts) -> Self {
        Self { ports }
    }

    /// The role named, in the actor's organization.
    async fn resolve(&self, actor: &Actor, role: RoleRef) -> Result<AssignedRole, IamError> {
        let name = role.name().to_owned();
        resolve_role(self.ports.roles.as_ref(), actor.organization_id(), role)
            .await?
            .ok_or(IamError::UnknownRole(name))
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
        role: RoleRef,
        origin: &Origin,
    ) -> Result<ServiceAccount, IamError> {
        actor.require(Permission::ServiceAccountsManage)?;
        let created_by = actor.person_signed_in().ok_or(IamError::PersonNeeded)?;
        let role = self.resolve(actor, role).await?;
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
        let created = actor.event(
            random,
            now,
            payloads::ServiceAccountCreated(payloads::service_account(&account)),
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
    pub async fn service_accounts(
        &self,
        actor: &Actor,
        page: PageRequest,
    ) -> Result<Page<ServiceAccount>, IamError> {
        actor.require(Permission::ServiceAccountsManage)?;
        let all = self
            .ports
            .service_accounts
            .service_accounts(actor.organization_id())
            .await?;
        Ok(Page::of_all(all, page))
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
        may_give(actor, current.role.clone())?;
        let role = match change.role {
            Some(role) => Some(may_give(actor, self.resolve(actor, role).await?)?),
            None => None,
        };
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
        if let Some(role) = &role {
            updated.role = role.clone();
        }
        let changed = actor.event(
            random,
            now,
            payloads::ServiceAccountUpdated {
                account: payloads::service_account(&updated),
                previous_role: &current.role,
            },
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
        actor.user_id().ok_or(IamError::PersonNeeded)?;
        let account = self.account_of(actor, id).await?;
        may_give(actor, account.role.clone())?;
        let now = self.ports.clock.now();
        let random = self.ports.random.as_ref();
        let deleted = actor.event(
            random,
            now,
            payloads::ServiceAccountDeleted {
                account: payloads::service_account(&account),
                deleted_at: now,
            },
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
        actor.person_signed_in().ok_or(IamError::PersonNeeded)?;
        let account = self.account_of(actor, id).await?;
        may_give(actor, account.role.clone())?;
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

    /// A page of the organization's roles: the four built-in ones (the permission table's),
    /// then its custom ones by key, read from the store a page at a time. Any member reads
    /// them, on any plan.
    pub async fn roles(
        &self,
        actor: &Actor,
        page: PageRequest,
    ) -> Result<Page<ListedRole>, IamError> {
        actor.require(Permission::OrganizationRead)?;
        let built_in = Role::ALL.len();
        let skipped = u32::try_from(built_in).unwrap_or(u32::MAX);
        let (custom, custom_total) = self
            .ports
            .roles
            .roles(actor.organization_id(), page.after(skipped))
            .await?;
        let start = usize::try_from(page.offset()).map_or(built_in, |o| o.min(built_in));
        let end = usize::try_from(page.offset().saturating_add(page.limit()))
            .map_or(built_in, |e| e.min(built_in));
        let items = Role::ALL[start..end]
            .iter()
            .copied()
            .map(ListedRole::BuiltIn)
            .chain(custom.into_iter().map(ListedRole::Custom))
            .collect();
        Ok(Page::new(items, u64::from(skipped) + custom_total, page))
    }

    /// One custom role of the organization.
    pub async fn role(&self, actor: &Actor, key: &RoleKey) -> Result<CustomRole, IamError> {
        actor.require(Permission::OrganizationRead)?;
        self.ports
            .roles
            .role(actor.organization_id(), key)
            .await?
            .ok_or(IamError::NotFound("role"))
    }

    /// `Ok` when the actor may define roles, and this one: `roles.manage`, a plan with custom
    /// roles, and nothing granted beyond the actor's own role.
    fn may_define(&self, actor: &Actor, permissions: PermissionSet) -> Result<(), IamError> {
        actor.require(Permission::RolesManage)?;
        if !actor.plan().includes(Feature::CustomRoles) {
            return Err(IamError::PlanRequired);
        }
        if !permissions.is_within(actor.role_permissions()) {
            return Err(IamError::RoleAboveYours(
                "with permissions your own role does not hold".to_owned(),
            ));
        }
        Ok(())
    }

    /// Defines a custom role (Business and Enterprise): `role.created`, audited.
    pub async fn create_role(
        &self,
        actor: &Actor,
        new: NewRole,
        origin: &Origin,
    ) -> Result<CustomRole, IamError> {
        self.may_define(actor, new.permissions)?;
        let now = self.ports.clock.now();
        let random = self.ports.random.as_ref();
        let role = CustomRole {
            organization_id: actor.organization_id(),
            key: new.key,
            name: new.name,
            description: new.description,
            permissions: new.permissions,
            created_at: now,
            updated_at: now,
        };
        let created = actor.event(random, now, payloads::RoleCreated(payloads::role(&role)));
        let record = actor
            .audit(random, now, AuditAction::RoleCreated, origin)
            .on(TargetKind::Role, &role.key);
        match self
            .ports
            .roles
            .create_role(role.clone(), created, record)
            .await
        {
            Ok(()) => Ok(role),
            Err(StoreError::Conflict) => Err(IamError::RoleTaken(role.key.to_string())),
            Err(e) => Err(e.into()),
        }
    }

    /// Changes a custom role: its holders act with what it grants from their next request.
    /// `role.updated`, audited, when something changed.
    pub async fn update_role(
        &self,
        actor: &Actor,
        key: &RoleKey,
        change: RoleChange,
        origin: &Origin,
    ) -> Result<CustomRole, IamError> {
        let current = self.role(actor, key).await?;
        self.may_define(actor, change.permissions.unwrap_or(current.permissions))?;
        // Nor may anyone change a role that grants more than their own.
        self.may_define(actor, current.permissions)?;
        let change = RoleChange {
            name: change.name.filter(|name| *name != current.name),
            description: change
                .description
                .filter(|description| *description != current.description),
            permissions: change
                .permissions
                .filter(|permissions| *permissions != current.permissions),
        };
        if change == RoleChange::default() {
            return Ok(current);
        }
        let now = self.ports.clock.now();
        let random = self.ports.random.as_ref();
        let mut updated = current.clone();
        if let Some(name) = &change.name {
            updated.name = name.clone();
        }
        if let Some(description) = &change.description {
            updated.description = description.clone();
        }
        if let Some(permissions) = change.permissions {
            updated.permissions = permissions;
        }
        let changed = actor.event(
            random,
            now,
            payloads::RoleUpdated {
                role: payloads::role(&updated),
                previous_permissions: &current.permissions,
            },
        );
        let record = actor
            .audit(random, now, AuditAction::RoleUpdated, origin)
            .on(TargetKind::Role, key);
        let revoked = self.narrowed(&current, &updated, now, origin).await?;
        self.ports
            .roles
            .update_role(
                current.organization_id,
                key,
                change,
                now,
                changed,
                record,
                revoked,
            )
            .await?
            .ok_or(IamError::NotFound("role"))
    }

    /// The SCIM tokens that a change from `current` to `updated` ends: those made by the
    /// role's holders, when it no longer grants `sso.manage` (their right ends with it).
    async fn narrowed(
        &self,
        current: &CustomRole,
        updated: &CustomRole,
        now: time::OffsetDateTime,
        origin: &Origin,
    ) -> Result<Vec<ScimTokenRevocation>, IamError> {
        let (before, after) = (AssignedRole::of(current), AssignedRole::of(updated));
        if !maker_right::keeps_scim_tokens(Some(&before))
            || maker_right::keeps_scim_tokens(Some(&after))
        {
            return Ok(Vec::new());
        }
        let tokens = self
            .ports
            .directory
            .scim_tokens(current.organization_id)
            .await?;
        let mut makers = Vec::new();
        for token in &tokens {
            if makers.contains(&token.created_by) {
                continue;
            }
            let holds = self
                .ports
                .memberships
                .membership(token.created_by, current.organization_id)
                .await?
                .is_some_and(|membership| membership.role.name() == current.key.as_ref());
            if holds {
                makers.push(token.created_by);
            }
        }
        Ok(maker_right::revoking(
            self.ports.random.as_ref(),
            &tokens,
            &makers,
            now,
            origin,
        ))
    }

    /// Deletes a custom role nobody holds: `role.deleted`, audited.
    pub async fn delete_role(
        &self,
        actor: &Actor,
        key: &RoleKey,
        origin: &Origin,
    ) -> Result<(), IamError> {
        let current = self.role(actor, key).await?;
        self.may_define(actor, current.permissions)?;
        let now = self.ports.clock.now();
        let random = self.ports.random.as_ref();
        let deleted = actor.event(random, now, payloads::RoleDeleted(payloads::role(&current)));
        let record = actor
            .audit(random, now, AuditAction::RoleDeleted, origin)
            .on(TargetKind::Role, key);
        match self
            .ports
            .roles
            .delete_role(current.organization_id, key, deleted, record)
            .await?
        {
            RoleDeletion::Deleted => Ok(()),
            RoleDeletion::NotFound => Err(IamError::NotFound("role")),
            RoleDeletion::Held(holders) => Err(IamError::RoleHeld(holders)),
        }
    }
}
