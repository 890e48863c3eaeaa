//! SAML single sign-on: the organizations' configurations, the requests sent to identity
//! providers, the sign-in they end in, and the XML-signature adapter that checks responses.

use async_trait::async_trait;
use time::OffsetDateTime;

use super::{BoxError, NewAccount, StoreError};
use crate::model::{
    AuditRecord, EmailDomain, NewEvent, NewSession, OrganizationId, Role, SamlAssertion,
    SamlRequest, SamlRequestId, SamlTrust, SsoConfiguration,
};

/// SAML single sign-on configurations, one per organization.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait SsoStore: Send + Sync + 'static {
    /// The organization's configuration; `None` when it has none.
    async fn sso_configuration(
        &self,
        id: OrganizationId,
    ) -> Result<Option<SsoConfiguration>, StoreError>;

    /// Stores the configuration of a live organization and records the event. Returns false
    /// when the organization is not live.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the organization has a configuration already.
    async fn create_sso_configuration(
        &self,
        configuration: SsoConfiguration,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// Replaces the organization's configuration and records the event. Returns false when it
    /// has none or is not live.
    async fn update_sso_configuration(
        &self,
        configuration: SsoConfiguration,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// The active configurations of live organizations whose `domain_whitelist` lists the
    /// domain, oldest first, at most 10: where home realm discovery sends an email.
    async fn sso_configurations_for_domain(
        &self,
        domain: &EmailDomain,
    ) -> Result<Vec<SsoConfiguration>, StoreError>;
}

/// How a sign-in through SAML makes its user a member, decided by the use case from the
/// configuration's `auto_provision` and `default_role`.
#[derive(Clone, Debug, PartialEq)]
pub enum Provision {
    /// The user is an active member already: nothing to create.
    Nothing,
    /// The user exists but is not a member: they join with this role.
    Member {
        /// The role they join with.
        role: Role,
    },
    /// Nobody has the email: the account (user without password, personal workspace and their
    /// events) is created and joins with this role.
    Account {
        /// The account to create.
        account: Box<NewAccount>,
        /// The role its user joins with.
        role: Role,
    },
}

/// Everything a SAML sign-in writes, in one transaction.
#[derive(Clone, Debug, PartialEq)]
pub struct SamlSignIn {
    /// The organization signed in to.
    pub organization_id: OrganizationId,
    /// The request the response answers: taken (it answers once) in the transaction.
    pub request_id: SamlRequestId,
    /// The assertion's id, remembered until `assertion_valid_until` so it is taken once.
    pub assertion_id: String,
    /// Until when the assertion could be presented.
    pub assertion_valid_until: OffsetDateTime,
    /// What makes the user a member.
    pub provision: Provision,
    /// The existing account signing in, when its address was never verified: reclaimed for
    /// the identity provider's user before the session opens (see
    /// [`Reclaim`](super::Reclaim)).
    pub reclaim: Option<super::Reclaim>,
    /// The session to open; its user is the one signing in (the new account's, when created).
    pub session: NewSession,
    /// With a session policy, how many of the user's sessions may stay live, the new one
    /// included (the oldest are revoked).
    pub keep_at_most: Option<u32>,
    /// The events: `auth.login`, and `member.joined` when the user joins (a new account's own
    /// events travel with it).
    pub events: Vec<NewEvent>,
    /// When it happens.
    pub at: OffsetDateTime,
    /// The audit records: `member.joined` when the user joins, and the sign-in's.
    pub audit: Vec<AuditRecord>,
}

/// What became of a [`SamlSignIn`]; nothing was written unless it is `SignedIn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SamlSignInOutcome {
    /// The session is open.
    SignedIn,
    /// The request was answered already, expired, or belongs to another organization.
    RequestGone,
    /// The assertion was presented before.
    Replayed,
}

/// SAML requests sent, assertions seen, and the sign-ins they end in.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait SamlStore: Send + Sync + 'static {
    /// Remembers a request sent to an identity provider, and forgets the requests and
    /// assertion ids that expired before it was made.
    async fn save_saml_request(&self, request: SamlRequest) -> Result<(), StoreError>;

    /// The organization's request with this id, when it is unanswered and unexpired at `now`.
    async fn saml_request(
        &self,
        organization_id: OrganizationId,
        id: &SamlRequestId,
        now: OffsetDateTime,
    ) -> Result<Option<SamlRequest>, StoreError>;

    /// In one transaction: takes the request (unanswered, unexpired, of this organization),
    /// remembers the assertion id, creates the account and the membership the provision
    /// names, opens the session and records the events. Writes nothing unless it answers
    /// [`SamlSignInOutcome::SignedIn`].
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the email was taken, or the user joined, in the meantime.
    async fn saml_sign_in(&self, sign_in: SamlSignIn) -> Result<SamlSignInOutcome, StoreError>;
}

/// Why a SAML response was refused by the XML-signature adapter. The messages are for the log;
/// the browser is told only that the sign-in was refused.
#[derive(Debug, thiserror::Error)]
pub enum SamlRejection {
    /// Over the size the adapter reads.
    #[error("the response is larger than {0} bytes")]
    TooLarge(usize),
    /// Not base64, not UTF-8, or not well-formed XML.
    #[error("the response is not a well-formed, base64-encoded XML document: {0}")]
    Malformed(String),
    /// A document type declaration (and with it any entity) or a processing instruction.
    #[error("the response declares a document type or holds a processing instruction")]
    Forbidden,
    /// Elements nested deeper than the adapter reads.
    #[error("the response nests elements deeper than {0} levels")]
    TooDeep(usize),
    /// More elements than the adapter reads.
    #[error("the response holds more than {0} elements")]
    TooManyElements(usize),
    /// No signature on the response or the assertion.
    #[error("neither the response nor its assertion is signed")]
    Unsigned,
    /// Signed with SHA-1 (or another algorithm weaker than RSA-SHA256).
    #[error("the signature uses an algorithm weaker than RSA-SHA256")]
    WeakAlgorithm,
    /// A signature does not verify with the configured certificate, or what it covers is not
    /// one response or one assertion (signature wrapping).
    #[error("the signature does not verify with the configured certificate")]
    BadSignature,
    /// A check of the SAML protocol failed: issuer, audience, destination, recipient, time
    /// window, status, subject confirmation.
    #[error("{0}")]
    Invalid(String),
    /// The adapter itself failed: not the response's fault.
    #[error("verifying the response failed")]
    Failed(#[source] BoxError),
}

/// SAML 2.0's messages and XML signatures (the `gatehouse-saml` adapter, over xmlsec).
///
/// Verifying a response is CPU work (tens of milliseconds for a large one): implementations do
/// it off the async workers, a bounded number at a time. Writing a request is cheap (nothing is
/// signed) and stays synchronous.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait SamlProtocol: Send + Sync + 'static {
    /// Where to send the browser: the identity provider's single sign-on URL with the request
    /// as a deflated, base64 `SAMLRequest` (HTTP-Redirect binding) and its id as `RelayState`
    /// (the binding allows at most 80 bytes there; `return_to` stays with the stored request).
    ///
    /// # Errors
    /// Only when the request cannot be written (a bug).
    fn authn_request_url(
        &self,
        request: &SamlRequest,
        trust: &SamlTrust,
    ) -> Result<String, BoxError>;

    /// Checks a response as posted to the assertion consumer (the `SAMLResponse` field: base64
    /// XML): bounded size and depth, no DTD; a signature on the response or the assertion that
    /// verifies with the trusted certificate, RSA-SHA256 or stronger, and the assertion read
    /// from exactly what it covers; the issuer, audience, destination and recipient; the time
    /// window (two minutes of skew, by the system clock); a successful status and a bearer
    /// confirmation. Whether it answers an outstanding request, and for whom, is the caller's
    /// to decide.
    ///
    /// # Errors
    /// A [`SamlRejection`] saying which check failed.
    async fn verify_response(
        &self,
        saml_response: &str,
        trust: &SamlTrust,
    ) -> Result<SamlAssertion, SamlRejection>;
}
