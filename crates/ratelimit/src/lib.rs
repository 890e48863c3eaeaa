//! Counters with a deadline, in process or in Redis: the adapters of the domain's
//! `RateLimiter` (requests per principal per minute) and `SignInAttempts` (failed sign-ins per
//! account, for brute-force protection) ports; and `HeavyLanes` (how many heavy requests of one
//! organization run at once), in process.
//!
//! With Redis, every replica shares one count per key; when Redis cannot be reached each
//! adapter says so in the log and counts in its own memory meanwhile, so that the counter
//! store can never take the service down nor switch the limits off; and leaves Redis alone for
//! [`REDIS_PAUSE`] after a failure, so that an outage costs one slow request per pause. This crate
//! knows the domain's ports and Redis, nothing of HTTP, databases or the other adapters.

mod lanes;
mod pause;
mod rate_limit;
mod sign_in_attempts;

pub use lanes::MemoryHeavyLanes;
pub use pause::REDIS_PAUSE;
pub use rate_limit::{MemoryRateLimiter, RedisRateLimiter};
pub use sign_in_attempts::{MemorySignInAttempts, RedisSignInAttempts};
