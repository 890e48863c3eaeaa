//! SAML single sign-on, the service provider's side: home realm discovery, the request sent to
//! an organization's identity provider, and the sign-in its signed answer ends in, with
//! just-in-time provisioning.
//!
//! The XML is the [`SamlProtocol`](crate::ports::SamlProtocol) adapter's: it verifies the
//! signature and the protocol's checks (issuer, audience, destination, recipient, time
//! window). What only Gatehouse knows is decided here: that the answer names a request this
//! organization sent and nobody answered yet, that its assertion was never seen before, that
//! the email's domain is one the organization whitelisted **and verified** (a DNS TXT record,
//! [`super::DomainService`]): an identity provider speaks only for the domains its
//! organization proved it holds, and who becomes a member.

use super::{
    auth::fold,
    lifecycle::{By, Joiner, Joining, Lifecycle},
    reclaim::reclaiming,
    sso_realm::{Realms, SsoLookup},
    AuthService, TokenPair,
};
use crate::{
    model::{
        sp_acs_url, sp_entity_id, Amr, AuditAction, AuditActor, Email, EmailDomain, Feature,
        FullName, Organization, OrganizationId, Origin, ReturnPath, SamlRequest, SamlRequestId,
        SamlTrust, SsoConfiguration, User, UserId, SAML_CLOCK_SKEW, SAML_REQUEST_TTL,
    },
    ports::{
        service_ports, BoxError, Provision, SamlRejection, SamlSignIn, SamlSignInOutcome,
        StoreError,
    },
};

service_ports! {
    /// The ports [`SamlService`] uses.
    pub struct SamlPorts { sso: SsoStore, domains: DomainStore, saml: SamlStore, saml_protocol: SamlProtocol, organizations: OrganizationStore, accounts: AccountStore, memberships: MembershipStore, policies: PolicyStore, clock: Clock, random: Random }
}

/// A sign-in through SAML that succeeded.
#[derive(Debug)]
pub struct SamlSignedIn {
    /// The session's tokens; the hosted pages keep the refresh token in their cookie.
    pub tokens: TokenPair,
    /// Where the browser goes now: the `return_to` the request was sent with.
    pub return_to: ReturnPath,
    /// Who signed in.
    pub user_id: UserId,
    /// Whether this sign-in created the account.
    pub provisioned: bool,
}

/// Why a SAML sign-in was refused. Every refusal looks the same to the browser; the message is
/// for the log.
#[derive(Debug, thiserror::Error)]
pub enum SamlSignInError {
    /// No active configuration, or the organization's plan has no single sign-on.
    #[error("the organization has no active SAML configuration on a plan with single sign-on")]
    NotConfigured,
    /// The adapter refused the response (signature, issuer, audience, time, ...).
    #[error("the response was refused: {0}")]
    Rejected(#[from] SamlRejection),
    /// A response no request asked for (IdP-initiated sign-in is refused).
    #[error("the response answers no request: IdP-initiated sign-in is refused")]
    Unsolicited,
    /// `InResponseTo` names no request of this organization that is unanswered and unexpired.
    #[error("the response answers no outstanding request of this organization")]
    UnknownRequest,
    /// The assertion was presented before.
    #[error("the assertion was presented before")]
    Replayed,
    /// The `NameID` is not an email address.
    #[error("the subject's NameID is not an email address")]
    NotAnEmail,
    /// The email's domain is not in the configuration's `domain_whitelist`.
    #[error("the email's domain is not in the organization's domain whitelist")]
    DomainNotAllowed,
    /// The email's domain is whitelisted, but the organization has not verified it: its
    /// identity provider does not speak for that domain.
    #[error("the email's domain is not a verified domain of the organization")]
    DomainNotVerified,
    /// The user has no account, or is not a member, and `auto_provision` is off.
    #[error("the user is not a member of the organization and auto_provision is off")]
    NotProvisioned,
    /// The store failed (or, as [`StoreError::Conflict`], the email was taken meanwhile).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Writing the request or signing the tokens failed.
    #[error("single sign-on failed")]
    Internal(#[source] BoxError),
}

/// SAML single sign-on for organizations that configured it.
#[derive(Clone)]
pub struct SamlService {
    ports: SamlPorts,
    /// Opens sessions the way a password login does (policies, limits, tokens).
    auth: AuthService,
    /// The service's public URL, the base of the service provider's addresses.
    public_url: String,
}

impl SamlService {
    /// A service on these ports; `public_url` is where Gatehouse is reached.
    pub fn new(ports: SamlPorts, auth: AuthService, public_url: String) -> Self {
        Self {
            ports,
            auth,
            public_url,
        }
    }

    /// Home realm discovery: the organization whose active configuration, on a plan with single
    /// sign-on, whitelists the email's domain, when that organization verified the domain too;
    /// else `None`.
    pub async fn lookup(&self, email: &str) -> Result<Option<SsoLookup>, StoreError> {
        let Ok(email) = Email::parse(email) else {
            return Ok(None);
        };
        Realms {
            sso: self.ports.sso.as_ref(),
            domains: self.ports.domains.as_ref(),
            organizations: self.ports.organizations.as_ref(),
            memberships: self.ports.memberships.as_ref(),
        }
        .of(&email, &self.public_url)
        .await
    }

    /// Starts a sign-in: remembers a new request and returns where to send the browser (the
    /// identity provider, with the request and `return_to` as its `RelayState`).
    pub async fn begin(
        &self,
        organization_id: OrganizationId,
        return_to: ReturnPath,
    ) -> Result<String, SamlSignInError> {
        let (_, configuration) = self.configured(organization_id).await?;
        let now = self.ports.clock.now();
        let request = SamlRequest {
            id: SamlRequestId::generate(self.ports.random.uuid()),
            organization_id,
            return_to,
            created_at: now,
            expires_at: now + SAML_REQUEST_TTL,
        };
        let url = self
            .ports
            .saml_protocol
            .authn_request_url(&request, &self.trust(configuration))
            .map_err(SamlSignInError::Internal)?;
        self.ports.saml.save_saml_request(request).await?;
        Ok(url)
    }

    /// The assertion consumer: checks the identity provider's answer (`SAMLResponse`, as
    /// posted), then signs its user in, creating the account or the membership when the
    /// configuration provisions them.
    ///
    /// Audited: the sign-in in the transaction that opens its session, a refusal on its own
    /// (in the organization, with no actor id: a refused assertion names no one the service may
    /// believe).
    pub async fn sign_in(
        &self,
        organization_id: OrganizationId,
        saml_response: &str,
        origin: &Origin,
    ) -> Result<SamlSignedIn, SamlSignInError> {
        let signed_in = self
            .checked_sign_in(organization_id, saml_response, origin)
            .await;
        match &signed_in {
            Ok(_) | Err(SamlSignInError::Store(_) | SamlSignInError::Internal(_)) => {}
            Err(_) => {
                self.auth
                    .refused_in(AuditActor::UnknownUser, origin, Some(organization_id))
                    .await?;
            }
        }
        signed_in
    }

    async fn checked_sign_in(
        &self,
        organization_id: OrganizationId,
        saml_response: &str,
        origin: &Origin,
    ) -> Result<SamlSignedIn, SamlSignInError> {
        let (organization, configuration) = self.configured(organization_id).await?;
        let assertion = self
            .ports
            .saml_protocol
            .verify_response(saml_response, &self.trust(configuration.clone()))
            .await?;
        let request_id = assertion
            .in_response_to
            .as_deref()
            .ok_or(SamlSignInError::Unsolicited)?;
        let request_id = SamlRequestId::parse(request_id).ok_or(SamlSignInError::UnknownRequest)?;
        let now = self.ports.clock.now();
        let request = self
            .ports
            .saml
            .saml_request(organization_id, &request_id, now)
            .await?
            .ok_or(SamlSignInError::UnknownRequest)?;
        let email = Email::parse(&assertion.name_id).map_err(|_| SamlSignInError::NotAnEmail)?;
        if !configuration.domain_whitelist.contains_email_domain(&email) {
            return Err(SamlSignInError::DomainNotAllowed);
        }
        let domain =
            EmailDomain::parse(email.domain()).map_err(|_| SamlSignInError::DomainNotAllowed)?;
        if self.ports.domains.verifying_organization(&domain).await? != Some(organization_id) {
            return Err(SamlSignInError::DomainNotVerified);
        }

        let role = configuration.default_role.role();
        let joining = (
            organization.plan,
            self.ports
                .policies
                .policies(organization_id)
                .await?
                .map(|saved| saved.policies),
        );
        let mut reclaim = None;
        let (user, provision, plans) =
            match self.ports.accounts.credentials_by_email(&email).await? {
                Some(credentials) => {
                    let mut user = credentials.user;
                    // The IdP speaks for the address: an account nobody proved it owns is
                    // reclaimed for its owner, the IdP's user.
                    reclaim = reclaiming(&mut user, |user| {
                        self.auth
                            .sign_in_record(user.id, AuditAction::UserReclaimed, origin, now)
                            .in_organization(organization_id)
                    });
                    let mut plans = self.ports.policies.policies_of_member(user.id).await?;
                    let member = self
                        .ports
                        .memberships
                        .membership(user.id, organization_id)
                        .await?;
                    let provision = match member {
                        Some(_) => Provision::Nothing,
                        None if configuration.auto_provision => {
                            plans.push(joining);
                            Provision::Member { role }
                        }
                        None => return Err(SamlSignInError::NotProvisioned),
                    };
                    (user, provision, plans)
                }
                None if configuration.auto_provision => {
                    let full_name = assertion
                        .full_name
                        .as_deref()
                        .and_then(|name| FullName::parse(name).ok())
                        .or_else(|| FullName::parse(email.local_part()).ok())
                        .ok_or(SamlSignInError::NotAnEmail)?;
                    // The identity provider asserted the address: it is verified.
                    let account = self.auth.new_account(email, full_name, None, true, now);
                    let user = User {
                        id: account.user.id,
                        email: account.user.email.clone(),
                        full_name: account.user.full_name.clone(),
                        created_at: now,
                        updated_at: now,
                        email_verified: true,
                    };
                    (
                        user,
                        Provision::Account {
                            account: Box::new(account),
                            role,
                        },
                        vec![joining],
                    )
                }
                None => return Err(SamlSignInError::NotProvisioned),
            };

        let mut events = Vec::new();
        let mut joined_audit = None;
        if !matches!(provision, Provision::Nothing) {
            let joined = Lifecycle::new(self.ports.random.as_ref(), now, origin).join(
                By::Themself(user.id),
                organization_id,
                Joiner {
                    user_id: user.id,
                    email: &user.email,
                    full_name: &user.full_name,
                },
                Joining::Provisioned(&role.into()),
            );
            events.push(joined.event);
            joined_audit = Some(joined.audit);
        }
        let provisioned = matches!(provision, Provision::Account { .. });
        let user_id = user.id;
        let mut opening = self
            .auth
            .opening(user, fold(&plans), None, Amr::external(), now);
        // `ext` speaks for this organization only.
        opening.session.sso_organization_id = Some(organization_id);
        events.push(opening.event.clone());
        let outcome = self
            .ports
            .saml
            .saml_sign_in(SamlSignIn {
                organization_id,
                request_id,
                assertion_id: assertion.id,
                // The adapter accepts an assertion until its end plus the skew: remember it
                // as long.
                assertion_valid_until: assertion.valid_until + SAML_CLOCK_SKEW,
                provision,
                reclaim,
                session: opening.session.clone(),
                keep_at_most: opening.keep_at_most,
                events,
                at: now,
                audit: joined_audit
                    .into_iter()
                    .chain([self
                        .auth
                        .sign_in_record(user_id, AuditAction::LoginSucceeded, origin, now)
                        .in_organization(organization_id)])
                    .collect(),
            })
            .await?;
        match outcome {
            SamlSignInOutcome::SignedIn => {}
            SamlSignInOutcome::RequestGone => return Err(SamlSignInError::UnknownRequest),
            SamlSignInOutcome::Replayed => return Err(SamlSignInError::Replayed),
        }
        let tokens = self
            .auth
            .tokens_for(opening)
            .await
            .map_err(|e| SamlSignInError::Internal(Box::new(e)))?;
        Ok(SamlSignedIn {
            tokens,
            return_to: request.return_to,
            user_id,
            provisioned,
        })
    }

    /// The organization, when it is live and its plan includes single sign-on.
    async fn with_sso(
        &self,
        organization_id: OrganizationId,
    ) -> Result<Option<Organization>, StoreError> {
        Ok(self
            .ports
            .organizations
            .organization(organization_id)
            .await?
            .filter(|org| org.plan.includes(Feature::Sso)))
    }

    /// The organization and its active configuration, on a plan with single sign-on.
    async fn configured(
        &self,
        organization_id: OrganizationId,
    ) -> Result<(Organization, SsoConfiguration), SamlSignInError> {
        let organization = self
            .with_sso(organization_id)
            .await?
            .ok_or(SamlSignInError::NotConfigured)?;
        let configuration = self
            .ports
            .sso
            .sso_configuration(organization_id)
            .await?
            .filter(|configuration| configuration.is_active)
            .ok_or(SamlSignInError::NotConfigured)?;
        Ok((organization, configuration))
    }

    /// What the organization's responses are checked against.
    fn trust(&self, configuration: SsoConfiguration) -> SamlTrust {
        let id = configuration.organization_id;
        SamlTrust {
            idp_entity_id: configuration.idp_entity_id,
            idp_certificate: configuration.idp_certificate,
            idp_sso_url: configuration.idp_sso_url,
            sp_entity_id: sp_entity_id(&self.public_url, id),
            acs_url: sp_acs_url(&self.public_url, id),
        }
    }
}
