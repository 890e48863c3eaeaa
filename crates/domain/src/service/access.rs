//! An actor inside an organization, and the permission check every organization route makes.

use time::OffsetDateTime;

use crate::{
    model::{
        AssignedRole, AuditAction, AuditActor, AuditRecord, Membership, OrganizationId, Origin,
        Permission, PermissionSet, Plan, Role, UserId, DIRECTORY_PERMISSIONS,
    },
    ports::Random,
};

use super::{Agent, DirectoryClient, MachineClient, Principal, ServiceAccountKey};

/// Someone acting inside one organization: a member (by a user's token or an API key), an
/// application with a machine token, or a service account with its key.
#[derive(Clone, Debug, PartialEq)]
pub enum Actor {
    /// A person who belongs to the organization.
    Member {
        /// Who acts: a user in a session, or an API key.
        principal: Principal,
        /// Their membership in the organization, with its role and the organization's plan.
        membership: Membership,
    },
    /// An application of the organization, with exactly its machine token's API scopes.
    Application(MachineClient),
    /// A service account of the organization, by one of its keys, with its role.
    ServiceAccount(ServiceAccountKey),
    /// The organization's identity provider, by one of its SCIM tokens: it manages members
    /// ([`DIRECTORY_PERMISSIONS`]) and nothing else.
    Directory(DirectoryClient),
}

/// The actor's role, narrowed by its token's scopes, does not grant the permission.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("missing permission {0}")]
pub struct Forbidden(pub Permission);

impl Actor {
    /// The audit record of something the actor does in their organization now: by their user,
    /// key or application, in the organization (say what it was done to with
    /// [`AuditRecord::on`]).
    pub(crate) fn audit(
        &self,
        random: &dyn Random,
        at: OffsetDateTime,
        action: AuditAction,
        origin: &Origin,
    ) -> AuditRecord {
        super::audit(random, at, self.audit_actor(), action, origin)
            .in_organization(self.organization_id())
    }

    /// Who acts, as the audit log names them.
    pub fn audit_actor(&self) -> AuditActor {
        match self {
            Self::Member { principal, .. } => AuditActor::of(principal),
            Self::Application(machine) => AuditActor::Application(machine.application_id),
            Self::ServiceAccount(key) => AuditActor::ServiceAccount(key.account.id),
            Self::Directory(directory) => AuditActor::Scim(directory.token_id),
        }
    }

    /// The organization acted in.
    pub fn organization_id(&self) -> OrganizationId {
        match self {
            Self::Member { membership, .. } => membership.organization_id,
            Self::Application(machine) => machine.organization_id,
            Self::ServiceAccount(key) => key.account.organization_id,
            Self::Directory(directory) => directory.organization_id,
        }
    }

    /// The organization's plan.
    pub fn plan(&self) -> Plan {
        match self {
            Self::Member { membership, .. } => membership.plan,
            Self::Application(machine) => machine.plan,
            Self::ServiceAccount(key) => key.plan,
            Self::Directory(directory) => directory.plan,
        }
    }

    /// The user acting, for a user's API key the user who created it; `None` for an
    /// application or a service account.
    pub fn user_id(&self) -> Option<UserId> {
        match self {
            Self::Member { principal, .. } => Some(principal.user_id()),
            Self::Application(_) | Self::ServiceAccount(_) | Self::Directory(_) => None,
        }
    }

    /// Whether this is the agent's actor (the one its credentials resolved to).
    pub fn is_of(&self, agent: &Agent) -> bool {
        match (self, agent) {
            (Self::Member { principal, .. }, Agent::Person(person)) => principal == person,
            (Self::Application(machine), Agent::Application(other)) => machine == other,
            (Self::ServiceAccount(key), Agent::ServiceAccount(other)) => key == other,
            (Self::Directory(directory), Agent::Directory(other)) => directory == other,
            _ => false,
        }
    }

    /// What the actor's role grants, before a token's scopes narrow it: a member's role, a
    /// service account's role. An application has no role: what its scopes let it do is
    /// checked by [`Self::require`], and the roles it gives (with `members:write`) are an
    /// admin's to give; so are a directory's (through the map an admin saved).
    pub fn role_permissions(&self) -> PermissionSet {
        match self {
            Self::Member { membership, .. } => membership.role.permissions(),
            Self::Application(_) | Self::Directory(_) => PermissionSet::of_role(Role::Admin),
            Self::ServiceAccount(key) => key.account.role.permissions(),
        }
    }

    /// Whether the actor may give `role` to someone (a member, an invitee, a service account)
    /// or take it from them: only when its own role grants everything `role` does. No one hands
    /// out more than they hold.
    pub fn may_give(&self, role: &AssignedRole) -> bool {
        role.permissions().is_within(self.role_permissions())
    }

    /// `Ok` when the actor may use the permission: a member's role grants it and, for an
    /// OAuth token that carries API scopes, one of them grants it too; an application's
    /// token's scopes grant it; a service account's role grants it.
    pub fn require(&self, permission: Permission) -> Result<(), Forbidden> {
        let granted = match self {
            Self::Member {
                principal,
                membership,
            } => membership.role.grants(permission) && principal.api_scopes().narrow(permission),
            Self::Application(machine) => machine.scopes.grant(permission),
            Self::ServiceAccount(key) => key.account.role.grants(permission),
            Self::Directory(_) => DIRECTORY_PERMISSIONS.contains(&permission),
        };
        if granted {
            Ok(())
        } else {
            Err(Forbidden(permission))
        }
    }
}
