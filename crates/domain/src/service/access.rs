//! An actor inside an organization, and the permission check every organization route makes.

use crate::model::{Membership, OrganizationId, Permission, UserId};

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
