//! Organization policies (Business and Enterprise plans): the password, MFA, session and network
//! rules an organization sets for its members, and how the policies of several organizations
//! combine for one user (the strictest wins). The password policy's defaults hold for every
//! password no organization's policy covers.

use std::{fmt, net::IpAddr};

use serde::{Deserialize, Serialize};
use time::{Duration, OffsetDateTime};

use super::{Feature, IpRange, Plan};

/// An integer within bounds fixed at compile time: a policy value out of its bounds cannot be
/// built.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bounded<const MIN: u32, const MAX: u32>(u32);

/// A number outside its bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("must be an integer from {min} to {max}")]
pub struct OutOfBounds {
    /// The smallest value accepted.
    pub min: u32,
    /// The largest value accepted.
    pub max: u32,
}

impl<const MIN: u32, const MAX: u32> Bounded<MIN, MAX> {
    /// The lower bound, as a value.
    pub const MIN: Self = Self(MIN);
    /// The upper bound, as a value.
    pub const MAX: Self = Self(MAX);

    /// For constants; out of bounds is a compile-time error where used in a `const`.
    pub const fn new_const(value: u32) -> Self {
        assert!(value >= MIN && value <= MAX, "value out of bounds");
        Self(value)
    }

    /// `raw`, if it is from `MIN` to `MAX` inclusive.
    pub fn parse(raw: i64) -> Result<Self, OutOfBounds> {
        u32::try_from(raw)
            .ok()
            .filter(|v| (MIN..=MAX).contains(v))
            .map(Self)
            .ok_or(OutOfBounds { min: MIN, max: MAX })
    }

    /// The number, within the bounds.
    pub const fn get(self) -> u32 {
        self.0
    }
}

impl<const MIN: u32, const MAX: u32> fmt::Debug for Bounded<MIN, MAX> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<const MIN: u32, const MAX: u32> Serialize for Bounded<MIN, MAX> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.0)
    }
}

impl<'de, const MIN: u32, const MAX: u32> Deserialize<'de> for Bounded<MIN, MAX> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Self::parse(i64::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// `password_policy.min_length`.
pub type MinLength = Bounded<8, 128>;
/// `password_policy.max_age_days`; 0 disables. The spec sets no upper bound; ten years is ours.
pub type MaxAgeDays = Bounded<0, 3650>;
/// `password_policy.prevent_reuse_count`.
pub type ReuseCount = Bounded<0, 24>;
/// `mfa_policy.grace_period_hours`; the spec sets no bounds; up to a year is ours.
pub type GraceHours = Bounded<0, 8760>;
/// `session_policy.max_session_duration_hours`.
pub type SessionHours = Bounded<1, 720>;
/// `session_policy.idle_timeout_minutes`.
pub type IdleMinutes = Bounded<5, 1440>;
/// `session_policy.max_concurrent_sessions`.
pub type ConcurrentSessions = Bounded<1, 100>;

/// The rules a new password must meet: an organization's `password_policy` (Business plan), or
/// without one the defaults below (NIST 800-63B: length over composition).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PasswordPolicy {
    /// The fewest characters a password may have.
    pub min_length: MinLength,
    /// Whether a password needs an uppercase letter.
    pub require_uppercase: bool,
    /// Whether a password needs a lowercase letter.
    pub require_lowercase: bool,
    /// Whether a password needs an ASCII digit.
    pub require_numbers: bool,
    /// Whether a password needs a character that is neither a letter nor a digit.
    pub require_special_chars: bool,
    /// Days after which a password must be changed; 0 disables.
    pub max_age_days: MaxAgeDays,
    /// How many previous passwords may not be chosen again.
    pub prevent_reuse_count: ReuseCount,
}

impl Default for PasswordPolicy {
    fn default() -> Self {
        Self {
            min_length: MinLength::MIN,
            require_uppercase: false,
            require_lowercase: false,
            require_numbers: false,
            require_special_chars: false,
            max_age_days: MaxAgeDays::MIN,
            prevent_reuse_count: ReuseCount::MIN,
        }
    }
}

impl PasswordPolicy {
    /// The policy that meets both: the longer minimum, every composition rule of either, the
    /// shorter maximum age (0 counting as none), the longer history.
    pub fn strictest(&self, other: &Self) -> Self {
        let max_age_days = match (self.max_age_days.get(), other.max_age_days.get()) {
            (0, _) => other.max_age_days,
            (_, 0) => self.max_age_days,
            _ => self.max_age_days.min(other.max_age_days),
        };
        Self {
            min_length: self.min_length.max(other.min_length),
            require_uppercase: self.require_uppercase || other.require_uppercase,
            require_lowercase: self.require_lowercase || other.require_lowercase,
            require_numbers: self.require_numbers || other.require_numbers,
            require_special_chars: self.require_special_chars || other.require_special_chars,
            max_age_days,
            prevent_reuse_count: self.prevent_reuse_count.max(other.prevent_reuse_count),
        }
    }

    /// Whether a password set at `changed_at` is too old at `now`.
    pub fn is_expired(&self, changed_at: OffsetDateTime, now: OffsetDateTime) -> bool {
        match self.max_age_days.get() {
            0 => false,
            days => now - changed_at >= Duration::days(i64::from(days)),
        }
    }
}

/// A second factor an organization may allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MfaMethod {
    /// Time-based one-time codes from an authenticator app.
    Totp,
    /// A security key or platform authenticator, through WebAuthn.
    Webauthn,
}

impl MfaMethod {
    /// Every method; what the default policy allows.
    pub const ALL: [Self; 2] = [Self::Totp, Self::Webauthn];

    /// The method's lowercase name, as the API and the stored policy write it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Totp => "totp",
            Self::Webauthn => "webauthn",
        }
    }

    /// Parses the method's lowercase name, `totp` or `webauthn`; the error is the message.
    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        match raw {
            "totp" => Ok(Self::Totp),
            "webauthn" => Ok(Self::Webauthn),
            _ => Err("must be one of: totp, webauthn"),
        }
    }
}

/// `mfa_policy`. Stored and returned; enforcing it waits for MFA enrolment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawMfaPolicy")]
pub struct MfaPolicy {
    required: bool,
    allowed_methods: Vec<MfaMethod>,
    grace_period_hours: GraceHours,
}

#[derive(Deserialize)]
struct RawMfaPolicy {
    required: bool,
    allowed_methods: Vec<MfaMethod>,
    grace_period_hours: GraceHours,
}

impl TryFrom<RawMfaPolicy> for MfaPolicy {
    type Error = MfaPolicyError;
    fn try_from(raw: RawMfaPolicy) -> Result<Self, Self::Error> {
        Self::new(raw.required, raw.allowed_methods, raw.grace_period_hours)
    }
}

/// An MFA policy that could never be met.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("must name at least one method when MFA is required")]
pub struct MfaPolicyError;

impl MfaPolicy {
    /// The most entries `allowed_methods` may list, duplicates included.
    pub const MAX_METHODS: usize = 8;

    /// Duplicate methods are dropped. Requiring MFA while allowing no method is refused.
    pub fn new(
        required: bool,
        allowed_methods: Vec<MfaMethod>,
        grace_period_hours: GraceHours,
    ) -> Result<Self, MfaPolicyError> {
        let mut methods = Vec::with_capacity(allowed_methods.len());
        for method in allowed_methods {
            if !methods.contains(&method) {
                methods.push(method);
            }
        }
        if required && methods.is_empty() {
            return Err(MfaPolicyError);
        }
        Ok(Self {
            required,
            allowed_methods: methods,
            grace_period_hours,
        })
    }

    /// Whether members must use a second factor.
    pub fn required(&self) -> bool {
        self.required
    }

    /// The methods members may use, each once; never empty when MFA is required.
    pub fn allowed_methods(&self) -> &[MfaMethod] {
        &self.allowed_methods
    }

    /// The hours a member without a second factor has to enrol one once MFA is required.
    pub fn grace_period_hours(&self) -> GraceHours {
        self.grace_period_hours
    }
}

impl Default for MfaPolicy {
    fn default() -> Self {
        Self {
            required: false,
            allowed_methods: MfaMethod::ALL.to_vec(),
            grace_period_hours: GraceHours::new_const(72),
        }
    }
}

/// `session_policy`: bounds on a user's login sessions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionPolicy {
    /// The longest a session lasts from sign-in, in hours (1 to 720).
    pub max_session_duration_hours: SessionHours,
    /// How long a session may go unused before it ends, in minutes (5 to 1440).
    pub idle_timeout_minutes: IdleMinutes,
    /// The most sessions a user may hold at once (1 to 100).
    pub max_concurrent_sessions: ConcurrentSessions,
}

impl Default for SessionPolicy {
    /// As permissive as the bounds allow: 30 days, a day's idleness, 100 sessions.
    fn default() -> Self {
        Self {
            max_session_duration_hours: SessionHours::MAX,
            idle_timeout_minutes: IdleMinutes::MAX,
            max_concurrent_sessions: ConcurrentSessions::MAX,
        }
    }
}

impl SessionPolicy {
    /// The tighter of each bound.
    pub fn strictest(self, other: Self) -> Self {
        Self {
            max_session_duration_hours: self
                .max_session_duration_hours
                .min(other.max_session_duration_hours),
            idle_timeout_minutes: self.idle_timeout_minutes.min(other.idle_timeout_minutes),
            max_concurrent_sessions: self
                .max_concurrent_sessions
                .min(other.max_concurrent_sessions),
        }
    }

    /// `max_session_duration_hours`, as a duration.
    pub fn max_duration(&self) -> Duration {
        Duration::hours(i64::from(self.max_session_duration_hours.get()))
    }

    /// `idle_timeout_minutes`, as a duration.
    pub fn idle_timeout(&self) -> Duration {
        Duration::minutes(i64::from(self.idle_timeout_minutes.get()))
    }
}

/// `ip_allowlist`: when enabled, requests in the organization's context must come from one of
/// these ranges.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawIpAllowlist")]
pub struct IpAllowlist {
    enabled: bool,
    allowed_ips: Vec<IpRange>,
}

#[derive(Deserialize)]
struct RawIpAllowlist {
    enabled: bool,
    allowed_ips: Vec<IpRange>,
}

impl TryFrom<RawIpAllowlist> for IpAllowlist {
    type Error = IpAllowlistError;
    fn try_from(raw: RawIpAllowlist) -> Result<Self, Self::Error> {
        Self::new(raw.enabled, raw.allowed_ips)
    }
}

/// More than [`IpAllowlist::MAX_ENTRIES`] distinct ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("must hold at most {} entries", IpAllowlist::MAX_ENTRIES)]
pub struct IpAllowlistError;

impl IpAllowlist {
    /// The most distinct ranges a list holds.
    pub const MAX_ENTRIES: usize = 256;

    /// Duplicate ranges are dropped.
    pub fn new(enabled: bool, allowed_ips: Vec<IpRange>) -> Result<Self, IpAllowlistError> {
        let mut ranges = Vec::with_capacity(allowed_ips.len());
        for range in allowed_ips {
            if !ranges.contains(&range) {
                ranges.push(range);
            }
        }
        if ranges.len() > Self::MAX_ENTRIES {
            return Err(IpAllowlistError);
        }
        Ok(Self {
            enabled,
            allowed_ips: ranges,
        })
    }

    /// Whether the list is enforced; a disabled one permits every address.
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// The ranges permitted, each once, in the order first given.
    pub fn allowed_ips(&self) -> &[IpRange] {
        &self.allowed_ips
    }

    /// Whether a request from `addr` may act in the organization.
    pub fn permits(&self, addr: IpAddr) -> bool {
        !self.enabled || self.allowed_ips.iter().any(|range| range.contains(addr))
    }
}

/// One organization's policies. An organization that never saved any has the defaults.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrganizationPolicies {
    /// The rules members' passwords must meet.
    pub password_policy: PasswordPolicy,
    /// Whether members need a second factor, and which ones they may use.
    pub mfa_policy: MfaPolicy,
    /// Bounds on members' login sessions.
    pub session_policy: SessionPolicy,
    /// The addresses requests in the organization's context may come from.
    pub ip_allowlist: IpAllowlist,
}

/// What a user's organizations demand of them together: the strictest password policy, and the
/// strictest session policy when any organization enforces one. Only organizations whose plan
/// includes policies count; a downgraded organization keeps its policies but stops enforcing
/// them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EffectivePolicies {
    /// The strictest password policy; the default one when no organization enforces policies.
    pub password: PasswordPolicy,
    /// The strictest session policy; `None` when no organization enforces policies.
    pub session: Option<SessionPolicy>,
    /// Whether an organization enforcing policies requires a second factor.
    pub mfa_required: bool,
}

impl EffectivePolicies {
    /// Folds the policies of the organizations a user belongs to (or is joining): each item is
    /// an organization's plan and its saved policies, `None` when it never saved any.
    pub fn of<'a>(
        organizations: impl IntoIterator<Item = (Plan, Option<&'a OrganizationPolicies>)>,
    ) -> Self {
        let defaults = OrganizationPolicies::default();
        organizations
            .into_iter()
            .filter(|(plan, _)| plan.includes(Feature::Policies))
            .map(|(_, policies)| policies.unwrap_or(&defaults))
            .fold(Self::default(), |acc, policies| Self {
                password: acc.password.strictest(&policies.password_policy),
                session: Some(match acc.session {
                    Some(session) => session.strictest(policies.session_policy),
                    None => policies.session_policy,
                }),
                mfa_required: acc.mfa_required || policies.mfa_policy.required(),
            })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_the_specs() {
        assert_eq!(MinLength::parse(7), Err(OutOfBounds { min: 8, max: 128 }));
        assert_eq!(MinLength::parse(8).unwrap().get(), 8);
        assert_eq!(MinLength::parse(129), Err(OutOfBounds { min: 8, max: 128 }));
        let reuse = OutOfBounds { min: 0, max: 24 };
        assert_eq!(ReuseCount::parse(25), Err(reuse));
        assert_eq!(ReuseCount::parse(-1), Err(reuse));
        let hours = OutOfBounds { min: 1, max: 720 };
        assert_eq!(SessionHours::parse(0), Err(hours));
        assert_eq!(SessionHours::parse(721), Err(hours));
        let idle = OutOfBounds { min: 5, max: 1440 };
        assert_eq!(IdleMinutes::parse(4), Err(idle));
        assert_eq!(IdleMinutes::parse(1441), Err(idle));
        let sessions = OutOfBounds { min: 1, max: 100 };
        assert_eq!(ConcurrentSessions::parse(0), Err(sessions));
        assert_eq!(ConcurrentSessions::parse(101), Err(sessions));
        assert_eq!(ConcurrentSessions::parse(i64::MAX), Err(sessions));
        assert_eq!(
            OutOfBounds { min: 1, max: 100 }.to_string(),
            "must be an integer from 1 to 100"
        );
    }

    #[test]
    fn requiring_mfa_needs_a_method() {
        let grace = GraceHours::new_const(0);
        assert_eq!(MfaPolicy::new(true, vec![], grace), Err(MfaPolicyError));
        assert!(MfaPolicy::new(false, vec![], grace).is_ok());
        let policy = MfaPolicy::new(true, vec![MfaMethod::Totp, MfaMethod::Totp], grace).unwrap();
        assert_eq!(policy.allowed_methods(), &[MfaMethod::Totp]);
    }

    #[test]
    fn the_allowlist_applies_only_when_enabled() {
        let office = vec![IpRange::parse("192.0.2.0/24").unwrap()];
        let inside: IpAddr = "192.0.2.10".parse().unwrap();
        let outside: IpAddr = "198.51.100.1".parse().unwrap();
        let on = IpAllowlist::new(true, office.clone()).unwrap();
        assert!(on.permits(inside));
        assert!(!on.permits(outside));
        let off = IpAllowlist::new(false, office).unwrap();
        assert!(off.permits(outside));
        let too_many = (0..=256)
            .map(|i| IpRange::parse(&format!("10.0.{}.{}", i / 256, i % 256)).unwrap())
            .collect();
        assert_eq!(IpAllowlist::new(true, too_many), Err(IpAllowlistError));
    }

    #[test]
    fn policies_round_trip_as_the_api_shape() {
        let policies = OrganizationPolicies::default();
        let json = serde_json::to_value(&policies).unwrap();
        assert_eq!(json["password_policy"]["min_length"], 8);
        assert_eq!(json["mfa_policy"]["allowed_methods"][1], "webauthn");
        assert_eq!(json["session_policy"]["max_session_duration_hours"], 720);
        assert_eq!(json["ip_allowlist"]["allowed_ips"], serde_json::json!([]));
        let back: OrganizationPolicies = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, policies);
        // A stored document that breaks a bound does not load.
        let mut corrupt = json;
        corrupt["session_policy"]["idle_timeout_minutes"] = 1.into();
        let refused = serde_json::from_value::<OrganizationPolicies>(corrupt).unwrap_err();
        assert_eq!(refused.to_string(), "must be an integer from 5 to 1440");
    }

    #[test]
    fn the_strictest_policy_wins_and_lapsed_plans_do_not_count() {
        let mut strict = OrganizationPolicies::default();
        strict.password_policy.min_length = MinLength::parse(14).unwrap();
        strict.password_policy.max_age_days = MaxAgeDays::parse(90).unwrap();
        strict.session_policy.idle_timeout_minutes = IdleMinutes::parse(15).unwrap();
        let mut other = OrganizationPolicies::default();
        other.password_policy.require_numbers = true;
        other.password_policy.max_age_days = MaxAgeDays::parse(30).unwrap();
        other.password_policy.prevent_reuse_count = ReuseCount::parse(5).unwrap();
        other.session_policy.max_concurrent_sessions = ConcurrentSessions::parse(2).unwrap();

        let effective = EffectivePolicies::of([
            (Plan::Business, Some(&strict)),
            (Plan::Enterprise, Some(&other)),
            (Plan::Business, None),
        ]);
        let password = &effective.password;
        assert_eq!(password.min_length.get(), 14);
        assert!(password.require_numbers);
        assert!(!password.require_uppercase);
        assert_eq!(password.max_age_days.get(), 30);
        assert_eq!(password.prevent_reuse_count.get(), 5);
        let session = effective.session.unwrap();
        assert_eq!(session.idle_timeout_minutes.get(), 15);
        assert_eq!(session.max_concurrent_sessions.get(), 2);
        assert_eq!(session.max_session_duration_hours.get(), 720);

        // The same policies on a plan without the feature are not enforced.
        let lapsed = EffectivePolicies::of([(Plan::Pro, Some(&strict))]);
        assert_eq!(lapsed, EffectivePolicies::default());
        assert_eq!(lapsed.session, None);
    }

    #[test]
    fn passwords_expire_after_max_age_days_unless_zero() {
        let changed = time::macros::datetime!(2026-01-01 00:00:00 UTC);
        let mut policy = PasswordPolicy::default();
        assert!(!policy.is_expired(changed, changed + Duration::days(10_000)));
        policy.max_age_days = MaxAgeDays::parse(90).unwrap();
        assert!(!policy.is_expired(changed, changed + Duration::days(89)));
        assert!(policy.is_expired(changed, changed + Duration::days(90)));
    }
}
