//! For the Rust services of products that sit behind Gatehouse: verifies Gatehouse's access
//! tokens offline, and its webhook signatures.
//!
//! A [`Verifier`] checks a token as Gatehouse signs it: RS256 only (never `none` nor HMAC),
//! with one of the keys Gatehouse publishes at `{issuer}/.well-known/jwks.json` (fetched,
//! cached, refetched when a token names a key the cache lacks, at most once a minute), its
//! issuer, its audience, its expiry and start with at most 5 seconds of clock skew. It returns
//! [`Claims`] typed with the types Gatehouse itself writes them from (`gatehouse-types`,
//! re-exported here as [`types`]): who the token acts for, the organization
//! and role it is scoped to, and [`Claims::can`] for the permissions Gatehouse granted there.
//!
//! **Set the audience to the tokens your product receives.**
//! - First-party tokens (a sign-in through Gatehouse's `/auth/*`, `aud: "gatehouse"`): the
//!   default audience, `gatehouse`.
//! - Tokens Gatehouse issues to your product's OAuth application (`/oauth/token`): your
//!   client id, `Verifier::builder(issuer).audience(client_id)`. Such a token names your
//!   client id always, and `gatehouse` beside it only when the user granted one of
//!   Gatehouse's API scopes; its `org_permissions` are the user's role narrowed to those
//!   scopes (none for `openid` alone).
//!
//! [`Claims::can`] grants a permission only to a token issued for the verifier's audience: a
//! verifier of first-party tokens gives nothing to another application's token, even one that
//! names `gatehouse` for Gatehouse's own API.
//!
//! ```no_run
//! use gatehouse_verify::types::Permission;
//! use gatehouse_verify::Verifier;
//!
//! # async fn handler(bearer_token: &str) -> Result<(), Box<dyn std::error::Error>> {
//! // Once, at start (and shared: clones share the cached keys).
//! let verifier = Verifier::new("https://id.example.com")?;
//!
//! // For each request.
//! let claims = verifier.verify(bearer_token).await?;
//! if let Some(organization) = claims.organization() {
//!     if claims.can(Permission::MembersRead) {
//!         println!("{:?} may list the members of {}", claims.subject(), organization.id);
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Webhook deliveries are checked with a [`WebhookVerifier`] made from the endpoint's secret:
//!
//! ```
//! use gatehouse_verify::{WebhookError, WebhookVerifier};
//!
//! let verifier = WebhookVerifier::new("whsec_...");
//! // The headers X-Service-Timestamp and X-Service-Signature, and the raw body.
//! let refused = verifier.verify(Some("1700000000"), Some("sha256=00"), b"{}");
//! assert_eq!(refused, Err(WebhookError::Stale));
//! ```
//!
//! With the feature `actix`, [`VerifiedClaims`] extracts the claims of a request's
//! `Authorization: Bearer` token, with the [`Verifier`] in the application's `web::Data`.
#![warn(missing_docs)]

use std::sync::Arc;

use jsonwebtoken::Algorithm;

#[cfg(feature = "actix")]
mod actix;
mod claims;
#[cfg(feature = "test-issuer")]
pub mod testing;
mod verifier;
mod webhook;

/// Gatehouse's own types, which the claims are typed with: ids, [`types::Role`],
/// [`types::Permission`], the API scopes and the signature format.
pub use gatehouse_types as types;

#[cfg(feature = "actix")]
pub use actix::{Unauthorized, VerifiedClaims};
pub use claims::{Claims, Organization, Subject};
pub use verifier::{Verifier, VerifierBuilder, DEFAULT_AUDIENCE, MAX_LEEWAY};
pub use webhook::{WebhookVerifier, SIGNATURE_HEADER, TIMESTAMP_HEADER, TIMESTAMP_TOLERANCE};

/// Why a [`Verifier`] could not be built.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// The HTTP client could not be made (its TLS set-up failed).
    #[error("the HTTP client could not be made: {0}")]
    Http(Arc<reqwest::Error>),
}

/// Why a token was refused. None of them prints the token.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// Not a JWT (three base64url parts, a JSON header), or an algorithm no JWT library knows
    /// (`none`).
    #[error("the token is not a JWT")]
    Malformed,
    /// Signed with another algorithm than RS256 (HS256, ES256, ...).
    #[error("the token is signed with {0:?}; only RS256 is accepted")]
    Algorithm(Algorithm),
    /// The header names no key (`kid`).
    #[error("the token names no key id")]
    MissingKeyId,
    /// No key Gatehouse publishes has the token's `kid`, even after a refetch.
    #[error("no published key has the token's key id")]
    UnknownKey,
    /// The key set could not be fetched, and no cached key has the token's `kid`.
    #[error("the key set could not be fetched: {0}")]
    KeySet(#[source] KeySetError),
    /// The signature does not verify with the key the token names.
    #[error("the token's signature does not verify")]
    Signature,
    /// Expired (`exp`) more than the leeway ago.
    #[error("the token has expired")]
    Expired,
    /// Not valid before (`nbf`) a time more than the leeway ahead.
    #[error("the token is not valid yet")]
    NotYetValid,
    /// Issued by someone else (`iss`).
    #[error("the token's issuer is not the expected one")]
    Issuer,
    /// Not issued for this audience (`aud`).
    #[error("the token is not for this audience")]
    Audience,
    /// `sub` is neither a user id nor the token's client id.
    #[error("the token's subject is neither a user nor its application")]
    Subject,
    /// A claim is missing (`exp`, `iss`, `aud`, `sub`) or not of Gatehouse's shape.
    #[error("the token's claims are not Gatehouse's")]
    Claims,
}

/// Why the key set could not be fetched.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeySetError {
    /// It took longer than the fetch timeout.
    #[error("no answer within the fetch timeout")]
    Timeout,
    /// The JWKS URL could not be reached, or its answer not read.
    #[error("unreachable: {0}")]
    Unreachable(#[source] Arc<reqwest::Error>),
    /// The JWKS URL answered with another status than success.
    #[error("answered with status {0}")]
    Status(u16),
    /// The answer was not a JSON key set.
    #[error("not a key set: {0}")]
    Invalid(#[source] Arc<serde_json::Error>),
    /// The answer is larger than a key set could be (1 MiB).
    #[error("the answer is larger than a key set")]
    TooLarge,
    /// The key set holds no RS256 signing key.
    #[error("the key set holds no RS256 signing key")]
    NoKeys,
    /// The fetch stopped before it finished (its runtime is shutting down).
    #[error("the fetch was interrupted")]
    Interrupted,
}

/// Why a webhook delivery was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookError {
    /// A header is absent (its name).
    #[error("the {0} header is missing")]
    Missing(&'static str),
    /// `X-Service-Timestamp` is not a number of seconds.
    #[error("the timestamp is not a number of seconds")]
    Timestamp,
    /// The timestamp is more than five minutes from now, either way: a replay.
    #[error("the timestamp is more than five minutes from now")]
    Stale,
    /// The signature is not the body's with this secret.
    #[error("the signature does not match")]
    Signature,
}
