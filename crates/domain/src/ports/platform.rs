//! What every part needs from the machine and the operator: health, the clock, randomness, rate limits and mail.

use async_trait::async_trait;
use time::OffsetDateTime;
use uuid::Uuid;

use super::{BoxError, PoolUse, StoreError};
use crate::model::{Email, Quota, SecretToken, TokenKind};

/// The store's liveness, for `/readyz`, and its pools' use, for the metrics.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait HealthStore: Send + Sync + 'static {
    /// One round trip to the database.
    async fn ping(&self) -> Result<(), StoreError>;

    /// The connection pools' use now, for the metrics; no round trip.
    fn pools(&self) -> Vec<PoolUse>;
}

/// The time.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait Clock: Send + Sync + 'static {
    /// The current time, in UTC. The system clock gives it to the microsecond, the precision
    /// the stores keep, so that a time read back equals the time written.
    fn now(&self) -> OffsetDateTime;
}

/// Identifiers and secrets from a cryptographically secure source.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait Random: Send + Sync + 'static {
    /// A fresh, time-ordered id.
    fn uuid(&self) -> Uuid;
    /// A fresh 256-bit secret with the kind's prefix.
    fn secret(&self, kind: TokenKind) -> SecretToken;
    /// A fresh recovery code, short enough to type from paper: ten characters of an alphabet
    /// without look-alikes (no `0`, `1`, `i`, `l`, `o`), as `xxxxx-xxxxx`; about 49 bits.
    fn recovery_code(&self) -> SecretToken;
}

/// The outcome of counting one request against a rate limit (see [`Quota`] for the rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateDecision {
    /// Whether the request is within the limit.
    pub allowed: bool,
    /// Requests allowed per minute: `X-RateLimit-Limit`.
    pub limit: u32,
    /// Requests that would still be admitted at once, right after this one (0 when refused).
    pub remaining: u32,
    /// For an admitted request, when the key is paid off and its whole burst available again;
    /// for a refused one, when the next request will be admitted. A whole second.
    pub reset_at: OffsetDateTime,
}

/// The counters could not be reached (Redis is down, say); the source says why, for the log.
#[derive(Debug, thiserror::Error)]
#[error("the rate limiter is unavailable")]
pub struct RateLimitError(#[source] pub BoxError);

/// Request counters per key (a principal or a client address), spread over the minute by the
/// rule of [`Quota`]. In-process by default; shared by every replica when backed by Redis.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait RateLimiter: Send + Sync + 'static {
    /// Counts one request for `key` at `now` against `quota` ([`Quota::admit`], atomically:
    /// concurrent requests each count). A refused request is not counted.
    ///
    /// # Errors
    /// [`RateLimitError`] when the counters cannot be reached; callers let the request through.
    async fn hit(
        &self,
        key: &str,
        quota: Quota,
        now: OffsetDateTime,
    ) -> Result<RateDecision, RateLimitError>;
}

/// The most heavy requests of one organization that run at once (in each process).
pub const HEAVY_REQUESTS_AT_ONCE: usize = 2;

/// How long a heavy request waits for one of its organization's lanes before it is refused.
pub const HEAVY_REQUEST_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Lanes for the requests whose cost grows with an organization's data rather than with the
/// page they answer (a search, a SCIM list or filter, a filtered audit log): at most
/// [`HEAVY_REQUESTS_AT_ONCE`] of one organization run at once, so that one tenant spending its
/// whole rate budget on them holds only that many of the process's threads and connections,
/// and every other tenant's requests find the rest free.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait HeavyLanes: Send + Sync + 'static {
    /// A lane of the organization, held until the [`HeavyLane`] is dropped; waits up to
    /// [`HEAVY_REQUEST_WAIT`] for one to be free, then `None`: the request is refused.
    async fn enter(&self, organization: crate::model::OrganizationId) -> Option<HeavyLane>;
}

/// A lane of an organization's [`HeavyLanes`], taken until dropped.
pub struct HeavyLane(#[allow(dead_code)] Box<dyn Send + Sync>);

impl HeavyLane {
    /// A lane that frees what `held` holds when dropped.
    pub fn new(held: impl Send + Sync + 'static) -> Self {
        Self(Box::new(held))
    }
}

impl std::fmt::Debug for HeavyLane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeavyLane")
    }
}

/// An email about to be sent. Its `Debug` shows the recipient and the subject only: the body
/// holds one-time links.
#[derive(Clone, PartialEq)]
pub struct Mail {
    /// The one recipient.
    pub to: Email,
    /// The subject line.
    pub subject: String,
    /// The plain-text body.
    pub text: String,
    /// The sender's display name in place of the configured one (an organization's branding);
    /// the sending address stays the configured one.
    pub sender_name: Option<String>,
    /// Where replies go (an organization's support address); `None`: to the sending address.
    pub reply_to: Option<Email>,
}

impl Mail {
    /// A mail from the service as configured.
    pub fn new(to: Email, subject: String, text: String) -> Self {
        Self {
            to,
            subject,
            text,
            sender_name: None,
            reply_to: None,
        }
    }
}

impl std::fmt::Debug for Mail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mail")
            .field("to", &self.to)
            .field("subject", &self.subject)
            .finish_non_exhaustive()
    }
}

/// The mail could not be handed over for sending; the source says why, for the log.
#[derive(Debug, thiserror::Error)]
#[error("sending mail failed")]
pub struct MailError(#[source] pub BoxError);

/// Outgoing email: SMTP, a mail directory, or the log.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait Mailer: Send + Sync + 'static {
    /// Hands one mail over for delivery: to the SMTP relay, the mail directory or the log.
    async fn send(&self, mail: Mail) -> Result<(), MailError>;
}

/// A mail sealed for the outbox (see `service::mail`): encrypted under the server's secret
/// key and bound to its id, since its body holds a one-time link. A use case hands it to the
/// store with the change that made it, and the store writes it in that change's transaction;
/// the worker opens and sends it. `Debug` shows the id only.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedMail {
    /// The mail's id in the outbox: what the seal is bound to.
    pub id: Uuid,
    /// The mail, sealed.
    pub sealed: Vec<u8>,
}

impl std::fmt::Debug for SealedMail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealedMail")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// A mail the worker leased from the outbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueuedMail {
    /// The mail as sealed.
    pub mail: SealedMail,
    /// Attempts made before this one.
    pub attempts: u32,
}

/// The mail outbox: mails written with the changes that made them, sent by the worker.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait MailQueue: Send + Sync + 'static {
    /// Queues one mail on its own, due at `at` (a mail no other write goes with: the worker's
    /// notice of a disabled endpoint).
    async fn queue_mail(&self, mail: SealedMail, at: OffsetDateTime) -> Result<(), StoreError>;

    /// Leases up to `limit` mails due at `now`, oldest first, until `until`: no other worker
    /// takes them meanwhile, and one that dies leaves them to be taken again then.
    async fn lease_mail(
        &self,
        now: OffsetDateTime,
        until: OffsetDateTime,
        limit: u32,
    ) -> Result<Vec<QueuedMail>, StoreError>;

    /// Forgets a mail: sent, or given up.
    async fn forget_mail(&self, id: Uuid) -> Result<(), StoreError>;

    /// Records a failed attempt: the mail has had `attempts` and is due again at `at`.
    async fn retry_mail(
        &self,
        id: Uuid,
        attempts: u32,
        at: OffsetDateTime,
    ) -> Result<(), StoreError>;
}
