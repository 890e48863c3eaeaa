use time::OffsetDateTime;

use super::{OrganizationId, OrganizationName, OrganizationType, Plan, Role, SearchTerm, Slug};

/// The role new members get by default: `member` or `viewer`, never more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultRole {
    /// New members get [`Role::Member`]; the default.
    Member,
    /// New members get [`Role::Viewer`].
    Viewer,
}

impl DefaultRole {
    /// The organization role new members get.
    pub const fn role(self) -> Role {
        match self {
            Self::Member => Role::Member,
            Self::Viewer => Role::Viewer,
        }
    }

    /// Parses the role's lowercase name, `member` or `viewer`; the error is the message.
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
    /// The role new members get by default.
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
    /// The organization's id.
    pub id: OrganizationId,
    /// Its display name.
    pub name: OrganizationName,
    /// Its unique handle.
    pub slug: Slug,
    /// Personal workspace or team.
    pub kind: OrganizationType,
    /// The plan it is on, which decides its features and rate limit.
    pub plan: Plan,
    /// `true` while the organization is live; `false` once it is deleted (kept for the
    /// retention period).
    pub is_active: bool,
    /// The default role of new members, and whether members may invite.
    pub settings: OrganizationSettings,
    /// How many members have joined; pending invitations are not counted.
    pub member_count: u64,
    /// How many applications it has registered.
    pub application_count: u64,
    /// When it was created.
    pub created_at: OffsetDateTime,
    /// When it last changed.
    pub updated_at: OffsetDateTime,
}

/// Filters of the organizations list.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OrganizationFilter {
    /// Only organizations of this type; `None` for both.
    pub kind: Option<OrganizationType>,
    /// Case-insensitive substring of the name.
    pub search: Option<SearchTerm>,
}

/// A change to an organization: only the `Some` fields change.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OrganizationChange {
    /// The new display name.
    pub name: Option<OrganizationName>,
    /// The new handle; it must not be taken.
    pub slug: Option<Slug>,
    /// The new default role of new members.
    pub default_role: Option<DefaultRole>,
    /// Whether members may now invite.
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
