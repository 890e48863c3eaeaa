//! mockall mocks of every port, for unit tests of code built on this crate's services.
//!
//! Enabled by the `mock` feature (add `gatehouse-domain = { ..., features = ["mock"] }` to
//! `[dev-dependencies]`). A mock with no expectation panics when it is called, so a test that
//! sets up only the ports a use case should touch also proves it touches no other.
//!
//! The ports are `#[async_trait]` traits, mocked after `async_trait` has run: an async method's
//! mock returns a boxed future, which [`ready`] makes from a value.
//!
//! ```
//! use gatehouse_domain::mock::{ready, MockPorts};
//! use gatehouse_domain::model::OrganizationId;
//!
//! let mut mocks = MockPorts::new();
//! mocks.organizations.expect_organization().returning(|_| ready(Ok(None)));
//! let ports = mocks.into_ports();
//! let acme = OrganizationId::from_uuid(uuid::Uuid::from_u128(0xac3e));
//! let found = futures::executor::block_on(ports.organizations.organization(acme));
//! assert!(matches!(found, Ok(None)));
//! ```

use std::{future::Future, pin::Pin, sync::Arc};

use crate::ports::Ports;
pub use crate::ports::{
    MockAccountStore, MockAccountTokenStore, MockApiKeyStore, MockApplicationStore, MockAuditStore,
    MockAuthorizationCodeStore, MockBrandingStore, MockClock, MockDeliveryQueue,
    MockDirectoryStore, MockDnsTxt, MockDomainStore, MockHealthStore, MockHeavyLanes,
    MockMailQueue, MockMailer, MockMemberStore, MockMembershipStore, MockMetrics, MockMfaStore,
    MockOperationsStore, MockOrganizationStore, MockPasswordHasher, MockPasswordJudge,
    MockPolicyStore, MockRandom, MockRateLimiter, MockRoleStore, MockSamlProtocol, MockSamlStore,
    MockSecretCipher, MockServiceAccountStore, MockSessionStore, MockSignInAttempts, MockSsoStore,
    MockTokenSigner, MockTotp, MockWebauthn, MockWebhookSender, MockWebhookStore,
};

/// What a mocked async port method returns: a boxed future.
pub type MockFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A finished future of `value`, for `returning` an async port method's result.
pub fn ready<T: Send + 'static>(value: T) -> MockFuture<T> {
    Box::pin(std::future::ready(value))
}

/// Every port, mocked, none with an expectation yet. Set the expectations a test needs on the
/// fields, then turn them into [`Ports`] with [`MockPorts::into_ports`], and a service's own
/// ports with `(&ports).into()`.
pub struct MockPorts {
    /// The mock [`AccountStore`](crate::ports::AccountStore).
    pub accounts: MockAccountStore,
    /// The mock [`SessionStore`](crate::ports::SessionStore).
    pub sessions: MockSessionStore,
    /// The mock [`AccountTokenStore`](crate::ports::AccountTokenStore).
    pub account_tokens: MockAccountTokenStore,
    /// The mock [`ApiKeyStore`](crate::ports::ApiKeyStore).
    pub api_keys: MockApiKeyStore,
    /// The mock [`MembershipStore`](crate::ports::MembershipStore).
    pub memberships: MockMembershipStore,
    /// The mock [`ServiceAccountStore`](crate::ports::ServiceAccountStore).
    pub service_accounts: MockServiceAccountStore,
    /// The mock [`RoleStore`](crate::ports::RoleStore).
    pub roles: MockRoleStore,
    /// The mock [`OrganizationStore`](crate::ports::OrganizationStore).
    pub organizations: MockOrganizationStore,
    /// The mock [`MemberStore`](crate::ports::MemberStore).
    pub members: MockMemberStore,
    /// The mock [`PolicyStore`](crate::ports::PolicyStore).
    pub policies: MockPolicyStore,
    /// The mock [`BrandingStore`](crate::ports::BrandingStore).
    pub branding: MockBrandingStore,
    /// The mock [`SsoStore`](crate::ports::SsoStore).
    pub sso: MockSsoStore,
    /// The mock [`MfaStore`](crate::ports::MfaStore).
    pub mfa: MockMfaStore,
    /// The mock [`Totp`](crate::ports::Totp).
    pub totp: MockTotp,
    /// The mock [`Webauthn`](crate::ports::Webauthn).
    pub webauthn: MockWebauthn,
    /// The mock [`SamlStore`](crate::ports::SamlStore).
    pub saml: MockSamlStore,
    /// The mock [`SamlProtocol`](crate::ports::SamlProtocol).
    pub saml_protocol: MockSamlProtocol,
    /// The mock [`DomainStore`](crate::ports::DomainStore).
    pub domains: MockDomainStore,
    /// The mock [`DirectoryStore`](crate::ports::DirectoryStore).
    pub directory: MockDirectoryStore,
    /// The mock [`DnsTxt`](crate::ports::DnsTxt).
    pub dns: MockDnsTxt,
    /// The mock [`ApplicationStore`](crate::ports::ApplicationStore).
    pub applications: MockApplicationStore,
    /// The mock [`AuthorizationCodeStore`](crate::ports::AuthorizationCodeStore).
    pub authorization_codes: MockAuthorizationCodeStore,
    /// The mock [`HealthStore`](crate::ports::HealthStore).
    pub health: MockHealthStore,
    /// The mock [`Clock`](crate::ports::Clock).
    pub clock: MockClock,
    /// The mock [`Random`](crate::ports::Random).
    pub random: MockRandom,
    /// The mock [`PasswordHasher`](crate::ports::PasswordHasher).
    pub hasher: MockPasswordHasher,
    /// The mock [`PasswordJudge`](crate::ports::PasswordJudge).
    pub judge: MockPasswordJudge,
    /// The mock [`TokenSigner`](crate::ports::TokenSigner).
    pub signer: MockTokenSigner,
    /// The mock [`Mailer`](crate::ports::Mailer).
    pub mailer: MockMailer,
    /// The mock [`MailQueue`](crate::ports::MailQueue).
    pub mail_queue: MockMailQueue,
    /// The mock [`RateLimiter`](crate::ports::RateLimiter).
    pub rate_limiter: MockRateLimiter,
    /// The mock [`HeavyLanes`](crate::ports::HeavyLanes).
    pub heavy: MockHeavyLanes,
    /// The mock [`SignInAttempts`](crate::ports::SignInAttempts).
    pub sign_in_attempts: MockSignInAttempts,
    /// The mock [`WebhookStore`](crate::ports::WebhookStore).
    pub webhooks: MockWebhookStore,
    /// The mock [`DeliveryQueue`](crate::ports::DeliveryQueue).
    pub delivery_queue: MockDeliveryQueue,
    /// The mock [`SecretCipher`](crate::ports::SecretCipher).
    pub cipher: MockSecretCipher,
    /// The mock [`WebhookSender`](crate::ports::WebhookSender).
    pub sender: MockWebhookSender,
    /// The mock [`OperationsStore`](crate::ports::OperationsStore).
    pub operations: MockOperationsStore,
    /// The mock [`Metrics`](crate::ports::Metrics).
    pub metrics: MockMetrics,
    /// The mock [`AuditStore`](crate::ports::AuditStore).
    pub audit: MockAuditStore,
}

impl MockPorts {
    /// Every port mocked, with no expectation.
    pub fn new() -> Self {
        Self {
            accounts: MockAccountStore::new(),
            sessions: MockSessionStore::new(),
            account_tokens: MockAccountTokenStore::new(),
            api_keys: MockApiKeyStore::new(),
            memberships: MockMembershipStore::new(),
            service_accounts: MockServiceAccountStore::new(),
            roles: MockRoleStore::new(),
            organizations: MockOrganizationStore::new(),
            members: MockMemberStore::new(),
            policies: MockPolicyStore::new(),
            branding: MockBrandingStore::new(),
            sso: MockSsoStore::new(),
            mfa: MockMfaStore::new(),
            totp: MockTotp::new(),
            webauthn: MockWebauthn::new(),
            saml: MockSamlStore::new(),
            saml_protocol: MockSamlProtocol::new(),
            domains: MockDomainStore::new(),
            directory: MockDirectoryStore::new(),
            dns: MockDnsTxt::new(),
            applications: MockApplicationStore::new(),
            authorization_codes: MockAuthorizationCodeStore::new(),
            health: MockHealthStore::new(),
            clock: MockClock::new(),
            random: MockRandom::new(),
            hasher: MockPasswordHasher::new(),
            judge: MockPasswordJudge::new(),
            signer: MockTokenSigner::new(),
            mailer: MockMailer::new(),
            mail_queue: MockMailQueue::new(),
            rate_limiter: MockRateLimiter::new(),
            heavy: MockHeavyLanes::new(),
            sign_in_attempts: MockSignInAttempts::new(),
            webhooks: MockWebhookStore::new(),
            delivery_queue: MockDeliveryQueue::new(),
            cipher: MockSecretCipher::new(),
            sender: MockWebhookSender::new(),
            operations: MockOperationsStore::new(),
            metrics: MockMetrics::new(),
            audit: MockAuditStore::new(),
        }
    }

    /// The mocks as the ports services take.
    pub fn into_ports(self) -> Ports {
        Ports {
            accounts: Arc::new(self.accounts),
            sessions: Arc::new(self.sessions),
            account_tokens: Arc::new(self.account_tokens),
            api_keys: Arc::new(self.api_keys),
            memberships: Arc::new(self.memberships),
            service_accounts: Arc::new(self.service_accounts),
            roles: Arc::new(self.roles),
            organizations: Arc::new(self.organizations),
            members: Arc::new(self.members),
            policies: Arc::new(self.policies),
            branding: Arc::new(self.branding),
            sso: Arc::new(self.sso),
            mfa: Arc::new(self.mfa),
            totp: Arc::new(self.totp),
            webauthn: Arc::new(self.webauthn),
            saml: Arc::new(self.saml),
            saml_protocol: Arc::new(self.saml_protocol),
            domains: Arc::new(self.domains),
            directory: Arc::new(self.directory),
            dns: Arc::new(self.dns),
            applications: Arc::new(self.applications),
            authorization_codes: Arc::new(self.authorization_codes),
            health: Arc::new(self.health),
            clock: Arc::new(self.clock),
            random: Arc::new(self.random),
            hasher: Arc::new(self.hasher),
            judge: Arc::new(self.judge),
            signer: Arc::new(self.signer),
            mailer: Arc::new(self.mailer),
            mail_queue: Arc::new(self.mail_queue),
            rate_limiter: Arc::new(self.rate_limiter),
            heavy: Arc::new(self.heavy),
            sign_in_attempts: Arc::new(self.sign_in_attempts),
            webhooks: Arc::new(self.webhooks),
            delivery_queue: Arc::new(self.delivery_queue),
            cipher: Arc::new(self.cipher),
            sender: Arc::new(self.sender),
            operations: Arc::new(self.operations),
            metrics: Arc::new(self.metrics),
            audit: Arc::new(self.audit),
        }
    }
}

impl Default for MockPorts {
    fn default() -> Self {
        Self::new()
    }
}
