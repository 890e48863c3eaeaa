//! What an operator measures. The HTTP edge and the delivery workers report here; an adapter
//! (Prometheus, in `gatehouse-metrics`) keeps the figures and renders them for a scrape.
//!
//! Every label is one of a closed set of values, so that no client-chosen string (an id, a
//! path, a made-up HTTP method) ever becomes a label and multiplies the series.

use std::time::Duration;

/// How a sign-in was attempted: a label of the sign-in counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SignInMethod {
    /// Email and password, on the API or the hosted login page.
    Password,
    /// The second step: a TOTP code, a recovery code or a security key.
    SecondFactor,
    /// A SAML assertion from the organization's identity provider.
    Saml,
    /// A mailed sign-in link.
    MailedLink,
}

impl SignInMethod {
    /// Every method, in a fixed order.
    pub const ALL: [Self; 4] = [
        Self::Password,
        Self::SecondFactor,
        Self::Saml,
        Self::MailedLink,
    ];

    /// The label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Password => "password",
            Self::SecondFactor => "mfa",
            Self::Saml => "saml",
            Self::MailedLink => "magic_link",
        }
    }
}

/// How a sign-in attempt ended: a label of the sign-in counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SignInOutcome {
    /// A session was opened.
    Success,
    /// The first step passed; a second factor is asked for.
    SecondFactorRequired,
    /// Wrong credentials, or a proof refused.
    Failure,
    /// Refused without a check: too many failures for the account.
    LockedOut,
    /// The server could not decide (the store or a key failed).
    Error,
}

impl SignInOutcome {
    /// Every outcome, in a fixed order.
    pub const ALL: [Self; 5] = [
        Self::Success,
        Self::SecondFactorRequired,
        Self::Failure,
        Self::LockedOut,
        Self::Error,
    ];

    /// The label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::SecondFactorRequired => "mfa_required",
            Self::Failure => "failure",
            Self::LockedOut => "locked_out",
            Self::Error => "error",
        }
    }
}

/// What a delivery attempt came to: a label of the delivery counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeliveryOutcome {
    /// The receiver answered with a 2xx.
    Delivered,
    /// It failed; another attempt is scheduled.
    Retrying,
    /// It failed and no attempt is left: a dead letter.
    Dead,
    /// Its lease was lost before the attempt was recorded (another worker took it over, or the
    /// endpoint is gone); it is not counted as an attempt.
    Abandoned,
}

impl DeliveryOutcome {
    /// Every outcome, in a fixed order.
    pub const ALL: [Self; 4] = [Self::Delivered, Self::Retrying, Self::Dead, Self::Abandoned];

    /// The label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Delivered => "delivered",
            Self::Retrying => "retrying",
            Self::Dead => "dead",
            Self::Abandoned => "abandoned",
        }
    }
}

/// Whose budget a refused request spent: a label of the rate-limit counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RateLimitedSpender {
    /// A request without valid credentials, counted by its address.
    Anonymous,
    /// A user's or an API key's request, counted by its principal.
    Authenticated,
}

impl RateLimitedSpender {
    /// The label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Anonymous => "anonymous",
            Self::Authenticated => "authenticated",
        }
    }
}

/// One connection pool's use at a moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolUse {
    /// Which pool: `primary` (PostgreSQL's only pool), or SQLite's `read` and `write`.
    pub pool: &'static str,
    /// The most connections it opens.
    pub max: u64,
    /// Connections handed out now.
    pub in_use: u64,
    /// Callers waiting for a connection now.
    pub waiting: u64,
}

/// The figures read at scrape time rather than counted as they happen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Gauges {
    /// Deliveries with an attempt still to come.
    pub pending_deliveries: u64,
    /// Mails in the outbox, not yet sent.
    pub queued_mail: u64,
    /// The store's connection pools.
    pub pools: Vec<PoolUse>,
}

/// Where the service's figures go.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait Metrics: Send + Sync + 'static {
    /// An HTTP request answered: its method (one of the standard ones, else `OTHER`), the
    /// route's template as registered (`/api/v1/organizations/{id}`, never the path
    /// itself; `unmatched` when no route took it), the status, and how long it took.
    fn request(&self, method: &str, route: &str, status: u16, elapsed: Duration);

    /// A sign-in attempt and how it ended.
    fn sign_in(&self, method: SignInMethod, outcome: SignInOutcome);

    /// A delivery attempt recorded; `since_commit` is the time from the change's commit (the
    /// delivery's creation) to the receiver's answer, for a delivered one.
    fn delivery(&self, outcome: DeliveryOutcome, since_commit: Option<Duration>);

    /// A request refused by the rate limiter.
    fn rate_limited(&self, caller: RateLimitedSpender);

    /// Everything, in the Prometheus text exposition format, with the gauges as given.
    fn render(&self, gauges: &Gauges) -> String;
}
