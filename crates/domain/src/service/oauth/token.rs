//! The token endpoint (RFC 6749 §3.2): the code exchange (with its PKCE verifier, and an ID
//! token for `openid`), refresh, and client credentials (machine tokens).

use time::{Duration, OffsetDateTime};

use super::{internal, ClientCredentials, OAuthService, TokenEndpointError};
use crate::{
    model::{
        at_hash, ApiScope, Application, AuditAction, AuditActor, AuthMethod, AuthorizationCode,
        ClientGrant, Feature, OAuthError, OAuthErrorCode, OrganizationChoice, Origin, Scope,
        SecretToken, TargetKind, TokenHash, TokenOrganization, User, UserClaims, OPENID,
    },
    ports::{Audience, IdTokenClaims, MachineClaims},
    service::{audit, AccessToken, RefreshError},
};

/// The longest a machine token lives (less when access tokens are configured to live less).
/// It cannot be revoked one by one; deactivating its application stops it at once.
pub const MACHINE_TOKEN_SECONDS: i64 = 15 * 60;

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
            org_permissions: organization.permissions(Some(&code.scope)),
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
