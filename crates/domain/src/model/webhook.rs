//! Webhook endpoints and deliveries: the URL rules, the ids, which events an endpoint is sent
//! ([`Subscription`]), the retry schedule, the lease's room and the signature.

use std::{collections::HashMap, fmt, net::IpAddr, str::FromStr, time::Duration};

use time::OffsetDateTime;
use uuid::Uuid;

use super::{
    text::{named_variants, parse_text, str_ref, string_conversions, TextError},
    EventId, EventType, OrganizationId,
};

/// A note for people on a webhook endpoint: trimmed, at most [`Self::MAX_CHARS`] characters,
/// may be empty; line feeds allowed, no other control character (PostgreSQL refuses a NUL in
/// any text, and no reader of the note wants the rest).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointDescription(String);

impl EndpointDescription {
    /// The longest note, in characters.
    pub const MAX_CHARS: usize = 500;

    /// A note as given, trimmed.
    ///
    /// # Errors
    /// When it is longer than [`Self::MAX_CHARS`] once trimmed, or holds a control character
    /// other than a line feed.
    pub fn parse(raw: &str) -> Result<Self, TextError> {
        parse_text(raw, 0, Self::MAX_CHARS, true).map(Self)
    }

    /// The note, trimmed.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

string_conversions!(EndpointDescription, TextError);

/// An endpoint URL: absolute `https`, with a host, no credentials, no fragment, at most 2048
/// bytes. Plain `http` is refused (the spec's `400`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookUrl(String);

/// Why an endpoint URL was refused. The messages complete "`<field>` ...".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WebhookUrlError {
    /// The URL is plain `http`; only `https` is delivered to.
    #[error("must use https")]
    NotHttps,
    /// Not an absolute `https` URL with a valid host and port, or it holds a fragment, white
    /// space or a control character.
    #[error("is not a valid absolute URL")]
    Invalid,
    /// The URL carries a user name or password (`user:password@`).
    #[error("must not contain credentials")]
    Credentials,
    /// More than 2048 bytes, after trimming.
    #[error("must be at most 2048 characters")]
    TooLong,
}

impl WebhookUrl {
    /// Trims `raw` and checks it against the rules above (the scheme in any case); keeps it
    /// as sent otherwise.
    pub fn parse(raw: &str) -> Result<Self, WebhookUrlError> {
        let raw = raw.trim();
        if raw.len() > 2048 {
            return Err(WebhookUrlError::TooLong);
        }
        let lower = raw.to_ascii_lowercase();
        if lower.starts_with("http://") {
            return Err(WebhookUrlError::NotHttps);
        }
        let rest = lower
            .strip_prefix("https://")
            .ok_or(WebhookUrlError::Invalid)?;
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        if authority.contains('@') {
            return Err(WebhookUrlError::Credentials);
        }
        let host = match authority.strip_prefix('[') {
            Some(v6) => v6.split(']').next().unwrap_or_default(),
            None => authority.split(':').next().unwrap_or_default(),
        };
        let port_ok = match authority.rsplit_once("]:").map(|(_, p)| p).or_else(|| {
            (!authority.starts_with('['))
                .then(|| authority.split_once(':').map(|(_, p)| p))
                .flatten()
        }) {
            None => true,
            Some(port) => port.parse::<u16>().is_ok_and(|p| p > 0),
        };
        let host_ok = !host.is_empty()
            && (host.parse::<IpAddr>().is_ok()
                || host
                    .split('.')
                    .all(|l| !l.is_empty() && l.chars().all(|c| c.is_alphanumeric() || c == '-')));
        if !host_ok
            || !port_ok
            || raw.contains('#')
            || raw.chars().any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(WebhookUrlError::Invalid);
        }
        Ok(Self(raw.to_owned()))
    }
}

impl WebhookUrl {
    /// The IP address the URL names as its host, when it names one rather than a domain name:
    /// as a browser reads it (the `url` crate's WHATWG rules), so `https://2130706433/` and
    /// `https://0x7f.1/` are `127.0.0.1` too.
    pub fn literal_address(&self) -> Option<IpAddr> {
        match url::Url::parse(&self.0).ok()?.host()? {
            url::Host::Ipv4(ip) => Some(IpAddr::V4(ip)),
            url::Host::Ipv6(ip) => Some(IpAddr::V6(ip)),
            url::Host::Domain(_) => None,
        }
    }

    /// Whether the URL's host is a literal address that is not on the public internet
    /// (private, loopback, link-local, ...: [`is_public_address`](super::is_public_address)
    /// says which), where a webhook is never delivered unless the server allows private targets.
    pub fn names_private_address(&self) -> bool {
        self.literal_address()
            .is_some_and(|ip| !super::is_public_address(ip))
    }
}

str_ref!(WebhookUrl);

macro_rules! prefixed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Uuid);

        impl $name {
            #[doc = concat!("What the id's text form starts with: `", $prefix, "`.")]
            pub const PREFIX: &'static str = $prefix;

            /// The id that wraps `id`; any UUID makes one.
            pub const fn from_uuid(id: Uuid) -> Self {
                Self(id)
            }

            /// The UUID the id wraps, as stored.
            pub const fn as_uuid(&self) -> Uuid {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}{}", $prefix, self.0.simple())
            }
        }

        impl FromStr for $name {
            type Err = ();
            fn from_str(s: &str) -> Result<Self, ()> {
                let hex = s.strip_prefix($prefix).ok_or(())?;
                if hex.len() != 32 {
                    return Err(());
                }
                Uuid::try_parse(hex).map(Self).map_err(|_| ())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
    };
}

prefixed_id!(
    /// A webhook endpoint: `ep_` and 32 hex digits.
    EndpointId,
    "ep_"
);
prefixed_id!(
    /// One delivery of one event to one endpoint: `dlv_` and 32 hex digits.
    DeliveryId,
    "dlv_"
);

/// `success`, `failed` or `pending`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryStatus {
    /// An attempt is due and not made yet: the first one, or one a manual retry queued.
    Pending,
    /// The latest attempt was answered with a 2xx.
    Success,
    /// The latest attempt failed; an automatic retry may still be due (see
    /// [`Delivery::next_retry_at`]).
    Failed,
}

named_variants!(
    DeliveryStatus,
    /// The status's lowercase name, as the API and the store write it.
    refused = "must be one of: success, failed, pending",
    { Pending => "pending", Success => "success", Failed => "failed" }
);

/// The automatic attempts of a delivery: attempt 1 at once; a failed attempt `k` schedules
/// attempt `k + 1` after `delays[k - 1]`; after `max_attempts` failures the delivery is
/// permanently failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetrySchedule {
    delays: Vec<Duration>,
}

impl RetrySchedule {
    /// The number of automatic attempts: one more than the delays between them... capped at
    /// the spec's five.
    pub const MAX_ATTEMPTS: u32 = 5;

    /// A schedule with these delays between attempts: at least `MAX_ATTEMPTS - 1` of them, all
    /// positive; delays past that many are accepted but never used. The error says which rule
    /// failed.
    pub fn new(delays: Vec<Duration>) -> Result<Self, String> {
        if delays.len() + 1 < Self::MAX_ATTEMPTS as usize {
            return Err(format!(
                "needs at least {} delays (one after each failed attempt but the last)",
                Self::MAX_ATTEMPTS - 1
            ));
        }
        if delays.iter().any(Duration::is_zero) {
            return Err("delays must be positive".into());
        }
        Ok(Self { delays })
    }

    /// When the attempt after failed attempt `attempt` is due, or `None` when that was the
    /// last automatic one (or a manual retry, which has no automatic follow-up).
    pub fn next_after(&self, attempt: u32, failed_at: OffsetDateTime) -> Option<OffsetDateTime> {
        if attempt >= Self::MAX_ATTEMPTS {
            return None;
        }
        let delay = self.delays.get((attempt as usize).checked_sub(1)?)?;
        time::Duration::try_from(*delay)
            .ok()
            .and_then(|delay| failed_at.checked_add(delay))
    }
}

impl Default for RetrySchedule {
    /// `60s, 5m, 30m, 2h, 24h`.
    fn default() -> Self {
        Self {
            delays: [60, 300, 1800, 7200, 86_400]
                .into_iter()
                .map(Duration::from_secs)
                .collect(),
        }
    }
}

impl FromStr for RetrySchedule {
    type Err = String;
    /// Seconds separated by commas: `60,300,1800,7200,86400`.
    fn from_str(raw: &str) -> Result<Self, String> {
        let delays = raw
            .split(',')
            .map(|s| {
                s.trim()
                    .parse::<u64>()
                    .map(Duration::from_secs)
                    .map_err(|_| format!("{s:?} is not a number of seconds"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(delays)
    }
}

/// A webhook endpoint as stored (the secret stays sealed in the store until a delivery needs
/// it).
#[derive(Clone, Debug, PartialEq)]
pub struct WebhookEndpoint {
    /// The endpoint's id, `ep_` and 32 hex digits.
    pub id: EndpointId,
    /// The organization whose events the endpoint receives.
    pub organization_id: OrganizationId,
    /// Where deliveries are posted.
    pub url: WebhookUrl,
    /// Free text for people; not checked, may be empty.
    pub description: String,
    /// The event types the endpoint subscribes to; the service keeps each once, at least one.
    pub events: Vec<EventType>,
    /// Whether events are delivered to it: turned off by hand, or after a run of failed
    /// deliveries.
    pub is_active: bool,
    /// When the endpoint was registered.
    pub created_at: OffsetDateTime,
    /// When the endpoint last changed.
    pub updated_at: OffsetDateTime,
}

impl WebhookEndpoint {
    /// The most event types an endpoint may list (there are fewer types than this).
    pub const MAX_EVENTS: usize = 64;

    /// What decides which events it is sent.
    pub fn subscription(&self) -> Subscription {
        Subscription {
            is_active: self.is_active,
            events: self.events.clone(),
        }
    }
}

/// What decides whether an event goes to an endpoint: the one place the rule is written (the
/// store reads an organization's endpoints and keeps those whose subscription
/// [`matches`](Self::matches)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subscription {
    /// Whether the endpoint is active: an inactive one is sent nothing.
    pub is_active: bool,
    /// The event types it lists.
    pub events: Vec<EventType>,
}

impl Subscription {
    /// The subscription of an endpoint that lists the event types named `names`, as stored. A
    /// name of no event type Gatehouse knows names nothing the endpoint is sent.
    pub fn from_names<S: AsRef<str>>(is_active: bool, names: impl IntoIterator<Item = S>) -> Self {
        Self {
            is_active,
            events: names
                .into_iter()
                .filter_map(|name| name.as_ref().parse().ok())
                .collect(),
        }
    }

    /// Whether an event of type `event` goes to the endpoint: it is active and lists the type.
    pub fn matches(&self, event: EventType) -> bool {
        self.is_active && self.events.contains(&event)
    }
}

/// Delivery counts of an endpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeliveryStats {
    /// All the endpoint's deliveries, pending ones included.
    pub total: u64,
    /// Deliveries whose latest attempt succeeded.
    pub successful: u64,
    /// Deliveries whose latest attempt failed, whether or not a retry is still due.
    pub failed: u64,
}

/// One delivery and its latest attempt.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery {
    /// The delivery's id, `dlv_` and 32 hex digits.
    pub id: DeliveryId,
    /// The endpoint it is sent to.
    pub webhook_id: EndpointId,
    /// The endpoint's organization.
    pub organization_id: OrganizationId,
    /// The event delivered.
    pub event_id: EventId,
    /// The event's type.
    pub event: EventType,
    /// Where the delivery stands.
    pub status: DeliveryStatus,
    /// The attempt the status is about, from 1: the one due while pending, else the last one
    /// made.
    pub attempt: u32,
    /// The receiver's HTTP status at the latest attempt; `None` before any attempt, or when
    /// the receiver did not answer.
    pub http_status: Option<u16>,
    /// The JSON payload sent; `None` when the stored payload is not JSON.
    pub request_body: Option<serde_json::Value>,
    /// The start of the receiver's answer at the latest attempt, or why there was none;
    /// `None` before any attempt.
    pub response_body: Option<String>,
    /// How long the latest attempt took, in milliseconds; `None` before any attempt.
    pub duration_ms: Option<u64>,
    /// When the latest attempt was made, whatever came of it; `None` before any attempt.
    pub delivered_at: Option<OffsetDateTime>,
    /// When a failed delivery is retried automatically; `None` while pending, after a
    /// success, and after the last automatic attempt.
    pub next_retry_at: Option<OffsetDateTime>,
    /// When the delivery was queued.
    pub created_at: OffsetDateTime,
}

/// What a delivery worker can take on at one lease: `total` attempts in all, at each endpoint
/// `per_endpoint` less the attempts it already has in flight there, and for each organization a
/// share, `per_organization` less the attempts in flight to its endpoints, that binds only
/// while other organizations wait. Leasing only what fits means a worker never leases a
/// delivery it must give back. Beyond its share, an organization with nobody else waiting may
/// use the free slots but a share's worth, kept free: no organization's slow endpoints ever
/// hold every slot, so another organization's fresh delivery never waits for one of them to
/// answer, and an organization alone with work is not held to its share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRoom {
    total: usize,
    per_endpoint: usize,
    per_organization: usize,
    in_flight: HashMap<EndpointId, usize>,
    in_flight_of: HashMap<OrganizationId, usize>,
}

impl LeaseRoom {
    /// Room for `total` attempts in all and `per_endpoint` at each endpoint, none in flight
    /// yet, and no bound per organization (see [`Self::per_organization`]).
    pub fn new(total: usize, per_endpoint: usize) -> Self {
        Self {
            total,
            per_endpoint,
            per_organization: usize::MAX,
            in_flight: HashMap::new(),
            in_flight_of: HashMap::new(),
        }
    }

    /// The same room, with each organization's share: at most `attempts` in flight to its
    /// endpoints while other organizations' deliveries are among the candidates.
    #[must_use]
    pub fn per_organization(mut self, attempts: usize) -> Self {
        self.per_organization = attempts;
        self
    }

    /// `attempts` more are in flight at `endpoint`.
    #[must_use]
    pub fn with_in_flight(mut self, endpoint: EndpointId, attempts: usize) -> Self {
        *self.in_flight.entry(endpoint).or_insert(0) += attempts;
        self
    }

    /// `attempts` are in flight at `endpoint` across every worker on the store (its held
    /// leases, this worker's own among them): the endpoint's count is at least that, so that
    /// the per-endpoint bound holds for a cluster of replicas and not only in each.
    #[must_use]
    pub fn with_held_in_cluster(mut self, endpoint: EndpointId, attempts: usize) -> Self {
        let count = self.in_flight.entry(endpoint).or_insert(0);
        *count = (*count).max(attempts);
        self
    }

    /// `attempts` more are in flight to the endpoints of `organization`.
    #[must_use]
    pub fn with_in_flight_of(mut self, organization: OrganizationId, attempts: usize) -> Self {
        *self.in_flight_of.entry(organization).or_insert(0) += attempts;
        self
    }

    /// The most attempts the lease may take, in all.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Endpoints with no room left: the lease need not look at their deliveries.
    pub fn full(&self) -> Vec<EndpointId> {
        self.in_flight
            .iter()
            .filter(|(_, n)| **n >= self.per_endpoint)
            .map(|(id, _)| *id)
            .collect()
    }

    /// The most attempts in flight at one endpoint: a lease need look at no more of an
    /// endpoint's due deliveries than this.
    pub fn per_endpoint(&self) -> usize {
        self.per_endpoint
    }

    /// Of `candidates`, in the order the store gives them (each organization's oldest due
    /// first, then each one's second, and so on), the ones that fit, in the same order: first
    /// each organization's within its share; then, while more than a share's worth of the
    /// lease's slots are still free, those the share alone left out, in their order (nobody
    /// else wants those slots now, and the share's worth left free is there for whoever
    /// comes next).
    pub fn pick<T>(
        &self,
        candidates: impl IntoIterator<Item = (T, EndpointId, OrganizationId)>,
    ) -> Vec<T> {
        let mut taken: HashMap<EndpointId, usize> = HashMap::new();
        let mut taken_of: HashMap<OrganizationId, usize> = HashMap::new();
        let mut picked: Vec<Option<T>> = Vec::new();
        let mut beyond_share: Vec<(usize, T, EndpointId)> = Vec::new();
        let mut count = 0;
        for (item, endpoint, organization) in candidates {
            if count >= self.total {
                break;
            }
            let busy = self.in_flight.get(&endpoint).copied().unwrap_or(0);
            let busy_of = self.in_flight_of.get(&organization).copied().unwrap_or(0);
            let taken = taken.entry(endpoint).or_insert(0);
            if busy + *taken >= self.per_endpoint {
                continue;
            }
            let taken_of = taken_of.entry(organization).or_insert(0);
            if busy_of + *taken_of < self.per_organization {
                *taken += 1;
                *taken_of += 1;
                count += 1;
                picked.push(Some(item));
            } else {
                // Its place among the picked, should a slot be left for it.
                beyond_share.push((picked.len(), item, endpoint));
                picked.push(None);
            }
        }
        let beyond_share_room = self.total.saturating_sub(self.per_organization);
        for (at, item, endpoint) in beyond_share {
            if count >= beyond_share_room {
                break;
            }
            let busy = self.in_flight.get(&endpoint).copied().unwrap_or(0);
            let taken = taken.entry(endpoint).or_insert(0);
            if busy + *taken < self.per_endpoint {
                *taken += 1;
                count += 1;
                picked[at] = Some(item);
            }
        }
        picked.into_iter().flatten().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::testing::refuses_each;

    #[test]
    fn a_lease_takes_only_what_fits_at_each_endpoint_and_in_all() {
        let [a, b, c] = [1, 2, 3].map(|n| EndpointId::from_uuid(Uuid::from_u128(n)));
        let room = LeaseRoom::new(5, 2)
            .with_in_flight(a, 1)
            .with_in_flight(c, 2);
        assert_eq!(room.full(), [c]);
        let org = OrganizationId::from_uuid(Uuid::from_u128(9));
        let candidates = [
            (1, a, org),
            (2, a, org),
            (3, b, org),
            (4, c, org),
            (5, b, org),
            (6, b, org),
            (7, a, org),
            (8, b, org),
        ];
        assert_eq!(
            room.pick(candidates),
            [1, 3, 5],
            "a has room for one, b for two, c none"
        );
        let small = LeaseRoom::new(2, 4);
        assert_eq!(small.pick(candidates), [1, 2], "never more than the total");
        assert!(LeaseRoom::new(0, 4).pick(candidates).is_empty());
    }

    #[test]
    fn attempts_other_replicas_hold_count_against_an_endpoints_bound() {
        let [a, b] = [1, 2].map(|n| EndpointId::from_uuid(Uuid::from_u128(n)));
        let org = OrganizationId::from_uuid(Uuid::from_u128(9));
        // This worker has one in flight at `a`; the cluster holds three there (this one among
        // them), and two at `b`, none of them this worker's.
        let room = LeaseRoom::new(10, 4)
            .with_in_flight(a, 1)
            .with_held_in_cluster(a, 3)
            .with_held_in_cluster(b, 4);
        assert_eq!(room.full(), [b]);
        let candidates = [(1, a, org), (2, a, org), (3, b, org)];
        assert_eq!(room.pick(candidates), [1], "a has room for one, b none");
        // A count older than this worker's own never lowers it.
        let room = LeaseRoom::new(10, 4)
            .with_in_flight(a, 4)
            .with_held_in_cluster(a, 2);
        assert_eq!(room.full(), [a]);
    }

    #[test]
    fn no_organization_takes_more_than_its_share_of_a_lease_while_others_wait() {
        let [a, b, c] = [1, 2, 3].map(|n| EndpointId::from_uuid(Uuid::from_u128(n)));
        let [noisy, quiet] = [7, 8].map(|n| OrganizationId::from_uuid(Uuid::from_u128(n)));
        let room = LeaseRoom::new(4, 10)
            .per_organization(3)
            .with_in_flight_of(noisy, 1);
        let candidates = [
            (1, a, noisy),
            (2, b, noisy),
            (5, c, quiet),
            (3, a, noisy),
            (4, b, noisy),
            (6, c, quiet),
        ];
        assert_eq!(
            room.pick(candidates),
            [1, 2, 5, 6],
            "noisy has room for two more in its share, and quiet waits for two"
        );
        let full = LeaseRoom::new(3, 10)
            .per_organization(3)
            .with_in_flight_of(noisy, 3);
        assert_eq!(
            full.pick(candidates),
            [5, 6],
            "quiet's two; the one slot left is kept free, a share's worth"
        );
        let wider = LeaseRoom::new(10, 10)
            .per_organization(3)
            .with_in_flight_of(noisy, 1);
        assert_eq!(
            wider.pick(candidates),
            [1, 2, 5, 3, 4, 6],
            "nobody waits for the slots left: noisy's share binds no more, and a share's worth \
             (three) stays free"
        );
        let wide_open = LeaseRoom::new(7, 10)
            .per_organization(3)
            .with_in_flight_of(noisy, 1);
        assert_eq!(
            wide_open.pick(candidates),
            [1, 2, 5, 6],
            "with seven slots free, three of them kept: none beyond the share"
        );
    }

    #[test]
    fn an_organization_alone_with_work_may_use_the_free_slots_but_a_share() {
        let [a, b] = [1, 2].map(|n| EndpointId::from_uuid(Uuid::from_u128(n)));
        let alone = OrganizationId::from_uuid(Uuid::from_u128(7));
        let room = LeaseRoom::new(5, 2)
            .per_organization(1)
            .with_in_flight_of(alone, 3)
            .with_in_flight(a, 1);
        let candidates = [(1, a, alone), (2, b, alone), (3, a, alone), (4, b, alone)];
        assert_eq!(
            room.pick(candidates),
            [1, 2, 4],
            "the free slots but a share's worth, and still no more than fits at each endpoint"
        );
        let tight = LeaseRoom::new(3, 2)
            .per_organization(1)
            .with_in_flight_of(alone, 3);
        assert_eq!(
            tight.pick(candidates),
            [1, 2],
            "one of the three slots kept free"
        );
    }

    #[test]
    fn only_https_urls_are_endpoints() {
        assert!(WebhookUrl::parse("https://hooks.example.com/in?x=1").is_ok());
        assert!(WebhookUrl::parse("https://127.0.0.1:8443/hook").is_ok());
        assert!(WebhookUrl::parse("https://[::1]:8443/hook").is_ok());
        refuses_each(
            WebhookUrl::parse,
            &["http://hooks.example.com", "HTTP://x.example"],
            WebhookUrlError::NotHttps,
        );
        assert_eq!(
            WebhookUrl::parse("https://u:p@x.example"),
            Err(WebhookUrlError::Credentials)
        );
        refuses_each(
            WebhookUrl::parse,
            &[
                "ftp://x",
                "https://",
                "https:///path",
                "x.example",
                "https://a b.example",
                "https://x.example:0/",
                "https://x.example:99999/",
                "https://x.example/a\0b",
                "https://x.example/a\u{7f}",
            ],
            WebhookUrlError::Invalid,
        );
    }

    #[test]
    fn literal_private_loopback_and_link_local_hosts_are_told_apart() {
        let private = |raw: &str| WebhookUrl::parse(raw).unwrap().names_private_address();
        for raw in [
            "https://127.0.0.1/hook",
            "https://127.0.0.1:8443/hook",
            "https://10.1.2.3/hook",
            "https://172.16.0.1/hook",
            "https://192.168.1.1/hook",
            "https://169.254.169.254/latest/meta-data",
            "https://0.0.0.0/hook",
            "https://[::1]/hook",
            "https://[fe80::1]/hook",
            "https://[fd00::1]/hook",
            "https://[::ffff:127.0.0.1]/hook",
            // What a browser reads as 127.0.0.1.
            "https://2130706433/hook",
            "https://0x7f.1/hook",
        ] {
            assert!(private(raw), "{raw} names a private address");
        }
        for raw in [
            "https://hooks.example.com/in",
            "https://8.8.8.8/hook",
            "https://[2606:4700:4700::1111]/hook",
            // A name is judged when it resolves, by the sender.
            "https://localhost/hook",
        ] {
            assert!(!private(raw), "{raw} names no private address");
        }
    }

    #[test]
    fn ids_carry_their_prefix_and_round_trip() {
        let id = EndpointId::from_uuid(Uuid::now_v7());
        let text = id.to_string();
        assert!(text.starts_with("ep_") && text.len() == 35);
        assert_eq!(text.parse::<EndpointId>(), Ok(id));
        assert_eq!(text.replace("ep_", "dlv_").parse::<EndpointId>(), Err(()));
        assert_eq!("ep_zz".parse::<EndpointId>(), Err(()));
    }

    #[test]
    fn the_schedule_follows_the_decisions() {
        let schedule = RetrySchedule::default();
        let t = OffsetDateTime::now_utc();
        assert_eq!(
            schedule.next_after(1, t),
            Some(t + time::Duration::seconds(60))
        );
        assert_eq!(
            schedule.next_after(4, t),
            Some(t + time::Duration::hours(2))
        );
        assert_eq!(schedule.next_after(5, t), None);
        assert_eq!(schedule.next_after(6, t), None);
        assert_eq!(
            "1,2,3".parse::<RetrySchedule>(),
            Err("needs at least 4 delays (one after each failed attempt but the last)".into())
        );
        assert!("1,2,3,4".parse::<RetrySchedule>().is_ok());
        assert_eq!(
            "1,x,3,4".parse::<RetrySchedule>(),
            Err("\"x\" is not a number of seconds".into())
        );
    }

    #[test]
    fn an_event_goes_to_an_active_endpoint_that_lists_its_type() {
        let listing = |is_active| {
            Subscription::from_names(
                is_active,
                [
                    EventType::MemberJoined.as_str(),
                    EventType::UserDeleted.as_str(),
                ],
            )
        };
        assert!(listing(true).matches(EventType::MemberJoined));
        assert!(listing(true).matches(EventType::UserDeleted));
        assert!(
            !listing(true).matches(EventType::MemberRemoved),
            "a type it does not list"
        );
        assert!(
            !listing(false).matches(EventType::MemberJoined),
            "an inactive endpoint is sent nothing"
        );
    }

    #[test]
    fn a_stored_name_of_no_known_event_type_matches_nothing() {
        let subscription = Subscription::from_names(true, ["member.joined", "member.*", ""]);
        assert_eq!(subscription.events, [EventType::MemberJoined]);
        assert!(EventType::ALL
            .iter()
            .filter(|event| subscription.matches(**event))
            .eq([&EventType::MemberJoined]));
    }

    #[test]
    fn an_endpoints_subscription_is_its_state_and_its_list() {
        let endpoint = WebhookEndpoint {
            id: EndpointId::from_uuid(Uuid::from_u128(1)),
            organization_id: OrganizationId::from_uuid(Uuid::from_u128(2)),
            url: WebhookUrl::parse("https://hooks.example.com/in").unwrap(),
            description: String::new(),
            events: vec![EventType::OrganizationUpdated],
            is_active: true,
            created_at: OffsetDateTime::UNIX_EPOCH,
            updated_at: OffsetDateTime::UNIX_EPOCH,
        };
        assert!(endpoint
            .subscription()
            .matches(EventType::OrganizationUpdated));
        let off = WebhookEndpoint {
            is_active: false,
            ..endpoint
        };
        assert!(!off.subscription().matches(EventType::OrganizationUpdated));
    }
}
