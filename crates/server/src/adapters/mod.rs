//! The server's adapters for the domain's non-store ports: time, randomness, password hashing,
//! secret encryption at rest and access-token signing.

mod clock;
mod mail;
mod password;
mod random;
mod rate_limit;
mod secret_box;
mod signer;

pub use clock::SystemClock;
pub use mail::{mailer_from_settings, LogMailer, MailDirMailer, SmtpMailer};
pub use password::Argon2Hasher;
pub use random::OsRandom;
pub use rate_limit::{MemoryRateLimiter, RedisRateLimiter};
pub use secret_box::{SecretBox, SecretBoxError};
pub use signer::{rotate_signing_key, KeyRing, KeyRingError, AUDIENCE};
