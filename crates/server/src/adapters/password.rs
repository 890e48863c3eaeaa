use std::fmt;

use argon2::password_hash::{
    PasswordHash as PhcHash, PasswordHasher as _, PasswordVerifier as _, SaltString,
};
use argon2::{Algorithm, Argon2, Params, Version};
use async_trait::async_trait;
use gatehouse_domain::model::{NewPassword, PasswordHash};
use gatehouse_domain::ports::{HashError, PasswordHasher};
use rand::rngs::OsRng;

/// argon2id password hashing. The work runs on tokio's blocking pool, which also bounds how many
/// hashes run at once.
#[derive(Clone)]
pub struct Argon2Hasher {
    argon2: Argon2<'static>,
    /// A hash of a throwaway password with the same parameters, verified against when the user
    /// is unknown so that the answer takes as long as for a known one.
    dummy: String,
}

impl Argon2Hasher {
    /// OWASP's minimum for argon2id: 19 MiB of memory, 2 iterations, 1 lane.
    pub const OWASP_M_COST_KIB: u32 = 19_456;
    pub const OWASP_T_COST: u32 = 2;
    pub const OWASP_P_COST: u32 = 1;

    /// A hasher with these parameters. Computes the dummy hash at once (one full hash, tens of
    /// milliseconds): call it at startup, not on an async worker in the hot path.
    pub fn new(params: Params) -> Result<Self, HashError> {
        let argon2 = Argon2::new(Algorithm::Argon2id, Version::V0x13, params);
        let salt = SaltString::generate(&mut OsRng);
        let dummy = argon2
            .hash_password(b"gatehouse-dummy-password", &salt)
            .map_err(|e| HashError(Box::new(e)))?
            .to_string();
        Ok(Self { argon2, dummy })
    }

    /// A hasher with OWASP's minimum parameters (m=19456 KiB, t=2, p=1).
    pub fn owasp() -> Result<Self, HashError> {
        let params = Params::new(
            Self::OWASP_M_COST_KIB,
            Self::OWASP_T_COST,
            Self::OWASP_P_COST,
            None,
        )
        .map_err(|e| HashError(Box::new(e)))?;
        Self::new(params)
    }
}

impl fmt::Debug for Argon2Hasher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Argon2Hasher")
            .field("params", self.argon2.params())
            .finish_non_exhaustive()
    }
}

/// Runs `work` on the blocking pool.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, HashError> + Send + 'static,
) -> Result<T, HashError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| HashError(Box::new(e)))?
}

/// Whether `presented` matches the PHC string `phc`; an unparsable hash is an error.
fn check(argon2: &Argon2<'_>, presented: &str, phc: &str) -> Result<bool, HashError> {
    let parsed = PhcHash::new(phc).map_err(|e| HashError(Box::new(e)))?;
    match argon2.verify_password(presented.as_bytes(), &parsed) {
        Ok(()) => Ok(true),
        Err(argon2::password_hash::Error::Password) => Ok(false),
        Err(e) => Err(HashError(Box::new(e))),
    }
}

#[async_trait]
impl PasswordHasher for Argon2Hasher {
    async fn hash(&self, password: NewPassword) -> Result<PasswordHash, HashError> {
        let argon2 = self.argon2.clone();
        blocking(move || {
            let salt = SaltString::generate(&mut OsRng);
            let phc = argon2
                .hash_password(password.expose().as_bytes(), &salt)
                .map_err(|e| HashError(Box::new(e)))?;
            Ok(PasswordHash::from_phc(phc.to_string()))
        })
        .await
    }

    async fn verify(
        &self,
        presented: String,
        hash: Option<PasswordHash>,
    ) -> Result<bool, HashError> {
        let argon2 = self.argon2.clone();
        match hash {
            Some(hash) => blocking(move || check(&argon2, &presented, hash.as_phc())).await,
            None => {
                let dummy = self.dummy.clone();
                blocking(move || {
                    // Same work as for a real user; the outcome is irrelevant.
                    let _ = check(&argon2, &presented, &dummy);
                    Ok(false)
                })
                .await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use gatehouse_domain::model::PasswordPolicy;

    use super::*;

    fn password(raw: &str) -> NewPassword {
        NewPassword::parse(raw, &PasswordPolicy::default()).unwrap()
    }

    #[tokio::test]
    async fn round_trip() {
        let hasher = Argon2Hasher::owasp().unwrap();
        let hash = hasher.hash(password("correct horse")).await.unwrap();
        assert!(hash.as_phc().starts_with("$argon2id$v=19$m=19456,t=2,p=1$"));
        assert!(hasher
            .verify("correct horse".into(), Some(hash.clone()))
            .await
            .unwrap());
        assert!(!hasher
            .verify("wrong horse".into(), Some(hash))
            .await
            .unwrap());
    }

    #[tokio::test]
    async fn unknown_user_is_false() {
        let hasher = Argon2Hasher::owasp().unwrap();
        assert!(!hasher
            .verify("gatehouse-dummy-password".into(), None)
            .await
            .unwrap());
    }

    #[tokio::test]
    async fn unparsable_hash_is_an_error() {
        let hasher = Argon2Hasher::owasp().unwrap();
        let broken = PasswordHash::from_phc("not a phc string".into());
        assert!(hasher.verify("x".into(), Some(broken)).await.is_err());
    }

    #[test]
    fn debug_shows_no_hash() {
        let hasher = Argon2Hasher::owasp().unwrap();
        assert!(!format!("{hasher:?}").contains(&hasher.dummy));
    }
}
