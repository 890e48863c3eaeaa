//! RS256 access tokens, signed with keys that every replica shares through the store.
//!
//! Keys are RSA-2048. The `rsa` crate only generates them (its private-key operations carry
//! RUSTSEC-2023-0071); signing and verification go through `jsonwebtoken`, that is `ring`.
//! Private keys rest in the store sealed by the [`SecretBox`] with the key id as associated
//! data, so write access to the database alone cannot plant a key: every key a ring uses must
//! open under the server's secret key and match its public half and its id.

use std::fmt;
use std::sync::{Arc, LazyLock, PoisonError, RwLock};
use std::time::{Duration as StdDuration, Instant};

use async_trait::async_trait;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use gatehouse_domain::ports::{
    AccessClaims, BearerClaims, BoxError, Clock, IdTokenClaims, MachineClaims, PublicJwk,
    SigningKeyStore, StoreError, StoredSigningKey, TokenError, TokenSigner,
};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use ring::digest::{digest, SHA256};
use ring::signature::RsaKeyPair;
use rsa::pkcs1::{DecodeRsaPublicKey as _, EncodeRsaPrivateKey as _, EncodeRsaPublicKey as _};
use rsa::traits::PublicKeyParts as _;
use rsa::{RsaPrivateKey, RsaPublicKey};
use time::{Duration, OffsetDateTime};
use tokio::sync::Semaphore;

use crate::blocking::bounded;
use crate::secret_box::{SecretBox, SecretBoxError};
use crate::verified::{TokenDigest, VerifiedTokens};

/// The `aud` of every access token.
pub const AUDIENCE: &str = "gatehouse";
pub(crate) const KEY_BITS: usize = 2048;
/// Clock skew tolerated on `exp` and `nbf`: at most 5 s, as the product's verifying library
/// allows (`docs/decisions.md`).
const LEEWAY_SECS: u64 = 5;
/// How long a retired key outlives the access-token TTL: replicas keep signing with it until
/// they next reload their keys.
const RETIRE_GRACE_MINUTES: i64 = 5;
/// At most one reload per this interval is triggered by tokens with an unknown `kid`, so that
/// forged tokens cannot turn into a query each.
const UNKNOWN_KID_RELOAD_INTERVAL: StdDuration = StdDuration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum KeyRingError {
    #[error("the signing key store failed")]
    Store(#[from] StoreError),
    #[error("generating a signing key failed")]
    Generate(#[source] BoxError),
    #[error("sealing a signing key failed")]
    Seal(#[source] SecretBoxError),
    #[error("signing key {kid} could not be opened (sealed under another secret key?)")]
    Open {
        kid: String,
        #[source]
        source: SecretBoxError,
    },
    #[error("signing key {kid} is corrupt: {reason}")]
    Corrupt { kid: String, reason: &'static str },
    #[error("no signing key is stored")]
    NoKey,
}

/// The key id: the first 16 hex digits of the SHA-256 of the public key's DER.
fn kid_of(public_der: &[u8]) -> String {
    digest(&SHA256, public_der).as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// RSA key generations at once in this process: one (a 2048-bit key is tens to hundreds of
/// milliseconds of one core, and keys are made at start-up and on rotation only).
static KEY_GENERATIONS: LazyLock<Arc<Semaphore>> = LazyLock::new(|| Arc::new(Semaphore::new(1)));

/// Generates a key pair, stores it (private half sealed) and returns its `kid`. What
/// `gatehouse keys rotate` does; running rings pick the key up on their next reload. The
/// generation runs on the blocking pool, one at a time in the process.
pub async fn rotate_signing_key(
    store: &dyn SigningKeyStore,
    secret_box: &SecretBox,
    clock: &dyn Clock,
) -> Result<String, KeyRingError> {
    let (private_der, public_der) = bounded(&KEY_GENERATIONS, || {
        let private = RsaPrivateKey::new(&mut rand::rngs::OsRng, KEY_BITS)
            .map_err(|e| KeyRingError::Generate(e.to_string().into()))?;
        let private_der = private
            .to_pkcs1_der()
            .map_err(|e| KeyRingError::Generate(e.to_string().into()))?;
        let public_der = private
            .to_public_key()
            .to_pkcs1_der()
            .map_err(|e| KeyRingError::Generate(e.to_string().into()))?;
        Ok::<_, KeyRingError>((private_der, public_der.into_vec()))
    })
    .await
    .map_err(|e| KeyRingError::Generate(Box::new(e)))??;
    let kid = kid_of(&public_der);
    let private_key_sealed = secret_box
        .seal(private_der.as_bytes(), kid.as_bytes())
        .map_err(KeyRingError::Seal)?;
    store
        .add_signing_key(StoredSigningKey {
            kid: kid.clone(),
            private_key_sealed,
            public_key_der: public_der,
            created_at: clock.now(),
        })
        .await?;
    Ok(kid)
}

/// A key that verifies tokens, and until its successor appeared signed them.
struct VerifyingKey {
    kid: String,
    /// When the next newer key was created; `None` for the newest key.
    retired_at: Option<OffsetDateTime>,
    decoding: DecodingKey,
    jwk: PublicJwk,
}

struct Keys {
    signing_kid: String,
    signing: EncodingKey,
    /// Newest first; only keys still verifying tokens in circulation at load time.
    verifying: Vec<VerifyingKey>,
}

impl Keys {
    /// The keys whose tokens may still be in circulation at `now`.
    fn active(
        &self,
        now: OffsetDateTime,
        access_ttl: Duration,
    ) -> impl Iterator<Item = &VerifyingKey> {
        self.verifying
            .iter()
            .filter(move |key| is_active(key.retired_at, now, access_ttl))
    }
}

fn is_active(
    retired_at: Option<OffsetDateTime>,
    now: OffsetDateTime,
    access_ttl: Duration,
) -> bool {
    retired_at.is_none_or(|retired_at| {
        now < retired_at + access_ttl + Duration::minutes(RETIRE_GRACE_MINUTES)
    })
}

/// Opens a stored key and checks it: the private half opens under `kid`, the public half is the
/// private key's, and `kid` is the public half's digest. Returns the private key's DER.
fn open(stored: &StoredSigningKey, secret_box: &SecretBox) -> Result<Vec<u8>, KeyRingError> {
    let corrupt = |reason| KeyRingError::Corrupt {
        kid: stored.kid.clone(),
        reason,
    };
    if kid_of(&stored.public_key_der) != stored.kid {
        return Err(corrupt("the kid is not the public key's"));
    }
    let private_der = secret_box
        .open(&stored.private_key_sealed, stored.kid.as_bytes())
        .map_err(|source| KeyRingError::Open {
            kid: stored.kid.clone(),
            source,
        })?;
    let pair = RsaKeyPair::from_der(&private_der).map_err(|_| corrupt("bad private key"))?;
    if pair.public().as_ref() != stored.public_key_der.as_slice() {
        return Err(corrupt("the public key is not the private key's"));
    }
    Ok(private_der)
}

fn jwk(stored: &StoredSigningKey) -> Result<PublicJwk, KeyRingError> {
    let public = RsaPublicKey::from_pkcs1_der(&stored.public_key_der).map_err(|_| {
        KeyRingError::Corrupt {
            kid: stored.kid.clone(),
            reason: "bad public key",
        }
    })?;
    Ok(PublicJwk {
        kty: "RSA",
        use_: "sig",
        alg: "RS256",
        kid: stored.kid.clone(),
        n: URL_SAFE_NO_PAD.encode(public.n().to_bytes_be()),
        e: URL_SAFE_NO_PAD.encode(public.e().to_bytes_be()),
    })
}

/// Reads the stored keys: the newest signs, it and the keys it replaced recently enough verify.
/// `None` when the store holds no key.
async fn load(
    store: &dyn SigningKeyStore,
    secret_box: &SecretBox,
    now: OffsetDateTime,
    access_ttl: Duration,
) -> Result<Option<Keys>, KeyRingError> {
    let mut stored = store.signing_keys().await?;
    // Newest first, ties broken by kid, so that every replica picks the same signing key.
    stored.sort_by(|a, b| {
        b.created_at
            .cmp(&a.created_at)
            .then_with(|| b.kid.cmp(&a.kid))
    });
    let Some(newest) = stored.first() else {
        return Ok(None);
    };
    let signing = EncodingKey::from_rsa_der(&open(newest, secret_box)?);
    let mut verifying = Vec::new();
    let mut retired_at = None;
    for key in &stored {
        if !is_active(retired_at, now, access_ttl) {
            break;
        }
        let checked = if retired_at.is_none() {
            Ok(())
        } else {
            open(key, secret_box).map(drop)
        };
        match checked.and_then(|()| jwk(key)) {
            Ok(jwk) => verifying.push(VerifyingKey {
                kid: key.kid.clone(),
                retired_at,
                decoding: DecodingKey::from_rsa_der(&key.public_key_der),
                jwk,
            }),
            Err(error) if retired_at.is_some() => {
                tracing::warn!(%error, "skipping a retired signing key that fails its checks");
            }
            Err(error) => return Err(error),
        }
        retired_at = Some(key.created_at);
    }
    Ok(Some(Keys {
        signing_kid: newest.kid.clone(),
        signing,
        verifying,
    }))
}

/// Signs access tokens with the newest stored key and verifies them with every key whose
/// tokens may still be in circulation. Call [`KeyRing::reload`] periodically to pick up keys
/// that other replicas or `gatehouse keys rotate` added; a token with an unknown `kid` also
/// triggers a reload (at most one a second).
pub struct KeyRing {
    store: Arc<dyn SigningKeyStore>,
    secret_box: SecretBox,
    clock: Arc<dyn Clock>,
    issuer: String,
    access_ttl: Duration,
    validation: Validation,
    /// Never held across an await.
    keys: RwLock<Arc<Keys>>,
    /// When a token with an unknown `kid` last caused a reload; also makes such reloads one at
    /// a time.
    unknown_kid_reload: tokio::sync::Mutex<Option<Instant>>,
    /// Tokens whose signature and claims were verified with the current keys (`verified.rs`).
    verified: VerifiedTokens<Keys>,
}

impl KeyRing {
    /// Loads the stored keys, first generating and storing one when there is none. Replicas
    /// starting together may each store one; they all reload and sign with the newest.
    pub async fn load_or_create(
        store: Arc<dyn SigningKeyStore>,
        secret_box: SecretBox,
        clock: Arc<dyn Clock>,
        issuer: String,
        access_ttl: Duration,
    ) -> Result<Self, KeyRingError> {
        let keys = match load(&*store, &secret_box, clock.now(), access_ttl).await? {
            Some(keys) => keys,
            None => {
                let kid = rotate_signing_key(&*store, &secret_box, &*clock).await?;
                tracing::info!(%kid, "generated the first token-signing key");
                load(&*store, &secret_box, clock.now(), access_ttl)
                    .await?
                    .ok_or(KeyRingError::NoKey)?
            }
        };
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_issuer(&[&issuer]);
        // `aud` must be there; whom it may name is the domain's rule
        // (`BearerClaims::is_for_gatehouse`), checked after decoding.
        validation.validate_aud = false;
        validation.set_required_spec_claims(&["exp", "nbf", "iat", "iss", "aud", "sub"]);
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.leeway = LEEWAY_SECS;
        Ok(Self {
            store,
            secret_box,
            clock,
            issuer,
            access_ttl,
            validation,
            keys: RwLock::new(Arc::new(keys)),
            unknown_kid_reload: tokio::sync::Mutex::new(None),
            verified: VerifiedTokens::default(),
        })
    }

    /// Rereads the keys from the store. On failure the current keys stay in use.
    pub async fn reload(&self) -> Result<(), KeyRingError> {
        let keys = load(
            &*self.store,
            &self.secret_box,
            self.clock.now(),
            self.access_ttl,
        )
        .await?
        .ok_or(KeyRingError::NoKey)?;
        *self.keys.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(keys);
        Ok(())
    }

    /// Generates and stores a new key, and signs with it from now on. Returns its `kid`.
    pub async fn rotate(&self) -> Result<String, KeyRingError> {
        let kid = rotate_signing_key(&*self.store, &self.secret_box, &*self.clock).await?;
        self.reload().await?;
        Ok(kid)
    }

    /// The `kid` of the key that signs new tokens.
    pub fn signing_kid(&self) -> String {
        self.keys().signing_kid.clone()
    }

    /// The `iss` that tokens must carry.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The lifetime of access tokens this ring was configured with.
    pub fn access_ttl(&self) -> Duration {
        self.access_ttl
    }

    fn keys(&self) -> Arc<Keys> {
        Arc::clone(&self.keys.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Any claims, signed RS256 with the newest key, its `kid` in the header.
    fn sign_claims<T: serde::Serialize>(&self, claims: &T) -> Result<String, TokenError> {
        let keys = self.keys();
        let mut header = Header::new(Algorithm::RS256);
        header.typ = Some("JWT".to_owned());
        header.kid = Some(keys.signing_kid.clone());
        jsonwebtoken::encode(&header, claims, &keys.signing)
            .map_err(|e| TokenError::Failed(Box::new(e)))
    }

    /// The current keys, if `kid` is among their active verifying keys.
    fn keys_with(&self, kid: &str) -> Option<Arc<Keys>> {
        let keys = self.keys();
        let now = self.clock.now();
        let found = keys.active(now, self.access_ttl).any(|key| key.kid == kid);
        found.then_some(keys)
    }

    /// Reloads for a `kid` this ring does not know (another replica may have rotated), unless
    /// such a reload happened less than [`UNKNOWN_KID_RELOAD_INTERVAL`] ago.
    async fn keys_with_after_reload(&self, kid: &str) -> Result<Option<Arc<Keys>>, TokenError> {
        let mut last = self.unknown_kid_reload.lock().await;
        // Someone else may have reloaded while this task waited.
        if let Some(keys) = self.keys_with(kid) {
            return Ok(Some(keys));
        }
        if last.is_some_and(|at| at.elapsed() < UNKNOWN_KID_RELOAD_INTERVAL) {
            return Ok(None);
        }
        *last = Some(Instant::now());
        self.reload()
            .await
            .map_err(|e| TokenError::Failed(Box::new(e)))?;
        Ok(self.keys_with(kid))
    }
}

impl fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys = self.keys();
        f.debug_struct("KeyRing")
            .field("issuer", &self.issuer)
            .field("access_ttl", &self.access_ttl)
            .field("signing_kid", &keys.signing_kid)
            .field(
                "verifying_kids",
                &keys.verifying.iter().map(|k| &k.kid).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// Whether a `jsonwebtoken` error means our own key is broken rather than the token bad.
fn is_internal(kind: &ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::InvalidRsaKey(_)
            | ErrorKind::InvalidKeyFormat
            | ErrorKind::InvalidEcdsaKey
            | ErrorKind::RsaFailedSigning
            | ErrorKind::MissingAlgorithm
    )
}

#[async_trait]
impl TokenSigner for KeyRing {
    async fn sign(&self, claims: &AccessClaims) -> Result<String, TokenError> {
        self.sign_claims(claims)
    }

    async fn sign_machine(&self, claims: &MachineClaims) -> Result<String, TokenError> {
        self.sign_claims(claims)
    }

    async fn sign_id_token(&self, claims: &IdTokenClaims) -> Result<String, TokenError> {
        self.sign_claims(claims)
    }

    async fn verify(&self, token: &str) -> Result<BearerClaims, TokenError> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| TokenError::Invalid)?;
        if header.alg != Algorithm::RS256 {
            return Err(TokenError::Invalid);
        }
        let kid = header.kid.ok_or(TokenError::Invalid)?;
        let keys = match self.keys_with(&kid) {
            Some(keys) => keys,
            None => self
                .keys_with_after_reload(&kid)
                .await?
                .ok_or(TokenError::Invalid)?,
        };
        let key = keys
            .verifying
            .iter()
            .find(|key| key.kid == kid)
            .ok_or(TokenError::Invalid)?;
        // The clock jsonwebtoken checks `exp` with.
        let now = i64::try_from(jsonwebtoken::get_current_timestamp()).unwrap_or(i64::MAX);
        let token_digest: TokenDigest = digest(&SHA256, token.as_bytes())
            .as_ref()
            .try_into()
            .map_err(|_| TokenError::Invalid)?;
        if let Some(claims) = self.verified.get(&token_digest, &keys, now) {
            return Ok(claims);
        }
        match jsonwebtoken::decode::<BearerClaims>(token, &key.decoding, &self.validation) {
            Ok(data) if !data.claims.is_for_gatehouse() => Err(TokenError::Invalid),
            Ok(data) => {
                self.verified
                    .insert(token_digest, &keys, data.claims.clone(), now);
                Ok(data.claims)
            }
            Err(e) if is_internal(e.kind()) => Err(TokenError::Failed(Box::new(e))),
            Err(_) => Err(TokenError::Invalid),
        }
    }

    async fn public_keys(&self) -> Result<Vec<PublicJwk>, TokenError> {
        let keys = self.keys();
        Ok(keys
            .active(self.clock.now(), self.access_ttl)
            .map(|key| key.jwk.clone())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    use gatehouse_domain::model::{SessionId, UserId};
    use gatehouse_domain::ports::Audience;
    use uuid::Uuid;

    use super::*;

    const ISSUER: &str = "https://id.example.com";

    #[derive(Default)]
    struct MemStore {
        keys: Mutex<Vec<StoredSigningKey>>,
        loads: AtomicUsize,
    }

    #[async_trait]
    impl SigningKeyStore for MemStore {
        async fn signing_keys(&self) -> Result<Vec<StoredSigningKey>, StoreError> {
            self.loads.fetch_add(1, Ordering::SeqCst);
            let mut keys = self.keys.lock().unwrap().clone();
            keys.sort_by_key(|key| std::cmp::Reverse(key.created_at));
            Ok(keys)
        }

        async fn add_signing_key(&self, key: StoredSigningKey) -> Result<(), StoreError> {
            self.keys.lock().unwrap().push(key);
            Ok(())
        }
    }

    struct TestClock(Mutex<OffsetDateTime>);

    impl TestClock {
        fn new() -> Arc<Self> {
            Arc::new(Self(Mutex::new(OffsetDateTime::now_utc())))
        }

        fn advance(&self, by: Duration) {
            *self.0.lock().unwrap() += by;
        }
    }

    impl Clock for TestClock {
        fn now(&self) -> OffsetDateTime {
            *self.0.lock().unwrap()
        }
    }

    fn secret_box() -> SecretBox {
        SecretBox::new([42; 32])
    }

    fn ttl() -> Duration {
        Duration::minutes(15)
    }

    async fn ring(store: &Arc<MemStore>, clock: &Arc<TestClock>) -> KeyRing {
        KeyRing::load_or_create(
            Arc::clone(store) as Arc<dyn SigningKeyStore>,
            secret_box(),
            Arc::clone(clock) as Arc<dyn Clock>,
            ISSUER.into(),
            ttl(),
        )
        .await
        .unwrap()
    }

    /// Claims valid now by the real clock, which is what `jsonwebtoken` checks `exp` against.
    fn claims() -> AccessClaims {
        let now = OffsetDateTime::now_utc().unix_timestamp();
        AccessClaims {
            iss: ISSUER.into(),
            sub: UserId::from_uuid(Uuid::now_v7()),
            aud: AUDIENCE.into(),
            iat: now,
            nbf: now,
            exp: now + 900,
            jti: Uuid::now_v7(),
            sid: SessionId::from_uuid(Uuid::now_v7()),
            email: "ada@example.com".into(),
            client_id: None,
            scope: None,
            amr: vec!["pwd".into()],
            org_id: None,
            org_role: None,
            org_permissions: Vec::new(),
        }
    }

    /// The token's payload, as JSON, without checking anything.
    fn payload_of(token: &str) -> serde_json::Value {
        use base64::Engine as _;
        let payload = token.split('.').nth(1).unwrap();
        let bytes = URL_SAFE_NO_PAD.decode(payload).unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test(flavor = "current_thread")]
    async fn key_generation_waits_for_the_one_slot_off_the_runtime_thread() {
        let store = Arc::new(MemStore::default());
        let held = Arc::clone(&KEY_GENERATIONS).acquire_owned().await.unwrap();
        let rotation = tokio::spawn({
            let store = Arc::clone(&store);
            async move { rotate_signing_key(&*store, &secret_box(), &*TestClock::new()).await }
        });
        // The one runtime thread stays free while the rotation waits for the slot.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!rotation.is_finished(), "generated without the slot");
        assert!(store.keys.lock().unwrap().is_empty());
        drop(held);
        let kid = rotation.await.unwrap().unwrap();
        assert_eq!(store.keys.lock().unwrap()[0].kid, kid);
    }

    #[tokio::test]
    async fn oauth_tokens_carry_client_id_and_scope_and_others_do_not() {
        let store = Arc::new(MemStore::default());
        let ring = ring(&store, &TestClock::new()).await;
        let plain = ring.sign(&claims()).await.unwrap();
        let payload = payload_of(&plain);
        assert!(payload.get("client_id").is_none(), "{payload}");
        assert!(payload.get("scope").is_none(), "{payload}");

        let mut granted = claims();
        granted.client_id = Some("ghc_00000000000000000000000000000abc".into());
        granted.scope = Some("read:user read:resources".into());
        granted.aud = Audience::gatehouse_and("ghc_00000000000000000000000000000abc");
        let token = ring.sign(&granted).await.unwrap();
        let payload = payload_of(&token);
        assert_eq!(payload["client_id"], "ghc_00000000000000000000000000000abc");
        assert_eq!(payload["scope"], "read:user read:resources");
        assert_eq!(
            payload["aud"],
            serde_json::json!(["gatehouse", "ghc_00000000000000000000000000000abc"])
        );
        assert_eq!(
            ring.verify(&token).await.unwrap(),
            BearerClaims::User(granted)
        );
    }

    #[tokio::test]
    async fn an_application_token_without_gatehouse_in_its_audience_verifies_only_for_its_own_application(
    ) {
        let store = Arc::new(MemStore::default());
        let ring = ring(&store, &TestClock::new()).await;
        let client_id = "ghc_00000000000000000000000000000abc";
        // `scope=openid email`: the application alone is the audience; Gatehouse still takes
        // the token (for /oauth/userinfo; the authenticator refuses it on the API).
        let openid = AccessClaims {
            client_id: Some(client_id.into()),
            scope: Some("openid email".into()),
            aud: Audience::Many(vec![client_id.into()]),
            ..claims()
        };
        let token = ring.sign(&openid).await.unwrap();
        assert_eq!(payload_of(&token)["aud"], serde_json::json!([client_id]));
        assert_eq!(
            ring.verify(&token).await.unwrap(),
            BearerClaims::User(openid.clone())
        );

        // Another application as the only audience, or none named in `client_id` (an ID
        // token's shape), is refused.
        for claims in [
            AccessClaims {
                aud: Audience::Many(vec!["ghc_00000000000000000000000000000def".into()]),
                ..openid.clone()
            },
            AccessClaims {
                client_id: None,
                scope: None,
                ..openid.clone()
            },
        ] {
            let token = ring.sign(&claims).await.unwrap();
            assert!(matches!(
                ring.verify(&token).await,
                Err(TokenError::Invalid)
            ));
        }
    }

    #[tokio::test]
    async fn organization_claims_are_signed_and_read_back() {
        let store = Arc::new(MemStore::default());
        let ring = ring(&store, &TestClock::new()).await;
        let plain = payload_of(&ring.sign(&claims()).await.unwrap());
        for absent in ["org_id", "org_role", "org_permissions"] {
            assert!(plain.get(absent).is_none(), "{plain}");
        }
        let organization = gatehouse_domain::model::OrganizationId::from_uuid(Uuid::now_v7());
        let scoped = AccessClaims {
            org_id: Some(organization),
            org_role: Some("viewer".to_owned()),
            org_permissions: vec!["organization.read".into()],
            ..claims()
        };
        let token = ring.sign(&scoped).await.unwrap();
        let payload = payload_of(&token);
        assert_eq!(payload["org_id"], organization.to_string());
        assert_eq!(payload["org_role"], "viewer");
        assert_eq!(
            payload["org_permissions"],
            serde_json::json!(["organization.read"])
        );
        assert_eq!(
            ring.verify(&token).await.unwrap(),
            BearerClaims::User(scoped)
        );
    }

    fn kid_of_token(token: &str) -> String {
        jsonwebtoken::decode_header(token).unwrap().kid.unwrap()
    }

    #[tokio::test]
    async fn expired_tokens_get_at_most_five_seconds_of_leeway() {
        let store = Arc::new(MemStore::default());
        let ring = ring(&store, &TestClock::new()).await;
        let now = OffsetDateTime::now_utc().unix_timestamp();
        let ended = |ago: i64| AccessClaims {
            iat: now - 900,
            nbf: now - 900,
            exp: now - ago,
            ..claims()
        };
        let just_ended = ring.sign(&ended(2)).await.unwrap();
        assert!(ring.verify(&just_ended).await.is_ok());
        let ended_ten_seconds_ago = ring.sign(&ended(10)).await.unwrap();
        assert!(matches!(
            ring.verify(&ended_ten_seconds_ago).await,
            Err(TokenError::Invalid)
        ));
        // Not yet valid: 10 s ahead is refused too.
        let early = AccessClaims {
            nbf: now + 10,
            ..claims()
        };
        let early = ring.sign(&early).await.unwrap();
        assert!(matches!(
            ring.verify(&early).await,
            Err(TokenError::Invalid)
        ));
    }

    #[tokio::test]
    async fn sign_then_verify() {
        let store = Arc::new(MemStore::default());
        let ring = ring(&store, &TestClock::new()).await;
        assert_eq!(store.keys.lock().unwrap().len(), 1);
        let claims = claims();
        let token = ring.sign(&claims).await.unwrap();
        let header = jsonwebtoken::decode_header(&token).unwrap();
        assert_eq!(header.alg, Algorithm::RS256);
        assert_eq!(header.typ.as_deref(), Some("JWT"));
        assert_eq!(header.kid.as_deref(), Some(ring.signing_kid().as_str()));
        assert_eq!(ring.signing_kid().len(), 16);
        assert_eq!(
            ring.verify(&token).await.unwrap(),
            BearerClaims::User(claims.clone())
        );
        // A second ring on the same store uses the stored key rather than making one.
        let again = KeyRing::load_or_create(
            Arc::clone(&store) as Arc<dyn SigningKeyStore>,
            secret_box(),
            TestClock::new(),
            ISSUER.into(),
            ttl(),
        )
        .await
        .unwrap();
        assert_eq!(again.signing_kid(), ring.signing_kid());
        assert_eq!(
            again.verify(&token).await.unwrap(),
            BearerClaims::User(claims)
        );
        assert!(!format!("{ring:?}").contains("private"));
    }

    #[tokio::test]
    async fn rotated_key_verifies_while_listed() {
        let store = Arc::new(MemStore::default());
        let clock = TestClock::new();
        let ring = ring(&store, &clock).await;
        let old_kid = ring.signing_kid();
        let old_token = ring.sign(&claims()).await.unwrap();

        clock.advance(Duration::days(30));
        let new_kid = ring.rotate().await.unwrap();
        assert_ne!(new_kid, old_kid);
        assert_eq!(ring.signing_kid(), new_kid);
        let new_token = ring.sign(&claims()).await.unwrap();
        assert_eq!(kid_of_token(&new_token), new_kid);

        let listed = |jwks: Vec<PublicJwk>| jwks.into_iter().map(|k| k.kid).collect::<Vec<_>>();
        assert_eq!(
            listed(ring.public_keys().await.unwrap()),
            [new_kid.clone(), old_kid.clone()]
        );
        assert!(ring.verify(&old_token).await.is_ok());
        assert!(ring.verify(&new_token).await.is_ok());

        // Once every token the old key signed has expired, it is gone, even for tokens that
        // claim to be valid for longer.
        clock.advance(ttl() + Duration::minutes(RETIRE_GRACE_MINUTES) + Duration::seconds(1));
        assert_eq!(
            listed(ring.public_keys().await.unwrap()),
            [new_kid.as_str()]
        );
        assert!(matches!(
            ring.verify(&old_token).await,
            Err(TokenError::Invalid)
        ));
        assert!(ring.verify(&new_token).await.is_ok());
        // A fresh load does not even read it.
        ring.reload().await.unwrap();
        assert_eq!(listed(ring.public_keys().await.unwrap()), [new_kid]);
    }

    #[tokio::test]
    async fn a_verified_token_is_remembered_and_no_other_bytes_pass_for_it() {
        let store = Arc::new(MemStore::default());
        let ring = ring(&store, &TestClock::new()).await;
        let issued = claims();
        let token = ring.sign(&issued).await.unwrap();
        let verified = BearerClaims::User(issued.clone());
        assert_eq!(ring.verify(&token).await.unwrap(), verified);
        assert_eq!(ring.verified.len(), 1);
        assert_eq!(ring.verify(&token).await.unwrap(), verified, "from memory");
        assert_eq!(ring.verified.len(), 1);

        // The same token with its last signature character changed, or with a payload that
        // says something else under the same signature: verified in full, refused, forgotten.
        let mut forged_signature = token.clone();
        let last = forged_signature.pop().unwrap();
        forged_signature.push(if last == 'A' { 'B' } else { 'A' });
        let mut other = issued.clone();
        other.sub = UserId::from_uuid(Uuid::now_v7());
        let other_payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&other).unwrap());
        let parts: Vec<&str> = token.split('.').collect();
        let forged_payload = format!("{}.{other_payload}.{}", parts[0], parts[2]);
        for forged in [forged_signature, forged_payload] {
            assert!(matches!(
                ring.verify(&forged).await,
                Err(TokenError::Invalid)
            ));
        }
        assert_eq!(ring.verified.len(), 1);

        // A token refused by its claims is not remembered either.
        let mut expired = claims();
        expired.exp -= 3600;
        let expired = ring.sign(&expired).await.unwrap();
        assert!(matches!(
            ring.verify(&expired).await,
            Err(TokenError::Invalid)
        ));
        assert_eq!(ring.verified.len(), 1);
    }

    #[tokio::test]
    async fn a_reload_makes_remembered_tokens_verify_again_with_the_keys_loaded() {
        let store = Arc::new(MemStore::default());
        let clock = TestClock::new();
        let ring = ring(&store, &clock).await;
        let token = ring.sign(&claims()).await.unwrap();
        ring.verify(&token).await.unwrap();
        let before = ring.keys();
        ring.reload().await.unwrap();
        assert!(!Arc::ptr_eq(&before, &ring.keys()));
        assert!(
            ring.verified
                .get(&digest_of(&token), &ring.keys(), 0)
                .is_none(),
            "what the old keys verified does not count for the new ones"
        );
        assert!(
            ring.verify(&token).await.is_ok(),
            "verified again with the new keys"
        );
        assert!(ring
            .verified
            .get(&digest_of(&token), &ring.keys(), 0)
            .is_some());
    }

    fn digest_of(token: &str) -> TokenDigest {
        digest(&SHA256, token.as_bytes())
            .as_ref()
            .try_into()
            .unwrap()
    }

    #[tokio::test]
    async fn bad_tokens_are_invalid() {
        let store = Arc::new(MemStore::default());
        let ring = ring(&store, &TestClock::new()).await;
        let token = ring.sign(&claims()).await.unwrap();

        // Tampered payload and signature.
        let (head, rest) = token.split_once('.').unwrap();
        let (payload, signature) = rest.split_once('.').unwrap();
        let mut forged = claims();
        forged.email = "mallory@example.com".into();
        let forged_payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged).unwrap());
        for bad in [
            format!("{head}.{forged_payload}.{signature}"),
            format!("{head}.{payload}.{}", &signature[1..]),
            format!("{head}.{payload}"),
            "garbage".to_owned(),
            String::new(),
        ] {
            assert!(matches!(ring.verify(&bad).await, Err(TokenError::Invalid)));
        }

        let invalid = |claims: AccessClaims| {
            let ring = &ring;
            async move {
                let token = ring.sign(&claims).await.unwrap();
                matches!(ring.verify(&token).await, Err(TokenError::Invalid))
            }
        };
        let now = OffsetDateTime::now_utc().unix_timestamp();
        assert!(
            invalid(AccessClaims {
                iss: "https://evil.example.com".into(),
                ..claims()
            })
            .await
        );
        assert!(
            invalid(AccessClaims {
                aud: "other".into(),
                ..claims()
            })
            .await
        );
        assert!(
            invalid(AccessClaims {
                aud: Audience::Many(vec!["other".into(), "ghc_x".into()]),
                ..claims()
            })
            .await
        );
        assert!(
            invalid(AccessClaims {
                iat: now - 1000,
                nbf: now - 1000,
                exp: now - 120,
                ..claims()
            })
            .await
        );
        assert!(
            invalid(AccessClaims {
                nbf: now + 300,
                ..claims()
            })
            .await
        );

        // Symmetric algorithms and tokens without a kid are refused.
        let mut header = Header::new(Algorithm::HS256);
        header.kid = Some(ring.signing_kid());
        let hs = jsonwebtoken::encode(&header, &claims(), &EncodingKey::from_secret(b"k")).unwrap();
        assert!(matches!(ring.verify(&hs).await, Err(TokenError::Invalid)));
        let no_kid = Header::new(Algorithm::RS256);
        let unsigned = format!(
            "{}.{payload}.{signature}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&no_kid).unwrap())
        );
        assert!(matches!(
            ring.verify(&unsigned).await,
            Err(TokenError::Invalid)
        ));
    }

    #[tokio::test]
    async fn keys_from_another_replica_are_picked_up() {
        let store = Arc::new(MemStore::default());
        let clock = TestClock::new();
        let ring_a = ring(&store, &clock).await;
        let ring_b = ring(&store, &clock).await;
        clock.advance(Duration::minutes(1));
        let kid = ring_b.rotate().await.unwrap();
        let token = ring_b.sign(&claims()).await.unwrap();
        assert_eq!(kid_of_token(&token), kid);

        let loads = store.loads.load(Ordering::SeqCst);
        assert!(ring_a.verify(&token).await.is_ok());
        assert_eq!(store.loads.load(Ordering::SeqCst), loads + 1);
        assert_eq!(ring_a.signing_kid(), kid);

        // Known kids do not reload; unknown ones reload at most once a second.
        assert!(ring_a.verify(&token).await.is_ok());
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some("0123456789abcdef".into());
        let (_, rest) = token.split_once('.').unwrap();
        let bogus = format!(
            "{}.{rest}",
            URL_SAFE_NO_PAD.encode(serde_json::to_vec(&header).unwrap())
        );
        assert!(matches!(
            ring_a.verify(&bogus).await,
            Err(TokenError::Invalid)
        ));
        assert_eq!(store.loads.load(Ordering::SeqCst), loads + 1);
    }

    #[tokio::test]
    async fn replicas_starting_together_converge() {
        let store = Arc::new(MemStore::default());
        let clock = TestClock::new();
        let (a, b) = tokio::join!(ring(&store, &clock), ring(&store, &clock));
        // Each may have stored a key, and the first to finish may sign with its own for a
        // while; each accepts the other's tokens all the same.
        let from_a = a.sign(&claims()).await.unwrap();
        let from_b = b.sign(&claims()).await.unwrap();
        assert!(a.verify(&from_b).await.is_ok());
        assert!(b.verify(&from_a).await.is_ok());
        // After a reload both sign with the same key.
        a.reload().await.unwrap();
        b.reload().await.unwrap();
        assert_eq!(a.signing_kid(), b.signing_kid());
        assert!(b.verify(&from_a).await.is_ok());
        assert!(a.verify(&from_b).await.is_ok());
    }

    #[tokio::test]
    async fn machine_tokens_verify_as_such_and_id_tokens_never_verify_as_bearer_tokens() {
        let store = Arc::new(MemStore::default());
        let ring = ring(&store, &TestClock::new()).await;
        let now = OffsetDateTime::now_utc().unix_timestamp();
        let machine = MachineClaims {
            iss: ISSUER.into(),
            sub: "ghc_00000000000000000000000000000abc".into(),
            aud: AUDIENCE.into(),
            iat: now,
            nbf: now,
            exp: now + 900,
            jti: Uuid::now_v7(),
            client_id: "ghc_00000000000000000000000000000abc".into(),
            org_id: gatehouse_domain::model::OrganizationId::from_uuid(Uuid::now_v7()),
            scope: "org:read".into(),
        };
        let token = ring.sign_machine(&machine).await.unwrap();
        assert_eq!(
            ring.verify(&token).await.unwrap(),
            BearerClaims::Machine(machine)
        );

        let id_token = IdTokenClaims {
            iss: ISSUER.into(),
            sub: UserId::from_uuid(Uuid::now_v7()),
            aud: "ghc_00000000000000000000000000000abc".into(),
            azp: "ghc_00000000000000000000000000000abc".into(),
            exp: now + 900,
            iat: now,
            auth_time: now - 60,
            nonce: Some("n-0S6_WzA2Mj".into()),
            at_hash: "77QmUPtjPfzWtF2AnpK9RQ".into(),
            amr: vec!["pwd".into()],
            email: None,
            email_verified: None,
            name: Some("Ada Lovelace".into()),
            org_id: None,
            org_role: None,
            org_permissions: Vec::new(),
        };
        let signed = ring.sign_id_token(&id_token).await.unwrap();
        let payload = payload_of(&signed);
        assert_eq!(payload["aud"], "ghc_00000000000000000000000000000abc");
        assert_eq!(payload["nonce"], "n-0S6_WzA2Mj");
        assert!(payload.get("email").is_none(), "{payload}");
        assert_eq!(
            jsonwebtoken::decode_header(&signed).unwrap().kid,
            Some(ring.signing_kid())
        );
        assert!(
            matches!(ring.verify(&signed).await, Err(TokenError::Invalid)),
            "an ID token is not a Bearer token"
        );
    }

    #[tokio::test]
    async fn jwks_verify_tokens() {
        let store = Arc::new(MemStore::default());
        let ring = ring(&store, &TestClock::new()).await;
        let token = ring.sign(&claims()).await.unwrap();
        let jwks = ring.public_keys().await.unwrap();
        assert_eq!(jwks.len(), 1);
        let jwk = &jwks[0];
        assert_eq!((jwk.kty, jwk.use_, jwk.alg), ("RSA", "sig", "RS256"));
        assert_eq!(jwk.kid, ring.signing_kid());
        assert_eq!(jwk.e, "AQAB");
        let json = serde_json::to_value(jwk).unwrap();
        assert_eq!(json["use"], "sig");

        let key = DecodingKey::from_rsa_components(&jwk.n, &jwk.e).unwrap();
        let mut validation = Validation::new(Algorithm::RS256);
        validation.set_issuer(&[ISSUER]);
        validation.set_audience(&[AUDIENCE]);
        let data = jsonwebtoken::decode::<AccessClaims>(&token, &key, &validation).unwrap();
        assert_eq!(data.claims.email, "ada@example.com");
    }

    #[tokio::test]
    async fn keys_sealed_under_another_secret_do_not_load() {
        let store = Arc::new(MemStore::default());
        let clock = TestClock::new();
        rotate_signing_key(&*store, &SecretBox::new([1; 32]), &*clock)
            .await
            .unwrap();
        let result = KeyRing::load_or_create(
            Arc::clone(&store) as Arc<dyn SigningKeyStore>,
            secret_box(),
            Arc::clone(&clock) as Arc<dyn Clock>,
            ISSUER.into(),
            ttl(),
        )
        .await;
        assert!(matches!(result, Err(KeyRingError::Open { .. })));

        // A tampered public key is caught too.
        let mut keys = store.keys.lock().unwrap().clone();
        keys[0].public_key_der[20] ^= 1;
        let tampered = Arc::new(MemStore {
            keys: Mutex::new(keys),
            loads: AtomicUsize::new(0),
        });
        let result = KeyRing::load_or_create(
            tampered as Arc<dyn SigningKeyStore>,
            SecretBox::new([1; 32]),
            clock as Arc<dyn Clock>,
            ISSUER.into(),
            ttl(),
        )
        .await;
        assert!(matches!(result, Err(KeyRingError::Corrupt { .. })));
    }
}
