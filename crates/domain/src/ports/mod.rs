//! The ports: everything the use cases need from the outside world, as traits.
//!
//! Adapters live elsewhere, one crate per outside thing: `gatehouse-store` implements the store
//! ports on PostgreSQL and SQLite, `gatehouse-crypto` the clock, randomness, password hashing,
//! token signing and the secret cipher, `gatehouse-ratelimit` the counters, `gatehouse-mail` the
//! mailer, `gatehouse-delivery` the webhook sender.
//! Every store method that writes is one transaction: it commits everything it was given,
//! the outbox events included, or nothing.
//!
//! Ports are object safe (`async_trait`) because the backend is picked at run time from
//! `GATEHOUSE_DATABASE_URL`; the services hold them as `Arc<dyn Port>`.
//!
//! By area: [`identity`], [`organizations`], [`oauth`], [`webhooks`], [`platform`]; every port
//! is also re-exported here.

use std::sync::Arc;

pub mod identity;
pub mod oauth;
pub mod organizations;
pub mod platform;
pub mod webhooks;

pub use identity::*;
pub use oauth::*;
pub use organizations::*;
pub use platform::*;
pub use webhooks::*;

/// The source of an unexpected failure, kept for the log.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// How a store operation can fail.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached or the pool is exhausted: worth retrying (HTTP 503).
    #[error("the store is unavailable")]
    Unavailable(#[source] BoxError),
    /// A uniqueness rule was violated by a concurrent or repeated write. Each method's docs say
    /// which rule can be violated, so the caller knows what the conflict means.
    #[error("a uniqueness rule was violated")]
    Conflict,
    /// Anything else: a bug or a corrupt row.
    #[error("the store failed")]
    Failed(#[source] BoxError),
}

/// Every port, as the services take them.
#[derive(Clone)]
pub struct Ports {
    pub accounts: Arc<dyn AccountStore>,
    pub sessions: Arc<dyn SessionStore>,
    pub api_keys: Arc<dyn ApiKeyStore>,
    pub memberships: Arc<dyn MembershipStore>,
    pub organizations: Arc<dyn OrganizationStore>,
    pub members: Arc<dyn MemberStore>,
    pub policies: Arc<dyn PolicyStore>,
    pub branding: Arc<dyn BrandingStore>,
    pub sso: Arc<dyn SsoStore>,
    pub applications: Arc<dyn ApplicationStore>,
    pub authorization_codes: Arc<dyn AuthorizationCodeStore>,
    pub health: Arc<dyn HealthStore>,
    pub clock: Arc<dyn Clock>,
    pub random: Arc<dyn Random>,
    pub hasher: Arc<dyn PasswordHasher>,
    pub signer: Arc<dyn TokenSigner>,
    pub mailer: Arc<dyn Mailer>,
    pub rate_limiter: Arc<dyn RateLimiter>,
    pub sign_in_attempts: Arc<dyn SignInAttempts>,
    pub webhooks: Arc<dyn WebhookStore>,
    pub cipher: Arc<dyn SecretCipher>,
    pub sender: Arc<dyn WebhookSender>,
}
