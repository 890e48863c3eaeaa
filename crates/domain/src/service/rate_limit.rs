//! Per-plan rate limits: counted per person (all of one user's tokens and API keys share one
//! budget) or per application, or per client address when anonymous (and on the public ways
//! in, whatever credential rides along); sized by the plan of the organization in context, else the principal's highest
//! plan, else `free`.

use std::net::IpAddr;

use super::Agent;
use crate::{
    model::{Plan, RateLimits},
    ports::{service_ports, RateDecision, RateLimitError},
};

/// Who a request is counted against.
#[derive(Clone, Debug)]
pub enum Caller {
    /// No credentials: counted per client address, on the Free plan's limit.
    Anonymous(IpAddr),
    /// An authenticated caller: counted per person (their access tokens and API keys together)
    /// or per application (machine token).
    Authenticated {
        /// Whom the credentials speak for.
        agent: Agent,
        /// The plan of the organization the request is about, when it names one the
        /// principal belongs to.
        organization_plan: Option<Plan>,
    },
}

/// Why a request could not be counted.
#[derive(Debug, thiserror::Error)]
pub enum RateLimitCheckError {
    /// The limiter failed (the Redis one counts in process instead, so only a limiter without
    /// a fallback does).
    #[error(transparent)]
    Limiter(#[from] RateLimitError),
}

service_ports! {
    /// The ports [`RateLimitService`] uses.
    pub struct RateLimitPorts { rate_limiter: RateLimiter, memberships: MembershipStore, clock: Clock }
}

/// Counts requests against the per-minute limit of the caller's plan.
#[derive(Clone)]
pub struct RateLimitService {
    ports: RateLimitPorts,
    limits: RateLimits,
}

impl RateLimitService {
    /// A service on these ports, with the limits of each plan.
    pub fn new(ports: RateLimitPorts, limits: RateLimits) -> Self {
        Self { ports, limits }
    }

    /// Counts one request.
    pub async fn check(&self, caller: &Caller) -> Result<RateDecision, RateLimitCheckError> {
        let (key, plan) = match caller {
            Caller::Anonymous(ip) => (format!("ip:{ip}"), Plan::Free),
            // An application acts in its one organization, on its plan.
            Caller::Authenticated {
                agent: Agent::Application(machine),
                ..
            } => (
                format!("application:{}", machine.application_id),
                machine.plan,
            ),
            // A service account has its own budget, on its organization's plan.
            Caller::Authenticated {
                agent: Agent::ServiceAccount(key),
                ..
            } => (format!("service_account:{}", key.account.id), key.plan),
            // An organization's directory has one budget, on the organization's plan, however
            // many SCIM tokens it holds.
            Caller::Authenticated {
                agent: Agent::Directory(directory),
                ..
            } => (
                format!("scim:{}", directory.organization_id),
                directory.plan,
            ),
            Caller::Authenticated {
                agent: Agent::Person(person),
                organization_plan,
            } => {
                // One budget per person: every token and API key of one user counts against
                // the same counter, so more keys buy no more requests.
                let key = format!("user:{}", person.user_id());
                let plan = match organization_plan {
                    Some(plan) => *plan,
                    // A plan that cannot be read counts as free: the request is still
                    // counted, and answered with its headers.
                    None => match self.ports.memberships.highest_plan(person.user_id()).await {
                        Ok(plan) => plan.unwrap_or(Plan::Free),
                        Err(error) => {
                            tracing::warn!(%error, "the caller's plan could not be read: counted on the free plan's limit");
                            Plan::Free
                        }
                    },
                };
                (key, plan)
            }
        };
        let limit = self.limits.per_minute(plan);
        Ok(self
            .ports
            .rate_limiter
            .hit(&key, limit, self.ports.clock.now())
            .await?)
    }
}
