//! An actor inside an organization, and the permission check every organization route makes.

use time::OffsetDateTime;

use crate::{
    model::{
        AuditAction, AuditActor, AuditRecord, Membership, OrganizationId, Origin, Permission,
        UserId,
    },
    ports::Random,
};

use super::Principal;

/// An authenticated principal acting inside one organization they belong to.
#[derive(Clone, Debug, PartialEq)]
pub struct Actor {
    /// Who acts: a user in a session, or an API key.
    pub principal: Principal,
    /// Their membership in the organization, with its role and the organization's plan.
    pub membership: Membership,
}

/// The actor's role does not grant the permission.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("missing permission {0}")]
pub struct Forbidden(pub Permission);

impl Actor {
    /// The audit record of something the actor does in their organization now: by their user
    /// or key, in the organization (say what it was done to with [`AuditRecord::on`]).
    pub(crate) fn audit(
        &self,
        random: &dyn Random,
        at: OffsetDateTime,
        action: AuditAction,
        origin: &Origin,
    ) -> AuditRecord {
        super::audit(random, at, AuditActor::of(&self.principal), action, origin)
            .in_organization(self.organization_id())
    }

    /// The organization acted in.
    pub fn organization_id(&self) -> OrganizationId {
        self.membership.organization_id
    }

    /// The user acting, for an API key the user who created it.
    pub fn user_id(&self) -> UserId {
        self.principal.user_id()
    }

    /// `Ok` when the actor's role grants the permission.
    pub fn require(&self, permission: Permission) -> Result<(), Forbidden> {
        if self.membership.role.grants(permission) {
            Ok(())
        } else {
            Err(Forbidden(permission))
        }
    }
}
