//! Directory sync: the users and groups an organization's identity provider (Okta, Entra ID,
//! Google Workspace, ...) provisions over SCIM 2.0, the bearer tokens it does so with, and the
//! map from its groups to roles.
//!
//! A directory user is the directory's record of a person; what it means for the organization
//! (an active member, a pending invitation, nothing) follows from its address and `active`
//! ([`UserAttributes::provisioned_address`]), and its role from the groups it is in
//! ([`GroupRoles::role_of`]). The protocol (JSON, filters, `PATCH`) is the SCIM adapter's.

use std::collections::BTreeMap;

use time::OffsetDateTime;

use super::{
    text::{parse_text, str_ref, TextError},
    AssignedRole, DirectoryGroupId, DirectoryUserId, Email, FullName, OrganizationId, Permission,
    Role, ScimTokenId, UserId,
};

/// The most SCIM tokens one organization holds: creating one more is refused.
pub const MAX_SCIM_TOKENS: u32 = 20;

/// The most addresses one directory user carries.
pub const MAX_DIRECTORY_EMAILS: usize = 10;

/// The most members one directory group holds.
pub const MAX_GROUP_MEMBERS: usize = 10_000;

/// The most group-to-role entries an organization maps.
pub const MAX_GROUP_ROLES: usize = 100;

/// The most characters of a text the directory sends (a name, an id, an address).
pub const MAX_DIRECTORY_TEXT: usize = 256;

/// A SCIM token's name: 1 to 100 characters once trimmed (`Okta`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScimTokenName(String);

impl ScimTokenName {
    /// A name as given, trimmed and composed (NFC).
    ///
    /// # Errors
    /// Why, completing "`name` ...": empty, longer than 100 characters, or holding a control
    /// character.
    pub fn parse(raw: &str) -> Result<Self, TextError> {
        parse_text(raw, 1, 100, false).map(Self)
    }
}

str_ref!(ScimTokenName);

/// A bearer token an organization's identity provider provisions with. Its secret is shown
/// once, at creation; the store keeps its SHA-256 hash.
#[derive(Clone, Debug, PartialEq)]
pub struct ScimToken {
    /// Its id.
    pub id: ScimTokenId,
    /// The one organization it provisions.
    pub organization_id: OrganizationId,
    /// Its name.
    pub name: ScimTokenName,
    /// The secret's first characters (`ghsc_AbCd`), to tell tokens apart.
    pub prefix: String,
    /// The member who created it: the token works while they are a member who may manage
    /// single sign-on there (it ends with its maker's right); invitations the directory sends
    /// name them as the inviter.
    pub created_by: UserId,
    /// When it was created.
    pub created_at: OffsetDateTime,
    /// When it was last used, if ever.
    pub last_used_at: Option<OffsetDateTime>,
}

/// A text the directory sent: 1 to [`MAX_DIRECTORY_TEXT`] characters once trimmed, on one line,
/// composed (NFC).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DirectoryText(String);

impl DirectoryText {
    /// A text as given, trimmed and composed.
    ///
    /// # Errors
    /// Why, completing "`<attribute>` ...".
    pub fn parse(raw: &str) -> Result<Self, TextError> {
        parse_text(raw, 1, MAX_DIRECTORY_TEXT, false).map(Self)
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the two are the same text but for case (SCIM's `caseExact: false`).
    pub fn eq_ignore_case(&self, other: &str) -> bool {
        self.0.to_lowercase() == other.to_lowercase()
    }
}

str_ref!(DirectoryText);

/// One of a directory user's addresses, as the directory sent it (not necessarily an address
/// Gatehouse could mail).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectoryEmail {
    /// The address.
    pub value: DirectoryText,
    /// Its kind (`work`, `home`, ...), as the directory labels it.
    pub kind: Option<DirectoryText>,
    /// Whether it is the user's primary address.
    pub primary: bool,
}

/// A directory user's name parts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DirectoryName {
    /// The whole name as displayed (`Ms. Barbara J Jensen III`).
    pub formatted: Option<DirectoryText>,
    /// The given name (`Barbara`).
    pub given_name: Option<DirectoryText>,
    /// The family name (`Jensen`).
    pub family_name: Option<DirectoryText>,
}

impl DirectoryName {
    /// Whether no part is set.
    pub fn is_empty(&self) -> bool {
        self.formatted.is_none() && self.given_name.is_none() && self.family_name.is_none()
    }
}

/// What the directory says of a user: the attributes a SCIM `User` carries that Gatehouse
/// keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserAttributes {
    /// The directory's unique name of the user, unique in the organization but for case
    /// (usually their address).
    pub user_name: DirectoryText,
    /// The directory's own id of the user.
    pub external_id: Option<DirectoryText>,
    /// The name to show.
    pub display_name: Option<DirectoryText>,
    /// The name's parts.
    pub name: DirectoryName,
    /// Their addresses (at most [`MAX_DIRECTORY_EMAILS`]).
    pub emails: Vec<DirectoryEmail>,
    /// Whether the directory lets them in: `false` removes them from the organization.
    pub active: bool,
}

impl UserAttributes {
    /// The address the person is known by: `userName` when it is an address, else the
    /// primary address (or the only one). `None` when neither is an address.
    pub fn address(&self) -> Option<Email> {
        if let Ok(email) = Email::parse(self.user_name.as_str()) {
            return Some(email);
        }
        let primary =
            self.emails
                .iter()
                .find(|email| email.primary)
                .or(match self.emails.as_slice() {
                    [only] => Some(only),
                    _ => None,
                })?;
        Email::parse(primary.value.as_str()).ok()
    }

    /// The address whose person belongs to the organization because of this user: its
    /// [`address`](Self::address) while it is `active`.
    pub fn provisioned_address(&self) -> Option<Email> {
        self.active.then(|| self.address()).flatten()
    }

    /// The full name an account made for this user gets: `name.formatted`, the given and
    /// family names, `displayName`, or the address's local part.
    pub fn full_name(&self, email: &Email) -> Option<FullName> {
        let parts = [&self.name.given_name, &self.name.family_name]
            .into_iter()
            .flatten()
            .map(DirectoryText::as_str)
            .collect::<Vec<_>>()
            .join(" ");
        let candidates = [
            self.name.formatted.as_ref().map(DirectoryText::as_str),
            Some(parts.as_str()),
            self.display_name.as_ref().map(DirectoryText::as_str),
            Some(email.local_part()),
        ];
        for candidate in candidates.into_iter().flatten() {
            if let Ok(name) = FullName::parse(candidate) {
                return Some(name);
            }
        }
        None
    }
}

/// A user the organization's directory provisioned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectoryUser {
    /// Its id (the SCIM resource's `id`).
    pub id: DirectoryUserId,
    /// The organization whose directory it belongs to.
    pub organization_id: OrganizationId,
    /// What the directory says of it.
    pub attributes: UserAttributes,
    /// When it was provisioned.
    pub created_at: OffsetDateTime,
    /// When it last changed.
    pub updated_at: OffsetDateTime,
}

/// What the directory says of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupAttributes {
    /// Its name, unique in the organization but for case; what [`GroupRoles`] maps.
    pub display_name: DirectoryText,
    /// The directory's own id of the group.
    pub external_id: Option<DirectoryText>,
    /// Its members, each once, in order (at most [`MAX_GROUP_MEMBERS`]).
    pub members: Vec<DirectoryUserId>,
}

impl GroupAttributes {
    /// The attributes with each member once, in order.
    pub fn normalized(mut self) -> Self {
        self.members.sort();
        self.members.dedup();
        self
    }
}

/// A group the organization's directory provisioned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectoryGroup {
    /// Its id (the SCIM resource's `id`).
    pub id: DirectoryGroupId,
    /// The organization whose directory it belongs to.
    pub organization_id: OrganizationId,
    /// What the directory says of it.
    pub attributes: GroupAttributes,
    /// When it was provisioned.
    pub created_at: OffsetDateTime,
    /// When it last changed.
    pub updated_at: OffsetDateTime,
}

/// Which role the members of a directory group get: `{group display name: role}`, the names
/// compared without case. A user in several mapped groups gets the one granting the most; in
/// none, the organization's `settings.default_role`. `owner` is never mapped: ownership moves
/// only by a transfer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupRoles(BTreeMap<DirectoryText, AssignedRole>);

/// Why a group-to-role map was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupRolesError {
    /// More entries than [`MAX_GROUP_ROLES`].
    #[error("at most {MAX_GROUP_ROLES} groups can be mapped")]
    TooMany,
    /// `owner` mapped.
    #[error("group {0:?}: the owner role cannot be given by the directory (an organization has one owner)")]
    Owner(String),
    /// Two names that differ only in case.
    #[error("group {0:?} is mapped twice")]
    Duplicate(String),
}

impl GroupRoles {
    /// The map, from its entries.
    ///
    /// # Errors
    /// [`GroupRolesError`]: too many entries, `owner`, or a name twice but for case.
    pub fn new(
        entries: impl IntoIterator<Item = (DirectoryText, AssignedRole)>,
    ) -> Result<Self, GroupRolesError> {
        let mut map = BTreeMap::new();
        for (group, role) in entries {
            if role.is(Role::Owner) {
                return Err(GroupRolesError::Owner(group.as_str().to_owned()));
            }
            if map
                .keys()
                .any(|known: &DirectoryText| known.eq_ignore_case(group.as_str()))
            {
                return Err(GroupRolesError::Duplicate(group.as_str().to_owned()));
            }
            map.insert(group, role);
            if map.len() > MAX_GROUP_ROLES {
                return Err(GroupRolesError::TooMany);
            }
        }
        Ok(Self(map))
    }

    /// The entries, by group name.
    pub fn iter(&self) -> impl Iterator<Item = (&DirectoryText, &AssignedRole)> {
        self.0.iter()
    }

    /// The role mapped to the group, if any.
    pub fn role_of_group(&self, display_name: &str) -> Option<&AssignedRole> {
        self.0
            .iter()
            .find(|(group, _)| group.eq_ignore_case(display_name))
            .map(|(_, role)| role)
    }

    /// The role of someone in these groups: the mapped role granting the most (then the
    /// built-in one, then the first by name), else `default`.
    pub fn role_of<'a>(
        &self,
        groups: impl IntoIterator<Item = &'a str>,
        default: AssignedRole,
    ) -> AssignedRole {
        groups
            .into_iter()
            .filter_map(|group| self.role_of_group(group))
            .max_by(|a, b| rank(a).cmp(&rank(b)))
            .cloned()
            .unwrap_or(default)
    }
}

/// How much a role grants, to choose among a user's mapped roles: the number of permissions,
/// a built-in role before a custom one with as many, then the name (reversed, so that the
/// first name wins a tie under `max_by`).
fn rank(role: &AssignedRole) -> (usize, bool, std::cmp::Reverse<String>) {
    (
        role.permissions().iter().count(),
        matches!(role, AssignedRole::BuiltIn(_)),
        std::cmp::Reverse(role.name().to_owned()),
    )
}

/// What a SCIM token may do in its organization: provision members, as an admin would (never
/// the owner's own permissions).
pub const DIRECTORY_PERMISSIONS: [Permission; 4] = [
    Permission::MembersRead,
    Permission::MembersCreate,
    Permission::MembersUpdate,
    Permission::MembersDelete,
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{PermissionSet, RoleKey};

    fn text(s: &str) -> DirectoryText {
        DirectoryText::parse(s).unwrap()
    }

    fn user(user_name: &str, emails: &[(&str, bool)]) -> UserAttributes {
        UserAttributes {
            user_name: text(user_name),
            external_id: None,
            display_name: None,
            name: DirectoryName::default(),
            emails: emails
                .iter()
                .map(|(value, primary)| DirectoryEmail {
                    value: text(value),
                    kind: None,
                    primary: *primary,
                })
                .collect(),
            active: true,
        }
    }

    #[test]
    fn the_address_is_the_user_name_when_it_is_one_else_the_primary_email() {
        let by_name = user("ada@acme.test", &[("other@acme.test", true)]);
        assert_eq!(by_name.address().unwrap().as_ref(), "ada@acme.test");
        let by_primary = user("ada", &[("a@x.test", false), ("ada@acme.test", true)]);
        assert_eq!(by_primary.address().unwrap().as_ref(), "ada@acme.test");
        let only = user("ada", &[("ada@acme.test", false)]);
        assert_eq!(only.address().unwrap().as_ref(), "ada@acme.test");
        let ambiguous = user("ada", &[("a@x.test", false), ("b@x.test", false)]);
        assert_eq!(ambiguous.address(), None);
        assert_eq!(user("ada", &[("not an address", true)]).address(), None);
    }

    #[test]
    fn an_inactive_user_provisions_no_one() {
        let mut ada = user("ada@acme.test", &[]);
        assert!(ada.provisioned_address().is_some());
        ada.active = false;
        assert_eq!(ada.provisioned_address(), None);
    }

    #[test]
    fn the_full_name_comes_from_the_name_parts_first() {
        let mut ada = user("ada@acme.test", &[]);
        let email = ada.address().unwrap();
        assert_eq!(ada.full_name(&email).unwrap().as_ref(), "ada");
        ada.display_name = Some(text("Countess"));
        assert_eq!(ada.full_name(&email).unwrap().as_ref(), "Countess");
        ada.name.given_name = Some(text("Ada"));
        ada.name.family_name = Some(text("Lovelace"));
        assert_eq!(ada.full_name(&email).unwrap().as_ref(), "Ada Lovelace");
        ada.name.formatted = Some(text("Ada King"));
        assert_eq!(ada.full_name(&email).unwrap().as_ref(), "Ada King");
    }

    #[test]
    fn a_user_in_several_groups_gets_the_role_granting_the_most() {
        let auditor = AssignedRole::Custom {
            key: RoleKey::parse("auditor").unwrap(),
            permissions: PermissionSet::of([Permission::MembersRead]),
        };
        let roles = GroupRoles::new([
            (text("Engineering"), Role::Member.into()),
            (text("Admins"), Role::Admin.into()),
            (text("Audit"), auditor.clone()),
        ])
        .unwrap();
        let default: AssignedRole = Role::Viewer.into();
        assert_eq!(
            roles.role_of(["engineering", "admins"], default.clone()),
            Role::Admin
        );
        assert_eq!(
            roles.role_of(["ENGINEERING"], default.clone()),
            Role::Member
        );
        assert_eq!(roles.role_of(["Audit"], default.clone()), auditor);
        assert_eq!(roles.role_of(["Sales"], default.clone()), Role::Viewer);
        assert_eq!(roles.role_of([], default), Role::Viewer);
    }

    #[test]
    fn the_owner_is_never_mapped_and_a_name_is_mapped_once() {
        assert_eq!(
            GroupRoles::new([(text("Founders"), Role::Owner.into())]),
            Err(GroupRolesError::Owner("Founders".into()))
        );
        assert_eq!(
            GroupRoles::new([
                (text("Admins"), Role::Admin.into()),
                (text("ADMINS"), Role::Member.into())
            ]),
            Err(GroupRolesError::Duplicate("ADMINS".into()))
        );
    }
}
