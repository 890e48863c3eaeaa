use time::OffsetDateTime;

use super::{OrganizationId, OrganizationName, OrganizationType, Plan, Role, Slug};

/// The role new members get by default: `member` or `viewer`, never more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultRole {
    Member,
    Viewer,
}

impl DefaultRole {
    pub const fn role(self) -> Role {
        match self {
            Self::Member => Role::Member,
            Self::Viewer => Role::Viewer,
        }
    }

    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        match raw {
            "member" => Ok(Self::Member),
            "viewer" => Ok(Self::Viewer),
            _ => Err("must be one of: member, viewer"),
        }
    }
}

/// An organization's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrganizationSettings {
    pub default_role: DefaultRole,
    /// Whether members (not only owners and admins) may invite, as `member` or `viewer`.
    pub allow_member_invite: bool,
}

impl Default for OrganizationSettings {
    fn default() -> Self {
        Self {
            default_role: DefaultRole::Member,
            allow_member_invite: false,
        }
    }
}

/// A live organization with its counts.
#[derive(Clone, Debug, PartialEq)]
pub struct Organization {
    pub id: OrganizationId,
    pub name: OrganizationName,
    pub slug: Slug,
    pub kind: OrganizationType,
    pub plan: Plan,
    pub is_active: bool,
    pub settings: OrganizationSettings,
    pub member_count: u64,
    pub application_count: u64,
    pub created_at: OffsetDateTime,
    pub updated_at: OffsetDateTime,
}

/// Filters of the organizations list.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OrganizationFilter {
    pub kind: Option<OrganizationType>,
    /// Case-insensitive substring of the name.
    pub search: Option<String>,
}

/// A change to an organization: only the `Some` fields change.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OrganizationChange {
    pub name: Option<OrganizationName>,
    pub slug: Option<Slug>,
    pub default_role: Option<DefaultRole>,
    pub allow_member_invite: Option<bool>,
}

impl OrganizationChange {
    /// Applies the change; returns the names of the fields that actually changed.
    pub fn apply_to(&self, org: &mut Organization) -> Vec<&'static str> {
        let mut changed = Vec::new();
        if let Some(name) = &self.name {
            if *name != org.name {
                org.name = name.clone();
                changed.push("name");
            }
        }
        if let Some(slug) = &self.slug {
            if *slug != org.slug {
                org.slug = slug.clone();
                changed.push("slug");
            }
        }
        if let Some(role) = self.default_role {
            if role != org.settings.default_role {
                org.settings.default_role = role;
                changed.push("settings.default_role");
            }
        }
        if let Some(allow) = self.allow_member_invite {
            if allow != org.settings.allow_member_invite {
                org.settings.allow_member_invite = allow;
                changed.push("settings.allow_member_invite");
            }
        }
        changed
    }
}
