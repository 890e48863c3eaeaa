//! The built-in roles a member may hold in an organization. What each grants is the
//! permission table's (`permission.rs`); an organization's own roles are `custom_role.rs`'s.

use serde::{Deserialize, Serialize};

use super::text::{display_as_str, named_variants};

/// A member's role in an organization.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Full control, deleting the organization included.
    Owner,
    /// Manages members, applications, settings, policies, webhooks, branding and SSO; cannot
    /// delete the organization.
    Admin,
    /// Reads the organization and its members, and uses its applications.
    Member,
    /// Reads the organization and its members; read-only.
    Viewer,
}

impl Role {
    /// The built-in roles, from the most to the least able.
    pub const ALL: [Role; 4] = [Self::Owner, Self::Admin, Self::Member, Self::Viewer];
}

named_variants!(
    Role,
    /// The role's lowercase name, as the API and the store write it.
    refused = "must be one of: owner, admin, member, viewer",
    {
        Owner => "owner",
        Admin => "admin",
        Member => "member",
        Viewer => "viewer",
    }
);

display_as_str!(Role);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_round_trip() {
        assert_eq!("viewer".parse::<Role>(), Ok(Role::Viewer));
        assert_eq!(
            "root".parse::<Role>(),
            Err("must be one of: owner, admin, member, viewer")
        );
    }
}
