//! The permission table: what each role may do inside an organization. One place, one table.

use std::fmt;

use super::Role;

/// A dotted permission, as `403` bodies name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Permission {
    /// `organization.read`: see the organization and its settings.
    OrganizationRead,
    /// `organization.update`: change its name, slug and settings.
    OrganizationUpdate,
    /// `organization.delete`: delete the organization (the owner only).
    OrganizationDelete,
    /// `organization.members.read`: list members and pending invitations.
    MembersRead,
    /// `organization.members.create`: invite people, as any role but owner.
    MembersCreate,
    /// `organization.members.invite`: invite people as `member` or `viewer`, while the
    /// organization's `settings.allow_member_invite` is on.
    MembersInviteWhenAllowed,
    /// `organization.members.update`: change members' roles.
    MembersUpdate,
    /// `organization.members.delete`: remove members and revoke invitations.
    MembersDelete,
    /// `applications.read`: see the organization's applications.
    ApplicationsRead,
    /// `applications.manage`: register, change and delete applications.
    ApplicationsManage,
    /// `webhooks.manage`: manage webhook endpoints and their deliveries.
    WebhooksManage,
    /// `policies.manage`: set the organization's security policies.
    PoliciesManage,
    /// `branding.manage`: set the organization's white-label branding.
    BrandingManage,
    /// `sso.manage`: configure SAML single sign-on.
    SsoManage,
    /// `audit.read`: read the organization's audit log.
    AuditRead,
    /// `api_keys.create`: create API keys that act in the organization.
    ApiKeysCreate,
}

impl Permission {
    /// Every permission, in the table's order.
    pub const ALL: [Permission; 16] = [
        Self::OrganizationRead,
        Self::OrganizationUpdate,
        Self::OrganizationDelete,
        Self::MembersRead,
        Self::MembersCreate,
        Self::MembersInviteWhenAllowed,
        Self::MembersUpdate,
        Self::MembersDelete,
        Self::ApplicationsRead,
        Self::ApplicationsManage,
        Self::WebhooksManage,
        Self::PoliciesManage,
        Self::BrandingManage,
        Self::SsoManage,
        Self::AuditRead,
        Self::ApiKeysCreate,
    ];

    /// The dotted name (`organization.members.create`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::OrganizationRead => "organization.read",
            Self::OrganizationUpdate => "organization.update",
            Self::OrganizationDelete => "organization.delete",
            Self::MembersRead => "organization.members.read",
            Self::MembersCreate => "organization.members.create",
            Self::MembersInviteWhenAllowed => "organization.members.invite",
            Self::MembersUpdate => "organization.members.update",
            Self::MembersDelete => "organization.members.delete",
            Self::ApplicationsRead => "applications.read",
            Self::ApplicationsManage => "applications.manage",
            Self::WebhooksManage => "webhooks.manage",
            Self::PoliciesManage => "policies.manage",
            Self::BrandingManage => "branding.manage",
            Self::SsoManage => "sso.manage",
            Self::AuditRead => "audit.read",
            Self::ApiKeysCreate => "api_keys.create",
        }
    }
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

use Permission::*;

/// The spec's role table. Owner: full control, deleting the organization. Admin: members,
/// applications, settings, policies, webhooks, branding, SSO, the audit log. Member: read the
/// organization and its members, use applications, create what a member creates (API keys for
/// the organization; invitations as member or viewer while `settings.allow_member_invite` is
/// on, which the invitation use case checks). Viewer: read-only, everywhere in the
/// organization: it creates nothing.
const TABLE: &[(Role, &[Permission])] = &[
    (Role::Owner, &Permission::ALL),
    (
        Role::Admin,
        &[
            OrganizationRead,
            OrganizationUpdate,
            MembersRead,
            MembersCreate,
            MembersInviteWhenAllowed,
            MembersUpdate,
            MembersDelete,
            ApplicationsRead,
            ApplicationsManage,
            WebhooksManage,
            PoliciesManage,
            BrandingManage,
            SsoManage,
            AuditRead,
            ApiKeysCreate,
        ],
    ),
    (
        Role::Member,
        &[
            OrganizationRead,
            MembersRead,
            ApplicationsRead,
            MembersInviteWhenAllowed,
            ApiKeysCreate,
        ],
    ),
    (
        Role::Viewer,
        &[OrganizationRead, MembersRead, ApplicationsRead],
    ),
];

impl Role {
    /// Whether the role grants the permission.
    pub fn grants(self, permission: Permission) -> bool {
        TABLE
            .iter()
            .find(|(role, _)| *role == self)
            .is_some_and(|(_, granted)| granted.contains(&permission))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_may_do_everything() {
        assert!(Permission::ALL.iter().all(|p| Role::Owner.grants(*p)));
    }

    #[test]
    fn only_the_owner_deletes_the_organization() {
        for role in [Role::Admin, Role::Member, Role::Viewer] {
            assert!(!role.grants(OrganizationDelete), "{role}");
        }
    }

    #[test]
    fn admins_manage_members_and_settings_but_members_and_viewers_only_read() {
        for p in [
            MembersCreate,
            MembersUpdate,
            MembersDelete,
            OrganizationUpdate,
            WebhooksManage,
        ] {
            assert!(Role::Admin.grants(p));
            assert!(!Role::Member.grants(p));
            assert!(!Role::Viewer.grants(p));
        }
        for role in [Role::Member, Role::Viewer] {
            assert!(role.grants(OrganizationRead) && role.grants(MembersRead));
        }
    }

    #[test]
    fn a_viewer_only_reads() {
        let reads = [OrganizationRead, MembersRead, ApplicationsRead];
        for permission in Permission::ALL {
            assert_eq!(
                Role::Viewer.grants(permission),
                reads.contains(&permission),
                "{permission}"
            );
        }
    }

    #[test]
    fn a_member_creates_api_keys_and_invites_when_allowed_where_a_viewer_may_not() {
        for permission in [ApiKeysCreate, MembersInviteWhenAllowed] {
            assert!(Role::Owner.grants(permission), "{permission}");
            assert!(Role::Admin.grants(permission), "{permission}");
            assert!(Role::Member.grants(permission), "{permission}");
            assert!(!Role::Viewer.grants(permission), "{permission}");
        }
    }

    #[test]
    fn names_are_dotted_paths() {
        assert_eq!(MembersCreate.to_string(), "organization.members.create");
    }
}
