//! The one admission: checking credentials (a Bearer token, an API key, a SCIM token) into
//! the [caller](super::caller) they speak for, and whether that caller may act inside an
//! organization (membership, IP allowlist, second factor, single sign-on).

use time::OffsetDateTime;

use super::{
    sso_realm::{Realms, SessionSignIn},
    Actor, Agent, AppGrant, DirectoryClient, MachineClient, Principal, ServiceAccountKey,
};
use crate::{
    model::{
        Amr, ApiScopes, AuthMethod, ClientAddress, ClientId, Email, Feature, KeyHolder, Membership,
        MfaMethod, OrganizationId, Permission, Plan, Scope, TokenHash,
    },
    ports::{
        service_ports, ApplicationStore, BearerClaims, MachineClaims, MembershipStore, PolicyStore,
        SavedPolicies, StoreError, TokenError,
    },
};

/// A Bearer token whose signature and claims checked out, before its session or its
/// application is looked at.
enum Verified {
    User(Principal),
    Machine(MachineClaims),
}

/// Why credentials were refused.
#[derive(Debug, thiserror::Error)]
pub enum AuthenticateError {
    /// Bad signature, expired, revoked, unknown key, wrong organization: all one answer.
    #[error("{0}")]
    Invalid(&'static str),
    /// The store could not be asked.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The token could not be checked (a key-ring failure, not a bad token).
    #[error("credentials could not be checked")]
    Internal(#[source] TokenError),
}

/// Why a principal may not act inside an organization.
#[derive(Debug, thiserror::Error)]
pub enum OrgAccessError {
    /// Not a member, or no such live organization: indistinguishable on purpose.
    #[error("organization not found")]
    NotFound,
    /// The organization's IP allowlist does not hold the request's address.
    #[error("requests from {0} are not allowed by the organization's IP allowlist")]
    AddressNotAllowed(ClientAddress),
    /// The organization requires a second factor this sign-in did not use, and the member's
    /// grace period is over.
    #[error("organization requires multi-factor authentication")]
    MfaRequired,
    /// The organization signs the member's address in through its identity provider, and
    /// this session was not signed in by it (the owner's break-glass excepted): at this URL.
    #[error("organization requires single sign-on")]
    SsoRequired(String),
    /// A token issued to an application that the user granted no API scope: it reads
    /// `/oauth/userinfo`, and nothing of the organization.
    #[error("this token was issued to an application and carries no API scope: it reads /oauth/userinfo only")]
    NoApiScope,
    /// The store could not be asked.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Longest access token looked at: Gatehouse's are under 1.5 KiB; a longer one is refused
/// before it is decoded or its signature checked.
pub const MAX_ACCESS_TOKEN_BYTES: usize = 8 * 1024;

service_ports! {
    /// The ports [`Authenticator`] uses.
    pub struct AuthenticatorPorts {
        signer: TokenSigner,
        sso: SsoStore,
        domains: DomainStore,
        sessions: SessionStore,
        api_keys: ApiKeyStore,
        service_accounts: ServiceAccountStore,
        directory: DirectoryStore,
        memberships: MembershipStore,
        policies: PolicyStore,
        applications: ApplicationStore,
        organizations: OrganizationStore,
        clock: Clock,
    }
}

const INVALID_TOKEN: AuthenticateError =
    AuthenticateError::Invalid("invalid or expired access token");

/// Tells who is calling: checks a Bearer token or an API key, and what the caller may reach
/// inside an organization.
#[derive(Clone)]
pub struct Authenticator {
    ports: AuthenticatorPorts,
    /// The service's public URL, where an identity provider's sign-in starts.
    public_url: std::sync::Arc<str>,
}

impl Authenticator {
    /// An authenticator on these ports.
    /// An authenticator on these ports, for the service at `public_url` (the issuer: where
    /// a member barred by single sign-on is sent to sign in).
    pub fn new(ports: AuthenticatorPorts, public_url: &str) -> Self {
        Self {
            ports,
            public_url: public_url.into(),
        }
    }

    /// The stores single sign-on realms are read from.
    fn realms(&self) -> Realms<'_> {
        Realms {
            sso: self.ports.sso.as_ref(),
            domains: self.ports.domains.as_ref(),
            organizations: self.ports.organizations.as_ref(),
            memberships: self.ports.memberships.as_ref(),
        }
    }

    /// The stores [`admission`] reads.
    fn admission_stores(&self) -> Admission<'_> {
        Admission {
            memberships: self.ports.memberships.as_ref(),
            policies: self.ports.policies.as_ref(),
            applications: self.ports.applications.as_ref(),
            realms: self.realms(),
            public_url: &self.public_url,
        }
    }

    /// Whom a Bearer token names, when its signature and claims are valid; whether its
    /// session is live, or its application active, is the caller's to check.
    async fn verified(&self, token: &str) -> Result<Verified, AuthenticateError> {
        if token.len() > MAX_ACCESS_TOKEN_BYTES {
            return Err(INVALID_TOKEN);
        }
        let claims = self.ports.signer.verify(token).await.map_err(|e| match e {
            TokenError::Invalid => INVALID_TOKEN,
            failed @ TokenError::Failed(_) => AuthenticateError::Internal(failed),
        })?;
        let claims = match claims {
            BearerClaims::User(claims) => claims,
            BearerClaims::Machine(claims) => return Ok(Verified::Machine(claims)),
        };
        let amr = Amr::from_stored(&claims.amr.join(" ")).unwrap_or_else(Amr::password);
        // Gatehouse wrote the client id and the scope when it signed the token: they parse.
        let application = match claims.client_id.as_deref() {
            Some(client_id) => Some(AppGrant {
                client_id: ClientId::parse(client_id).ok_or(INVALID_TOKEN)?,
                scope: Scope::parse(claims.scope.as_deref().unwrap_or_default())
                    .map_err(|_| INVALID_TOKEN)?,
            }),
            None => None,
        };
        Ok(Verified::User(Principal::User {
            user_id: claims.sub,
            session_id: claims.sid,
            amr,
            application,
        }))
    }

    /// The application a machine token acts for: active, in the organization the token
    /// names, which is live and on a plan with OAuth. Deactivating or deleting the
    /// application, or leaving the plan, stops its tokens at once.
    async fn machine(&self, claims: MachineClaims) -> Result<MachineClient, AuthenticateError> {
        let gone = AuthenticateError::Invalid("the token's application is inactive or gone");
        let client_id = ClientId::parse(&claims.client_id).ok_or(INVALID_TOKEN)?;
        let scope = Scope::parse(&claims.scope).map_err(|_| INVALID_TOKEN)?;
        let (application, _) = self
            .ports
            .applications
            .application_by_client_id(&client_id)
            .await?
            .filter(|(app, _)| app.is_active && app.organization_id == claims.org_id)
            .ok_or(gone)?;
        let plan = self
            .ports
            .organizations
            .organization(application.organization_id)
            .await?
            .map(|organization| organization.plan)
            .filter(|plan| plan.includes(Feature::OAuth))
            .ok_or(AuthenticateError::Invalid(
                "the token's organization is gone or no longer on the enterprise plan",
            ))?;
        Ok(MachineClient {
            application_id: application.id,
            client_id,
            organization_id: application.organization_id,
            plan,
            scopes: ApiScopes::of(&scope),
        })
    }

    /// Authenticates a Bearer token: a user's with valid claims and a live session, or an
    /// application's machine token whose application is active.
    pub async fn authenticate_bearer(&self, token: &str) -> Result<Agent, AuthenticateError> {
        match self.verified(token).await? {
            Verified::User(principal) => {
                let live = match principal.session_id() {
                    Some(session_id) => {
                        self.ports
                            .sessions
                            .is_live(session_id, self.ports.clock.now())
                            .await?
                    }
                    None => false,
                };
                if !live {
                    return Err(AuthenticateError::Invalid("the session has ended"));
                }
                Ok(Agent::Person(principal))
            }
            Verified::Machine(claims) => Ok(Agent::Application(self.machine(claims).await?)),
        }
    }

    /// [`Self::authenticate_bearer`] and [`Self::actor_of`] together, for a request inside an
    /// organization: for a user, the session, the membership and the policies are read in one
    /// store round trip. The agent comes back whether or not it may act there (a rate limit
    /// counts it either way).
    pub async fn authenticate_bearer_in(
        &self,
        token: &str,
        organization_id: OrganizationId,
        client: ClientAddress,
    ) -> Result<(Agent, Result<Actor, OrgAccessError>), AuthenticateError> {
        let principal = match self.verified(token).await? {
            Verified::User(principal) => principal,
            Verified::Machine(claims) => {
                let machine = self.machine(claims).await?;
                let actor = self
                    .machine_actor(machine.clone(), organization_id, client)
                    .await;
                return Ok((Agent::Application(machine), actor));
            }
        };
        let Some(session_id) = principal.session_id() else {
            return Err(INVALID_TOKEN);
        };
        let now = self.ports.clock.now();
        let access = self
            .ports
            .memberships
            .session_access(session_id, principal.user_id(), organization_id, now)
            .await?;
        if !access.session_live {
            return Err(AuthenticateError::Invalid("the session has ended"));
        }
        let admitted = match access.membership {
            None => Err(OrgAccessError::NotFound),
            Some(membership) => {
                match granted_in(
                    self.ports.applications.as_ref(),
                    &principal,
                    organization_id,
                )
                .await
                {
                    Ok(()) => {
                        let admitted = admit(
                            principal.clone(),
                            membership,
                            access.policies,
                            access.sso_organization,
                            Some(client),
                            now,
                        );
                        single_sign_on(
                            self.realms(),
                            &self.public_url,
                            admitted,
                            access.sso_organization,
                            access.sso_email.as_ref(),
                        )
                        .await
                    }
                    Err(refused) => Err(refused),
                }
            }
        };
        Ok((Agent::Person(principal), admitted))
    }

    /// Authenticates an API key sent with the organization it belongs to: a user's key acts
    /// as its user, a service account's as the account (while it exists).
    pub async fn authenticate_api_key(
        &self,
        key: &str,
        organization_id: OrganizationId,
    ) -> Result<Agent, AuthenticateError> {
        let now: OffsetDateTime = self.ports.clock.now();
        let api_key = self
            .ports
            .api_keys
            .use_api_key(&TokenHash::of(key), now)
            .await?
            .ok_or(AuthenticateError::Invalid("invalid API key"))?;
        if api_key.organization_id != organization_id {
            return Err(AuthenticateError::Invalid(
                "the API key does not belong to the organization in X-Organization-ID",
            ));
        }
        match api_key.holder {
            KeyHolder::User(user_id) => Ok(Agent::Person(Principal::ApiKey {
                key_id: api_key.id,
                user_id,
                organization_id,
            })),
            KeyHolder::ServiceAccount(id) => {
                // Deleting the account deletes its keys; this read also gives its role now.
                let access = self
                    .ports
                    .service_accounts
                    .service_account(id)
                    .await?
                    .filter(|access| access.account.organization_id == organization_id)
                    .ok_or(AuthenticateError::Invalid("invalid API key"))?;
                Ok(Agent::ServiceAccount(ServiceAccountKey {
                    key_id: api_key.id,
                    account: access.account,
                    plan: access.plan,
                }))
            }
        }
    }

    /// The identity provider behind a SCIM token of the organization in the path: a token of
    /// another organization, revoked, or of an organization gone is refused like a wrong one.
    pub async fn authenticate_scim_token(
        &self,
        token: &str,
        organization_id: OrganizationId,
    ) -> Result<Agent, AuthenticateError> {
        let access = self
            .ports
            .directory
            .use_scim_token(&TokenHash::of(token), self.ports.clock.now())
            .await?
            .filter(|access| access.token.organization_id == organization_id)
            .ok_or(AuthenticateError::Invalid("invalid SCIM token"))?;
        // A token works while its creator may still manage single sign-on there: it ends with
        // its maker's right (removed, demoted, or their custom role narrowed).
        let creator = self
            .ports
            .memberships
            .membership(access.token.created_by, organization_id)
            .await?;
        if !creator.is_some_and(|member| member.role.grants(Permission::SsoManage)) {
            return Err(AuthenticateError::Invalid(
                "invalid SCIM token: its creator may no longer manage single sign-on",
            ));
        }
        Ok(Agent::Directory(DirectoryClient {
            token_id: access.token.id,
            organization_id,
            plan: access.plan,
            created_by: access.token.created_by,
        }))
    }

    /// The principal acting inside an organization, from the client's address; outsiders get
    /// `NotFound`, members outside an enforced IP allowlist `AddressNotAllowed`.
    pub async fn actor(
        &self,
        principal: Principal,
        organization_id: OrganizationId,
        client: ClientAddress,
    ) -> Result<Actor, OrgAccessError> {
        admission(
            self.admission_stores(),
            principal,
            organization_id,
            client,
            self.ports.clock.now(),
        )
        .await
    }

    /// Whoever the agent is, acting inside an organization from the client's address: a
    /// person as [`Self::actor`] says, an application only in its own organization and from
    /// an address the organization's IP allowlist holds.
    pub async fn actor_of(
        &self,
        agent: Agent,
        organization_id: OrganizationId,
        client: ClientAddress,
    ) -> Result<Actor, OrgAccessError> {
        match agent {
            Agent::Person(principal) => self.actor(principal, organization_id, client).await,
            Agent::Application(machine) => {
                self.machine_actor(machine, organization_id, client).await
            }
            Agent::ServiceAccount(key) => {
                if key.account.organization_id != organization_id {
                    return Err(OrgAccessError::NotFound);
                }
                self.allowlisted(key.plan, organization_id, client).await?;
                Ok(Actor::ServiceAccount(key))
            }
            Agent::Directory(directory) => {
                if directory.organization_id != organization_id {
                    return Err(OrgAccessError::NotFound);
                }
                self.allowlisted(directory.plan, organization_id, client)
                    .await?;
                Ok(Actor::Directory(directory))
            }
        }
    }

    /// `Ok` when the organization's IP allowlist holds the client's address, or binds nothing
    /// (none set, or a plan without policies): for those who act in one organization only,
    /// applications and service accounts.
    async fn allowlisted(
        &self,
        plan: Plan,
        organization_id: OrganizationId,
        client: ClientAddress,
    ) -> Result<(), OrgAccessError> {
        if plan.includes(Feature::Policies) {
            if let Some(saved) = self.ports.policies.policies(organization_id).await? {
                if !saved.policies.ip_allowlist.permits(client.0) {
                    return Err(OrgAccessError::AddressNotAllowed(client));
                }
            }
        }
        Ok(())
    }

    /// An application acting in an organization: its own (another is `NotFound`, as for an
    /// outsider), from an address the organization's IP allowlist holds while the plan
    /// enforces policies.
    async fn machine_actor(
        &self,
        machine: MachineClient,
        organization_id: OrganizationId,
        client: ClientAddress,
    ) -> Result<Actor, OrgAccessError> {
        if machine.organization_id != organization_id {
            return Err(OrgAccessError::NotFound);
        }
        self.allowlisted(machine.plan, organization_id, client)
            .await?;
        Ok(Actor::Application(machine))
    }

    /// The principal's membership in an organization; outsiders get `NotFound`.
    pub async fn membership_of(
        &self,
        principal: &Principal,
        organization_id: OrganizationId,
    ) -> Result<Membership, OrgAccessError> {
        membership_of(self.ports.memberships.as_ref(), principal, organization_id).await
    }
}

/// The stores [`admission`] reads, and where an identity provider's sign-in starts.
#[derive(Clone, Copy)]
pub(crate) struct Admission<'a> {
    pub(crate) memberships: &'a dyn MembershipStore,
    pub(crate) policies: &'a dyn PolicyStore,
    pub(crate) applications: &'a dyn ApplicationStore,
    pub(crate) realms: Realms<'a>,
    pub(crate) public_url: &'a str,
}

/// The one admission into an organization, which every way in makes (its routes, creating an
/// API key for it, `/oauth/authorize` for its applications): the principal is a member (an API
/// key only of its own organization; a token issued to an application only in that
/// application's organization, while it is active, and with API scopes), from an address the
/// organization's IP allowlist holds, with the second factor its MFA policy requires once the
/// member's grace period is over, and, for a signed-in session, through the organization's
/// identity provider where its single sign-on claims the member's address ([`single_sign_on`]).
pub(crate) async fn admission(
    stores: Admission<'_>,
    principal: Principal,
    organization_id: OrganizationId,
    client: ClientAddress,
    now: OffsetDateTime,
) -> Result<Actor, OrgAccessError> {
    let membership = membership_of(stores.memberships, &principal, organization_id).await?;
    granted_in(stores.applications, &principal, organization_id).await?;
    let policies = match membership.plan.includes(Feature::Policies) {
        true => stores.policies.policies(organization_id).await?,
        false => None,
    };
    // An SSO session's `ext` needs the organization its IdP signed it in to; a session single
    // sign-on may bar, the address (where the organization's configuration is active).
    let (sso_organization, sso_email) = match &principal {
        Principal::User {
            user_id,
            session_id,
            amr,
            ..
        } if amr.includes(AuthMethod::External)
            || SessionSignIn {
                amr,
                sso_organization: None,
            }
            .may_be_barred(&membership) =>
        {
            let access = stores
                .memberships
                .session_access(*session_id, *user_id, organization_id, now)
                .await?;
            (access.sso_organization, access.sso_email)
        }
        _ => (None, None),
    };
    let admitted = admit(
        principal,
        membership,
        policies,
        sso_organization,
        Some(client),
        now,
    );
    single_sign_on(
        stores.realms,
        stores.public_url,
        admitted,
        sso_organization,
        sso_email.as_ref(),
    )
    .await
}

/// Single sign-on's word on a member the rest of the admission let in: a signed-in session
/// of an address the organization's identity provider claims must be one that provider signed
/// in ([`Realms::bars`]). `sso_email` is the member's address where the organization's
/// configuration is active (else nothing is read). An API key acts for a server, not a
/// sign-in, and an application's token for the session it was granted from: that session is
/// the one looked at.
async fn single_sign_on(
    realms: Realms<'_>,
    public_url: &str,
    admitted: Result<Actor, OrgAccessError>,
    sso_organization: Option<OrganizationId>,
    sso_email: Option<&Email>,
) -> Result<Actor, OrgAccessError> {
    let actor = admitted?;
    let (
        Actor::Member {
            principal: Principal::User { amr, .. },
            membership,
        },
        Some(email),
    ) = (&actor, sso_email)
    else {
        return Ok(actor);
    };
    let session = SessionSignIn {
        amr,
        sso_organization,
    };
    match realms.bars(session, membership, email, public_url).await? {
        Some(realm) => Err(OrgAccessError::SsoRequired(realm.login_url)),
        None => Ok(actor),
    }
}

/// For a token issued to an application: the user granted it API scopes, and the organization
/// is the application's own (another is `NotFound`, as for an outsider), while the application
/// is active. Nothing to check for a sign-in's own token or an API key.
async fn granted_in(
    applications: &dyn ApplicationStore,
    principal: &Principal,
    organization_id: OrganizationId,
) -> Result<(), OrgAccessError> {
    let Some(grant) = principal.application() else {
        return Ok(());
    };
    if ApiScopes::of(&grant.scope).is_empty() {
        return Err(OrgAccessError::NoApiScope);
    }
    match applications
        .application_by_client_id(&grant.client_id)
        .await?
    {
        Some((application, _))
            if application.is_active && application.organization_id == organization_id =>
        {
            Ok(())
        }
        _ => Err(OrgAccessError::NotFound),
    }
}

/// The member acting, when the organization's policies let them from this address at `now`.
/// Policies bind only while the plan includes them; a downgrade stops enforcing. `client` is
/// `None` where the request is not the member's own (an application's server refreshing a
/// token): the IP allowlist was checked where the member was, at `/oauth/authorize`.
pub(crate) fn admit(
    principal: Principal,
    membership: Membership,
    policies: Option<SavedPolicies>,
    sso_organization: Option<OrganizationId>,
    client: Option<ClientAddress>,
    now: OffsetDateTime,
) -> Result<Actor, OrgAccessError> {
    if let Some(saved) = policies.filter(|_| membership.plan.includes(Feature::Policies)) {
        if let Some(client) = client.filter(|c| !saved.policies.ip_allowlist.permits(c.0)) {
            return Err(OrgAccessError::AddressNotAllowed(client));
        }
        if needs_second_factor(&principal, &membership, &saved, sso_organization, now) {
            return Err(OrgAccessError::MfaRequired);
        }
    }
    Ok(Actor::Member {
        principal,
        membership,
    })
}

/// Whether the organization's MFA policy refuses this principal now: it requires MFA, the
/// sign-in behind the token used no allowed second factor (an identity provider's, `ext`,
/// counts when it is this organization's own: `sso_organization`, the organization whose IdP
/// signed the session in; another organization's IdP vouches for nothing here), and the
/// member's grace period, from
/// when MFA became required or when they joined, whichever is later, is over. API keys act for
/// servers, not people, and are not asked for a second factor.
fn needs_second_factor(
    principal: &Principal,
    membership: &Membership,
    saved: &SavedPolicies,
    sso_organization: Option<OrganizationId>,
    now: OffsetDateTime,
) -> bool {
    let policy = &saved.policies.mfa_policy;
    let Principal::User { amr, .. } = principal else {
        return false;
    };
    let own_idp =
        amr.includes(AuthMethod::External) && sso_organization == Some(membership.organization_id);
    if !policy.required() || own_idp {
        return false;
    }
    let allowed = policy.allowed_methods().iter().any(|method| {
        amr.includes(match method {
            MfaMethod::Totp => AuthMethod::Otp,
            MfaMethod::Webauthn => AuthMethod::HardwareKey,
        })
    });
    if allowed {
        return false;
    }
    let since = saved
        .mfa_required_since
        .unwrap_or(saved.updated_at)
        .max(membership.joined_at);
    let grace = time::Duration::hours(i64::from(policy.grace_period_hours().get()));
    now >= since + grace
}

/// The principal's membership in an organization; outsiders (an API key of another
/// organization included) get `NotFound`.
pub(crate) async fn membership_of(
    memberships: &dyn MembershipStore,
    principal: &Principal,
    organization_id: OrganizationId,
) -> Result<Membership, OrgAccessError> {
    if let Principal::ApiKey {
        organization_id: own,
        ..
    } = principal
    {
        if *own != organization_id {
            return Err(OrgAccessError::NotFound);
        }
    }
    memberships
        .membership(principal.user_id(), organization_id)
        .await?
        .ok_or(OrgAccessError::NotFound)
}
