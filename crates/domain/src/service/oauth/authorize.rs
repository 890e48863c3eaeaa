//! The OAuth 2.0 authorization endpoint's decision (RFC 6749 §4.1.1, RFC 7636): whom to send
//! where. The HTTP layer turns the answer into a page, a redirect to the login page, or a
//! redirect back to the client. The consents a user gives an application's API scopes, on the
//! consent page, are kept and taken back here too.

use time::{Duration, OffsetDateTime};
use url::Url;

use super::OAuthService;
use crate::{
    model::{
        ApiScopes, Application, AuditAction, AuthorizationCode, Branding, ClientId, CodeChallenge,
        Consent, Feature, GrantedConsent, NewAuthorizationCode, Nonce, OAuthError, OAuthErrorCode,
        OrganizationId, Origin, Page, PageRequest, RedirectUri, Scope, State, TargetKind,
        TokenKind, AUTHORIZATION_CODE_SECONDS,
    },
    ports::StoreError,
    service::{audit, user_audit, BrowserSession, OrgAccessError, Principal},
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
    /// The application's organization signs the user's address in through its identity
    /// provider, and the signed-in session is not that provider's: sign in there (at
    /// `login_url`, which takes `?return_to=`), then make the same request again.
    SingleSignOn {
        /// Where the organization's identity provider's sign-in starts.
        login_url: String,
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

impl OAuthService {
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
        // The organization admits the member as at every other way in: its IP allowlist, MFA
        // policy and single sign-on hold here too.
        let admitted = self
            .authenticator
            .actor(
                session.principal(),
                application.organization_id,
                origin.client(),
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
            Err(OrgAccessError::SsoRequired(login_url)) => {
                if demand.silent {
                    let error = OAuthError::new(
                        OAuthErrorCode::LoginRequired,
                        "the organization requires a sign-in through its identity provider",
                    );
                    return Err(back(error, state));
                }
                return Ok(Authorization::SingleSignOn { login_url });
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
        let record = user_audit(
            self.ports.random.as_ref(),
            now,
            user,
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
            let record = user_audit(
                self.ports.random.as_ref(),
                now,
                session.user_id,
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

    /// A page of the consents the user gave applications, newest first.
    pub async fn consents(
        &self,
        principal: &Principal,
        page: PageRequest,
    ) -> Result<Page<GrantedConsent>, StoreError> {
        self.ports
            .authorization_codes
            .consents_of(principal.user_id(), page)
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
            principal.audit_actor(),
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
