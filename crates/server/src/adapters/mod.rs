//! The server's adapters for the domain's non-store ports: time, randomness, password hashing,
//! secret encryption at rest and access-token signing.

mod clock;
mod password;
mod random;
mod secret_box;
mod signer;

pub use clock::SystemClock;
pub use password::Argon2Hasher;
pub use random::OsRandom;
pub use secret_box::{SecretBox, SecretBoxError};
pub use signer::{rotate_signing_key, KeyRing, KeyRingError, AUDIENCE};
