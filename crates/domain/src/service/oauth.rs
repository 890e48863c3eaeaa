//! The OAuth 2.0 authorization endpoint's decision (RFC 6749 §4.1.1, RFC 7636): whom to send
//! where. The HTTP layer turns the answer into a page, a redirect to the login page, or a
//! redirect back to the client.

use serde_json::json;
use time::{Duration, OffsetDateTime};
use url::Url;

use super::{
    audit, event,
    principal::{admission, Admission},
    AccessToken, Agent, AuthService, BrowserSession, OrgAccessError, Principal, RefreshError,
};
use crate::{
    model::{
        at_hash, client_secret_matches, ApiScope, ApiScopes, Application, AuditAction, AuditActor,
        AuditRecord, AuthMethod, AuthorizationCode, Branding, ClientGrant, ClientId, CodeChallenge,
        Consent, EventType, Feature, GrantedConsent, NewAuthorizationCode, Nonce, OAuthError,
        OAuthErrorCode, OrganizationChoice, OrganizationId, Origin, RedirectUri, Scope,
        SecretToken, Session, SessionId, State, TargetKind, TokenHash, TokenKind,
        TokenOrganization, User, UserClaims, UserId, AUTHORIZATION_CODE_SECONDS, EMAIL_SCOPE,
        OPENID, PROFILE_SCOPE,
    },
    ports::{
        service_ports, AccessClaims, Audience, BearerClaims, BoxError, IdTokenClaims,
        MachineClaims, StoreError, TokenError,
    },
};

/// The longest a machine token lives (less when access tokens are configured to live less).
/// It cannot be revoked one by one; deactivating its application stops it at once.
pub const MACHINE_TOKEN_SECONDS: i64 = 15 * 60;

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
    /// `code_challenge`: the PKCE challenge (RFC 7636); optional unless the application
    /// requires PKCE.
    pub code_challenge: Option<String>,
    /// `code_challenge_method`: `S256`, with a `code_challenge`.
    pub code_challenge_method: Option<String>,
    /// `nonce` (OpenID Connect): echoed in the ID token.
    pub nonce: Option<String>,
    /// `prompt` (OpenID Connect): `login` asks for a new sign-in even when one is open, `none`
    /// for none at all (`login_required` when one would be needed); `consent` and
    /// `select_account` are accepted and change nothing (there is no consent screen, and one
    /// sign-in on the pages at a time).
    pub prompt: Option<String>,
    /// `max_age` (OpenID Connect): the most seconds since the sign-in on the pages; an older
    /// one asks for a new sign-in.
    pub max_age: Option<String>,
    /// `organization_id` (Gatehouse's): the organization the tokens speak for. An
    /// application's tokens speak for its own organization, the only one they may name: they
    /// carry its `org_id`, `org_role` and `org_permissions` whether or not the request names
    /// it; another organization is `invalid_request`.
    pub organization_id: Option<String>,
}

/// What an authorization request asks of the sign-in behind it (`prompt`, `max_age`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct SignInDemand {
    /// `prompt=none`: never show a page; `login_required` instead.
    silent: bool,
    /// `prompt=login`: a new sign-in, whatever is open.
    fresh: bool,
    /// `max_age`: a sign-in no older than this.
    max_age: Option<Duration>,
}

impl SignInDemand {
    fn parse(prompt: Option<&str>, max_age: Option<&str>) -> Result<Self, OAuthError> {
        let invalid =
            |description: &str| OAuthError::new(OAuthErrorCode::InvalidRequest, description);
        let mut demand = Self::default();
        let values: Vec<&str> = prompt
            .map(|p| p.split_whitespace().collect())
            .unwrap_or_default();
        for value in &values {
            match *value {
                "none" => demand.silent = true,
                "login" => demand.fresh = true,
                "consent" | "select_account" => {}
                _ => {
                    return Err(invalid(
                        "prompt takes none, login, consent or select_account",
                    ))
                }
            }
        }
        if demand.silent && values.len() > 1 {
            return Err(invalid("prompt=none goes with no other value"));
        }
        demand.max_age = max_age
            .map(|seconds| {
                seconds
                    .parse::<u32>()
                    .map(|s| Duration::seconds(s.into()))
                    .map_err(|_| invalid("max_age is a number of seconds"))
            })
            .transpose()?;
        Ok(demand)
    }

    /// Whether a sign-in made at `authenticated_at` will do at `now`.
    fn accepts(&self, authenticated_at: OffsetDateTime, now: OffsetDateTime) -> bool {
        !self.fresh && self.max_age.is_none_or(|age| now - authenticated_at <= age)
    }
}

/// Where the person goes next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Authorization {
    /// Nobody is signed in, or not as the request's `prompt=login` or `max_age` wants, or not
    /// with the second factor the organization's MFA policy requires of a member who has one:
    /// sign in (in the application's organization's branding, with the second factor when the
    /// user has one), then make the same request again without `prompt` and `max_age`, which
    /// that sign-in satisfies.
    SignIn {
        /// The application asking, whose organization's branding the sign-in page wears.
        application: Application,
    },
    /// Back to the client with a code: the URL to redirect to.
    Granted {
        /// The client's redirect URI with `code` and `state`.
        redirect: String,
    },
    /// The request asks for API scopes the signed-in user has not consented to for this
    /// application: ask them on the consent page (in the organization's branding), then
    /// [`OAuthService::consent`] answers.
    Consent {
        /// The application asking.
        application: Application,
        /// The API scopes it asks for, all of them (some may have been consented to before).
        scopes: ApiScopes,
    },
    /// The organization's policies refuse the signed-in member, and no sign-in on the pages
    /// would change that now: say why on a page in the organization's branding (the member
    /// must set up a second factor, or come from an allowed address), and send nothing to the
    /// client.
    NotAdmitted {
        /// The application asking.
        application: Application,
        /// Why the organization refuses the member.
        reason: NotAdmitted,
    },
}

/// Why an organization's policies refuse a member at `/oauth/authorize`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotAdmitted {
    /// The organization requires a second factor and the member has none to sign in with.
    SecondFactorNeeded,
    /// The request's address is outside the organization's IP allowlist.
    AddressNotAllowed,
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

/// Why a consent could not be taken back.
#[derive(Debug, thiserror::Error)]
pub enum RevokeConsentError {
    /// The user gave no consent to an application with that client id.
    #[error("no consent to that application")]
    NotFound,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

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
        if !self
            .plan_includes(application.organization_id, Feature::Branding)
            .await?
        {
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
        let (challenge, scope, nonce) =
            parse_grant(&request, application.require_pkce).map_err(|error| back(error, state))?;
        if !self
            .plan_includes(application.organization_id, Feature::OAuth)
            .await?
        {
            let error = OAuthError::new(
                OAuthErrorCode::AccessDenied,
                "OAuth authorization needs the enterprise plan",
            );
            return Err(back(error, state));
        }
        let demand = SignInDemand::parse(request.prompt.as_deref(), request.max_age.as_deref())
            .map_err(|error| back(error, state))?;
        if let Some(named) = request.organization_id.as_deref() {
            let named = uuid::Uuid::parse_str(named)
                .ok()
                .map(OrganizationId::from_uuid);
            if named != Some(application.organization_id) {
                let error = OAuthError::new(
                    OAuthErrorCode::InvalidRequest,
                    "organization_id must be the application's own organization",
                );
                return Err(back(error, state));
            }
        }
        let now = self.ports.clock.now();
        let Some(
            session @ BrowserSession {
                user_id: user,
                amr,
                authenticated_at,
                ..
            },
        ) = signed_in.filter(|session| demand.accepts(session.authenticated_at, now))
        else {
            if demand.silent {
                let error = OAuthError::new(
                    OAuthErrorCode::LoginRequired,
                    "prompt=none, and no sign-in on the hosted pages will do",
                );
                return Err(back(error, state));
            }
            return Ok(Authorization::SignIn { application });
        };
        let user = *user;
        // The organization admits the member as at every other way in: its IP allowlist and
        // MFA policy hold here too.
        let admitted = admission(
            Admission {
                memberships: self.ports.memberships.as_ref(),
                policies: self.ports.policies.as_ref(),
                applications: self.ports.applications.as_ref(),
            },
            session.principal(),
            application.organization_id,
            origin.client(),
            now,
        )
        .await;
        match admitted {
            Ok(_) => {}
            Err(OrgAccessError::Store(error)) => return Err(error.into()),
            Err(OrgAccessError::MfaRequired) => {
                let has_factor = self
                    .ports
                    .mfa
                    .mfa_factors(user)
                    .await?
                    .iter()
                    .any(|factor| factor.confirmed_at.is_some());
                if demand.silent {
                    let error = OAuthError::new(
                        OAuthErrorCode::InteractionRequired,
                        "the organization requires a second factor this sign-in did not use",
                    );
                    return Err(back(error, state));
                }
                return Ok(match has_factor {
                    true => Authorization::SignIn { application },
                    false => Authorization::NotAdmitted {
                        application,
                        reason: NotAdmitted::SecondFactorNeeded,
                    },
                });
            }
            Err(OrgAccessError::AddressNotAllowed(_)) => {
                if demand.silent {
                    let error = OAuthError::new(
                        OAuthErrorCode::AccessDenied,
                        "the organization's IP allowlist does not hold this address",
                    );
                    return Err(back(error, state));
                }
                return Ok(Authorization::NotAdmitted {
                    application,
                    reason: NotAdmitted::AddressNotAllowed,
                });
            }
            Err(OrgAccessError::NotFound | OrgAccessError::NoApiScope) => {
                let error = OAuthError::new(
                    OAuthErrorCode::AccessDenied,
                    "the signed-in user is not a member of the application's organization",
                );
                return Err(back(error, state));
            }
        }
        // API scopes act in the organization for the user: they need the user's consent.
        let asked = ApiScopes::of(&scope);
        if !asked.is_empty() {
            let consented = self
                .ports
                .authorization_codes
                .consented_scopes(user, application.id)
                .await?;
            if !asked.covered_by(&consented) {
                if demand.silent {
                    let error = OAuthError::new(
                        OAuthErrorCode::ConsentRequired,
                        "the user has not consented to the API scopes asked for",
                    );
                    return Err(back(error, state));
                }
                return Ok(Authorization::Consent {
                    application,
                    scopes: asked,
                });
            }
        }
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
                        authenticated_at: *authenticated_at,
                        nonce,
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

    /// The user's answer on the consent page to an authorization request (the same request's
    /// parameters): allowed, the consent is remembered (with the API scopes consented to
    /// before) and the request decided again, which now sends a code back; denied, the client
    /// hears `access_denied`. Nobody signed in: sign in first.
    pub async fn consent(
        &self,
        request: AuthorizeRequest,
        signed_in: Option<&BrowserSession>,
        allowed: bool,
        origin: &Origin,
    ) -> Result<Authorization, AuthorizeError> {
        let (application, redirect_uri) = self.trusted_client(&request).await?;
        let Some(session) = signed_in else {
            return Ok(Authorization::SignIn { application });
        };
        let state = request.state.as_deref().and_then(|s| State::parse(s).ok());
        let back = |error: OAuthError| AuthorizeError::Redirect {
            redirect: redirect_with(
                &redirect_uri,
                &[
                    ("error", error.code.as_str()),
                    ("error_description", &error.description),
                ],
                state.as_ref(),
            ),
            error,
        };
        if !allowed {
            return Err(back(OAuthError::new(
                OAuthErrorCode::AccessDenied,
                "the user did not allow the API scopes asked for",
            )));
        }
        let (_, scope, _) = parse_grant(&request, application.require_pkce).map_err(back)?;
        let asked = ApiScopes::of(&scope);
        if !asked.is_empty() {
            let now = self.ports.clock.now();
            let consented = self
                .ports
                .authorization_codes
                .consented_scopes(session.user_id, application.id)
                .await?;
            let record = audit(
                self.ports.random.as_ref(),
                now,
                AuditActor::User(session.user_id),
                AuditAction::OAuthConsentGranted,
                origin,
            )
            .in_organization(application.organization_id)
            .on(TargetKind::Application, application.id);
            self.ports
                .authorization_codes
                .save_consent(
                    Consent {
                        user_id: session.user_id,
                        application_id: application.id,
                        scopes: consented.union(&asked),
                        granted_at: now,
                    },
                    record,
                )
                .await?;
        }
        self.authorize(request, signed_in, origin).await
    }

    /// The consents the user gave applications, newest first.
    pub async fn consents(&self, principal: &Principal) -> Result<Vec<GrantedConsent>, StoreError> {
        self.ports
            .authorization_codes
            .consents_of(principal.user_id())
            .await
    }

    /// Takes back the user's consent to the application with this client id: its sessions of
    /// the user end at once (their tokens stop working), and the next authorization asks
    /// again. Audited in the application's organization.
    pub async fn revoke_consent(
        &self,
        principal: &Principal,
        client_id: &str,
        origin: &Origin,
    ) -> Result<(), RevokeConsentError> {
        let user = principal.user_id();
        let client_id = ClientId::parse(client_id).ok_or(RevokeConsentError::NotFound)?;
        let (application, _) = self
            .ports
            .applications
            .application_by_client_id(&client_id)
            .await?
            .ok_or(RevokeConsentError::NotFound)?;
        let now = self.ports.clock.now();
        let record = audit(
            self.ports.random.as_ref(),
            now,
            AuditActor::of(principal),
            AuditAction::OAuthConsentRevoked,
            origin,
        )
        .in_organization(application.organization_id)
        .on(TargetKind::Application, application.id);
        match self
            .ports
            .authorization_codes
            .revoke_consent(user, &client_id, now, record)
            .await?
        {
            true => Ok(()),
            false => Err(RevokeConsentError::NotFound),
        }
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

/// The response type, the PKCE challenge (if any; required when the application requires
/// PKCE), the scope and the nonce of a request, in the RFC's order of complaint.
fn parse_grant(
    request: &AuthorizeRequest,
    require_pkce: bool,
) -> Result<(Option<CodeChallenge>, Scope, Option<Nonce>), OAuthError> {
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
    let challenge = CodeChallenge::requested(
        request.code_challenge.as_deref(),
        request.code_challenge_method.as_deref(),
        require_pkce,
    )?;
    let scope = Scope::parse(request.scope.as_deref().unwrap_or_default())?;
    let nonce = request.nonce.as_deref().map(Nonce::parse).transpose()?;
    Ok((challenge, scope, nonce))
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
        /// The PKCE verifier of the code's challenge; none for a code issued without one.
        code_verifier: Option<String>,
    },
    /// `refresh_token`: a new access token from a refresh token.
    RefreshToken {
        /// The refresh token.
        refresh_token: String,
    },
    /// `client_credentials`: a machine token for the application itself.
    ClientCredentials {
        /// The API scopes asked for, space-separated.
        scope: Option<String>,
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
    /// The OpenID Connect ID token, when the code's scope holds `openid`.
    pub id_token: Option<String>,
}

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
    /// The token endpoint: exchanges a code (with its PKCE verifier), refreshes, or issues a
    /// machine token (client credentials), for an authenticated client.
    ///
    /// Audited: an exchange is `oauth.token_issued` in the transaction that opens the session;
    /// a machine token `oauth.client_credentials_issued`; a refusal of an application that
    /// exists is `oauth.token_refused`, on its own (a refresh that works is not recorded: it
    /// changes no grant).
    pub async fn token(
        &self,
        client: ClientCredentials,
        grant: TokenGrant,
        origin: &Origin,
    ) -> Result<OAuthTokens, TokenEndpointError> {
        let application = self.client(&client, origin).await?;
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
            TokenGrant::ClientCredentials { scope } => {
                self.client_credentials(&application, scope.as_deref(), origin)
                    .await
            }
        };
        if let Err(TokenEndpointError::OAuth(_)) = &issued {
            self.refused(&application, origin).await?;
        }
        issued
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
                let record = audit(
                    self.ports.random.as_ref(),
                    now,
                    AuditActor::System,
                    AuditAction::SessionRevoked,
                    &Origin::system(),
                )
                .on(TargetKind::User, stored.code.user_id);
                self.end_session(
                    session,
                    stored.code.user_id,
                    "authorization code reused",
                    record,
                    now,
                )
                .await?;
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
        stored.code.proven_by(verifier.as_deref())?;
        let user = stored.code.user_id;
        // The application's organization admitted the member at /oauth/authorize; the tokens
        // speak for it, with the member's role as it is now.
        let Some(membership) = self
            .ports
            .memberships
            .membership(user, application.organization_id)
            .await?
        else {
            return Err(invalid(
                "the user is no longer a member of the application's organization",
            )
            .into());
        };
        let speaks_for = TokenOrganization::of(&membership);
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
        let account = credentials.user.clone();
        let opening = self
            .auth
            .opening(
                credentials.user,
                policies,
                Some(grant),
                stored.code.amr.clone(),
                now,
            )
            .for_organization(Some(speaks_for.clone()));
        let redeemed = self
            .ports
            .authorization_codes
            .redeem_authorization_code(
                &hash,
                opening.session.clone(),
                opening.event.clone(),
                opening.keep_at_most,
                now,
                self.by_application(application, AuditAction::OAuthTokenIssued, origin, now)
                    .on(TargetKind::User, user),
            )
            .await?;
        if !redeemed {
            // A concurrent exchange took it between the read and now.
            return Err(invalid("the authorization code was used already").into());
        }
        let tokens = self.auth.tokens_for(opening).await.map_err(internal)?;
        let id_token = match stored.code.scope.contains(OPENID) {
            true => Some(
                self.id_token(
                    application,
                    &account,
                    &stored.code,
                    &tokens.access,
                    speaks_for,
                    now,
                )
                .await?,
            ),
            false => None,
        };
        Ok(OAuthTokens {
            access_token: tokens.access.access_token,
            expires_in: tokens.access.expires_in,
            refresh_token: Some(tokens.refresh_token),
            scope: stored.code.scope,
            id_token,
        })
    }

    /// The ID token of a code's exchange (OpenID Connect Core §3.1.3.6): for the application,
    /// about the user, with the code's nonce, sign-in time and methods, the `at_hash` of the
    /// access token issued with it, and the claims its scope allows. It expires with that
    /// access token.
    async fn id_token(
        &self,
        application: &Application,
        user: &User,
        code: &AuthorizationCode,
        access: &AccessToken,
        organization: TokenOrganization,
        now: OffsetDateTime,
    ) -> Result<String, TokenEndpointError> {
        let claims = UserClaims::of(user, &code.scope);
        let client_id = application.client_id.as_str().to_owned();
        let id_token = IdTokenClaims {
            iss: self.auth.settings().issuer.clone(),
            sub: claims.sub,
            aud: client_id.clone(),
            azp: client_id,
            exp: now.unix_timestamp() + access.expires_in,
            iat: now.unix_timestamp(),
            auth_time: code.authenticated_at.unix_timestamp(),
            nonce: code.nonce.as_ref().map(|nonce| nonce.as_str().to_owned()),
            at_hash: at_hash(&access.access_token),
            amr: code.amr.claim(),
            email: claims.email,
            email_verified: claims.email_verified,
            name: claims.name,
            org_id: Some(organization.organization_id),
            org_role: Some(organization.role.name().to_owned()),
            org_permissions: organization.permissions(),
        };
        self.ports
            .signer
            .sign_id_token(&id_token)
            .await
            .map_err(internal)
    }

    async fn refresh(
        &self,
        application: &Application,
        refresh_token: &str,
    ) -> Result<OAuthTokens, TokenEndpointError> {
        // The session's grant comes with the refresh's own read: one round trip.
        let (access, grant) = self
            .auth
            .refresh_session(
                refresh_token,
                Some(application.id),
                OrganizationChoice::Keep,
                None,
            )
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
            scope: grant.map(|grant| grant.scope).unwrap_or_default(),
            id_token: None,
        })
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
        let ended = event(
            self.ports.random.as_ref(),
            now,
            EventType::AuthLogout,
            None,
            Some(user),
            json!({ "user_id": user, "session_id": session, "reason": reason }),
        );
        self.ports
            .sessions
            .end_session(session, now, ended, record)
            .await?;
        Ok(())
    }
}

fn internal(error: TokenError) -> TokenEndpointError {
    TokenEndpointError::Internal(Box::new(error))
}

// ---------------------------------------------------------------------------------------------
// Client credentials: machine tokens
// ---------------------------------------------------------------------------------------------

impl OAuthService {
    /// A machine token for the application (`client_credentials`): on the enterprise plan,
    /// for one or more of Gatehouse's API scopes and nothing else, no refresh token.
    async fn client_credentials(
        &self,
        application: &Application,
        scope: Option<&str>,
        origin: &Origin,
    ) -> Result<OAuthTokens, TokenEndpointError> {
        if !self
            .plan_includes(application.organization_id, Feature::OAuth)
            .await?
        {
            return Err(OAuthError::new(
                OAuthErrorCode::UnauthorizedClient,
                "client_credentials needs the enterprise plan",
            )
            .into());
        }
        let scope = machine_scope(scope.unwrap_or_default())?;
        let now = self.ports.clock.now();
        let lifetime = self
            .auth
            .settings()
            .access_token_ttl
            .min(Duration::seconds(MACHINE_TOKEN_SECONDS));
        let client_id = application.client_id.as_str().to_owned();
        let claims = MachineClaims {
            iss: self.auth.settings().issuer.clone(),
            sub: client_id.clone(),
            aud: Audience::gatehouse_and(&client_id),
            iat: now.unix_timestamp(),
            nbf: now.unix_timestamp(),
            exp: (now + lifetime).unix_timestamp(),
            jti: self.ports.random.uuid(),
            client_id,
            org_id: application.organization_id,
            scope: scope.to_string(),
        };
        let access_token = self
            .ports
            .signer
            .sign_machine(&claims)
            .await
            .map_err(internal)?;
        let record = self
            .by_application(
                application,
                AuditAction::OAuthClientCredentialsIssued,
                origin,
                now,
            )
            .on(TargetKind::Application, application.id);
        self.auth.record_alone(record).await?;
        Ok(OAuthTokens {
            access_token,
            expires_in: lifetime.whole_seconds(),
            refresh_token: None,
            scope,
            id_token: None,
        })
    }
}

/// The scope of a `client_credentials` request: one or more of Gatehouse's API scopes, and
/// only those.
fn machine_scope(raw: &str) -> Result<Scope, OAuthError> {
    let scope = Scope::parse(raw)?;
    let names = || {
        ApiScope::ALL
            .iter()
            .map(|scope| scope.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    };
    if scope.is_empty() {
        return Err(OAuthError::new(
            OAuthErrorCode::InvalidScope,
            format!("ask for one or more of the API scopes: {}", names()),
        ));
    }
    if let Some(other) = scope
        .tokens()
        .iter()
        .find(|token| ApiScope::parse(token).is_none())
    {
        return Err(OAuthError::new(
            OAuthErrorCode::InvalidScope,
            format!(
                "a machine token carries only API scopes ({}); {other:?} is not one",
                names()
            ),
        ));
    }
    Ok(scope)
}

// ---------------------------------------------------------------------------------------------
// Userinfo, introspection, revocation
// ---------------------------------------------------------------------------------------------

/// What a token presented for introspection or revocation turned out to be, for the client
/// that presents it.
enum Presented {
    /// An access token of a live session granted to this client.
    Access(AccessClaims),
    /// The refresh token of a live session granted to this client.
    Refresh(Session),
    /// A machine token of this client, whose organization is still on the enterprise plan.
    Machine(MachineClaims),
    /// Anything else: unknown, malformed, expired, revoked, or another client's.
    Nothing,
}

/// What kind of token an introspection found active.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntrospectedKind {
    /// An access token (a user's, or a machine token): `token_type` `Bearer`.
    Access,
    /// A refresh token: `token_type` `refresh_token`.
    Refresh,
}

/// An active token, as RFC 7662 §2.2 describes it to the client it was issued to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActiveToken {
    /// An access token or a refresh token.
    pub kind: IntrospectedKind,
    /// The scope granted.
    pub scope: Scope,
    /// The client it was issued to (the one asking).
    pub client_id: String,
    /// The user's id, or a machine token's client id.
    pub sub: String,
    /// The user's email; `None` for a machine token.
    pub username: Option<String>,
    /// When it expires, in Unix seconds.
    pub exp: i64,
    /// When it was issued, in Unix seconds (a refresh token: when its session opened).
    pub iat: i64,
    /// The issuer.
    pub iss: String,
    /// An access token's audience: `gatehouse` and the client id.
    pub aud: Option<Audience>,
    /// An access token's id.
    pub jti: Option<String>,
    /// The organization the token speaks for: a machine token's, or the one an access
    /// token's sign-in named.
    pub org_id: Option<OrganizationId>,
}

/// An introspection's answer (RFC 7662 §2.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Introspection {
    /// The token is active, and was issued to the client asking.
    Active(Box<ActiveToken>),
    /// `{"active": false}`: the token is not active, or not the asking client's to inspect.
    Inactive,
}

impl OAuthService {
    /// The userinfo endpoint (OpenID Connect Core §5.3): the claims of the user a token of the
    /// OAuth flow with the scope `openid` speaks for, by its scope.
    ///
    /// # Errors
    /// `insufficient_scope` for any other token (a sign-in's own, an API key, a machine
    /// token, a token without `openid`); `invalid_token` when the user is gone.
    pub async fn userinfo(&self, agent: &Agent) -> Result<UserClaims, TokenEndpointError> {
        let Agent::Person(principal) = agent else {
            return Err(insufficient_scope().into());
        };
        let Some(scope) = principal
            .application()
            .map(|grant| &grant.scope)
            .filter(|scope| scope.contains(OPENID))
        else {
            return Err(insufficient_scope().into());
        };
        let user_id = principal.user_id();
        let user = self
            .ports
            .accounts
            .credentials_by_id(user_id)
            .await?
            .ok_or_else(|| OAuthError::new(OAuthErrorCode::InvalidToken, "the user is gone"))?
            .user;
        Ok(UserClaims::of(&user, scope))
    }

    /// RFC 7662 introspection, for an authenticated client: a token is active only while it
    /// works (its session live, its application active) and only for the client it was issued
    /// to; anything else is inactive. A refusal of an application that exists is recorded
    /// (`oauth.token_refused`); an answer changes nothing and is not recorded.
    pub async fn introspect(
        &self,
        client: ClientCredentials,
        token: &str,
        origin: &Origin,
    ) -> Result<Introspection, TokenEndpointError> {
        let application = self.client(&client, origin).await?;
        let issuer = self.auth.settings().issuer.clone();
        let client_id = application.client_id.as_str().to_owned();
        let active = match self.presented(&application, token).await? {
            Presented::Nothing => return Ok(Introspection::Inactive),
            Presented::Access(claims) => ActiveToken {
                kind: IntrospectedKind::Access,
                scope: Scope::parse(claims.scope.as_deref().unwrap_or_default())?,
                client_id,
                sub: claims.sub.to_string(),
                username: Some(claims.email),
                exp: claims.exp,
                iat: claims.iat,
                iss: claims.iss,
                aud: Some(claims.aud),
                jti: Some(claims.jti.to_string()),
                org_id: claims.org_id,
            },
            Presented::Machine(claims) => ActiveToken {
                kind: IntrospectedKind::Access,
                scope: Scope::parse(&claims.scope)?,
                client_id,
                sub: claims.sub,
                username: None,
                exp: claims.exp,
                iat: claims.iat,
                iss: claims.iss,
                aud: Some(claims.aud),
                jti: Some(claims.jti.to_string()),
                org_id: Some(claims.org_id),
            },
            Presented::Refresh(session) => {
                let Some(user) = self
                    .ports
                    .accounts
                    .credentials_by_id(session.user_id)
                    .await?
                else {
                    return Ok(Introspection::Inactive);
                };
                ActiveToken {
                    kind: IntrospectedKind::Refresh,
                    scope: session.grant.map(|grant| grant.scope).unwrap_or_default(),
                    client_id,
                    sub: session.user_id.to_string(),
                    username: Some(user.user.email.as_ref().to_owned()),
                    exp: session.expires_at.unix_timestamp(),
                    iat: session.created_at.unix_timestamp(),
                    iss: issuer,
                    aud: None,
                    jti: None,
                    org_id: None,
                }
            }
        };
        Ok(Introspection::Active(Box::new(active)))
    }

    /// RFC 7009 revocation, for an authenticated client. A refresh token or an access token of
    /// a session granted to this client ends that session: its refresh token and every access
    /// token it issued stop working at once (`oauth.token_revoked`, by the application,
    /// in the same transaction). A token that is not this client's, or no longer works, is
    /// left alone and answered the same (RFC 7009 §2.2).
    ///
    /// # Errors
    /// `unsupported_token_type` for a machine token: it cannot be revoked one by one (it
    /// lives at most [`MACHINE_TOKEN_SECONDS`]; deactivating the application stops it at
    /// once).
    pub async fn revoke(
        &self,
        client: ClientCredentials,
        token: &str,
        origin: &Origin,
    ) -> Result<(), TokenEndpointError> {
        let application = self.client(&client, origin).await?;
        let (session, user) = match self.presented(&application, token).await? {
            Presented::Nothing => return Ok(()),
            Presented::Machine(_) => {
                return Err(OAuthError::new(
                    OAuthErrorCode::UnsupportedTokenType,
                    "a machine token cannot be revoked: it expires by itself within minutes; \
                     deactivate the application to stop its machine tokens at once",
                )
                .into())
            }
            Presented::Access(claims) => (claims.sid, claims.sub),
            Presented::Refresh(session) => (session.id, session.user_id),
        };
        let now = self.ports.clock.now();
        let record = self
            .by_application(&application, AuditAction::OAuthTokenRevoked, origin, now)
            .on(TargetKind::User, user);
        self.end_session(session, user, "revoked by the application", record, now)
            .await?;
        Ok(())
    }

    /// What the token is for this client: a Gatehouse JWT (by its shape), else a refresh
    /// token.
    async fn presented(
        &self,
        application: &Application,
        token: &str,
    ) -> Result<Presented, TokenEndpointError> {
        let now = self.ports.clock.now();
        if token.is_empty() || token.len() > super::principal::MAX_ACCESS_TOKEN_BYTES {
            return Ok(Presented::Nothing);
        }
        if token.split('.').count() == 3 {
            let claims = match self.ports.signer.verify(token).await {
                Ok(claims) => claims,
                Err(TokenError::Invalid) => return Ok(Presented::Nothing),
                Err(failed) => return Err(internal(failed)),
            };
            return Ok(match claims {
                BearerClaims::User(claims)
                    if claims.client_id.as_deref() == Some(application.client_id.as_str())
                        && self.ports.sessions.is_live(claims.sid, now).await? =>
                {
                    Presented::Access(claims)
                }
                BearerClaims::Machine(claims)
                    if claims.client_id == application.client_id.as_str()
                        && claims.org_id == application.organization_id
                        && self
                            .plan_includes(application.organization_id, Feature::OAuth)
                            .await? =>
                {
                    Presented::Machine(claims)
                }
                _ => Presented::Nothing,
            });
        }
        let session = self
            .ports
            .sessions
            .session_by_refresh_token(&TokenHash::of(token), now)
            .await?
            .filter(|session| {
                session
                    .grant
                    .as_ref()
                    .is_some_and(|grant| grant.application_id == application.id)
            });
        Ok(session.map_or(Presented::Nothing, Presented::Refresh))
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

fn insufficient_scope() -> OAuthError {
    OAuthError::new(
        OAuthErrorCode::InsufficientScope,
        "userinfo needs an access token of the OAuth flow granted the scope openid",
    )
}

// ---------------------------------------------------------------------------------------------
// Discovery
// ---------------------------------------------------------------------------------------------

/// The OpenID Provider metadata (OpenID Connect Discovery 1.0 §3, RFC 8414): where the
/// endpoints are and what they support. Everything a client needs besides its id and secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Discovery {
    /// The issuer: the public URL, as every token's `iss`.
    pub issuer: String,
    /// `{issuer}/oauth/authorize`.
    pub authorization_endpoint: String,
    /// `{issuer}/oauth/token`.
    pub token_endpoint: String,
    /// `{issuer}/oauth/userinfo`.
    pub userinfo_endpoint: String,
    /// `{issuer}/oauth/revoke` (RFC 7009).
    pub revocation_endpoint: String,
    /// `{issuer}/oauth/introspect` (RFC 7662).
    pub introspection_endpoint: String,
    /// `{issuer}/.well-known/jwks.json`.
    pub jwks_uri: String,
    /// `openid`, `profile`, `email` and the API scopes (others are accepted and echoed).
    pub scopes_supported: Vec<&'static str>,
    /// The claims the ID token and userinfo may carry.
    pub claims_supported: Vec<&'static str>,
}

impl Discovery {
    /// `code`.
    pub const RESPONSE_TYPES: &'static [&'static str] = &["code"];
    /// `query`.
    pub const RESPONSE_MODES: &'static [&'static str] = &["query"];
    /// The grants of the token endpoint.
    pub const GRANT_TYPES: &'static [&'static str] =
        &["authorization_code", "refresh_token", "client_credentials"];
    /// `public`: `sub` is the user's id, the same for every client.
    pub const SUBJECT_TYPES: &'static [&'static str] = &["public"];
    /// `RS256`.
    pub const SIGNING_ALGORITHMS: &'static [&'static str] = &["RS256"];
    /// How clients authenticate at the token, revocation and introspection endpoints.
    pub const CLIENT_AUTH_METHODS: &'static [&'static str] =
        &["client_secret_basic", "client_secret_post"];
    /// `S256` only.
    pub const CODE_CHALLENGE_METHODS: &'static [&'static str] = &["S256"];
}

impl OAuthService {
    /// The OpenID Provider metadata of this server.
    pub fn discovery(&self) -> Discovery {
        let issuer = self.auth.settings().issuer.clone();
        let at = |path: &str| format!("{issuer}{path}");
        let mut scopes_supported = vec![OPENID, PROFILE_SCOPE, EMAIL_SCOPE];
        scopes_supported.extend(ApiScope::ALL.iter().map(|scope| scope.as_str()));
        Discovery {
            authorization_endpoint: at("/oauth/authorize"),
            token_endpoint: at("/oauth/token"),
            userinfo_endpoint: at("/oauth/userinfo"),
            revocation_endpoint: at("/oauth/revoke"),
            introspection_endpoint: at("/oauth/introspect"),
            jwks_uri: at("/.well-known/jwks.json"),
            scopes_supported,
            claims_supported: vec![
                "iss",
                "sub",
                "aud",
                "azp",
                "exp",
                "iat",
                "auth_time",
                "nonce",
                "at_hash",
                "amr",
                "email",
                "email_verified",
                "name",
                "org_id",
                "org_role",
                "org_permissions",
            ],
            issuer,
        }
    }
}
