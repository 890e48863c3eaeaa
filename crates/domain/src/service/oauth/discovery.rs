//! Discovery: the OpenID Provider metadata (OpenID Connect Discovery 1.0 §3, RFC 8414).

use super::OAuthService;
use crate::model::{ApiScope, EMAIL_SCOPE, OPENID, PROFILE_SCOPE};

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
