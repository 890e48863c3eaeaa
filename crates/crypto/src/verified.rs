//! Access tokens whose signature and claims `jsonwebtoken` has already verified.
//!
//! A client sends the same access token with every request for its whole lifetime, and the RSA
//! verification of its signature was a quarter of the server's CPU for an authenticated read
//! (`docs/benchmarks.md`, the fourth pass). [`VerifiedTokens`] remembers the claims of a token
//! that passed, under the SHA-256 of the token's exact bytes, so that the same token is checked
//! by RSA once, not on every request. What a hit still requires, every time:
//!
//! - the very same token (any other bytes have another digest and are verified in full);
//! - the same loaded keys: the caller looks its `kid` up among the keys active now first, and
//!   an entry counts only for the key set it was verified with (a reload, every minute or on
//!   an unknown `kid`, makes every entry miss once);
//! - a token not yet expired by the same clock `jsonwebtoken` uses, without its leeway (near its
//!   end a token is verified in full again, leeway and all).
//!
//! Whether the token's session is still live (a machine token's application still active) is
//! checked on every request, elsewhere, as before: logging out ends a token at once whether or
//! not its signature was remembered.
//!
//! The map is split in shards, each behind its own short lock, and bounded: a full shard drops
//! what no longer counts, then everything if that was not enough.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use gatehouse_domain::ports::BearerClaims;

/// Shards (locks) of the map: enough that the cores of a large machine rarely meet.
const SHARDS: usize = 32;
/// Tokens remembered per shard.
const PER_SHARD: usize = 1024;

/// The SHA-256 of a token's bytes.
pub(crate) type TokenDigest = [u8; 32];

/// Verified access tokens (module docs). `K` is the key set a token was verified with.
pub(crate) struct VerifiedTokens<K> {
    shards: Vec<Mutex<HashMap<TokenDigest, Entry<K>>>>,
}

struct Entry<K> {
    claims: BearerClaims,
    keys: Arc<K>,
}

impl<K> Entry<K> {
    fn counts(&self, keys: &Arc<K>, now: i64) -> bool {
        Arc::ptr_eq(&self.keys, keys) && self.claims.exp() > now
    }
}

impl<K> Default for VerifiedTokens<K> {
    fn default() -> Self {
        Self {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
        }
    }
}

impl<K> VerifiedTokens<K> {
    fn shard(&self, digest: &TokenDigest) -> &Mutex<HashMap<TokenDigest, Entry<K>>> {
        &self.shards[usize::from(digest[0]) % SHARDS]
    }

    /// The claims of the token with this digest, when it was verified with `keys` and has not
    /// expired at `now` (Unix seconds).
    pub(crate) fn get(
        &self,
        digest: &TokenDigest,
        keys: &Arc<K>,
        now: i64,
    ) -> Option<BearerClaims> {
        let shard = self
            .shard(digest)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        shard
            .get(digest)
            .filter(|entry| entry.counts(keys, now))
            .map(|entry| entry.claims.clone())
    }

    /// Remembers the claims of a token that `keys` verified.
    pub(crate) fn insert(
        &self,
        digest: TokenDigest,
        keys: &Arc<K>,
        claims: BearerClaims,
        now: i64,
    ) {
        let mut shard = self
            .shard(&digest)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if shard.len() >= PER_SHARD {
            shard.retain(|_, entry| entry.counts(keys, now));
            if shard.len() >= PER_SHARD {
                shard.clear();
            }
        }
        shard.insert(
            digest,
            Entry {
                claims,
                keys: Arc::clone(keys),
            },
        );
    }

    /// How many tokens are remembered (all shards).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }
}
