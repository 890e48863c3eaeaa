//! Login sessions: one as created at sign-in and as the store returns it, what an application
//! was granted in one, and the organization its access tokens speak for.

use time::{Duration, OffsetDateTime};

use super::{
    Amr, ApiScopes, ApplicationId, AssignedRole, ClientId, Membership, OrganizationId,
    PasswordHash, Scope, SessionId, TokenHash, UserId,
};

/// How stale a session's `last_used_at` may get: a refresh writes it only when it is at least
/// this old, so a client that refreshes often costs a write every half minute, not one per
/// refresh. An idle timeout (five minutes at least) is honoured to within this: a session may
/// be found idle up to this much early, never late.
pub const SESSION_TOUCH_INTERVAL: Duration = Duration::seconds(30);

/// A login session as created at login. The refresh token is known only by its hash.
#[derive(Clone, Debug, PartialEq)]
pub struct NewSession {
    /// The session's id, which its access tokens carry as `sid`.
    pub id: SessionId,
    /// The signed-in user.
    pub user_id: UserId,
    /// The hash of the refresh token handed to the client.
    pub refresh_token_hash: TokenHash,
    /// When the user signed in.
    pub created_at: OffsetDateTime,
    /// When the session ends by itself, unless revoked earlier.
    pub expires_at: OffsetDateTime,
    /// Set when an OAuth token exchange opened the session for an application.
    pub grant: Option<ClientGrant>,
    /// How the user signed in: what its access tokens say in `amr`.
    pub amr: Amr,
    /// For a SAML sign-in, the organization whose identity provider signed the user in: the
    /// only organization for which the session's `ext` method counts as a second factor.
    pub sso_organization_id: Option<OrganizationId>,
    /// The organization its access tokens speak for (`org_id`, `org_role`,
    /// `org_permissions`), chosen at sign-in and admitted then; `None` for tokens of no one
    /// organization.
    pub organization_id: Option<OrganizationId>,
    /// For a password sign-in, the password hash it checked: the session opens only while that
    /// is still the account's password, so that a reset or change that lands while the sign-in
    /// is in flight ends it too (the store compares in the transaction that opens it).
    pub password_checked: Option<PasswordHash>,
}

/// What an application was granted: its refresh token works only for it, and its access tokens
/// carry its `client_id` and the `scope`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientGrant {
    /// The application the session was opened for.
    pub application_id: ApplicationId,
    /// That application's client id.
    pub client_id: ClientId,
    /// The scope the user granted it.
    pub scope: Scope,
}

/// A live session (not revoked, not expired) as the store returns it.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    /// The session's id.
    pub id: SessionId,
    /// The signed-in user.
    pub user_id: UserId,
    /// When the user signed in.
    pub created_at: OffsetDateTime,
    /// When the session ends by itself, unless revoked earlier.
    pub expires_at: OffsetDateTime,
    /// When its refresh token was last used (until then, when it was created): what an idle
    /// timeout counts from.
    pub last_used_at: OffsetDateTime,
    /// The application the session belongs to; `None` for a sign-in to Gatehouse itself.
    pub grant: Option<ClientGrant>,
    /// How the user signed in.
    pub amr: Amr,
    /// For a SAML sign-in, the organization whose identity provider signed the user in.
    pub sso_organization_id: Option<OrganizationId>,
    /// The organization its access tokens speak for, until a refresh names another or none.
    pub organization_id: Option<OrganizationId>,
}

/// The organization an access token speaks for, after the one admission: its id, the member's
/// role there and what that role may do (the `org_id`, `org_role` and `org_permissions`
/// claims), so that the product behind Gatehouse decides without calling back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenOrganization {
    /// The organization (`org_id`).
    pub organization_id: OrganizationId,
    /// The member's role in it when the token was issued (`org_role`: a built-in role's name
    /// or a custom role's key).
    pub role: AssignedRole,
}

impl TokenOrganization {
    /// What an admitted membership puts in a token.
    pub fn of(membership: &Membership) -> Self {
        Self {
            organization_id: membership.organization_id,
            role: membership.role.clone(),
        }
    }

    /// The dotted names of what a token may do there (`org_permissions`), in the table's
    /// order: for a sign-in's own token (`granted` is `None`), the role's permissions; for a
    /// token issued to an application, the role's permissions that the API scopes the user
    /// granted it cover ([`ApiScopes::grant`]), so none for `openid` alone.
    pub fn permissions(&self, granted: Option<&Scope>) -> Vec<String> {
        let covered = granted.map(ApiScopes::of);
        self.role
            .permissions()
            .iter()
            .filter(|permission| {
                covered
                    .as_ref()
                    .is_none_or(|scopes| scopes.grant(*permission))
            })
            .map(|permission| permission.as_str().to_owned())
            .collect()
    }
}

/// Which organization a refresh's token speaks for (`organization_id` of `POST
/// /auth/refresh`): the session's as it stands, another one (admitted, and kept for the
/// refreshes after), or none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OrganizationChoice {
    /// `organization_id` absent: the session's organization, if it has one.
    #[default]
    Keep,
    /// `organization_id` given: this one from now on.
    Switch(OrganizationId),
    /// `organization_id: null`: none from now on.
    Clear,
}

impl OrganizationChoice {
    /// The organization chosen, given the session's current one.
    pub fn applied_to(self, current: Option<OrganizationId>) -> Option<OrganizationId> {
        match self {
            Self::Keep => current,
            Self::Switch(organization) => Some(organization),
            Self::Clear => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;
    use crate::model::{Permission, PermissionSet, Role, RoleKey};

    fn admin() -> TokenOrganization {
        TokenOrganization {
            organization_id: OrganizationId::from_uuid(Uuid::from_u128(1)),
            role: AssignedRole::BuiltIn(Role::Admin),
        }
    }

    fn scope(raw: &str) -> Scope {
        Scope::parse(raw).unwrap()
    }

    #[test]
    fn a_sign_ins_own_token_lists_the_whole_role() {
        let every = admin().permissions(None);
        assert_eq!(
            every.len(),
            PermissionSet::of_role(Role::Admin).iter().count()
        );
        assert!(every.contains(&"organization.members.update".to_owned()));
    }

    #[test]
    fn an_application_token_lists_none_of_the_role_without_an_api_scope() {
        for granted in ["openid", "openid email profile", "read:user"] {
            assert!(
                admin().permissions(Some(&scope(granted))).is_empty(),
                "{granted}"
            );
        }
    }

    #[test]
    fn an_application_token_lists_what_its_api_scopes_cover_of_the_role() {
        assert_eq!(
            admin().permissions(Some(&scope("openid org:read"))),
            ["organization.read", "applications.read", "audit.read"]
        );
        assert_eq!(
            admin().permissions(Some(&scope("members:read"))),
            ["organization.members.read"]
        );
        // Never more than the role: a viewer's `members:write` token may write nothing.
        let viewer = TokenOrganization {
            role: AssignedRole::BuiltIn(Role::Viewer),
            ..admin()
        };
        assert!(viewer.permissions(Some(&scope("members:write"))).is_empty());
        // A custom role is narrowed the same way.
        let auditor = TokenOrganization {
            role: AssignedRole::Custom {
                key: RoleKey::parse("auditor").unwrap(),
                permissions: PermissionSet::of([Permission::AuditRead, Permission::MembersRead]),
            },
            ..admin()
        };
        assert_eq!(
            auditor.permissions(Some(&scope("org:read webhooks:read"))),
            ["audit.read"]
        );
    }
}
