//! Gatehouse's cryptography and the operating system underneath it: the adapters of the
//! domain's `PasswordHasher` (argon2id), `PasswordJudge` (zxcvbn), `TokenSigner` (RS256 access tokens with keys shared
//! through the store), `Random` (ids and secrets), `Totp` (RFC 6238 codes) and `Clock` ports, and the [`SecretBox`] that
//! seals secrets at rest.
//!
//! Every primitive comes from a maintained library (`argon2`, `jsonwebtoken` over `ring`,
//! `ring`'s AES-256-GCM, `rsa` for key generation only, `totp-rs` for one-time codes, the OS CSPRNG through `rand`); nothing
//! here is hand-written cryptography. The CPU-heavy work (argon2, zxcvbn, RSA key generation)
//! runs on tokio's blocking pool, each kind bounded in how much runs at once, never on the async
//! workers. This crate knows the domain's ports and nothing of HTTP,
//! databases or the other adapters: the signing keys reach it through the `SigningKeyStore`
//! port.

mod blocking;
mod clock;
pub mod limits;
mod password;
mod random;
mod secret_box;
mod signer;
mod strength;
mod totp;
mod verified;

pub use clock::SystemClock;
pub use password::Argon2Hasher;
pub use random::OsRandom;
pub use secret_box::{SecretBox, SecretBoxError};
pub use signer::{rotate_signing_key, KeyRing, KeyRingError, AUDIENCE};
pub use strength::ZxcvbnJudge;
pub use totp::RfcTotp;
