//! The physical limits of this crate's primitives, for benchmarks: how many argon2id hashes and
//! RS256 signatures a machine can make per second, with exactly the parameters the adapters use
//! and none of their bookkeeping. `just bench` prints each hot path next to these.

use std::time::{Duration, Instant};

use argon2::{Algorithm, Argon2, Params, Version};
use jsonwebtoken::{EncodingKey, Header};
use rsa::pkcs1::{EncodeRsaPrivateKey as _, LineEnding};
use uuid::Uuid;

use crate::{signer::KEY_BITS, Argon2Hasher};

/// A measurement that could not be made (the primitive refused its own parameters).
#[derive(Debug, thiserror::Error)]
#[error("cannot measure: {0}")]
pub struct LimitError(String);

fn error(e: impl std::fmt::Display) -> LimitError {
    LimitError(e.to_string())
}

/// Runs `work` on `threads` threads for `secs` seconds; returns the calls per second.
fn per_sec<S: Send>(
    threads: usize,
    secs: f64,
    state: impl Fn(usize) -> S + Sync,
    work: impl Fn(&mut S) -> Result<(), LimitError> + Sync,
) -> Result<f64, LimitError> {
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(secs);
    let counts: Vec<Result<u64, LimitError>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|i| {
                let (state, work) = (&state, &work);
                scope.spawn(move || {
                    let mut own = state(i);
                    let mut count = 0_u64;
                    while Instant::now() < deadline {
                        work(&mut own)?;
                        count += 1;
                    }
                    Ok(count)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|_| Err(error("a thread panicked"))))
            .collect()
    });
    let total = counts.into_iter().sum::<Result<u64, LimitError>>()?;
    Ok(total as f64 / started.elapsed().as_secs_f64())
}

/// argon2id hashes per second with [`Argon2Hasher`]'s OWASP parameters, on `threads` threads.
pub fn argon2_hashes_per_sec(threads: usize, secs: f64) -> Result<f64, LimitError> {
    let params = Params::new(
        Argon2Hasher::OWASP_M_COST_KIB,
        Argon2Hasher::OWASP_T_COST,
        Argon2Hasher::OWASP_P_COST,
        None,
    )
    .map_err(error)?;
    per_sec(
        threads,
        secs,
        |i| {
            let argon2 = Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone());
            let salt = [u8::try_from(i % 256).unwrap_or(0); 16];
            (argon2, salt)
        },
        |(argon2, salt)| {
            let mut output = [0_u8; 32];
            argon2
                .hash_password_into(b"correct horse battery staple", &salt[..], &mut output)
                .map_err(error)
        },
    )
}

/// RS256 signatures per second over claims shaped like an access token, with a key of the size
/// the key ring generates, on `threads` threads.
pub fn rs256_signatures_per_sec(threads: usize, secs: f64) -> Result<f64, LimitError> {
    let private = rsa::RsaPrivateKey::new(&mut rand::rngs::OsRng, KEY_BITS).map_err(error)?;
    let pem = private.to_pkcs1_pem(LineEnding::LF).map_err(error)?;
    let key = EncodingKey::from_rsa_pem(pem.as_bytes()).map_err(error)?;
    let mut header = Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = Some("0123456789abcdef".to_owned());
    let (user, session) = (Uuid::now_v7(), Uuid::now_v7());
    per_sec(
        threads,
        secs,
        |_| (),
        |()| {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let claims = serde_json::json!({
                "iss": "http://127.0.0.1:8080",
                "sub": user,
                "aud": "gatehouse",
                "iat": now,
                "nbf": now,
                "exp": now + 3600,
                "jti": Uuid::new_v4(),
                "sid": session,
                "email": "bench@example.com",
            });
            jsonwebtoken::encode(&header, &claims, &key)
                .map(|_| ())
                .map_err(error)
        },
    )
}
