//! The claims of the tokens Gatehouse signs (RS256 JWTs): a user's access token, an
//! application's machine token, an OpenID Connect ID token. Gatehouse writes them with these
//! types and products read them with the same ones (`gatehouse-verify`).

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::{OrganizationId, SessionId, UserId};

/// The `aud` claim: one audience (`"gatehouse"`), or several (`["gatehouse", client id]` in a
/// token issued to an application with one of Gatehouse's API scopes, `[client id]` in one
/// without; the domain's `audience_of_grant` is the rule).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Audience {
    /// A single audience, written as a string.
    One(String),
    /// Several audiences, written as an array.
    Many(Vec<String>),
}

impl Audience {
    /// Gatehouse alone: `"gatehouse"`.
    pub fn gatehouse() -> Self {
        Self::One(GATEHOUSE_AUDIENCE.to_owned())
    }

    /// Gatehouse and the application the token was issued to: `["gatehouse", client id]`.
    pub fn gatehouse_and(client_id: &str) -> Self {
        Self::Many(vec![GATEHOUSE_AUDIENCE.to_owned(), client_id.to_owned()])
    }

    /// The audiences, as a list.
    pub fn into_vec(self) -> Vec<String> {
        match self {
            Self::One(one) => vec![one],
            Self::Many(many) => many,
        }
    }

    /// Whether `audience` is one of them.
    pub fn contains(&self, audience: &str) -> bool {
        match self {
            Self::One(one) => one == audience,
            Self::Many(many) => many.iter().any(|a| a == audience),
        }
    }
}

impl From<&str> for Audience {
    fn from(audience: &str) -> Self {
        Self::One(audience.to_owned())
    }
}

/// `aud` of every access token Gatehouse issues (with the client id beside it in an
/// application's).
pub const GATEHOUSE_AUDIENCE: &str = "gatehouse";

/// The claims of an access token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessClaims {
    /// The issuer: the server's public URL.
    pub iss: String,
    /// The subject: the signed-in user.
    pub sub: UserId,
    /// The audience (the domain's `audience_of_grant`): `gatehouse` for a sign-in's own token; the
    /// client id of an application's, beside `gatehouse` when it holds an API scope.
    pub aud: Audience,
    /// When the token was issued, in Unix seconds.
    pub iat: i64,
    /// The token is not valid before this time, in Unix seconds (its issue time).
    pub nbf: i64,
    /// When the token expires, in Unix seconds.
    pub exp: i64,
    /// A fresh id of this token.
    pub jti: Uuid,
    /// The session the token belongs to: ending the session ends the token at once.
    pub sid: SessionId,
    /// The user's email when the token was issued.
    pub email: String,
    /// The application, for a token issued through the OAuth flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id: Option<String>,
    /// The scope granted to that application (space-separated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// How the user signed in (RFC 8176): `["pwd"]` for a password, `["ext"]` for SAML single
    /// sign-on. Empty only in tokens issued before Gatehouse wrote the claim.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amr: Vec<String>,
    /// The organization the token speaks for, when the sign-in named one (and it admitted
    /// the user): its id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub org_id: Option<OrganizationId>,
    /// The user's role in `org_id` when the token was issued: a built-in role's name or a
    /// custom role's key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub org_role: Option<String>,
    /// The dotted permissions of that role (`organization.members.read`, ...); in a token
    /// issued to an application, only those its API scopes cover
    /// (the domain's `TokenOrganization::permissions`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub org_permissions: Vec<String>,
}

/// The claims of a machine token, which `grant_type=client_credentials` issues to an
/// application: it acts for the application inside its organization, with exactly its scopes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineClaims {
    /// The issuer: the server's public URL.
    pub iss: String,
    /// The subject: the application's client id.
    pub sub: String,
    /// The audience: `["gatehouse", client id]`.
    pub aud: Audience,
    /// When the token was issued, in Unix seconds.
    pub iat: i64,
    /// The token is not valid before this time, in Unix seconds (its issue time).
    pub nbf: i64,
    /// When the token expires, in Unix seconds.
    pub exp: i64,
    /// A fresh id of this token.
    pub jti: Uuid,
    /// The application's client id (as `sub`).
    pub client_id: String,
    /// The application's organization, the one organization the token acts in.
    pub org_id: OrganizationId,
    /// The API scopes granted (space-separated).
    pub scope: String,
}

/// The claims of an OpenID Connect ID token (OpenID Connect Core 1.0 §2): who signed in, for
/// which client, when and how. Only the client it names in `aud` may accept it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdTokenClaims {
    /// The issuer: the server's public URL.
    pub iss: String,
    /// The subject: the user.
    pub sub: UserId,
    /// The audience: the client id of the application the code was issued to.
    pub aud: String,
    /// The authorized party: the same client id.
    pub azp: String,
    /// When the token expires, in Unix seconds.
    pub exp: i64,
    /// When the token was issued, in Unix seconds.
    pub iat: i64,
    /// When the user signed in (on the hosted page), in Unix seconds.
    pub auth_time: i64,
    /// The `nonce` of the authorization request, echoed; absent when it sent none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    /// The left half of the SHA-256 of the access token issued with it, base64url.
    pub at_hash: String,
    /// How the user signed in (RFC 8176).
    pub amr: Vec<String>,
    /// The user's email, with the scope `email`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// Whether the user proved they receive mail at it, with the scope `email`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email_verified: Option<bool>,
    /// The user's full name, with the scope `profile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The organization the sign-in was for, when the authorization request named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub org_id: Option<OrganizationId>,
    /// The user's role in `org_id`: a built-in role's name or a custom role's key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub org_role: Option<String>,
    /// The dotted permissions of that role that the API scopes granted cover (none for
    /// `openid` alone), as in the access token issued with it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub org_permissions: Vec<String>,
}

/// The claims of a Bearer token that verified: a user's access token, or an application's
/// machine token.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum BearerClaims {
    /// A user's access token (a sign-in, or the OAuth flow).
    User(AccessClaims),
    /// An application's machine token (`client_credentials`).
    Machine(MachineClaims),
}

impl BearerClaims {
    /// When the token expires, in Unix seconds.
    pub fn exp(&self) -> i64 {
        match self {
            Self::User(claims) => claims.exp,
            Self::Machine(claims) => claims.exp,
        }
    }

    /// Whether Gatehouse takes the token at all, by its audience: `aud` names `gatehouse`, or
    /// the token was issued to an application (`client_id`) and `aud` names that application
    /// (a token without an API scope: it reads `/oauth/userinfo`, and the authenticator refuses
    /// it everywhere else). An ID token (`aud` a client, no `client_id`) is never taken.
    pub fn is_for_gatehouse(&self) -> bool {
        match self {
            Self::User(claims) => {
                claims.aud.contains(GATEHOUSE_AUDIENCE)
                    || claims
                        .client_id
                        .as_deref()
                        .is_some_and(|client_id| claims.aud.contains(client_id))
            }
            Self::Machine(claims) => claims.aud.contains(GATEHOUSE_AUDIENCE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLIENT: &str = "ghc_00000000000000000000000000000abc";

    fn user_claims(aud: Audience, client_id: Option<&str>) -> BearerClaims {
        BearerClaims::User(AccessClaims {
            iss: "https://id.example.com".into(),
            sub: UserId::from_uuid(Uuid::from_u128(2)),
            aud,
            iat: 0,
            nbf: 0,
            exp: 900,
            jti: Uuid::from_u128(3),
            sid: SessionId::from_uuid(Uuid::from_u128(4)),
            email: "ada@example.com".into(),
            client_id: client_id.map(str::to_owned),
            scope: client_id.map(|_| "openid".to_owned()),
            amr: vec!["pwd".into()],
            org_id: None,
            org_role: None,
            org_permissions: Vec::new(),
        })
    }

    #[test]
    fn gatehouse_takes_its_own_audience_or_the_application_a_token_was_issued_to() {
        assert!(user_claims(Audience::gatehouse(), None).is_for_gatehouse());
        assert!(user_claims(Audience::gatehouse_and(CLIENT), Some(CLIENT)).is_for_gatehouse());
        assert!(user_claims(Audience::Many(vec![CLIENT.into()]), Some(CLIENT)).is_for_gatehouse());
        // Another application's, or a client named with no `client_id` (an ID token's shape).
        let other = "ghc_00000000000000000000000000000def";
        assert!(!user_claims(Audience::Many(vec![other.into()]), Some(CLIENT)).is_for_gatehouse());
        assert!(!user_claims(Audience::One(CLIENT.into()), None).is_for_gatehouse());
        assert!(!user_claims("billing".into(), None).is_for_gatehouse());
    }
}
