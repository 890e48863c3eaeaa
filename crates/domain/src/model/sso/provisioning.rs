//! Provisioning: the role a user the IdP provisions gets in the organization.

use crate::model::{
    text::{display_as_str, from_str_by_parse},
    Role,
};

/// The role given to users the IdP provisions: like [`Role`] but never `owner`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ProvisionRole {
    /// Provisioned as [`Role::Admin`].
    Admin,
    /// Provisioned as [`Role::Member`]; the default.
    #[default]
    Member,
    /// Provisioned as [`Role::Viewer`].
    Viewer,
}

/// The role named is not `admin`, `member` or `viewer` (lowercase); `owner` is never accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("must be one of: admin, member, viewer")]
pub struct ProvisionRoleError;

impl ProvisionRole {
    /// Parses the role's lowercase name: `admin`, `member` or `viewer`.
    pub fn parse(raw: &str) -> Result<Self, ProvisionRoleError> {
        match raw {
            "admin" => Ok(Self::Admin),
            "member" => Ok(Self::Member),
            "viewer" => Ok(Self::Viewer),
            _ => Err(ProvisionRoleError),
        }
    }

    /// The role's lowercase name, as [`Role::as_str`] writes it.
    pub const fn as_str(self) -> &'static str {
        self.role().as_str()
    }

    /// The organization role a provisioned user gets.
    pub const fn role(self) -> Role {
        match self {
            Self::Admin => Role::Admin,
            Self::Member => Role::Member,
            Self::Viewer => Role::Viewer,
        }
    }
}

from_str_by_parse!(ProvisionRole, ProvisionRoleError);

display_as_str!(ProvisionRole);
