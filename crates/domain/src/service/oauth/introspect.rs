//! Userinfo (OpenID Connect Core §5.3), introspection (RFC 7662) and revocation (RFC 7009):
//! what a token presented by a client is, and ending the session behind it.

use super::{internal, ClientCredentials, OAuthService, TokenEndpointError};
use crate::{
    model::{
        Application, AuditAction, Feature, OAuthError, OAuthErrorCode, OrganizationId, Origin,
        Scope, Session, TargetKind, TokenHash, UserClaims, OPENID,
    },
    ports::{AccessClaims, Audience, BearerClaims, MachineClaims, TokenError},
    service::Agent,
};

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
                scope: Scope::parse(claims.scope.as_deref().unwrap_or_default())
                    .map_err(OAuthError::from)?,
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
                scope: Scope::parse(&claims.scope).map_err(OAuthError::from)?,
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
    /// lives at most [`MACHINE_TOKEN_SECONDS`](super::MACHINE_TOKEN_SECONDS); deactivating the application stops it at
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
        if token.is_empty() || token.len() > crate::service::authenticator::MAX_ACCESS_TOKEN_BYTES {
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
}

fn insufficient_scope() -> OAuthError {
    OAuthError::new(
        OAuthErrorCode::InsufficientScope,
        "userinfo needs an access token of the OAuth flow granted the scope openid",
    )
}
