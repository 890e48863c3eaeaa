//! Who is calling: the one vocabulary of the use cases for whoever a request speaks for.
//!
//! | type | who | where it comes from | what it may reach |
//! |---|---|---|---|
//! | [`Principal`] | a person: a user's session (a Bearer token, perhaps issued to an application through OAuth) or a user's API key | `Authenticator::authenticate_bearer`, `authenticate_api_key` | the account's own routes ([`Agent::person`]), and organizations they belong to, as an [`Actor`] |
//! | [`MachineClient`] | an application with a machine token (`client_credentials`) | `Authenticator::authenticate_bearer` | its own organization only, with its token's API scopes |
//! | [`ServiceAccountKey`] | a service account with one of its API keys | `Authenticator::authenticate_api_key` | its organization only, with its role |
//! | [`DirectoryClient`] | an organization's identity provider with a SCIM token | `Authenticator::authenticate_scim_token` | its organization's SCIM endpoints only |
//! | [`Agent`] | any of the four above: whom valid credentials speak for, before any organization is looked at | the authenticator | [`Agent::person`] outside organizations; `Authenticator::actor_of` inside one |
//! | [`Actor`] | an agent admitted inside one organization (membership, IP allowlist, second factor, single sign-on checked) | `Authenticator::actor_of`, the one admission | what its role (narrowed by its token's scopes) permits: [`Actor::require`] |
//! | [`BrowserSession`] | the person signed in on the hosted pages, by the session cookie | `AuthService::signed_in` | what a [`Principal`] may ([`BrowserSession::principal`]) |
//!
//! Two more names are not callers of the use cases: the operator of the control plane
//! ([`Operator`](crate::model::Operator), by the control token) and the rate limiter's
//! [`Spender`](super::Spender) (whose budget a request spends: an agent or an address).

use time::OffsetDateTime;

use crate::{
    model::{
        Amr, ApiKeyId, ApiScopes, ApplicationId, AssignedRole, AuditAction, AuditActor,
        AuditRecord, ClientId, Membership, NewEvent, OrganizationId, Origin, Permission,
        PermissionSet, Plan, Role, ScimTokenId, Scope, ServiceAccount, SessionId, UserId,
        DIRECTORY_PERMISSIONS,
    },
    ports::Random,
};

/// An authenticated person: a user's Bearer token, or an API key acting as its creator.
#[derive(Clone, Debug, PartialEq)]
pub enum Principal {
    /// A user with a Bearer access token of a live session.
    User {
        /// The user the token was issued to.
        user_id: UserId,
        /// The session the token belongs to; ending it ends the token.
        session_id: SessionId,
        /// How the user signed in, as the token says (`amr`); a token from before Gatehouse
        /// wrote the claim counts as a password sign-in.
        amr: Amr,
        /// The application the token was issued to and what it was granted, for a token of
        /// the OAuth flow; `None` for a sign-in's own token. Such a token reads `userinfo`,
        /// and acts in the application's organization only within its API scopes.
        application: Option<AppGrant>,
    },
    /// An API key: acts as its creator, inside its one organization.
    ApiKey {
        /// The key's id.
        key_id: ApiKeyId,
        /// The user who created the key: the key acts as them.
        user_id: UserId,
        /// The one organization the key belongs to.
        organization_id: OrganizationId,
    },
}

impl Principal {
    /// Who the audit log names for what this principal does: the user of a session, or the
    /// key.
    pub fn audit_actor(&self) -> AuditActor {
        match self {
            Self::User { user_id, .. } => AuditActor::User(*user_id),
            Self::ApiKey { key_id, .. } => AuditActor::ApiKey(*key_id),
        }
    }

    /// The user the principal acts as.
    pub fn user_id(&self) -> UserId {
        match self {
            Self::User { user_id, .. } | Self::ApiKey { user_id, .. } => *user_id,
        }
    }

    /// The session of a user's Bearer token; `None` for an API key.
    pub fn session_id(&self) -> Option<SessionId> {
        match self {
            Self::User { session_id, .. } => Some(*session_id),
            Self::ApiKey { .. } => None,
        }
    }

    /// The API scopes the credentials are narrowed to: those of an OAuth token's scope. Empty
    /// (not narrowed) for a sign-in's own token and for an API key.
    pub fn api_scopes(&self) -> ApiScopes {
        match self {
            Self::User {
                application: Some(grant),
                ..
            } => ApiScopes::of(&grant.scope),
            Self::User { .. } | Self::ApiKey { .. } => ApiScopes::default(),
        }
    }

    /// The application a token of the OAuth flow was issued to, and what it was granted.
    pub fn application(&self) -> Option<&AppGrant> {
        match self {
            Self::User { application, .. } => application.as_ref(),
            Self::ApiKey { .. } => None,
        }
    }

    /// `Ok` when the credentials may be used outside any one organization (the account's own
    /// routes: profile, API keys, second factors, invitations, the list of organizations): a
    /// sign-in's own token or an API key. A token issued to an application reads
    /// `/oauth/userinfo` there and nothing else: what the user granted it, if anything, is
    /// inside the application's organization.
    pub fn outside_organizations(&self) -> Result<(), IssuedToApplication> {
        match self.application() {
            Some(grant) => Err(IssuedToApplication(grant.client_id.clone())),
            None => Ok(()),
        }
    }
}

/// What an application holds in a token of the OAuth flow: who it is and the scope the user
/// granted it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppGrant {
    /// The application's client id (the token's `client_id`).
    pub client_id: ClientId,
    /// The scope granted (`openid email org:read`, ...).
    pub scope: Scope,
}

/// A token issued to an application was used where the user granted it nothing: outside
/// organizations it reads `/oauth/userinfo` only.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("this token was issued to the application {0}: outside its organization it reads /oauth/userinfo only")]
pub struct IssuedToApplication(pub ClientId);

/// An application acting with a machine token (`grant_type=client_credentials`): inside its
/// own organization, with exactly its token's API scopes.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineClient {
    /// The application.
    pub application_id: ApplicationId,
    /// Its client id, the token's `sub`.
    pub client_id: ClientId,
    /// Its organization, the only one it acts in.
    pub organization_id: OrganizationId,
    /// The organization's plan (enterprise, or the token would not have been accepted).
    pub plan: Plan,
    /// What the token may do.
    pub scopes: ApiScopes,
}

/// A service account acting with one of its API keys: inside its one organization, with its
/// role, whoever made the key.
#[derive(Clone, Debug, PartialEq)]
pub struct ServiceAccountKey {
    /// The key used.
    pub key_id: ApiKeyId,
    /// The account, as it is now (its role included).
    pub account: ServiceAccount,
    /// Its organization's plan.
    pub plan: Plan,
}

/// An organization's identity provider, provisioning with one of the organization's SCIM
/// tokens: inside that organization only, as an admin would manage members.
#[derive(Clone, Debug, PartialEq)]
pub struct DirectoryClient {
    /// The token used.
    pub token_id: ScimTokenId,
    /// The organization it provisions.
    pub organization_id: OrganizationId,
    /// The organization's plan.
    pub plan: Plan,
    /// Who created the token: the inviter the directory's invitations name.
    pub created_by: UserId,
}

/// Whom valid credentials speak for: a person, an application with a machine token, a service
/// account with its key, or an organization's identity provider with a SCIM token.
#[derive(Clone, Debug, PartialEq)]
pub enum Agent {
    /// A user's token or a user's API key.
    Person(Principal),
    /// An application's machine token.
    Application(MachineClient),
    /// A service account's API key.
    ServiceAccount(ServiceAccountKey),
    /// An organization's SCIM token.
    Directory(DirectoryClient),
}

impl Agent {
    /// The person behind the credentials, for a route outside any one organization (the
    /// account's own routes: profile, API keys, second factors, invitations, the list of
    /// organizations). Only a person's own credentials reach them: a sign-in's token or a
    /// user's API key. Every other kind of credential acts inside its one organization only.
    ///
    /// # Errors
    /// [`OnlyInsideOrganization`], saying which kind of credential it is.
    pub fn person(self) -> Result<Principal, OnlyInsideOrganization> {
        match self {
            Self::Person(principal) => {
                principal.outside_organizations()?;
                Ok(principal)
            }
            Self::Application(_) => Err(OnlyInsideOrganization::MachineToken),
            Self::ServiceAccount(_) => Err(OnlyInsideOrganization::ServiceAccountKey),
            Self::Directory(_) => Err(OnlyInsideOrganization::ScimToken),
        }
    }
}

/// Why credentials may not be used outside any one organization.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OnlyInsideOrganization {
    /// An application's machine token.
    #[error("a machine token acts only inside its application's organization")]
    MachineToken,
    /// A service account's API key.
    #[error("a service account's key acts only inside its organization")]
    ServiceAccountKey,
    /// An organization's SCIM token.
    #[error("a SCIM token acts only at its organization's SCIM endpoints")]
    ScimToken,
    /// A user's token issued to an application through OAuth.
    #[error(transparent)]
    IssuedToApplication(#[from] IssuedToApplication),
}

/// Who is signed in on the hosted pages, by their session cookie.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrowserSession {
    /// The signed-in user.
    pub user_id: UserId,
    /// The session the cookie holds the refresh token of.
    pub session_id: SessionId,
    /// How the user signed in; an application's code, and the session it opens, say the same.
    pub amr: Amr,
    /// When the user signed in (the session opened): an ID token's `auth_time`.
    pub authenticated_at: OffsetDateTime,
}

impl BrowserSession {
    /// The user as a caller of the use cases (signing out, for one).
    pub fn principal(&self) -> Principal {
        Principal::User {
            user_id: self.user_id,
            session_id: self.session_id,
            amr: self.amr.clone(),
            application: None,
        }
    }
}

/// Someone acting inside one organization: a member (by a user's token or an API key), an
/// application with a machine token, or a service account with its key.
#[derive(Clone, Debug, PartialEq)]
pub enum Actor {
    /// A person who belongs to the organization.
    Member {
        /// Who acts: a user in a session, or an API key.
        principal: Principal,
        /// Their membership in the organization, with its role and the organization's plan.
        membership: Membership,
    },
    /// An application of the organization, with exactly its machine token's API scopes.
    Application(MachineClient),
    /// A service account of the organization, by one of its keys, with its role.
    ServiceAccount(ServiceAccountKey),
    /// The organization's identity provider, by one of its SCIM tokens: it manages members
    /// ([`DIRECTORY_PERMISSIONS`]) and nothing else.
    Directory(DirectoryClient),
}

/// The actor's role, narrowed by its token's scopes, does not grant the permission.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("missing permission {0}")]
pub struct Forbidden(pub Permission);

impl Actor {
    /// The audit record of something the actor does in their organization now: by their user,
    /// key or application, in the organization (say what it was done to with
    /// [`AuditRecord::on`]).
    pub(crate) fn audit(
        &self,
        random: &dyn Random,
        at: OffsetDateTime,
        action: AuditAction,
        origin: &Origin,
    ) -> AuditRecord {
        super::audit(random, at, self.audit_actor(), action, origin)
            .in_organization(self.organization_id())
    }

    /// The outbox event of a change the actor makes in their organization now: the
    /// organization's, and their user's when a person acts.
    pub(crate) fn event<P: super::payloads::Payload>(
        &self,
        random: &dyn Random,
        at: OffsetDateTime,
        payload: P,
    ) -> NewEvent {
        super::event(
            random,
            at,
            Some(self.organization_id()),
            self.user_id(),
            payload,
        )
    }

    /// Who acts, as the audit log names them.
    pub fn audit_actor(&self) -> AuditActor {
        match self {
            Self::Member { principal, .. } => principal.audit_actor(),
            Self::Application(machine) => AuditActor::Application(machine.application_id),
            Self::ServiceAccount(key) => AuditActor::ServiceAccount(key.account.id),
            Self::Directory(directory) => AuditActor::Scim(directory.token_id),
        }
    }

    /// The organization acted in.
    pub fn organization_id(&self) -> OrganizationId {
        match self {
            Self::Member { membership, .. } => membership.organization_id,
            Self::Application(machine) => machine.organization_id,
            Self::ServiceAccount(key) => key.account.organization_id,
            Self::Directory(directory) => directory.organization_id,
        }
    }

    /// The organization's plan.
    pub fn plan(&self) -> Plan {
        match self {
            Self::Member { membership, .. } => membership.plan,
            Self::Application(machine) => machine.plan,
            Self::ServiceAccount(key) => key.plan,
            Self::Directory(directory) => directory.plan,
        }
    }

    /// The user acting, for a user's API key the user who created it; `None` for an
    /// application or a service account.
    pub fn user_id(&self) -> Option<UserId> {
        match self {
            Self::Member { principal, .. } => Some(principal.user_id()),
            Self::Application(_) | Self::ServiceAccount(_) | Self::Directory(_) => None,
        }
    }

    /// The person acting in a signed-in session (a sign-in's access token, or an application's
    /// token of one), which passed the organization's admission as a sign-in (its MFA policy
    /// and single sign-on); `None` for an API key, an application's machine token, a service
    /// account or a directory. A credential that outlives the session (an API key, a service
    /// account and its keys, a SCIM token) is made only by such a person: a key never makes
    /// spares of itself, nor keeps making credentials once single sign-on bars its maker's
    /// password session.
    pub fn person_signed_in(&self) -> Option<UserId> {
        match self {
            Self::Member {
                principal: principal @ Principal::User { .. },
                ..
            } => Some(principal.user_id()),
            _ => None,
        }
    }

    /// Whether this is the agent's actor (the one its credentials resolved to).
    pub fn is_of(&self, agent: &Agent) -> bool {
        match (self, agent) {
            (Self::Member { principal, .. }, Agent::Person(person)) => principal == person,
            (Self::Application(machine), Agent::Application(other)) => machine == other,
            (Self::ServiceAccount(key), Agent::ServiceAccount(other)) => key == other,
            (Self::Directory(directory), Agent::Directory(other)) => directory == other,
            _ => false,
        }
    }

    /// What the actor's role grants, before a token's scopes narrow it: a member's role, a
    /// service account's role. An application has no role: what its scopes let it do is
    /// checked by [`Self::require`], and the roles it gives (with `members:write`) are an
    /// admin's to give; so are a directory's (through the map an admin saved).
    pub fn role_permissions(&self) -> PermissionSet {
        match self {
            Self::Member { membership, .. } => membership.role.permissions(),
            Self::Application(_) | Self::Directory(_) => PermissionSet::of_role(Role::Admin),
            Self::ServiceAccount(key) => key.account.role.permissions(),
        }
    }

    /// Whether the actor may give `role` to someone (a member, an invitee, a service account)
    /// or take it from them: only when its own role grants everything `role` does. No one hands
    /// out more than they hold.
    pub fn may_give(&self, role: &AssignedRole) -> bool {
        role.permissions().is_within(self.role_permissions())
    }

    /// `Ok` when the actor may use the permission: a member's role grants it and, for an
    /// OAuth token that carries API scopes, one of them grants it too; an application's
    /// token's scopes grant it; a service account's role grants it.
    pub fn require(&self, permission: Permission) -> Result<(), Forbidden> {
        let granted = match self {
            Self::Member {
                principal,
                membership,
            } => membership.role.grants(permission) && principal.api_scopes().narrow(permission),
            Self::Application(machine) => machine.scopes.grant(permission),
            Self::ServiceAccount(key) => key.account.role.grants(permission),
            Self::Directory(_) => DIRECTORY_PERMISSIONS.contains(&permission),
        };
        if granted {
            Ok(())
        } else {
            Err(Forbidden(permission))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use uuid::Uuid;

    use super::*;

    fn user(application: Option<AppGrant>) -> Principal {
        Principal::User {
            user_id: UserId::from_uuid(Uuid::from_u128(1)),
            session_id: SessionId::from_uuid(Uuid::from_u128(2)),
            amr: Amr::password(),
            application,
        }
    }

    fn acme() -> OrganizationId {
        OrganizationId::from_uuid(Uuid::from_u128(3))
    }

    fn client_id() -> ClientId {
        ClientId::generate(Uuid::from_u128(0xabc))
    }

    #[test]
    fn only_a_persons_own_credentials_reach_the_routes_outside_organizations() {
        let signed_in = user(None);
        assert_eq!(Agent::Person(signed_in.clone()).person(), Ok(signed_in));
        let key = Principal::ApiKey {
            key_id: ApiKeyId::from_uuid(Uuid::from_u128(4)),
            user_id: UserId::from_uuid(Uuid::from_u128(1)),
            organization_id: acme(),
        };
        assert_eq!(Agent::Person(key.clone()).person(), Ok(key));
    }

    #[test]
    fn every_other_credential_is_told_where_it_acts() {
        let granted = user(Some(AppGrant {
            client_id: client_id(),
            scope: Scope::parse("openid").unwrap(),
        }));
        assert_eq!(
            Agent::Person(granted).person(),
            Err(OnlyInsideOrganization::IssuedToApplication(
                IssuedToApplication(client_id())
            ))
        );
        let machine = MachineClient {
            application_id: ApplicationId::from_uuid(Uuid::from_u128(5)),
            client_id: client_id(),
            organization_id: acme(),
            plan: Plan::Enterprise,
            scopes: ApiScopes::default(),
        };
        assert_eq!(
            Agent::Application(machine).person(),
            Err(OnlyInsideOrganization::MachineToken)
        );
        let directory = DirectoryClient {
            token_id: ScimTokenId::from_uuid(Uuid::from_u128(6)),
            organization_id: acme(),
            plan: Plan::Business,
            created_by: UserId::from_uuid(Uuid::from_u128(1)),
        };
        assert_eq!(
            Agent::Directory(directory).person(),
            Err(OnlyInsideOrganization::ScimToken)
        );
    }
}
