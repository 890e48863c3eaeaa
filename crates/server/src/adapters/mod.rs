//! The server's adapters for the domain's non-store ports: time, randomness, password hashing,
//! secret encryption at rest, access-token signing, rate limits and failed sign-ins.

mod clock;
mod mail;
mod password;
mod random;
mod rate_limit;
mod secret_box;
mod sign_in_attempts;
mod signer;

pub use clock::SystemClock;
pub use mail::{mailer_from_settings, LogMailer, MailDirMailer, SmtpMailer};
pub use password::Argon2Hasher;
pub use random::OsRandom;
pub use rate_limit::{MemoryRateLimiter, RedisRateLimiter};
pub use secret_box::{SecretBox, SecretBoxError};
pub use sign_in_attempts::{MemorySignInAttempts, RedisSignInAttempts};
pub use signer::{rotate_signing_key, KeyRing, KeyRingError, AUDIENCE};
