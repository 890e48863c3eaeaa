//! Per-plan rate limits: counted per person (all of one user's tokens and API keys share one
//! budget), per organization for its machines (every service account and application of one
//! organization share one budget) and for its directory, or per client address when anonymous
//! (and on the public ways in, whatever credential rides along); sized by the plan of the
//! organization in context, else the principal's highest plan, else `free`; spread over the
//! minute ([`Quota::spread`]: at most a sixth of the budget at once).

use std::net::IpAddr;

use super::Agent;
use crate::{
    model::{OrganizationId, Plan, Quota, RateLimits},
    ports::{service_ports, RateDecision, RateLimitError},
};

/// Whose budget a request spends: an address, or the agent its credentials speak for. Not a
/// caller of the use cases (those are `service::caller`'s): a request refused for bad
/// credentials still spends its address's budget.
#[derive(Clone, Debug)]
pub enum Spender {
    /// No credentials: counted per client address, on the Free plan's limit.
    Anonymous(IpAddr),
    /// An authenticated caller: counted per person (their access tokens and API keys together)
    /// or per organization (its service accounts and applications together; its directory).
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
    pub async fn check(&self, spender: &Spender) -> Result<RateDecision, RateLimitCheckError> {
        let (key, plan) = match spender {
            Spender::Anonymous(ip) => (format!("ip:{ip}"), Plan::Free),
            // An organization's machines, its applications and its service accounts, share one
            // budget on its plan: more accounts or applications buy no more requests.
            Spender::Authenticated {
                agent: Agent::Application(machine),
                ..
            } => (machine_key(machine.organization_id), machine.plan),
            Spender::Authenticated {
                agent: Agent::ServiceAccount(key),
                ..
            } => (machine_key(key.account.organization_id), key.plan),
            // An organization's directory has one budget, on the organization's plan, however
            // many SCIM tokens it holds.
            Spender::Authenticated {
                agent: Agent::Directory(directory),
                ..
            } => (
                format!("scim:{}", directory.organization_id),
                directory.plan,
            ),
            Spender::Authenticated {
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
        let quota = Quota::spread(self.limits.per_minute(plan));
        Ok(self
            .ports
            .rate_limiter
            .hit(&key, quota, self.ports.clock.now())
            .await?)
    }
}

/// The one budget of an organization's machines (service accounts and applications).
fn machine_key(organization: OrganizationId) -> String {
    format!("machine:{organization}")
}

#[cfg(test)]
mod tests {
    use std::{
        collections::HashMap,
        sync::{Arc, Mutex},
    };

    use futures::executor::block_on;
    use time::Duration;
    use uuid::Uuid;

    use super::{super::tests::ready, *};
    use crate::{
        model::{
            ApiKeyId, ApiScopes, ApplicationId, ClientId, Role, ServiceAccount, ServiceAccountId,
            ServiceAccountName, UserId,
        },
        ports::{MockRateLimiter, RateDecision},
        service::{
            tests::{now, Mocks, ACME, GLOBEX},
            MachineClient, ServiceAccountKey,
        },
    };

    /// A limiter that counts every request of a key in one minute, against the quota's
    /// minute: all this test asks is which requests share a count, and at what size.
    fn counting_limiter() -> MockRateLimiter {
        let counts: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
        let mut limiter = MockRateLimiter::new();
        limiter.expect_hit().returning(move |key, quota, at| {
            let mut counts = counts.lock().unwrap();
            let count = counts.entry(key.to_owned()).or_default();
            *count += 1;
            ready(Ok(RateDecision {
                allowed: *count <= quota.per_minute(),
                limit: quota.per_minute(),
                remaining: quota.per_minute().saturating_sub(*count),
                reset_at: at + Duration::minutes(1),
            }))
        });
        limiter
    }

    fn service() -> RateLimitService {
        let mut mocks = Mocks::new();
        mocks.rate_limiter = counting_limiter();
        RateLimitService::new((&mocks.ports()).into(), RateLimits::default())
    }

    fn service_account(n: u128, organization_id: OrganizationId) -> Spender {
        Spender::Authenticated {
            agent: Agent::ServiceAccount(ServiceAccountKey {
                key_id: ApiKeyId::from_uuid(Uuid::from_u128(0x4e1 + n)),
                account: ServiceAccount {
                    id: ServiceAccountId::from_uuid(Uuid::from_u128(0x5a_0000 + n)),
                    organization_id,
                    name: ServiceAccountName::parse(&format!("robot {n}")).unwrap(),
                    role: Role::Admin.into(),
                    created_by: UserId::from_uuid(Uuid::from_u128(1)),
                    created_at: now(),
                    updated_at: now(),
                },
                plan: Plan::Free,
            }),
            organization_plan: None,
        }
    }

    fn application(organization_id: OrganizationId) -> Spender {
        Spender::Authenticated {
            agent: Agent::Application(MachineClient {
                application_id: ApplicationId::from_uuid(Uuid::from_u128(0xa99)),
                client_id: ClientId::generate(Uuid::from_u128(0xabc)),
                organization_id,
                plan: Plan::Free,
                scopes: ApiScopes::default(),
            }),
            organization_plan: None,
        }
    }

    fn allowed(limits: &RateLimitService, spender: &Spender) -> bool {
        block_on(limits.check(spender)).unwrap().allowed
    }

    #[test]
    fn an_organizations_service_accounts_and_applications_share_one_budget_on_its_plan() {
        let limits = service();
        let free = RateLimits::default().per_minute(Plan::Free);
        let machines = [
            service_account(1, ACME),
            service_account(2, ACME),
            application(ACME),
        ];
        let admitted = (0..2 * free)
            .filter(|n| allowed(&limits, &machines[(*n % 3) as usize]))
            .count();
        assert_eq!(
            admitted, free as usize,
            "two service accounts and an application of one free organization get one free budget"
        );
        // Each one of them is refused now, and another organization's machines are not.
        assert!(machines.iter().all(|caller| !allowed(&limits, caller)));
        assert!(allowed(&limits, &service_account(3, GLOBEX)));
        assert!(allowed(&limits, &application(GLOBEX)));
    }

    #[test]
    fn a_plans_budget_is_spread_over_the_minute() {
        let mut mocks = Mocks::new();
        mocks
            .rate_limiter
            .expect_hit()
            .withf(|key, quota, _| key == format!("machine:{ACME}") && *quota == Quota::new(60, 10))
            .times(1)
            .returning(|_, quota, at| {
                ready(Ok(RateDecision {
                    allowed: true,
                    limit: quota.per_minute(),
                    remaining: quota.burst() - 1,
                    reset_at: at,
                }))
            });
        let limits = RateLimitService::new((&mocks.ports()).into(), RateLimits::default());
        assert!(allowed(&limits, &service_account(1, ACME)));
    }
}
