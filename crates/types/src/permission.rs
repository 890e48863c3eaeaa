//! The permission table: what each role may do inside an organization. One place, one table.
//! Beside it, Gatehouse's own API scopes and what each grants, which narrow a token's role.

use std::fmt;

use crate::{Role, Scope};

/// A dotted permission, as `403` bodies name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Permission {
    /// `organization.read`: see the organization and its settings.
    OrganizationRead,
    /// `organization.update`: change its name, slug and settings.
    OrganizationUpdate,
    /// `organization.delete`: delete the organization (the owner only).
    OrganizationDelete,
    /// `organization.transfer_ownership`: hand the organization to another member (the owner
    /// only, with their password).
    OwnershipTransfer,
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
    /// `webhooks.read`: see webhook endpoints and their delivery logs.
    WebhooksRead,
    /// `webhooks.manage`: manage webhook endpoints and their deliveries.
    WebhooksManage,
    /// `policies.manage`: set the organization's security policies.
    PoliciesManage,
    /// `branding.manage`: set the organization's white-label branding.
    BrandingManage,
    /// `sso.manage`: configure SAML single sign-on and directory sync (SCIM tokens, the map
    /// from directory groups to roles).
    SsoManage,
    /// `audit.read`: read the organization's audit log.
    AuditRead,
    /// `api_keys.create`: create API keys that act in the organization.
    ApiKeysCreate,
    /// `api_keys.manage`: see every key that acts in the organization (never its secret) and
    /// revoke any of them.
    ApiKeysManage,
    /// `service_accounts.manage`: create, change and delete service accounts and their keys.
    ServiceAccountsManage,
    /// `roles.manage`: define, change and delete the organization's custom roles.
    RolesManage,
    /// `domains.manage`: claim, verify and remove the organization's email domains.
    DomainsManage,
}

impl Permission {
    /// Every permission, in the table's order.
    pub const ALL: [Permission; 22] = [
        Self::OrganizationRead,
        Self::OrganizationUpdate,
        Self::OrganizationDelete,
        Self::OwnershipTransfer,
        Self::MembersRead,
        Self::MembersCreate,
        Self::MembersInviteWhenAllowed,
        Self::MembersUpdate,
        Self::MembersDelete,
        Self::ApplicationsRead,
        Self::ApplicationsManage,
        Self::WebhooksRead,
        Self::WebhooksManage,
        Self::PoliciesManage,
        Self::BrandingManage,
        Self::SsoManage,
        Self::AuditRead,
        Self::ApiKeysCreate,
        Self::ApiKeysManage,
        Self::ServiceAccountsManage,
        Self::RolesManage,
        Self::DomainsManage,
    ];

    /// The dotted name (`organization.members.create`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::OrganizationRead => "organization.read",
            Self::OrganizationUpdate => "organization.update",
            Self::OrganizationDelete => "organization.delete",
            Self::OwnershipTransfer => "organization.transfer_ownership",
            Self::MembersRead => "organization.members.read",
            Self::MembersCreate => "organization.members.create",
            Self::MembersInviteWhenAllowed => "organization.members.invite",
            Self::MembersUpdate => "organization.members.update",
            Self::MembersDelete => "organization.members.delete",
            Self::ApplicationsRead => "applications.read",
            Self::ApplicationsManage => "applications.manage",
            Self::WebhooksRead => "webhooks.read",
            Self::WebhooksManage => "webhooks.manage",
            Self::PoliciesManage => "policies.manage",
            Self::BrandingManage => "branding.manage",
            Self::SsoManage => "sso.manage",
            Self::AuditRead => "audit.read",
            Self::ApiKeysCreate => "api_keys.create",
            Self::ApiKeysManage => "api_keys.manage",
            Self::ServiceAccountsManage => "service_accounts.manage",
            Self::RolesManage => "roles.manage",
            Self::DomainsManage => "domains.manage",
        }
    }

    /// What the permission lets its holder do, for the catalogue.
    pub const fn description(self) -> &'static str {
        match self {
            Self::OrganizationRead => "See the organization and its settings",
            Self::OrganizationUpdate => "Change the organization's name, slug and settings",
            Self::OrganizationDelete => "Delete the organization (the owner only)",
            Self::OwnershipTransfer => "Hand the organization to another member (the owner only)",
            Self::MembersRead => "List members and pending invitations",
            Self::MembersCreate => "Invite people, as any role but owner",
            Self::MembersInviteWhenAllowed => {
                "Invite people as member or viewer, while the organization allows members to invite"
            }
            Self::MembersUpdate => "Change members' roles",
            Self::MembersDelete => "Remove members and revoke invitations",
            Self::ApplicationsRead => "See the organization's applications",
            Self::ApplicationsManage => "Register, change and delete applications",
            Self::WebhooksRead => "See webhook endpoints and their delivery logs",
            Self::WebhooksManage => "Manage webhook endpoints and their deliveries",
            Self::PoliciesManage => "Set the organization's security policies",
            Self::BrandingManage => "Set the organization's branding",
            Self::SsoManage => "Configure SAML single sign-on and directory sync (SCIM)",
            Self::AuditRead => "Read the organization's audit log",
            Self::ApiKeysCreate => "Create API keys that act in the organization",
            Self::ApiKeysManage => "See and revoke every API key that acts in the organization",
            Self::ServiceAccountsManage => {
                "Create, change and delete service accounts and their keys"
            }
            Self::RolesManage => "Define, change and delete the organization's custom roles",
            Self::DomainsManage => "Claim, verify and remove the organization's email domains",
        }
    }

    /// The owner's own permissions: no other role, built-in or custom, holds them.
    pub const OWNER_ONLY: [Permission; 2] = [Self::OrganizationDelete, Self::OwnershipTransfer];

    /// The permission a dotted name names (the inverse of [`Permission::as_str`]); `None` for
    /// any other name, such as one a newer Gatehouse added, which a reader should ignore.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|permission| permission.as_str() == name)
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
            WebhooksRead,
            WebhooksManage,
            PoliciesManage,
            BrandingManage,
            SsoManage,
            AuditRead,
            ApiKeysCreate,
            ApiKeysManage,
            ServiceAccountsManage,
            RolesManage,
            DomainsManage,
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

/// One of Gatehouse's own API scopes. An OAuth token that carries any of them acts within its
/// user's role narrowed to what they grant; a machine token (`client_credentials`) acts with
/// exactly what they grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ApiScope {
    /// `org:read`: see the organization, its applications and its audit log.
    OrgRead,
    /// `org:write`: change the organization's settings, applications, policies, branding and
    /// single sign-on.
    OrgWrite,
    /// `members:read`: list members and pending invitations.
    MembersRead,
    /// `members:write`: invite, change roles, remove members and revoke invitations.
    MembersWrite,
    /// `webhooks:read`: see webhook endpoints and their delivery logs.
    WebhooksRead,
    /// `webhooks:write`: create, change, test and delete endpoints, retry deliveries.
    WebhooksWrite,
}

/// What each API scope grants. Deleting or handing over the organization, creating API keys,
/// managing the organization's keys, its service accounts and its custom roles are in none: only a token that
/// carries no API scope (acting with the user's whole role) does any of them.
const SCOPES: &[(ApiScope, &[Permission])] = &[
    (
        ApiScope::OrgRead,
        &[OrganizationRead, ApplicationsRead, AuditRead],
    ),
    (
        ApiScope::OrgWrite,
        &[
            OrganizationUpdate,
            ApplicationsManage,
            PoliciesManage,
            BrandingManage,
            SsoManage,
            DomainsManage,
        ],
    ),
    (ApiScope::MembersRead, &[MembersRead]),
    (
        ApiScope::MembersWrite,
        &[
            MembersCreate,
            MembersInviteWhenAllowed,
            MembersUpdate,
            MembersDelete,
        ],
    ),
    (ApiScope::WebhooksRead, &[WebhooksRead]),
    (ApiScope::WebhooksWrite, &[WebhooksManage]),
];

impl ApiScope {
    /// Every API scope, in the documented order.
    pub const ALL: [ApiScope; 6] = [
        Self::OrgRead,
        Self::OrgWrite,
        Self::MembersRead,
        Self::MembersWrite,
        Self::WebhooksRead,
        Self::WebhooksWrite,
    ];

    /// What the scope lets an application do, as the consent page tells the user.
    pub const fn description(self) -> &'static str {
        match self {
            Self::OrgRead => "See the organization, its applications and its audit log",
            Self::OrgWrite => {
                "Change the organization's settings, applications, policies, branding and single sign-on"
            }
            Self::MembersRead => "List the organization's members and pending invitations",
            Self::MembersWrite => "Invite members, change their roles and remove them",
            Self::WebhooksRead => "See webhook endpoints and their delivery logs",
            Self::WebhooksWrite => "Create, change, test and delete webhook endpoints",
        }
    }

    /// The scope token (`members:read`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::OrgRead => "org:read",
            Self::OrgWrite => "org:write",
            Self::MembersRead => "members:read",
            Self::MembersWrite => "members:write",
            Self::WebhooksRead => "webhooks:read",
            Self::WebhooksWrite => "webhooks:write",
        }
    }

    /// The API scope a scope token names; `None` for any other token (`openid`, a free-form
    /// one).
    pub fn parse(token: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|scope| scope.as_str() == token)
    }

    /// Whether the scope grants the permission.
    pub fn grants(self, permission: Permission) -> bool {
        SCOPES
            .iter()
            .find(|(scope, _)| *scope == self)
            .is_some_and(|(_, granted)| granted.contains(&permission))
    }
}

impl fmt::Display for ApiScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The API scopes among a token's scope, each once, in the scope's order. Empty: the token is
/// not narrowed (it acts with the user's role).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiScopes(Vec<ApiScope>);

impl ApiScopes {
    /// The API scopes `scope` names; its other tokens are not Gatehouse's to interpret.
    pub fn of(scope: &Scope) -> Self {
        Self(
            scope
                .tokens()
                .iter()
                .filter_map(|token| ApiScope::parse(token))
                .collect(),
        )
    }

    /// Whether no API scope is among them.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The scopes, in order.
    pub fn scopes(&self) -> &[ApiScope] {
        &self.0
    }

    /// Whether one of them grants the permission.
    pub fn grant(&self, permission: Permission) -> bool {
        self.0.iter().any(|scope| scope.grants(permission))
    }

    /// Whether every one of these scopes is among `granted` (nothing asked is always covered).
    pub fn covered_by(&self, granted: &ApiScopes) -> bool {
        self.0.iter().all(|scope| granted.0.contains(scope))
    }

    /// These scopes and the ones of `other` not among them, in that order.
    pub fn union(&self, other: &ApiScopes) -> ApiScopes {
        let mut all = self.0.clone();
        all.extend(other.0.iter().filter(|scope| !self.0.contains(scope)));
        Self(all)
    }

    /// Whether a token with these scopes may use a permission its user's role grants: any
    /// permission when it carries none, else only those its scopes grant.
    pub fn narrow(&self, permission: Permission) -> bool {
        self.is_empty() || self.grant(permission)
    }
}

impl fmt::Display for ApiScopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.0.iter().map(|scope| scope.as_str()).collect();
        f.write_str(&names.join(" "))
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
    fn only_the_owner_deletes_or_hands_over_the_organization() {
        for role in [Role::Admin, Role::Member, Role::Viewer] {
            assert!(!role.grants(OrganizationDelete), "{role}");
            assert!(!role.grants(OwnershipTransfer), "{role}");
        }
    }

    #[test]
    fn owners_and_admins_manage_service_accounts_and_the_organizations_keys() {
        for role in [Role::Owner, Role::Admin] {
            assert!(role.grants(ServiceAccountsManage), "{role}");
            assert!(role.grants(ApiKeysManage), "{role}");
        }
        for role in [Role::Member, Role::Viewer] {
            assert!(!role.grants(ServiceAccountsManage), "{role}");
            assert!(!role.grants(ApiKeysManage), "{role}");
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
    fn every_permission_parses_back_from_its_name() {
        for permission in Permission::ALL {
            assert_eq!(Permission::parse(permission.as_str()), Some(permission));
        }
        assert_eq!(Permission::parse("organization.billing.read"), None);
        assert_eq!(Permission::parse("Organization.Read"), None);
    }

    #[test]
    fn names_are_dotted_paths() {
        assert_eq!(MembersCreate.to_string(), "organization.members.create");
    }

    fn scopes(raw: &str) -> ApiScopes {
        ApiScopes::of(&Scope::parse(raw).unwrap())
    }

    #[test]
    fn api_scopes_are_picked_out_of_a_free_form_scope() {
        let picked = scopes("openid org:read email members:write org:read");
        assert_eq!(picked.scopes(), [ApiScope::OrgRead, ApiScope::MembersWrite]);
        assert_eq!(picked.to_string(), "org:read members:write");
        assert!(scopes("openid profile read:user").is_empty());
        for scope in ApiScope::ALL {
            assert_eq!(ApiScope::parse(scope.as_str()), Some(scope));
        }
        assert_eq!(ApiScope::parse("org:delete"), None);
    }

    #[test]
    fn each_api_scope_grants_its_reads_or_writes_only() {
        let reads = scopes("org:read members:read webhooks:read");
        for permission in [
            OrganizationRead,
            ApplicationsRead,
            AuditRead,
            MembersRead,
            WebhooksRead,
        ] {
            assert!(reads.grant(permission), "{permission}");
        }
        for permission in [
            OrganizationUpdate,
            MembersCreate,
            MembersUpdate,
            MembersDelete,
            WebhooksManage,
            ApplicationsManage,
        ] {
            assert!(!reads.grant(permission), "{permission}");
        }
        assert!(scopes("webhooks:write").grant(WebhooksManage));
        assert!(!scopes("webhooks:write").grant(WebhooksRead));
        assert!(scopes("members:write").grant(MembersUpdate));
        assert!(!scopes("members:write").grant(MembersRead));
    }

    #[test]
    fn no_api_scope_deletes_or_hands_over_the_organization_or_manages_keys_and_accounts() {
        let all = scopes(&ApiScope::ALL.map(ApiScope::as_str).join(" "));
        let whole_role_only = [
            OrganizationDelete,
            OwnershipTransfer,
            ApiKeysCreate,
            ApiKeysManage,
            ServiceAccountsManage,
            RolesManage,
        ];
        for permission in whole_role_only {
            assert!(!all.grant(permission), "{permission}");
        }
        // Every other permission is some scope's.
        for permission in Permission::ALL {
            if !whole_role_only.contains(&permission) {
                assert!(all.grant(permission), "{permission}");
            }
        }
    }

    #[test]
    fn a_token_without_api_scopes_is_not_narrowed() {
        let none = ApiScopes::default();
        assert!(Permission::ALL.iter().all(|p| none.narrow(*p)));
        let org_read = scopes("org:read");
        assert!(org_read.narrow(OrganizationRead));
        assert!(!org_read.narrow(OrganizationUpdate));
    }
}
