//! The OAuth 2.0 authorization-code flow with PKCE (RFC 6749, RFC 7636): the parts of a request,
//! parsed, the RFC's error codes, and the proof-key check.

use std::fmt;

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use super::{
    Amr, ApplicationId, RedirectUri, Scope, ScopeError, SessionId, TokenHash, User, UserId,
};

/// How long an authorization code may be exchanged (RFC 6749 §4.1.2 recommends at most 10
/// minutes; a code travels one redirect, so a minute is plenty).
pub const AUTHORIZATION_CODE_SECONDS: i64 = 60;

/// The error codes of RFC 6749 §4.1.2.1 (authorization) and §5.2 (token).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OAuthErrorCode {
    /// `invalid_request`: a parameter is missing, repeated or malformed (a bad PKCE challenge
    /// or verifier, say).
    InvalidRequest,
    /// `invalid_client`: the client is unknown, inactive, or its secret is wrong.
    InvalidClient,
    /// `invalid_grant`: the code or refresh token is unknown, expired, used already, or was
    /// issued to another client, redirect URI or verifier.
    InvalidGrant,
    /// `unauthorized_client`: the client may not use this grant or response type.
    UnauthorizedClient,
    /// `unsupported_grant_type`: a `grant_type` other than `authorization_code`,
    /// `refresh_token` and `client_credentials`.
    UnsupportedGrantType,
    /// `unsupported_token_type` (RFC 7009 §2.2.1): a token that cannot be revoked (a machine
    /// token).
    UnsupportedTokenType,
    /// `invalid_token` (RFC 6750 §3.1): the Bearer token is malformed, expired, revoked or not
    /// Gatehouse's.
    InvalidToken,
    /// `insufficient_scope` (RFC 6750 §3.1): the token's scope does not cover the request.
    InsufficientScope,
    /// `unsupported_response_type`: a `response_type` other than `code`.
    UnsupportedResponseType,
    /// `invalid_scope`: the scope is malformed or not allowed.
    InvalidScope,
    /// `access_denied`: the user or the server refused the authorization.
    AccessDenied,
    /// `login_required` (OpenID Connect Core 3.1.2.6): `prompt=none`, and nobody is signed in
    /// on the hosted pages (or not recently enough for `max_age`).
    LoginRequired,
    /// `interaction_required` (OpenID Connect Core 3.1.2.6): `prompt=none`, and the
    /// organization's policies need the user to do something on a page first (sign in with a
    /// second factor, say).
    InteractionRequired,
    /// `consent_required` (OpenID Connect Core 3.1.2.6): `prompt=none`, and the user has not
    /// consented to the API scopes asked for.
    ConsentRequired,
    /// `server_error`: the server failed unexpectedly.
    ServerError,
    /// `temporarily_unavailable`: the server cannot answer now; the client may retry later.
    TemporarilyUnavailable,
}

impl OAuthErrorCode {
    /// The code as the `error` parameter carries it (`invalid_grant`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request",
            Self::InvalidClient => "invalid_client",
            Self::InvalidGrant => "invalid_grant",
            Self::UnauthorizedClient => "unauthorized_client",
            Self::UnsupportedGrantType => "unsupported_grant_type",
            Self::UnsupportedTokenType => "unsupported_token_type",
            Self::InvalidToken => "invalid_token",
            Self::InsufficientScope => "insufficient_scope",
            Self::UnsupportedResponseType => "unsupported_response_type",
            Self::InvalidScope => "invalid_scope",
            Self::AccessDenied => "access_denied",
            Self::LoginRequired => "login_required",
            Self::InteractionRequired => "interaction_required",
            Self::ConsentRequired => "consent_required",
            Self::ServerError => "server_error",
            Self::TemporarilyUnavailable => "temporarily_unavailable",
        }
    }
}

/// An RFC 6749 error: the code, and a sentence for the developer (`error_description`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {description}", code.as_str())]
pub struct OAuthError {
    /// The RFC's error code, the `error` parameter.
    pub code: OAuthErrorCode,
    /// What was wrong, for the client's developer: the `error_description` parameter.
    pub description: String,
}

impl OAuthError {
    /// An error with this code and description.
    pub fn new(code: OAuthErrorCode, description: impl Into<String>) -> Self {
        Self {
            code,
            description: description.into(),
        }
    }

    /// An `invalid_request` error.
    pub fn invalid_request(description: impl Into<String>) -> Self {
        Self::new(OAuthErrorCode::InvalidRequest, description)
    }

    /// An `invalid_grant` error.
    pub fn invalid_grant(description: impl Into<String>) -> Self {
        Self::new(OAuthErrorCode::InvalidGrant, description)
    }
}

/// A parameter, unless it was sent without a value: that is as if it were left out (RFC 6749
/// §3.1).
fn given(value: Option<&str>) -> Option<&str> {
    value.filter(|v| !v.is_empty())
}

/// Unreserved characters (RFC 3986 §2.3), the alphabet of a code verifier.
fn is_unreserved(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~')
}

/// A PKCE code verifier (RFC 7636 §4.1): 43 to 128 unreserved characters. `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct CodeVerifier(String);

impl CodeVerifier {
    /// The request's `code_verifier`.
    ///
    /// # Errors
    /// `invalid_request` when it is not 43 to 128 unreserved characters.
    pub fn parse(raw: &str) -> Result<Self, OAuthError> {
        let length = raw.chars().count();
        if !(43..=128).contains(&length) || !raw.chars().all(is_unreserved) {
            return Err(OAuthError::invalid_request(
                "code_verifier must be 43 to 128 characters of A-Z, a-z, 0-9, '-', '.', '_', '~'",
            ));
        }
        Ok(Self(raw.to_owned()))
    }

    /// Its S256 challenge: `BASE64URL(SHA256(verifier))`, unpadded.
    pub fn challenge(&self) -> CodeChallenge {
        CodeChallenge(URL_SAFE_NO_PAD.encode(Sha256::digest(self.0.as_bytes())))
    }
}

impl fmt::Debug for CodeVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CodeVerifier(<redacted>)")
    }
}

/// A PKCE code challenge with the `S256` method: the unpadded base64url of a SHA-256, 43
/// characters. The `plain` method is refused: it protects nothing that the code does not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeChallenge(String);

impl CodeChallenge {
    /// The challenge of an authorization request, if it has one: `challenge` and `method` are
    /// the request's `code_challenge` and `code_challenge_method` (an empty one counts as
    /// absent, RFC 6749 §3.1), `required` whether the application requires PKCE. Without a
    /// challenge a confidential client's code is bound by its secret alone (RFC 6749 §4.1);
    /// with one, the exchange needs its verifier.
    ///
    /// # Errors
    /// `invalid_request` when the application requires PKCE and there is no challenge, when a
    /// method comes without a challenge, when the method is `plain` or anything but `S256` (or
    /// missing beside a challenge), or when the challenge is not 43 characters of unpadded
    /// base64url of 32 bytes.
    pub fn requested(
        challenge: Option<&str>,
        method: Option<&str>,
        required: bool,
    ) -> Result<Option<Self>, OAuthError> {
        match (given(challenge), given(method)) {
            (None, None) if required => Err(OAuthError::invalid_request(
                "code_challenge is required (PKCE with S256): the application requires PKCE",
            )),
            (None, None) => Ok(None),
            (None, Some(_)) => Err(OAuthError::invalid_request(
                "code_challenge_method was sent without a code_challenge",
            )),
            (Some(challenge), method) => Self::s256(challenge, method).map(Some),
        }
    }

    /// A challenge that is there, with its method.
    fn s256(challenge: &str, method: Option<&str>) -> Result<Self, OAuthError> {
        match method {
            Some("S256") => {}
            Some("plain") | None => {
                return Err(OAuthError::invalid_request(
                    "code_challenge_method must be S256; plain is not accepted",
                ))
            }
            Some(_) => {
                return Err(OAuthError::invalid_request(
                    "code_challenge_method must be S256",
                ))
            }
        }
        let decoded = URL_SAFE_NO_PAD.decode(challenge).ok();
        if challenge.len() != 43 || decoded.map(|bytes| bytes.len()) != Some(32) {
            return Err(OAuthError::invalid_request(
                "code_challenge must be the unpadded base64url SHA-256 of the verifier (43 characters)",
            ));
        }
        Ok(Self(challenge.to_owned()))
    }

    /// A challenge as the store kept it, taken as it is (it was parsed when the code was
    /// issued).
    pub fn from_stored(value: String) -> Self {
        Self(value)
    }

    /// The challenge as the client sent it: 43 base64url characters.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `verifier` is the one this challenge was made from (compared in constant time).
    pub fn is_met_by(&self, verifier: &CodeVerifier) -> bool {
        let expected = verifier.challenge();
        let (a, b) = (self.0.as_bytes(), expected.0.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

/// The most characters of a scope or a state Gatehouse takes.
const MAX_PARAMETER_CHARS: usize = Scope::MAX_CHARS;

/// A refused scope is the RFC's `invalid_scope`, saying what the rule is.
impl From<ScopeError> for OAuthError {
    fn from(refused: ScopeError) -> Self {
        OAuthError::new(OAuthErrorCode::InvalidScope, refused.to_string())
    }
}

/// A parameter the client gets back exactly as it sent it (`state`, `nonce`): kept as it is,
/// `invalid_request` when longer than 1024 characters or when it holds a control character
/// (RFC 6749 makes `state` printable ASCII; a NUL could not even be stored).
fn echoed(name: &str, raw: &str) -> Result<String, OAuthError> {
    if raw.chars().count() > MAX_PARAMETER_CHARS {
        return Err(OAuthError::invalid_request(format!(
            "{name} is longer than {MAX_PARAMETER_CHARS} characters"
        )));
    }
    if raw.chars().any(char::is_control) {
        return Err(OAuthError::invalid_request(format!(
            "{name} must not contain control characters"
        )));
    }
    Ok(raw.to_owned())
}

/// The client's `state`, returned unchanged; at most 1024 characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State(String);

impl State {
    /// The request's `state`, kept as it is.
    ///
    /// # Errors
    /// `invalid_request` when it is longer than 1024 characters.
    pub fn parse(raw: &str) -> Result<Self, OAuthError> {
        echoed("state", raw).map(Self)
    }

    /// The state exactly as the client sent it, to send back.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The scope that asks for OpenID Connect: an ID token, and the userinfo endpoint.
pub const OPENID: &str = "openid";
/// The scope that adds the user's `email` and `email_verified` to the ID token and userinfo.
pub const EMAIL_SCOPE: &str = "email";
/// The scope that adds the user's `name` to the ID token and userinfo.
pub const PROFILE_SCOPE: &str = "profile";

/// The client's `nonce` (OpenID Connect Core §3.1.2.1), echoed in the ID token; at most 1024
/// characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nonce(String);

impl Nonce {
    /// The request's `nonce`, kept as it is.
    ///
    /// # Errors
    /// `invalid_request` when it is longer than 1024 characters.
    pub fn parse(raw: &str) -> Result<Self, OAuthError> {
        echoed("nonce", raw).map(Self)
    }

    /// The nonce exactly as the client sent it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The ID token's `at_hash` of an access token (OpenID Connect Core §3.1.3.6): the left half
/// of its SHA-256, unpadded base64url.
pub fn at_hash(access_token: &str) -> String {
    let digest = Sha256::digest(access_token.as_bytes());
    URL_SAFE_NO_PAD.encode(&digest[..digest.len() / 2])
}

/// What OpenID Connect tells a client of a user, by the scope it was granted: `sub` always,
/// `email` and `email_verified` with `email`, `name` with `profile`. The ID token and the
/// userinfo endpoint say the same.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserClaims {
    /// The user's id.
    pub sub: UserId,
    /// The email, with the scope `email`.
    pub email: Option<String>,
    /// Whether the user proved they receive mail at it, with the scope `email`.
    pub email_verified: Option<bool>,
    /// The full name, with the scope `profile`.
    pub name: Option<String>,
}

impl UserClaims {
    /// The claims of `user` that `scope` lets a client read.
    pub fn of(user: &User, scope: &Scope) -> Self {
        let email = scope.contains(EMAIL_SCOPE);
        Self {
            sub: user.id,
            email: email.then(|| user.email.as_ref().to_owned()),
            email_verified: email.then_some(user.email_verified),
            name: scope
                .contains(PROFILE_SCOPE)
                .then(|| user.full_name.as_ref().to_owned()),
        }
    }
}

/// What an authorization code stands for: who signed in, for which application, to be
/// returned where, under which PKCE challenge and scope, until when. The code itself is known
/// to the store only by its hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthorizationCode {
    /// The application the code was issued to; only it may exchange the code.
    pub application_id: ApplicationId,
    /// The user who signed in and whose session the exchange opens.
    pub user_id: UserId,
    /// The registered redirect URI the code was sent to; the exchange must name the same one.
    pub redirect_uri: RedirectUri,
    /// The PKCE challenge the exchange's verifier must meet; `None` when the request sent
    /// none, and then the exchange must send no verifier ([`AuthorizationCode::proven_by`]).
    pub challenge: Option<CodeChallenge>,
    /// The scope granted, which the tokens of the exchange carry.
    pub scope: Scope,
    /// How the user signed in to the page that granted the code: the session the exchange
    /// opens says the same.
    pub amr: Amr,
    /// When the user signed in to that page: the ID token's `auth_time`.
    pub authenticated_at: OffsetDateTime,
    /// The client's `nonce`, for the ID token.
    pub nonce: Option<Nonce>,
    /// When the code was issued.
    pub created_at: OffsetDateTime,
    /// When the code stops being exchangeable: [`AUTHORIZATION_CODE_SECONDS`] after
    /// `created_at`.
    pub expires_at: OffsetDateTime,
}

impl AuthorizationCode {
    /// Whether the exchange's `code_verifier` (an empty one counts as absent) is the proof
    /// this code needs: the verifier of its challenge when it was issued with one (RFC 7636
    /// §4.6), none when it was issued without (RFC 9700 §2.1.1: a verifier for a code without
    /// a challenge is refused, so that PKCE cannot be downgraded by stripping the challenge).
    ///
    /// # Errors
    /// `invalid_request` when a challenged code comes without a verifier or with a malformed
    /// one; `invalid_grant` when the verifier does not meet the challenge, or when a verifier
    /// comes for a code issued without a challenge.
    pub fn proven_by(&self, verifier: Option<&str>) -> Result<(), OAuthError> {
        match (&self.challenge, given(verifier)) {
            (None, None) => Ok(()),
            (Some(challenge), Some(verifier)) => {
                match challenge.is_met_by(&CodeVerifier::parse(verifier)?) {
                    true => Ok(()),
                    false => Err(OAuthError::invalid_grant(
                        "code_verifier does not match the code_challenge",
                    )),
                }
            }
            (Some(_), None) => Err(OAuthError::invalid_request(
                "code_verifier is required: the code was issued with a code_challenge",
            )),
            (None, Some(_)) => Err(OAuthError::invalid_grant(
                "code_verifier was sent for a code issued without a code_challenge",
            )),
        }
    }
}

/// A stored code, and whether (and by which session) it was used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredCode {
    /// What the code stands for.
    pub code: AuthorizationCode,
    /// When the code was exchanged; `None` while it is unused. A code is exchanged once.
    pub used_at: Option<OffsetDateTime>,
    /// The session its exchange opened; `None` while it is unused.
    pub session_id: Option<SessionId>,
}

/// A code and its hash, to store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewAuthorizationCode {
    /// The hash of the code handed to the client, which the store looks it up by.
    pub hash: TokenHash,
    /// What the code stands for.
    pub code: AuthorizationCode,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7636 Appendix B.
    const RFC_VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    const RFC_CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

    fn s256(challenge: Option<&str>, method: Option<&str>) -> Result<CodeChallenge, OAuthError> {
        CodeChallenge::requested(challenge, method, true).map(|c| c.expect("a challenge"))
    }

    #[test]
    fn the_rfc_7636_example_verifier_meets_its_challenge() {
        let verifier = CodeVerifier::parse(RFC_VERIFIER).unwrap();
        assert_eq!(verifier.challenge().as_str(), RFC_CHALLENGE);
        let challenge = s256(Some(RFC_CHALLENGE), Some("S256")).unwrap();
        assert!(challenge.is_met_by(&verifier));
        let other = CodeVerifier::parse(&"a".repeat(43)).unwrap();
        assert!(!challenge.is_met_by(&other));
    }

    #[test]
    fn only_s256_challenges_of_the_right_shape_are_taken() {
        let no_plain = OAuthError::invalid_request(
            "code_challenge_method must be S256; plain is not accepted",
        );
        assert_eq!(
            s256(Some(RFC_CHALLENGE), Some("plain")),
            Err(no_plain.clone())
        );
        assert_eq!(
            s256(Some(RFC_CHALLENGE), None),
            Err(no_plain),
            "plain by default"
        );
        assert_eq!(
            s256(Some(RFC_CHALLENGE), Some("s256")),
            Err(OAuthError::invalid_request(
                "code_challenge_method must be S256"
            ))
        );
        let no_challenge =
            OAuthError::invalid_request("code_challenge_method was sent without a code_challenge");
        assert_eq!(s256(None, Some("S256")), Err(no_challenge.clone()));
        assert_eq!(s256(Some(""), Some("S256")), Err(no_challenge));
        let misshapen = OAuthError::invalid_request(
            "code_challenge must be the unpadded base64url SHA-256 of the verifier (43 characters)",
        );
        for bad in [
            RFC_CHALLENGE[1..].to_owned(),
            format!("{RFC_CHALLENGE}="),
            "+".repeat(43),
        ] {
            assert_eq!(
                s256(Some(&bad), Some("S256")),
                Err(misshapen.clone()),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_challenge_may_be_left_out_unless_the_application_requires_pkce() {
        assert_eq!(CodeChallenge::requested(None, None, false), Ok(None));
        assert_eq!(
            CodeChallenge::requested(Some(""), Some(""), false),
            Ok(None),
            "empty parameters are absent ones"
        );
        let required = CodeChallenge::requested(None, None, true).unwrap_err();
        assert_eq!(required.code, OAuthErrorCode::InvalidRequest);
        assert!(required
            .description
            .starts_with("code_challenge is required"));
        for method in ["S256", "plain"] {
            assert_eq!(
                CodeChallenge::requested(None, Some(method), false)
                    .unwrap_err()
                    .code,
                OAuthErrorCode::InvalidRequest,
                "a method without a challenge: {method}"
            );
        }
        for required in [false, true] {
            assert_eq!(
                CodeChallenge::requested(Some(RFC_CHALLENGE), Some("plain"), required),
                Err(OAuthError::invalid_request(
                    "code_challenge_method must be S256; plain is not accepted"
                ))
            );
            let taken = CodeChallenge::requested(Some(RFC_CHALLENGE), Some("S256"), required);
            assert_eq!(taken.unwrap().unwrap().as_str(), RFC_CHALLENGE);
        }
    }

    fn code(challenge: Option<CodeChallenge>) -> AuthorizationCode {
        let at = OffsetDateTime::UNIX_EPOCH;
        AuthorizationCode {
            application_id: ApplicationId::from_uuid(uuid::Uuid::from_u128(1)),
            user_id: UserId::from_uuid(uuid::Uuid::from_u128(2)),
            redirect_uri: RedirectUri::parse("https://app.example.com/cb").unwrap(),
            challenge,
            scope: Scope::default(),
            amr: Amr::password(),
            authenticated_at: at,
            nonce: None,
            created_at: at,
            expires_at: at,
        }
    }

    #[test]
    fn an_exchange_brings_the_verifier_of_the_codes_challenge_or_none_without_one() {
        let challenged = code(Some(s256(Some(RFC_CHALLENGE), Some("S256")).unwrap()));
        assert_eq!(challenged.proven_by(Some(RFC_VERIFIER)), Ok(()));
        let error = |code: &AuthorizationCode, verifier: Option<&str>| {
            code.proven_by(verifier).unwrap_err().code
        };
        let other = "a".repeat(43);
        assert_eq!(
            error(&challenged, Some(&other)),
            OAuthErrorCode::InvalidGrant
        );
        assert_eq!(
            error(&challenged, Some("short")),
            OAuthErrorCode::InvalidRequest
        );
        assert_eq!(error(&challenged, None), OAuthErrorCode::InvalidRequest);
        assert_eq!(error(&challenged, Some("")), OAuthErrorCode::InvalidRequest);

        let unchallenged = code(None);
        assert_eq!(unchallenged.proven_by(None), Ok(()));
        assert_eq!(unchallenged.proven_by(Some("")), Ok(()), "empty is absent");
        // A verifier, even a well-formed one, for a code issued without a challenge: someone
        // stripped the challenge from the request, or the client is confused (RFC 9700 §4.8.2).
        assert_eq!(
            error(&unchallenged, Some(RFC_VERIFIER)),
            OAuthErrorCode::InvalidGrant
        );
        assert_eq!(
            error(&unchallenged, Some("short")),
            OAuthErrorCode::InvalidGrant
        );
    }

    #[test]
    fn verifiers_are_43_to_128_unreserved_characters_and_never_printed() {
        let refused = OAuthError::invalid_request(
            "code_verifier must be 43 to 128 characters of A-Z, a-z, 0-9, '-', '.', '_', '~'",
        );
        assert_eq!(CodeVerifier::parse(&"a".repeat(42)), Err(refused.clone()));
        assert!(CodeVerifier::parse(&"a".repeat(43)).is_ok());
        assert!(CodeVerifier::parse(&"~._-".repeat(32)).is_ok());
        assert_eq!(CodeVerifier::parse(&"a".repeat(129)), Err(refused.clone()));
        assert_eq!(
            CodeVerifier::parse(&format!("{}+", "a".repeat(43))),
            Err(refused)
        );
        let verifier = CodeVerifier::parse(RFC_VERIFIER).unwrap();
        assert!(!format!("{verifier:?}").contains(RFC_VERIFIER));
    }

    #[test]
    fn a_refused_scope_is_invalid_scope_saying_why() {
        assert_eq!(
            Scope::parse("read\"user").map_err(OAuthError::from),
            Err(OAuthError::new(
                OAuthErrorCode::InvalidScope,
                "scope tokens are printable ASCII without '\"' and '\\', separated by spaces",
            ))
        );
        assert_eq!(
            Scope::parse(&"a".repeat(1025)).map_err(OAuthError::from),
            Err(OAuthError::new(
                OAuthErrorCode::InvalidScope,
                "scope is longer than 1024 characters"
            ))
        );
    }

    #[test]
    fn states_are_returned_as_given_up_to_1024_characters() {
        assert_eq!(State::parse("xyz 1/2").unwrap().as_str(), "xyz 1/2");
        assert_eq!(
            State::parse(&"s".repeat(1025)),
            Err(OAuthError::invalid_request(
                "state is longer than 1024 characters"
            ))
        );
    }

    #[test]
    fn error_codes_are_the_rfcs() {
        assert_eq!(OAuthErrorCode::InvalidGrant.as_str(), "invalid_grant");
        assert_eq!(
            OAuthErrorCode::UnsupportedResponseType.as_str(),
            "unsupported_response_type"
        );
        let error = OAuthError::invalid_request("x");
        assert_eq!(error.to_string(), "invalid_request: x");
    }

    #[test]
    fn at_hash_is_the_left_half_of_the_sha256_in_base64url() {
        // OpenID Connect Core 1.0, Appendix A.3's access token and at_hash.
        assert_eq!(
            at_hash("jHkWEdUXMU1BwAsC4vtUsZwnNvTIxEl0z9K3vx5KF0Y"),
            "77QmUPtjPfzWtF2AnpK9RQ"
        );
    }

    #[test]
    fn nonces_and_states_are_kept_as_given_up_to_1024_printable_characters() {
        assert_eq!(
            Nonce::parse("n-0S6_WzA2Mj").unwrap().as_str(),
            "n-0S6_WzA2Mj"
        );
        assert_eq!(
            Nonce::parse(&"n".repeat(1025)).unwrap_err().code,
            OAuthErrorCode::InvalidRequest
        );
        for raw in ["n\0", "a\nb"] {
            assert_eq!(
                Nonce::parse(raw).unwrap_err().code,
                OAuthErrorCode::InvalidRequest
            );
            assert_eq!(
                State::parse(raw).unwrap_err().code,
                OAuthErrorCode::InvalidRequest
            );
        }
    }
}
