//! Custom roles: an organization's own roles over the permission catalogue, given to members,
//! invitations and service accounts like a built-in role. The permission check reads them as it
//! reads the built-in table ([`AssignedRole::grants`]): a custom role is data, not a second path.
//! Here too are the role held ([`AssignedRole`]) and the role asked for by name ([`RoleRef`]),
//! built-in or custom alike.

use std::{fmt, str::FromStr};

use serde::{Serialize, Serializer};
use time::OffsetDateTime;

use super::{
    text::{parse_text, str_display, str_ref, TextError},
    OrganizationId, Permission, Role,
};

/// A set of permissions, as a role holds them.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct PermissionSet(u32);

impl PermissionSet {
    fn bit(permission: Permission) -> u32 {
        let index = Permission::ALL
            .iter()
            .position(|p| *p == permission)
            .unwrap_or_default();
        1 << index
    }

    /// The set of these permissions.
    pub fn of(permissions: impl IntoIterator<Item = Permission>) -> Self {
        Self(
            permissions
                .into_iter()
                .fold(0, |set, permission| set | Self::bit(permission)),
        )
    }

    /// What a built-in role grants, as the permission table says.
    pub fn of_role(role: Role) -> Self {
        Self::of(
            Permission::ALL
                .into_iter()
                .filter(|permission| role.grants(*permission)),
        )
    }

    /// Whether the set holds the permission.
    pub fn contains(self, permission: Permission) -> bool {
        self.0 & Self::bit(permission) != 0
    }

    /// The permissions held, in the catalogue's order.
    pub fn iter(self) -> impl Iterator<Item = Permission> {
        Permission::ALL
            .into_iter()
            .filter(move |permission| self.contains(*permission))
    }

    /// Whether every permission of this set is in `other`.
    pub fn is_within(self, other: Self) -> bool {
        self.0 & !other.0 == 0
    }

    /// Whether the set holds none.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Debug for PermissionSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.iter().map(Permission::as_str))
            .finish()
    }
}

impl Serialize for PermissionSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter().map(Permission::as_str))
    }
}

/// The permissions of a custom role, as given: every name in the catalogue, none of the owner's
/// own.
///
/// # Errors
/// Why, completing "`permissions` ...": a name the catalogue does not have, or one of the
/// owner's own permissions.
pub fn custom_permissions<'a>(
    names: impl IntoIterator<Item = &'a str>,
) -> Result<PermissionSet, String> {
    let mut permissions = Vec::new();
    for name in names {
        let permission = Permission::parse(name).ok_or_else(|| {
            format!("has {name:?}, which is no permission: GET /api/v1/iam/permissions lists them")
        })?;
        if Permission::OWNER_ONLY.contains(&permission) {
            return Err(format!(
                "has {name:?}, which is the owner's alone: no custom role may hold it"
            ));
        }
        permissions.push(permission);
    }
    Ok(PermissionSet::of(permissions))
}

/// A custom role's key (`billing-manager`): lowercase letters, digits and single inner hyphens,
/// 2 to 40 characters, and not the name of a built-in role.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RoleKey(String);

impl RoleKey {
    /// Checks `raw` as it stands.
    ///
    /// # Errors
    /// Why, completing "`key` ...".
    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        if raw.len() < 2 || raw.len() > 40 {
            return Err("must be 2 to 40 characters");
        }
        let allowed = raw
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !allowed || raw.starts_with('-') || raw.ends_with('-') || raw.contains("--") {
            return Err("may contain only lowercase letters, digits and single hyphens, and may not start or end with a hyphen");
        }
        if raw.parse::<Role>().is_ok() {
            return Err("is a built-in role's name");
        }
        Ok(Self(raw.to_owned()))
    }
}

str_ref!(RoleKey);

str_display!(RoleKey);

/// A custom role's display name: 1 to 100 characters once trimmed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoleName(String);

impl RoleName {
    /// A name as given, trimmed and composed (NFC).
    ///
    /// # Errors
    /// Why, completing "`name` ...".
    pub fn parse(raw: &str) -> Result<Self, TextError> {
        parse_text(raw, 1, 100, false).map(Self)
    }
}

str_ref!(RoleName);

/// A custom role's description: at most 500 characters once trimmed (may be empty).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleDescription(String);

impl RoleDescription {
    /// A description as given, trimmed and composed (NFC).
    ///
    /// # Errors
    /// Why, completing "`description` ...".
    pub fn parse(raw: &str) -> Result<Self, TextError> {
        parse_text(raw, 0, 500, true).map(Self)
    }
}

str_ref!(RoleDescription);

/// A role an organization defined.
#[derive(Clone, Debug, PartialEq)]
pub struct CustomRole {
    /// The organization it belongs to.
    pub organization_id: OrganizationId,
    /// Its key, given to members like a built-in role's name.
    pub key: RoleKey,
    /// Its name.
    pub name: RoleName,
    /// What it is for.
    pub description: RoleDescription,
    /// What it grants: never one of the owner's own permissions.
    pub permissions: PermissionSet,
    /// When it was defined.
    pub created_at: OffsetDateTime,
    /// When it last changed.
    pub updated_at: OffsetDateTime,
}

/// A role as an organization's list of roles shows it: a built-in one, or one it defined.
#[derive(Clone, Debug, PartialEq)]
pub enum ListedRole {
    /// `owner`, `admin`, `member` or `viewer`, granting what the permission table says.
    BuiltIn(Role),
    /// A custom role of the organization.
    Custom(CustomRole),
}

/// A role as asked for by name: a built-in one, or a custom one of the organization, by key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoleRef {
    /// `owner`, `admin`, `member` or `viewer`.
    BuiltIn(Role),
    /// A custom role's key, to be found in the organization.
    Custom(RoleKey),
}

impl RoleRef {
    /// The name asked for: a built-in role's, or a custom role's key.
    pub fn name(&self) -> &str {
        match self {
            Self::BuiltIn(role) => role.as_str(),
            Self::Custom(key) => key.as_ref(),
        }
    }
}

impl FromStr for RoleRef {
    type Err = &'static str;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Ok(role) = s.parse::<Role>() {
            return Ok(Self::BuiltIn(role));
        }
        RoleKey::parse(s)
            .map(Self::Custom)
            .map_err(|_| "must be owner, admin, member, viewer or the key of one of the organization's custom roles")
    }
}

/// The role a member, an invitation or a service account holds: a built-in one, or a custom
/// one with what it grants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AssignedRole {
    /// A built-in role, granting what the permission table says.
    BuiltIn(Role),
    /// A custom role of the organization.
    Custom {
        /// Its key.
        key: RoleKey,
        /// What it grants.
        permissions: PermissionSet,
    },
}

impl AssignedRole {
    /// Its name: the built-in role's, or the custom role's key.
    pub fn name(&self) -> &str {
        match self {
            Self::BuiltIn(role) => role.as_str(),
            Self::Custom { key, .. } => key.as_ref(),
        }
    }

    /// What it grants.
    pub fn permissions(&self) -> PermissionSet {
        match self {
            Self::BuiltIn(role) => PermissionSet::of_role(*role),
            Self::Custom { permissions, .. } => *permissions,
        }
    }

    /// Whether it grants the permission: the one check, for every kind of role.
    pub fn grants(&self, permission: Permission) -> bool {
        match self {
            Self::BuiltIn(role) => role.grants(permission),
            Self::Custom { permissions, .. } => permissions.contains(permission),
        }
    }

    /// Whether it is this built-in role.
    pub fn is(&self, role: Role) -> bool {
        matches!(self, Self::BuiltIn(own) if *own == role)
    }

    /// The role of this custom role's definition.
    pub fn of(role: &CustomRole) -> Self {
        Self::Custom {
            key: role.key.clone(),
            permissions: role.permissions,
        }
    }
}

impl PartialEq<Role> for AssignedRole {
    fn eq(&self, other: &Role) -> bool {
        self.is(*other)
    }
}

impl From<Role> for AssignedRole {
    fn from(role: Role) -> Self {
        Self::BuiltIn(role)
    }
}

impl fmt::Display for AssignedRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for AssignedRole {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_holds_what_it_was_made_of_and_a_role_what_the_table_says() {
        let set = PermissionSet::of([Permission::AuditRead, Permission::MembersRead]);
        assert!(set.contains(Permission::AuditRead));
        assert!(!set.contains(Permission::MembersUpdate));
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            [Permission::MembersRead, Permission::AuditRead]
        );
        for role in Role::ALL {
            for permission in Permission::ALL {
                assert_eq!(
                    PermissionSet::of_role(role).contains(permission),
                    role.grants(permission)
                );
            }
        }
        assert!(set.is_within(PermissionSet::of_role(Role::Admin)));
        assert!(!PermissionSet::of_role(Role::Admin).is_within(set));
    }

    #[test]
    fn a_custom_role_never_holds_the_owners_own_permissions() {
        assert!(custom_permissions(["audit.read", "organization.members.read"]).is_ok());
        for owners in ["organization.delete", "organization.transfer_ownership"] {
            assert_eq!(
                custom_permissions([owners]),
                Err(format!(
                    "has {owners:?}, which is the owner's alone: no custom role may hold it"
                ))
            );
        }
        assert_eq!(
            custom_permissions(["audit.read", "everything"]),
            Err("has \"everything\", which is no permission: GET /api/v1/iam/permissions lists them".to_owned())
        );
    }

    #[test]
    fn a_key_is_a_slug_that_is_no_built_in_role() {
        assert!(RoleKey::parse("billing-manager").is_ok());
        assert!(RoleKey::parse("auditor2").is_ok());
        let characters = "may contain only lowercase letters, digits and single hyphens, and may not start or end with a hyphen";
        for (bad, why) in [
            ("admin", "is a built-in role's name"),
            ("owner", "is a built-in role's name"),
            ("a", "must be 2 to 40 characters"),
            ("", "must be 2 to 40 characters"),
            (&"a".repeat(41), "must be 2 to 40 characters"),
            ("Billing", characters),
            ("-x", characters),
            ("x-", characters),
            ("a--b", characters),
            ("a b", characters),
        ] {
            assert_eq!(RoleKey::parse(bad), Err(why), "{bad:?}");
        }
        assert_eq!("admin".parse(), Ok(RoleRef::BuiltIn(Role::Admin)));
        assert_eq!(
            "auditor".parse(),
            Ok(RoleRef::Custom(RoleKey::parse("auditor").unwrap()))
        );
        assert_eq!(
            "Not A Role".parse::<RoleRef>(),
            Err("must be owner, admin, member, viewer or the key of one of the organization's custom roles")
        );
    }

    #[test]
    fn an_assigned_role_grants_by_the_table_or_by_its_set() {
        let auditor = AssignedRole::Custom {
            key: RoleKey::parse("auditor").unwrap(),
            permissions: PermissionSet::of([Permission::AuditRead]),
        };
        assert!(auditor.grants(Permission::AuditRead));
        assert!(!auditor.grants(Permission::MembersRead));
        assert_eq!(auditor.name(), "auditor");
        assert!(AssignedRole::from(Role::Viewer).grants(Permission::MembersRead));
        assert!(AssignedRole::from(Role::Owner).is(Role::Owner));
        assert!(!auditor.is(Role::Owner));
    }
}
