use std::{
    fmt,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use argon2::password_hash::{Output, ParamsString, PasswordHash as PhcHash, Salt, SaltString};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use async_trait::async_trait;
use gatehouse_domain::model::{NewPassword, PasswordHash};
use gatehouse_domain::ports::{HashError, PasswordHasher};
use rand::rngs::OsRng;
use tokio::sync::Semaphore;

use crate::blocking::bounded;

/// argon2id password hashing.
///
/// At most `concurrency` hashes run at a time (the rest wait, without holding a thread), each on
/// tokio's blocking pool, and each in one of a few reused working areas (19 MiB apiece with
/// OWASP's parameters): the hasher's memory is at most `concurrency × m_cost`. The default,
/// [`Self::default_concurrency`], is one per core up to [`Self::MAX_DEFAULT_CONCURRENCY`], so
/// that memory under a burst of logins stays bounded however many cores the machine has (and
/// logins cannot take every core from the other requests).
///
/// Allocating the area afresh for every hash left glibc's allocator holding hundreds of
/// megabytes after a burst of logins (it keeps freed blocks of that size in its arenas), and a
/// fresh mapping per hash costs half as much again as the hash (page faults), so areas are
/// reused while logins come in. [`Self::release_idle`] gives back those left unused, which the
/// server calls every second: after a burst the memory goes back to the system. Each area is
/// allocated with 32 MiB of address space (of which argon2 touches, and the system backs, only
/// `m_cost`), the size from which glibc always maps a block of its own and unmaps it when it is
/// freed (`mallopt(3)`, `DEFAULT_MMAP_THRESHOLD_MAX`).
#[derive(Clone)]
pub struct Argon2Hasher {
    argon2: Argon2<'static>,
    /// A hash of a throwaway password with the same parameters, verified against when the user
    /// is unknown so that the answer takes as long as for a known one.
    dummy: String,
    permits: Arc<Semaphore>,
    /// Working areas not in use: at most one per permit.
    memory: Arc<Mutex<Vec<IdleArea>>>,
    workers: usize,
}

/// A working area waiting to be reused, and when it was last used.
struct IdleArea {
    area: Vec<Block>,
    last_used: Instant,
}

/// Address space reserved for each working area, in blocks (1 KiB each): 32 MiB, glibc's
/// largest mmap threshold on 64-bit systems, so that freeing an area always unmaps it.
const AREA_CAPACITY_BLOCKS: usize = 32 * 1024;

fn failed<E: std::error::Error + Send + Sync + 'static>(error: E) -> HashError {
    HashError(Box::new(error))
}

impl Argon2Hasher {
    /// OWASP's minimum for argon2id: 19 MiB of memory, 2 iterations, 1 lane.
    pub const OWASP_M_COST_KIB: u32 = 19_456;
    pub const OWASP_T_COST: u32 = 2;
    pub const OWASP_P_COST: u32 = 1;

    /// The most hashes [`Self::default_concurrency`] lets run at once, whatever the cores: 8 ×
    /// 19 MiB of working areas at OWASP's parameters.
    pub const MAX_DEFAULT_CONCURRENCY: usize = 8;

    /// Hashes at once by default: one per core the process may run on, at most
    /// [`Self::MAX_DEFAULT_CONCURRENCY`].
    pub fn default_concurrency() -> usize {
        std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(Self::MAX_DEFAULT_CONCURRENCY)
    }

    /// A hasher with these parameters that runs at most `concurrency` hashes at once (at least
    /// one). Computes the dummy hash at once (one full hash, tens of milliseconds): call it at
    /// startup, not on an async worker in the hot path.
    pub fn new(params: Params, concurrency: usize) -> Result<Self, HashError> {
        let argon2 = Argon2::new(Algorithm::Argon2id, Version::V0x13, params);
        let workers = concurrency.max(1);
        let mut hasher = Self {
            argon2,
            dummy: String::new(),
            permits: Arc::new(Semaphore::new(workers)),
            memory: Arc::new(Mutex::new(Vec::with_capacity(workers))),
            workers,
        };
        let salt = SaltString::generate(&mut OsRng);
        hasher.dummy = hasher.hash_with(b"gatehouse-dummy-password", &salt)?;
        // Start-up's hash keeps no area: none is held until logins come.
        hasher.release_idle(Duration::ZERO);
        Ok(hasher)
    }

    /// Frees the working areas unused for `idle` or longer; returns how many. The server calls
    /// it every second with a few seconds of grace, so that a steady stream of logins reuses
    /// its areas and an idle server holds none.
    pub fn release_idle(&self, idle: Duration) -> usize {
        let Ok(mut free) = self.memory.lock() else {
            return 0;
        };
        let (kept, released): (Vec<_>, Vec<_>) = std::mem::take(&mut *free)
            .into_iter()
            .partition(|idle_area| idle_area.last_used.elapsed() < idle);
        *free = kept;
        drop(free);
        // Unmapped here, outside the lock.
        released.len()
    }

    /// How many working areas are kept for reuse now.
    pub fn areas_kept(&self) -> usize {
        self.memory.lock().map_or(0, |free| free.len())
    }

    /// A hasher with OWASP's minimum parameters (m=19456 KiB, t=2, p=1), running
    /// [`Self::default_concurrency`] hashes at once.
    pub fn owasp() -> Result<Self, HashError> {
        Self::owasp_with_concurrency(Self::default_concurrency())
    }

    /// A hasher with OWASP's minimum parameters running at most `concurrency` hashes at once.
    pub fn owasp_with_concurrency(concurrency: usize) -> Result<Self, HashError> {
        let params = Params::new(
            Self::OWASP_M_COST_KIB,
            Self::OWASP_T_COST,
            Self::OWASP_P_COST,
            None,
        )
        .map_err(failed)?;
        Self::new(params, concurrency)
    }

    /// Runs argon2 with `argon2`'s parameters into `out`, in a reused memory area when one of the
    /// right size is free.
    fn compute(
        &self,
        argon2: &Argon2<'_>,
        password: &[u8],
        salt: &[u8],
        out: &mut [u8],
    ) -> Result<(), HashError> {
        let blocks = argon2.params().block_count();
        let reused = self
            .memory
            .lock()
            .ok()
            .and_then(|mut free| free.pop())
            .map(|idle| idle.area)
            .filter(|area| area.len() == blocks);
        let mut area = reused.unwrap_or_else(|| {
            let mut area = Vec::with_capacity(blocks.max(AREA_CAPACITY_BLOCKS));
            area.resize(blocks, Block::default());
            area
        });
        let result = argon2
            .hash_password_into_with_memory(password, salt, out, &mut area)
            .map_err(failed);
        if let Ok(mut free) = self.memory.lock() {
            if free.len() < self.workers && area.len() == self.argon2.params().block_count() {
                free.push(IdleArea {
                    area,
                    last_used: Instant::now(),
                });
            }
        }
        result
    }

    /// The PHC string of `password` hashed with this hasher's parameters and `salt`.
    fn hash_with(&self, password: &[u8], salt: &SaltString) -> Result<String, HashError> {
        let salt = salt.as_salt();
        let mut salt_bytes = [0u8; Salt::RECOMMENDED_LENGTH * 2];
        let salt_bytes = salt.decode_b64(&mut salt_bytes).map_err(failed)?;
        let mut out = [0u8; Params::DEFAULT_OUTPUT_LEN];
        self.compute(&self.argon2, password, salt_bytes, &mut out)?;
        let phc = PhcHash {
            algorithm: Algorithm::Argon2id.ident(),
            version: Some(Version::V0x13.into()),
            params: ParamsString::try_from(self.argon2.params()).map_err(failed)?,
            salt: Some(salt),
            hash: Some(Output::new(&out).map_err(failed)?),
        };
        Ok(phc.to_string())
    }

    /// Whether `presented` matches the PHC string `phc` (with whatever argon2 parameters it
    /// names); an unparsable hash is an error.
    fn check(&self, presented: &str, phc: &str) -> Result<bool, HashError> {
        let parsed = PhcHash::new(phc).map_err(failed)?;
        let algorithm = Algorithm::try_from(parsed.algorithm).map_err(failed)?;
        let version = parsed
            .version
            .map(Version::try_from)
            .transpose()
            .map_err(failed)?
            .unwrap_or_default();
        let params = Params::try_from(&parsed).map_err(failed)?;
        let (Some(salt), Some(expected)) = (parsed.salt, parsed.hash) else {
            return Err(failed(argon2::password_hash::Error::PhcStringField));
        };
        let mut salt_bytes = [0u8; 64];
        let salt_bytes = salt.decode_b64(&mut salt_bytes).map_err(failed)?;
        let mut out = vec![0u8; expected.len()];
        let argon2 = Argon2::new(algorithm, version, params);
        self.compute(&argon2, presented.as_bytes(), salt_bytes, &mut out)?;
        // Output's equality is constant-time.
        Ok(Output::new(&out).map_err(failed)? == expected)
    }

    /// Runs `work` on the blocking pool once a hashing slot is free (see [`bounded`]).
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Self) -> Result<T, HashError> + Send + 'static,
    ) -> Result<T, HashError> {
        let hasher = self.clone();
        bounded(&self.permits, move || work(&hasher))
            .await
            .map_err(failed)?
    }
}

impl fmt::Debug for Argon2Hasher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Argon2Hasher")
            .field("params", self.argon2.params())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl PasswordHasher for Argon2Hasher {
    async fn hash(&self, password: NewPassword) -> Result<PasswordHash, HashError> {
        self.blocking(move |hasher| {
            let salt = SaltString::generate(&mut OsRng);
            let phc = hasher.hash_with(password.expose().as_bytes(), &salt)?;
            Ok(PasswordHash::from_phc(phc))
        })
        .await
    }

    async fn verify(
        &self,
        presented: String,
        hash: Option<PasswordHash>,
    ) -> Result<bool, HashError> {
        match hash {
            Some(hash) => {
                self.blocking(move |hasher| hasher.check(&presented, hash.as_phc()))
                    .await
            }
            None => {
                self.blocking(move |hasher| {
                    // Same work as for a real user; the outcome is irrelevant.
                    let _ = hasher.check(&presented, &hasher.dummy);
                    Ok(false)
                })
                .await
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use gatehouse_domain::model::{PasswordCandidate, PasswordPolicy, PasswordStrength};

    use super::*;

    fn password(raw: &str) -> NewPassword {
        PasswordCandidate::parse(raw, &PasswordPolicy::default())
            .unwrap()
            .judged(PasswordStrength {
                score: 4,
                feedback: None,
            })
            .unwrap()
    }

    #[tokio::test]
    async fn round_trip() {
        let hasher = Argon2Hasher::owasp().unwrap();
        let hash = hasher
            .hash(password("correct horse battery"))
            .await
            .unwrap();
        assert!(hash.as_phc().starts_with("$argon2id$v=19$m=19456,t=2,p=1$"));
        assert!(hasher
            .verify("correct horse battery".into(), Some(hash.clone()))
            .await
            .unwrap());
        assert!(!hasher
            .verify("wrong horse battery".into(), Some(hash))
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
        let error = hasher.verify("x".into(), Some(broken)).await.unwrap_err();
        assert_eq!(
            error.0.downcast_ref::<argon2::password_hash::Error>(),
            Some(&argon2::password_hash::Error::PhcStringField),
            "{error:?}"
        );
    }

    #[tokio::test]
    async fn hashes_are_standard_phc_strings_that_the_argon2_crate_verifies() {
        use argon2::password_hash::{PasswordHasher as _, PasswordVerifier as _};
        let hasher = Argon2Hasher::owasp().unwrap();
        let hash = hasher
            .hash(password("correct horse battery"))
            .await
            .unwrap();
        let parsed = PhcHash::new(hash.as_phc()).unwrap();
        assert!(Argon2::default()
            .verify_password(b"correct horse battery", &parsed)
            .is_ok());
        // And hashes made elsewhere, with other parameters, verify here.
        let other = Argon2::new(
            Algorithm::Argon2id,
            Version::V0x13,
            Params::new(8192, 3, 1, None).unwrap(),
        )
        .hash_password(b"old password", &SaltString::generate(&mut OsRng))
        .unwrap()
        .to_string();
        let other = PasswordHash::from_phc(other);
        assert!(hasher
            .verify("old password".into(), Some(other.clone()))
            .await
            .unwrap());
        assert!(!hasher.verify("nope".into(), Some(other)).await.unwrap());
    }

    #[tokio::test]
    async fn many_hashes_at_once_all_finish_and_verify() {
        let hasher = Argon2Hasher::owasp().unwrap();
        let mut tasks = Vec::new();
        for i in 0..8 {
            let hasher = hasher.clone();
            tasks.push(tokio::spawn(async move {
                let raw = format!("a passphrase of its own, number {i}");
                let hash = hasher.hash(password(&raw)).await.unwrap();
                hasher.verify(raw, Some(hash)).await.unwrap()
            }));
        }
        for task in tasks {
            assert!(task.await.unwrap());
        }
    }

    #[tokio::test]
    async fn working_areas_are_kept_while_used_and_given_back_when_idle() {
        let hasher = Argon2Hasher::owasp().unwrap();
        assert_eq!(hasher.areas_kept(), 0, "start-up's hash keeps no area");
        let hash = hasher
            .hash(password("correct horse battery staple"))
            .await
            .unwrap();
        assert_eq!(hasher.areas_kept(), 1, "kept for the next hash");
        assert_eq!(
            hasher.release_idle(Duration::from_secs(60)),
            0,
            "used just now"
        );
        assert!(hasher
            .verify("correct horse battery staple".into(), Some(hash.clone()))
            .await
            .unwrap());
        assert_eq!(hasher.areas_kept(), 1, "the verification reused it");
        assert_eq!(hasher.release_idle(Duration::ZERO), 1);
        assert_eq!(hasher.areas_kept(), 0);
        assert!(
            hasher
                .verify("correct horse battery staple".into(), Some(hash))
                .await
                .unwrap(),
            "a fresh area works as well"
        );
    }

    #[tokio::test]
    async fn a_burst_of_hashes_keeps_no_more_working_areas_than_its_concurrency() {
        let hasher = Argon2Hasher::owasp_with_concurrency(2).unwrap();
        let tasks: Vec<_> = (0..6)
            .map(|i| {
                let hasher = hasher.clone();
                tokio::spawn(async move {
                    hasher
                        .hash(password(&format!("a passphrase of its own, number {i}")))
                        .await
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap().unwrap();
        }
        assert!(
            (1..=2).contains(&hasher.areas_kept()),
            "at most one area per hash allowed at once, kept {}",
            hasher.areas_kept()
        );
    }

    #[test]
    fn the_default_concurrency_is_bounded_whatever_the_cores() {
        let default = Argon2Hasher::default_concurrency();
        assert!((1..=Argon2Hasher::MAX_DEFAULT_CONCURRENCY).contains(&default));
    }

    #[test]
    fn debug_shows_no_hash() {
        let hasher = Argon2Hasher::owasp().unwrap();
        assert!(!format!("{hasher:?}").contains(&hasher.dummy));
    }
}
