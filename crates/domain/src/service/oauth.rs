//! The OAuth 2.0 authorization endpoint's decision (RFC 6749 §4.1.1, RFC 7636): whom to send
//! where. The HTTP layer turns the answer into a page, a redirect to the login page, or a
//! redirect back to the client.

use chrono::Duration;
use url::Url;

use crate::{
    model::{
        Application, AuthorizationCode, ClientId, CodeChallenge, Feature, NewAuthorizationCode,
        OAuthError, OAuthErrorCode, RedirectUri, Scope, State, TokenKind, UserId,
        AUTHORIZATION_CODE_SECONDS,
    },
    ports::{Ports, StoreError},
};

/// The authorization request's parameters, as the client sent them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthorizeRequest {
    pub client_id: Option<String>,
    pub redirect_uri: Option<String>,
    pub response_type: Option<String>,
    pub scope: Option<String>,
    pub state: Option<String>,
    pub code_challenge: Option<String>,
    pub code_challenge_method: Option<String>,
}

/// Where the person goes next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Authorization {
    /// Nobody is signed in: sign in (in the application's organization's branding), then make
    /// the same request again.
    SignIn { application: Application },
    /// Back to the client with a code: the URL to redirect to.
    Granted { redirect: String },
}

#[derive(Debug, thiserror::Error)]
pub enum AuthorizeError {
    /// The client or the redirect URI cannot be trusted: show the message on a page, never
    /// redirect (RFC 6749 §4.1.2.1).
    #[error("{0}")]
    NotRedirectable(String),
    /// Back to the client with an RFC 6749 error: the URL to redirect to.
    #[error("redirect with an error")]
    Redirect { redirect: String, error: OAuthError },
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[derive(Clone)]
pub struct OAuthService {
    ports: Ports,
}

impl OAuthService {
    pub fn new(ports: Ports) -> Self {
        Self { ports }
    }

    /// Decides an authorization request for the person signed in (`user`), if any.
    pub async fn authorize(
        &self,
        request: AuthorizeRequest,
        user: Option<UserId>,
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
        let Some(user) = user else {
            return Ok(Authorization::SignIn { application });
        };
        if self
            .ports
            .memberships
            .membership(user, application.organization_id)
            .await?
            .is_none()
        {
            let error = OAuthError::new(
                OAuthErrorCode::AccessDenied,
                "the signed-in user is not a member of the application's organization",
            );
            return Err(back(error, state));
        }
        let now = self.ports.clock.now();
        let code = self.ports.random.secret(TokenKind::AuthorizationCode);
        self.ports
            .authorization_codes
            .save_authorization_code(NewAuthorizationCode {
                hash: code.hash(),
                code: AuthorizationCode {
                    application_id: application.id,
                    user_id: user,
                    redirect_uri: redirect_uri.clone(),
                    challenge,
                    scope,
                    created_at: now,
                    expires_at: now + Duration::seconds(AUTHORIZATION_CODE_SECONDS),
                },
            })
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
