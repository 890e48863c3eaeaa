//! The ports: everything the use cases need from the outside world, as traits.
//!
//! Adapters live elsewhere, one crate per outside thing: `gatehouse-store` implements the store
//! ports on PostgreSQL and SQLite, `gatehouse-crypto` the clock, randomness, password hashing
//! and judging, token signing, TOTP and the secret cipher, `gatehouse-ratelimit` the counters,
//! `gatehouse-mail` the mailer, `gatehouse-delivery` the webhook sender, `gatehouse-saml` the
//! SAML protocol, `gatehouse-webauthn` the WebAuthn ceremonies, `gatehouse-dns` the TXT
//! lookups, `gatehouse-metrics` the metrics. `docs/architecture.md` lists every port.
//! Every store method that writes is one transaction: it commits everything it was given,
//! the outbox events included, or nothing.
//!
//! Ports are object safe (`async_trait`) because the backend is picked at run time from
//! `GATEHOUSE_DATABASE_URL`; the services hold them as `Arc<dyn Port>`.
//!
//! By area: [`audit`], [`control`], [`directory`], [`domains`], [`iam`], [`identity`],
//! [`metrics`], [`mfa`], [`organizations`], [`sso`], [`oauth`], [`webhooks`], [`platform`];
//! every port is also re-exported here.

use std::sync::Arc;

pub mod audit;
pub mod control;
pub mod directory;
pub mod domains;
pub mod iam;
pub mod identity;
pub mod metrics;
pub mod mfa;
pub mod oauth;
pub mod organizations;
pub mod platform;
pub mod sso;
pub mod webhooks;

pub use audit::*;
pub use control::*;
pub use directory::*;
pub use domains::*;
pub use iam::*;
pub use identity::*;
pub use metrics::*;
pub use mfa::*;
pub use oauth::*;
pub use organizations::*;
pub use platform::*;
pub use sso::*;
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
    /// A record the write hangs on (the parent a new row names) was deleted meanwhile: the
    /// write changed nothing (HTTP 404, as for a record that was never there).
    #[error("a record the write names is gone")]
    Gone,
    /// Anything else: a bug or a corrupt row.
    #[error("the store failed")]
    Failed(#[source] BoxError),
}

/// Every port: the whole set an application that serves every use case wires once.
///
/// Each service takes only the ports it uses, as its own struct (`AuthPorts`,
/// `OrganizationPorts`, ...); each of those converts from `&Ports`, so an application that has
/// built the whole set writes `OrganizationService::new((&ports).into())`, and one that reuses a
/// single service builds just that service's struct.
#[derive(Clone)]
pub struct Ports {
    /// The [`AccountStore`].
    pub accounts: Arc<dyn AccountStore>,
    /// The [`SessionStore`].
    pub sessions: Arc<dyn SessionStore>,
    /// The [`AccountTokenStore`].
    pub account_tokens: Arc<dyn AccountTokenStore>,
    /// The [`ApiKeyStore`].
    pub api_keys: Arc<dyn ApiKeyStore>,
    /// The [`MembershipStore`].
    pub memberships: Arc<dyn MembershipStore>,
    /// The [`ServiceAccountStore`].
    pub service_accounts: Arc<dyn ServiceAccountStore>,
    /// The [`RoleStore`].
    pub roles: Arc<dyn RoleStore>,
    /// The [`OrganizationStore`].
    pub organizations: Arc<dyn OrganizationStore>,
    /// The [`MemberStore`].
    pub members: Arc<dyn MemberStore>,
    /// The [`PolicyStore`].
    pub policies: Arc<dyn PolicyStore>,
    /// The [`BrandingStore`].
    pub branding: Arc<dyn BrandingStore>,
    /// The [`SsoStore`].
    pub sso: Arc<dyn SsoStore>,
    /// The [`MfaStore`].
    pub mfa: Arc<dyn MfaStore>,
    /// The [`Totp`].
    pub totp: Arc<dyn Totp>,
    /// The [`Webauthn`].
    pub webauthn: Arc<dyn Webauthn>,
    /// The [`SamlStore`].
    pub saml: Arc<dyn SamlStore>,
    /// The [`DomainStore`].
    pub domains: Arc<dyn DomainStore>,
    /// The [`DirectoryStore`].
    pub directory: Arc<dyn DirectoryStore>,
    /// The [`DnsTxt`].
    pub dns: Arc<dyn DnsTxt>,
    /// The [`SamlProtocol`].
    pub saml_protocol: Arc<dyn SamlProtocol>,
    /// The [`ApplicationStore`].
    pub applications: Arc<dyn ApplicationStore>,
    /// The [`AuthorizationCodeStore`].
    pub authorization_codes: Arc<dyn AuthorizationCodeStore>,
    /// The [`HealthStore`].
    pub health: Arc<dyn HealthStore>,
    /// The [`Clock`].
    pub clock: Arc<dyn Clock>,
    /// The [`Random`].
    pub random: Arc<dyn Random>,
    /// The [`PasswordHasher`].
    pub hasher: Arc<dyn PasswordHasher>,
    /// The [`PasswordJudge`].
    pub judge: Arc<dyn PasswordJudge>,
    /// The [`TokenSigner`].
    pub signer: Arc<dyn TokenSigner>,
    /// The [`Mailer`]: the mail worker's only (a use case queues mail through its store).
    pub mailer: Arc<dyn Mailer>,
    /// The [`MailQueue`].
    pub mail_queue: Arc<dyn MailQueue>,
    /// The [`RateLimiter`].
    pub rate_limiter: Arc<dyn RateLimiter>,
    /// The [`HeavyLanes`].
    pub heavy: Arc<dyn HeavyLanes>,
    /// The [`SignInAttempts`].
    pub sign_in_attempts: Arc<dyn SignInAttempts>,
    /// The [`WebhookStore`].
    pub webhooks: Arc<dyn WebhookStore>,
    /// The [`DeliveryQueue`].
    pub delivery_queue: Arc<dyn DeliveryQueue>,
    /// The [`SecretCipher`].
    pub cipher: Arc<dyn SecretCipher>,
    /// The [`WebhookSender`].
    pub sender: Arc<dyn WebhookSender>,
    /// The [`OperationsStore`].
    pub operations: Arc<dyn OperationsStore>,
    /// Where the service's figures go (`gatehouse-metrics`).
    pub metrics: Arc<dyn Metrics>,
    /// The [`AuditStore`].
    pub audit: Arc<dyn AuditStore>,
}

/// Declares the ports one service needs: a struct of `Arc<dyn Port>` fields named as in
/// [`Ports`], and its conversion from the whole set.
macro_rules! service_ports {
    (
        $(#[$meta:meta])*
        pub struct $name:ident { $($field:ident: $port:ident),+ $(,)? }
    ) => {
        $(#[$meta])*
        #[derive(Clone)]
        pub struct $name {
            $(
                #[doc = concat!("The [`", stringify!($port), "`](crate::ports::", stringify!($port), ").")]
                pub $field: std::sync::Arc<dyn crate::ports::$port>,
            )+
        }

        impl From<&crate::ports::Ports> for $name {
            fn from(ports: &crate::ports::Ports) -> Self {
                Self { $($field: std::sync::Arc::clone(&ports.$field)),+ }
            }
        }
    };
}
pub(crate) use service_ports;
