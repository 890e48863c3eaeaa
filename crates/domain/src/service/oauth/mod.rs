//! The OAuth 2.0 and OpenID Connect authorization server, [`OAuthService`]: its ports, and what
//! its endpoints share (the client's authentication at the token, revocation and introspection
//! endpoints, their error, the records of what an application did, the end of a session).
//! One file per part of the protocol:
//!
//! - `authorize`: the authorization endpoint's decision, and the consents users give.
//! - `token`: the token endpoint's grants: the code exchange (with an ID token for `openid`),
//!   refresh, and client credentials (machine tokens).
//! - `introspect`: userinfo, introspection and revocation.
//! - `discovery`: the OpenID Provider metadata.

mod authorize;
mod discovery;
mod introspect;
mod token;

pub use authorize::{
    Authorization, AuthorizeError, AuthorizeRequest, NotAdmitted, RevokeConsentError,
};
pub use discovery::Discovery;
pub use introspect::{ActiveToken, IntrospectedKind, Introspection};
pub use token::{OAuthTokens, TokenGrant, MACHINE_TOKEN_SECONDS};

use super::payloads;
use time::OffsetDateTime;

use super::{audit, user_event, AuthService, Authenticator};
use crate::{
    model::{
        client_secret_matches, Application, AuditAction, AuditActor, AuditRecord, ClientId,
        Feature, OAuthError, OAuthErrorCode, OrganizationId, Origin, SecretToken, SessionId,
        TargetKind, UserId,
    },
    ports::{service_ports, BoxError, StoreError, TokenError},
};

service_ports! {
    /// The ports [`OAuthService`] uses.
    pub struct OAuthPorts { applications: ApplicationStore, authorization_codes: AuthorizationCodeStore, accounts: AccountStore, sessions: SessionStore, memberships: MembershipStore, policies: PolicyStore, mfa: MfaStore, organizations: OrganizationStore, branding: BrandingStore, signer: TokenSigner, clock: Clock, random: Random }
}

/// The OAuth 2.0 and OpenID Connect authorization server: the authorize step; the code
/// exchange (with an ID token for `openid`), refresh and client credentials at the token
/// endpoint; userinfo, revocation and introspection; sign-in sessions started by applications.
#[derive(Clone)]
pub struct OAuthService {
    ports: OAuthPorts,
    /// Opens and refreshes sessions the way a password login does (policies, limits, tokens).
    auth: AuthService,
    /// The one admission, which `/oauth/authorize` makes for the application's organization.
    authenticator: Authenticator,
}

/// How the client authenticated at the token endpoint (`client_secret_basic` or
/// `client_secret_post`; the HTTP layer reads either).
#[derive(Clone, PartialEq, Eq)]
pub struct ClientCredentials {
    /// The application's client id.
    pub client_id: String,
    /// Its client secret, checked against the stored SHA-256.
    pub client_secret: SecretToken,
}

debug_showing!(ClientCredentials { client_id });

/// Why an OAuth endpoint (token, userinfo, revocation, introspection) refused a request.
#[derive(Debug, thiserror::Error)]
pub enum TokenEndpointError {
    /// An RFC 6749 §5.2 error (or RFC 6750's, RFC 7009's); `invalid_client` and
    /// `invalid_token` are a `401`, `insufficient_scope` a `403`, the others `400`.
    #[error(transparent)]
    OAuth(#[from] OAuthError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Signing a token failed.
    #[error("issuing the token failed")]
    Internal(#[source] BoxError),
}

impl OAuthService {
    /// A service on these ports, issuing tokens through `auth`.
    pub fn new(ports: OAuthPorts, auth: AuthService, authenticator: Authenticator) -> Self {
        Self {
            ports,
            auth,
            authenticator,
        }
    }

    /// The active application whose credentials these are; a refusal of an application that
    /// exists is recorded (`oauth.token_refused`).
    async fn client(
        &self,
        client: &ClientCredentials,
        origin: &Origin,
    ) -> Result<Application, TokenEndpointError> {
        match self.authenticated(client).await {
            Ok(application) => Ok(application),
            Err((error, claimed)) => {
                if let Some(claimed) = claimed {
                    self.refused(&claimed, origin).await?;
                }
                Err(error.into())
            }
        }
    }

    /// The audit record of something the application did at an OAuth endpoint, in its
    /// organization (say to what with [`AuditRecord::on`]).
    fn by_application(
        &self,
        application: &Application,
        action: AuditAction,
        origin: &Origin,
        at: OffsetDateTime,
    ) -> AuditRecord {
        audit(
            self.ports.random.as_ref(),
            at,
            AuditActor::Application(application.id),
            action,
            origin,
        )
        .in_organization(application.organization_id)
    }

    /// Records a refusal at an OAuth endpoint of the application the client id names.
    async fn refused(&self, application: &Application, origin: &Origin) -> Result<(), StoreError> {
        let record = self
            .by_application(
                application,
                AuditAction::OAuthTokenRefused,
                origin,
                self.ports.clock.now(),
            )
            .on(TargetKind::Application, application.id)
            .failed();
        self.auth.record_alone(record).await
    }

    /// The active application whose client id and secret these are; `invalid_client`
    /// otherwise, the same whichever part was wrong, with the application the client id names
    /// when there is one (for the record of the refusal).
    async fn authenticated(
        &self,
        client: &ClientCredentials,
    ) -> Result<Application, (OAuthError, Option<Application>)> {
        let invalid = || {
            OAuthError::new(
                OAuthErrorCode::InvalidClient,
                "client authentication failed",
            )
        };
        let Some(client_id) = ClientId::parse(&client.client_id) else {
            return Err((invalid(), None));
        };
        let found = self
            .ports
            .applications
            .application_by_client_id(&client_id)
            .await
            .map_err(|_| {
                let unavailable =
                    OAuthError::new(OAuthErrorCode::TemporarilyUnavailable, "try again");
                (unavailable, None)
            })?;
        match found {
            Some((application, hash))
                if application.is_active && client_secret_matches(&client.client_secret, &hash) =>
            {
                Ok(application)
            }
            Some((application, _)) => Err((invalid(), Some(application))),
            None => Err((invalid(), None)),
        }
    }

    /// Ends a session (its refresh token and access tokens stop working at once), recording
    /// `auth.logout` with the reason and the audit record.
    async fn end_session(
        &self,
        session: SessionId,
        user: UserId,
        reason: &str,
        record: AuditRecord,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let ended = user_event(
            self.ports.random.as_ref(),
            now,
            user,
            payloads::AuthLogout {
                user_id: user,
                session_id: session,
                reason: Some(reason),
            },
        );
        self.ports
            .sessions
            .end_session(session, now, ended, record)
            .await?;
        Ok(())
    }

    /// Whether the organization is live and its plan includes the feature.
    async fn plan_includes(
        &self,
        organization: OrganizationId,
        feature: Feature,
    ) -> Result<bool, StoreError> {
        Ok(self
            .ports
            .organizations
            .organization(organization)
            .await?
            .is_some_and(|org| org.plan.includes(feature)))
    }
}

fn internal(error: TokenError) -> TokenEndpointError {
    TokenEndpointError::Internal(Box::new(error))
}

#[cfg(test)]
pub(super) mod tests;
