//! The built-in roles a member may hold in an organization. What each grants is the
//! permission table's (`permission.rs`); an organization's own roles are the domain's
//! (`gatehouse_domain::model::CustomRole`).

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};

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

    /// The role's lowercase name, as the API, the store and the `org_role` claim write it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Owner => "owner",
            Self::Admin => "admin",
            Self::Member => "member",
            Self::Viewer => "viewer",
        }
    }
}

impl FromStr for Role {
    type Err = &'static str;

    /// The role [`Role::as_str`] names; any other name is refused with what the names are.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|role| role.as_str() == name)
            .ok_or("must be one of: owner, admin, member, viewer")
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

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
