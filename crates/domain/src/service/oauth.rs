//! The OAuth 2.0 authorization endpoint's decision (RFC 6749 §4.1.1, RFC 7636): whom to send
//! where. The HTTP layer turns the answer into a page, a redirect to the login page, or a
//! redirect back to the client.

use serde_json::json;
use time::{Duration, OffsetDateTime};
use url::Url;

use super::{audit, event, AuthService, BrowserSession, RefreshError};
use crate::{
    model::{
        client_secret_matches, Application, AuditAction, AuditActor, AuthMethod, AuthorizationCode,
        Branding, ClientGrant, ClientId, CodeChallenge, CodeVerifier, EventType, Feature,
        NewAuthorizationCode, OAuthError, OAuthErrorCode, Origin, RedirectUri, Scope, SecretToken,
        SessionId, State, TargetKind, TokenHash, TokenKind, UserId, AUTHORIZATION_CODE_SECONDS,
    },
    ports::{service_ports, BoxError, StoreError},
};

/// The authorization request's parameters, as the client sent them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthorizeRequest {
    /// `client_id`: the application asking.
    pub client_id: Option<String>,
    /// `redirect_uri`: where to send the answer; must be one the application registered.
    pub redirect_uri: Option<String>,
    /// `response_type`: only `code` is supported.
    pub response_type: Option<String>,
    /// `scope`: the scopes asked for, space-separated (`openid profile email`).
    pub scope: Option<String>,
    /// `state`: the client's value, returned unchanged.
    pub state: Option<String>,
    /// `code_challenge`: the PKCE challenge (RFC 7636).
    pub code_challenge: Option<String>,
    /// `code_challenge_method`: `S256`.
    pub code_challenge_method: Option<String>,
}

/// Where the person goes next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Authorization {
    /// Nobody is signed in: sign in (in the application's organization's branding), then make
    /// the same request again.
    SignIn {
        /// The application asking, whose organization's branding the sign-in page wears.
        application: Application,
    },
    /// Back to the client with a code: the URL to redirect to.
    Granted {
        /// The client's redirect URI with `code` and `state`.
        redirect: String,
    },
}

/// Why an authorization request was not granted.
#[derive(Debug, thiserror::Error)]
pub enum AuthorizeError {
    /// The client or the redirect URI cannot be trusted: show the message on a page, never
    /// redirect (RFC 6749 §4.1.2.1).
    #[error("{0}")]
    NotRedirectable(String),
    /// Back to the client with an RFC 6749 error: the URL to redirect to.
    #[error("redirect with an error")]
    Redirect {
        /// The client's redirect URI with `error`, `error_description` and `state`.
        redirect: String,
        /// The error it carries.
        error: OAuthError,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

service_ports! {
    /// The ports [`OAuthService`] uses.
    pub struct OAuthPorts { applications: ApplicationStore, authorization_codes: AuthorizationCodeStore, accounts: AccountStore, sessions: SessionStore, memberships: MembershipStore, organizations: OrganizationStore, branding: BrandingStore, clock: Clock, random: Random }
}

/// The OAuth 2.0 authorization server: the authorize step, the code exchange and refresh at the token endpoint, and sign-in sessions started by applications.
#[derive(Clone)]
pub struct OAuthService {
    ports: OAuthPorts,
    /// Opens and refreshes sessions the way a password login does (policies, limits, tokens).
    auth: AuthService,
}

impl OAuthService {
    /// A service on these ports, issuing tokens through `auth`.
    pub fn new(ports: OAuthPorts, auth: AuthService) -> Self {
        Self { ports, auth }
    }

    /// The branding of the login page an authorization request sends people to: its
    /// application's organization's, while its plan includes branding; `None` for the default
    /// look (no such client, or a plan without branding).
    pub async fn branding_for(&self, client_id: &str) -> Result<Option<Branding>, StoreError> {
        let Some(client_id) = ClientId::parse(client_id) else {
            return Ok(None);
        };
        let Some((application, _)) = self
            .ports
            .applications
            .application_by_client_id(&client_id)
            .await?
        else {
            return Ok(None);
        };
        let organization = self
            .ports
            .organizations
            .organization(application.organization_id)
            .await?;
        if !organization.is_some_and(|org| org.plan.includes(Feature::Branding)) {
            return Ok(None);
        }
        Ok(Some(
            self.ports
                .branding
                .branding(application.organization_id)
                .await?
                .map(|saved| saved.branding)
                .unwrap_or_default(),
        ))
    }

    /// Decides an authorization request for the person signed in on the pages, if any.
    /// Audited: a code issued is `oauth.authorized`, by the user, in the application's
    /// organization.
    pub async fn authorize(
        &self,
        request: AuthorizeRequest,
        signed_in: Option<&BrowserSession>,
        origin: &Origin,
    ) -> Result<Authorization, AuthorizeError> {
        let (application, redirect_uri) = self.trusted_client(&request).await?;
        // From here on, errors go back to the client, with its state when it sent a usable one.
        let state = request.state.as_deref().map(State::parse).transpose();
        let back = |error: OAuthError, state: Option<&State>| AuthorizeError::Redirect {
            redirect: redirect_with(
                &redirect_uri,
                &[
                    ("error", error.code.as_str()),
                    ("error_description", &error.description),
                ],
                state,
            ),
            error,
        };
        let state = state.map_err(|error| back(error, None))?;
        let state = state.as_ref();
        let (challenge, scope) = parse_grant(&request).map_err(|error| back(error, state))?;
        let organization = self
            .ports
            .organizations
            .organization(application.organization_id)
            .await?;
        if !organization.is_some_and(|org| org.plan.includes(Feature::OAuth)) {
            let error = OAuthError::new(
                OAuthErrorCode::AccessDenied,
                "OAuth authorization needs the enterprise plan",
            );
            return Err(back(error, state));
        }
        let Some(BrowserSession {
            user_id: user, amr, ..
        }) = signed_in
        else {
            return Ok(Authorization::SignIn { application });
        };
        let user = *user;
        if !self.is_member(user, &application).await? {
            let error = OAuthError::new(
                OAuthErrorCode::AccessDenied,
                "the signed-in user is not a member of the application's organization",
            );
            return Err(back(error, state));
        }
        let now = self.ports.clock.now();
        let code = self.ports.random.secret(TokenKind::AuthorizationCode);
        let record = audit(
            self.ports.random.as_ref(),
            now,
            AuditActor::User(user),
            AuditAction::OAuthAuthorized,
            origin,
        )
        .in_organization(application.organization_id)
        .on(TargetKind::Application, application.id);
        self.ports
            .authorization_codes
            .save_authorization_code(
                NewAuthorizationCode {
                    hash: code.hash(),
                    code: AuthorizationCode {
                        application_id: application.id,
                        user_id: user,
                        redirect_uri: redirect_uri.clone(),
                        challenge,
                        scope,
                        amr: amr.clone(),
                        created_at: now,
                        expires_at: now + Duration::seconds(AUTHORIZATION_CODE_SECONDS),
                    },
                },
                record,
            )
            .await?;
        Ok(Authorization::Granted {
            redirect: redirect_with(&redirect_uri, &[("code", code.expose())], state),
        })
    }

    /// The application named by `client_id`, active, and the redirect URI: exactly one it
    /// registered, or its only one when the request names none.
    async fn trusted_client(
        &self,
        request: &AuthorizeRequest,
    ) -> Result<(Application, RedirectUri), AuthorizeError> {
        let unknown = || AuthorizeError::NotRedirectable("unknown or inactive client_id".into());
        let client_id = request
            .client_id
            .as_deref()
            .and_then(ClientId::parse)
            .ok_or_else(unknown)?;
        let (application, _) = self
            .ports
            .applications
            .application_by_client_id(&client_id)
            .await?
            .filter(|(app, _)| app.is_active)
            .ok_or_else(unknown)?;
        let redirect_uri = match request.redirect_uri.as_deref() {
            Some(given) => application.redirect_uris.exactly(given).cloned(),
            None => {
                let mut registered = application.redirect_uris.iter();
                match (registered.next(), registered.next()) {
                    (Some(only), None) => Some(only.clone()),
                    _ => None,
                }
            }
        }
        .ok_or_else(|| {
            AuthorizeError::NotRedirectable(
                "redirect_uri is not one the application registered (it must match exactly)".into(),
            )
        })?;
        Ok((application, redirect_uri))
    }
}

/// The response type, the PKCE challenge and the scope of a request, in the RFC's order of
/// complaint.
fn parse_grant(request: &AuthorizeRequest) -> Result<(CodeChallenge, Scope), OAuthError> {
    match request.response_type.as_deref() {
        Some("code") => {}
        None => return Err(OAuthError::invalid_request("response_type is required")),
        Some(_) => {
            return Err(OAuthError::new(
                OAuthErrorCode::UnsupportedResponseType,
                "only response_type=code is supported",
            ))
        }
    }
    let challenge = CodeChallenge::parse(
        request.code_challenge.as_deref(),
        request.code_challenge_method.as_deref(),
    )?;
    let scope = Scope::parse(request.scope.as_deref().unwrap_or_default())?;
    Ok((challenge, scope))
}

/// The redirect URI with the parameters (and the state) added to its query.
fn redirect_with(uri: &RedirectUri, parameters: &[(&str, &str)], state: Option<&State>) -> String {
    match Url::parse(uri.as_str()) {
        Ok(mut url) => {
            {
                let mut query = url.query_pairs_mut();
                for (name, value) in parameters {
                    query.append_pair(name, value);
                }
                if let Some(state) = state {
                    query.append_pair("state", state.as_str());
                }
            }
            url.to_string()
        }
        // A registered URI always parses; should one not, the client gets nothing.
        Err(_) => uri.as_str().to_owned(),
    }
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

impl std::fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientCredentials")
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

/// A token request's grant.
#[derive(Clone, PartialEq, Eq)]
pub enum TokenGrant {
    /// `authorization_code`: exchange a code for tokens.
    AuthorizationCode {
        /// The code the authorize step issued.
        code: String,
        /// The redirect URI the code was issued for, when the request named one.
        redirect_uri: Option<String>,
        /// The PKCE verifier of the code's challenge.
        code_verifier: Option<String>,
    },
    /// `refresh_token`: a new access token from a refresh token.
    RefreshToken {
        /// The refresh token.
        refresh_token: String,
    },
}

/// The token endpoint's answer (RFC 6749 §5.1).
#[derive(Clone, PartialEq, Eq)]
pub struct OAuthTokens {
    /// The RS256 JWT.
    pub access_token: String,
    /// Seconds until the access token expires.
    pub expires_in: i64,
    /// Issued by the code exchange; a refresh answers without one (the token is not rotated).
    pub refresh_token: Option<SecretToken>,
    /// The scopes granted.
    pub scope: Scope,
}

/// Why the token endpoint refused a request.
#[derive(Debug, thiserror::Error)]
pub enum TokenEndpointError {
    /// An RFC 6749 §5.2 error; `invalid_client` is a `401`, the others `400`.
    #[error(transparent)]
    OAuth(#[from] OAuthError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Signing the token failed.
    #[error("issuing the token failed")]
    Internal(#[source] BoxError),
}

impl OAuthService {
    /// The token endpoint: exchanges a code (with its PKCE verifier) or refreshes, for an
    /// authenticated client.
    ///
    /// Audited: an exchange is `oauth.token_issued` in the transaction that opens the session;
    /// a refusal of an application that exists is `oauth.token_refused`, on its own (a refresh
    /// that works is not recorded: it changes no grant).
    pub async fn token(
        &self,
        client: ClientCredentials,
        grant: TokenGrant,
        origin: &Origin,
    ) -> Result<OAuthTokens, TokenEndpointError> {
        let application = match self.authenticated(&client).await {
            Ok(application) => application,
            Err((error, claimed)) => {
                if let Some(claimed) = claimed {
                    self.refused(&claimed, origin).await?;
                }
                return Err(error.into());
            }
        };
        let issued = match grant {
            TokenGrant::AuthorizationCode {
                code,
                redirect_uri,
                code_verifier,
            } => {
                self.exchange(&application, &code, redirect_uri, code_verifier, origin)
                    .await
            }
            TokenGrant::RefreshToken { refresh_token } => {
                self.refresh(&application, &refresh_token).await
            }
        };
        if let Err(TokenEndpointError::OAuth(_)) = &issued {
            self.refused(&application, origin).await?;
        }
        issued
    }

    /// Records a refusal at the token endpoint of the application the client id names.
    async fn refused(&self, application: &Application, origin: &Origin) -> Result<(), StoreError> {
        let record = audit(
            self.ports.random.as_ref(),
            self.ports.clock.now(),
            AuditActor::Application(application.id),
            AuditAction::OAuthTokenRefused,
            origin,
        )
        .in_organization(application.organization_id)
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

    async fn exchange(
        &self,
        application: &Application,
        code: &str,
        redirect_uri: Option<String>,
        verifier: Option<String>,
        origin: &Origin,
    ) -> Result<OAuthTokens, TokenEndpointError> {
        let now = self.ports.clock.now();
        let hash = TokenHash::of(code);
        let invalid = |why: &str| OAuthError::invalid_grant(why);
        let stored = self
            .ports
            .authorization_codes
            .authorization_code(&hash)
            .await?
            .ok_or_else(|| invalid("unknown authorization code"))?;
        if stored.code.application_id != application.id {
            return Err(invalid("the code was issued to another client").into());
        }
        if stored.used_at.is_some() {
            // Presented twice: someone else may hold it. What the first use issued ends now.
            if let Some(session) = stored.session_id {
                self.end_session(session, stored.code.user_id, now).await?;
            }
            return Err(invalid(
                "the authorization code was used already; the tokens it issued are revoked",
            )
            .into());
        }
        if now >= stored.code.expires_at {
            return Err(invalid("the authorization code expired").into());
        }
        if redirect_uri.as_deref() != Some(stored.code.redirect_uri.as_str()) {
            return Err(invalid("redirect_uri must be the one the code was issued for").into());
        }
        let verifier = CodeVerifier::parse(verifier.as_deref().unwrap_or_default())?;
        if !stored.code.challenge.is_met_by(&verifier) {
            return Err(invalid("code_verifier does not match the code_challenge").into());
        }
        let user = stored.code.user_id;
        if !self.is_member(user, application).await? {
            return Err(invalid(
                "the user is no longer a member of the application's organization",
            )
            .into());
        }
        let credentials = self
            .ports
            .accounts
            .credentials_by_id(user)
            .await?
            .ok_or_else(|| invalid("the user is gone"))?;
        let policies = self.auth.policies_of(user).await?;
        if stored.code.amr.includes(AuthMethod::Password)
            && policies
                .password
                .is_expired(credentials.password_changed_at, now)
        {
            return Err(invalid("the user's password expired; they must renew it").into());
        }
        let grant = ClientGrant {
            application_id: application.id,
            client_id: application.client_id.clone(),
            scope: stored.code.scope.clone(),
        };
        let opening = self.auth.opening(
            credentials.user,
            policies,
            Some(grant),
            stored.code.amr.clone(),
            now,
        );
        let redeemed = self
            .ports
            .authorization_codes
            .redeem_authorization_code(
                &hash,
                opening.session.clone(),
                opening.event.clone(),
                opening.keep_at_most,
                now,
                audit(
                    self.ports.random.as_ref(),
                    now,
                    AuditActor::Application(application.id),
                    AuditAction::OAuthTokenIssued,
                    origin,
                )
                .in_organization(application.organization_id)
                .on(TargetKind::User, user),
            )
            .await?;
        if !redeemed {
            // A concurrent exchange took it between the read and now.
            return Err(invalid("the authorization code was used already").into());
        }
        let tokens = self
            .auth
            .tokens_for(opening)
            .await
            .map_err(|e| TokenEndpointError::Internal(Box::new(e)))?;
        Ok(OAuthTokens {
            access_token: tokens.access.access_token,
            expires_in: tokens.access.expires_in,
            refresh_token: Some(tokens.refresh_token),
            scope: stored.code.scope,
        })
    }

    async fn refresh(
        &self,
        application: &Application,
        refresh_token: &str,
    ) -> Result<OAuthTokens, TokenEndpointError> {
        let now = self.ports.clock.now();
        let session = self
            .ports
            .sessions
            .session_by_refresh_token(&TokenHash::of(refresh_token), now)
            .await?;
        let scope = session
            .and_then(|session| session.grant)
            .map(|grant| grant.scope)
            .unwrap_or_default();
        let access = self
            .auth
            .refresh(refresh_token, Some(application.id))
            .await
            .map_err(|error| match error {
                RefreshError::Store(e) => TokenEndpointError::Store(e),
                RefreshError::Internal(e) => TokenEndpointError::Internal(e),
                other => OAuthError::invalid_grant(other.to_string()).into(),
            })?;
        Ok(OAuthTokens {
            access_token: access.access_token,
            expires_in: access.expires_in,
            refresh_token: None,
            scope,
        })
    }

    /// Whether the user is an active member of the application's (live) organization.
    async fn is_member(&self, user: UserId, application: &Application) -> Result<bool, StoreError> {
        Ok(self
            .ports
            .memberships
            .membership(user, application.organization_id)
            .await?
            .is_some())
    }

    async fn end_session(
        &self,
        session: SessionId,
        user: UserId,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let ended = event(
            self.ports.random.as_ref(),
            now,
            EventType::AuthLogout,
            None,
            Some(user),
            json!({ "user_id": user, "session_id": session, "reason": "authorization code reused" }),
        );
        let record = audit(
            self.ports.random.as_ref(),
            now,
            AuditActor::System,
            AuditAction::SessionRevoked,
            &Origin::system(),
        )
        .on(TargetKind::User, user);
        self.ports
            .sessions
            .end_session(session, now, ended, record)
            .await?;
        Ok(())
    }
}
