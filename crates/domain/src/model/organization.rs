//! Organizations: an organization as it is kept, with its name, slug, type and settings; one
//! about to be created; a change to one; and the filters of the organizations list.

use serde::Serialize;
use time::OffsetDateTime;

use super::{
    text::{is_invisible_control, named_variants, normalized, str_ref, INVISIBLE_CONTROL},
    OrganizationId, Plan, Role, SearchTerm,
};

/// An organization's display name: 2 to 100 characters once trimmed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct OrganizationName(String);

impl OrganizationName {
    /// The fewest characters accepted, after trimming.
    pub const MIN_CHARS: usize = 2;
    /// The most characters accepted, after trimming.
    pub const MAX_CHARS: usize = 100;

    /// Trims `raw`, composes it (NFC) and checks it: 2 to 100 characters (not bytes), no
    /// control characters, no bidirectional or zero-width controls (the rule of every name:
    /// `text.rs`). The error is the message, completing "`<field>` ...".
    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        let name = normalized(raw);
        let chars = name.chars().count();
        if chars < Self::MIN_CHARS {
            return Err("must be at least 2 characters");
        }
        if chars > Self::MAX_CHARS {
            return Err("must be at most 100 characters");
        }
        if name.chars().any(char::is_control) {
            return Err("must not contain control characters");
        }
        if name.chars().any(is_invisible_control) {
            return Err(INVISIBLE_CONTROL);
        }
        Ok(Self(name))
    }

    /// A name for a user's personal workspace, built from what they are called. Always valid.
    pub fn personal_workspace_of(full_name: &str) -> Self {
        let owner: String = full_name
            .trim()
            .chars()
            .take(Self::MAX_CHARS - 12)
            .collect();
        let name = if owner.is_empty() {
            "Personal workspace".to_owned()
        } else {
            format!("{owner}'s workspace")
        };
        Self(name)
    }
}

str_ref!(OrganizationName);

/// A URL-friendly, unique organization handle: lowercase `a-z`, `0-9` and single inner hyphens,
/// 2 to 64 characters.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct Slug(String);

/// Why a slug was refused. The messages complete "`<field>` ...".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlugError {
    /// Shorter than [`Slug::MIN_LEN`] or longer than [`Slug::MAX_LEN`].
    #[error("must be 2 to 64 characters")]
    Length,
    /// A character other than `a-z`, `0-9` and `-`, or a hyphen that leads, trails or
    /// follows another.
    #[error("may contain only lowercase letters, digits and single hyphens, and may not start or end with a hyphen")]
    Characters,
}

impl Slug {
    /// The shortest slug accepted, in characters (all ASCII, so bytes too).
    pub const MIN_LEN: usize = 2;
    /// The longest slug accepted, in characters (all ASCII, so bytes too).
    pub const MAX_LEN: usize = 64;

    /// Checks `raw` as it stands, neither trimmed nor lowercased, against the rules above.
    pub fn parse(raw: &str) -> Result<Self, SlugError> {
        if raw.len() < Self::MIN_LEN || raw.len() > Self::MAX_LEN {
            return Err(SlugError::Length);
        }
        let allowed = raw
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !allowed || raw.starts_with('-') || raw.ends_with('-') || raw.contains("--") {
            return Err(SlugError::Characters);
        }
        Ok(Self(raw.to_owned()))
    }

    /// Derives a slug from a name: ASCII letters and digits kept and lowercased, everything else
    /// folded into single hyphens. A name with too little to keep gets `org`.
    pub fn generate_from(name: &str) -> Self {
        let mut slug = String::with_capacity(name.len());
        for c in name.chars() {
            if c.is_ascii_alphanumeric() {
                slug.push(c.to_ascii_lowercase());
            } else if !slug.is_empty() && !slug.ends_with('-') {
                slug.push('-');
            }
        }
        // Leave room for a "-NNN" suffix when the slug is taken.
        slug.truncate(Self::MAX_LEN - 8);
        let slug = slug.trim_end_matches('-');
        if slug.len() < Self::MIN_LEN {
            return Self("org".to_owned());
        }
        Self(slug.to_owned())
    }

    /// The `n`-th candidate when this generated slug is taken: `base`, `base-2`, `base-3`, ...
    pub fn candidate(&self, n: u32) -> Self {
        if n <= 1 {
            self.clone()
        } else {
            Self(format!("{}-{n}", self.0))
        }
    }
}

str_ref!(Slug);

/// `personal` (created with the account, only its owner) or `team`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OrganizationType {
    /// The workspace created with a user's account; it lives as long as its user and cannot
    /// be deleted.
    Personal,
    /// An organization created to work with others; its owner may delete it.
    Team,
}

named_variants!(
    OrganizationType,
    /// The type's lowercase name, as the API and the store write it.
    refused = "must be one of: personal, team",
    { Personal => "personal", Team => "team" }
);

/// An organization about to be created. `slug` is the first candidate: when it was generated
/// (`slug_generated`), the store takes the first free one of [`Slug::candidate`].
#[derive(Clone, Debug, PartialEq)]
pub struct NewOrganization {
    /// The new organization's id.
    pub id: OrganizationId,
    /// Its display name.
    pub name: OrganizationName,
    /// The slug asked for, or the first candidate of a generated one.
    pub slug: Slug,
    /// Whether `slug` was derived from the name: then a taken slug moves on to the next
    /// candidate instead of being a conflict.
    pub slug_generated: bool,
    /// Personal workspace or team.
    pub kind: OrganizationType,
    /// The plan it starts on.
    pub plan: Plan,
    /// When it is created.
    pub created_at: OffsetDateTime,
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testing::refuses_each;

    #[test]
    fn slugs_follow_the_documented_rules() {
        for ok in ["ab", "acme", "acme-corp", "a1-b2-c3", &"a".repeat(64)] {
            assert!(Slug::parse(ok).is_ok(), "{ok}");
        }
        assert_eq!(Slug::parse("a"), Err(SlugError::Length));
        assert_eq!(Slug::parse(&"a".repeat(65)), Err(SlugError::Length));
        refuses_each(
            Slug::parse,
            &["Acme", "-acme", "acme-", "ac--me", "ac me", "acmé", "ac_me"],
            SlugError::Characters,
        );
    }

    #[test]
    fn generated_slugs_are_valid_and_suffixed_when_taken() {
        let slug = Slug::generate_from("  Acme Corp. — Research & Development!! ");
        assert_eq!(slug.as_ref(), "acme-corp-research-development");
        assert_eq!(slug.candidate(1).as_ref(), "acme-corp-research-development");
        assert_eq!(
            slug.candidate(3).as_ref(),
            "acme-corp-research-development-3"
        );
        assert_eq!(Slug::generate_from("日本").as_ref(), "org");
        let long = Slug::generate_from(&"x".repeat(300));
        assert!(Slug::parse(long.candidate(999).as_ref()).is_ok());
    }

    #[test]
    fn organization_names_are_bounded() {
        assert_eq!(
            OrganizationName::parse(" A "),
            Err("must be at least 2 characters")
        );
        assert!(OrganizationName::parse("Ab").is_ok());
        assert!(OrganizationName::parse(&"é".repeat(100)).is_ok());
        assert_eq!(
            OrganizationName::parse(&"é".repeat(101)),
            Err("must be at most 100 characters")
        );
        let personal = OrganizationName::personal_workspace_of(&"z".repeat(500));
        assert!(OrganizationName::parse(personal.as_ref()).is_ok());
    }
}
