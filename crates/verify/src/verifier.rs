//! The verifier: Gatehouse's published keys, fetched and cached, and the checks of a token.

use std::{
    collections::HashMap,
    fmt,
    sync::{Arc, PoisonError, RwLock},
    time::{Duration, Instant},
};

use jsonwebtoken::{errors::ErrorKind, Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use tokio::sync::Mutex;

use crate::{claims::RawClaims, BuildError, Claims, KeySetError, VerifyError};

/// The most clock skew tolerated on `exp` and `nbf`.
pub const MAX_LEEWAY: Duration = Duration::from_secs(5);

/// The most of a key set read: Gatehouse's holds a few keys of about 400 bytes each.
const MAX_KEY_SET_BYTES: usize = 1 << 20;

/// The audience Gatehouse's own access tokens carry.
pub const DEFAULT_AUDIENCE: &str = gatehouse_types::GATEHOUSE_AUDIENCE;

/// Verifies Gatehouse's access tokens offline, with the keys Gatehouse publishes at its JWKS URL.
///
/// The key set is fetched on the first verification and cached. A token naming a key id the
/// cache lacks (Gatehouse rotated its key) refetches it, at most once per
/// [`VerifierBuilder::refetch_interval`] (a minute) however many tokens ask, one fetch at a
/// time; a cache older than [`VerifierBuilder::max_age`] is refreshed the same way, and kept
/// when the refresh fails. A verification waits at most [`VerifierBuilder::fetch_timeout`] for
/// a fetch. Cheap to clone: clones share the cache.
#[derive(Clone)]
pub struct Verifier {
    inner: Arc<Inner>,
}

struct Inner {
    issuer: String,
    audience: String,
    jwks_url: String,
    http: reqwest::Client,
    validation: Validation,
    refetch_interval: Duration,
    fetch_timeout: Duration,
    max_age: Duration,
    cache: RwLock<Cache>,
    /// Held by the one fetch in flight.
    fetching: Mutex<()>,
}

#[derive(Default)]
struct Cache {
    keys: HashMap<String, Arc<DecodingKey>>,
    fetched_at: Option<Instant>,
    /// The last fetch that finished: when it started, and how it went.
    attempt: Option<(Instant, Result<(), KeySetError>)>,
}

impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Verifier")
            .field("issuer", &self.inner.issuer)
            .field("audience", &self.inner.audience)
            .field("jwks_url", &self.inner.jwks_url)
            .finish_non_exhaustive()
    }
}

/// Settings of a [`Verifier`]; [`Verifier::builder`] makes one.
#[derive(Debug)]
pub struct VerifierBuilder {
    issuer: String,
    jwks_url: Option<String>,
    audience: String,
    http: Option<reqwest::Client>,
    leeway: Duration,
    refetch_interval: Duration,
    fetch_timeout: Duration,
    max_age: Duration,
}

impl VerifierBuilder {
    /// Where the key set is fetched from; by default `{issuer}/.well-known/jwks.json`.
    pub fn jwks_url(mut self, url: impl Into<String>) -> Self {
        self.jwks_url = Some(url.into());
        self
    }

    /// The audience a token must name in `aud`, and the one [`Claims::can`] grants for; by
    /// default `gatehouse`, for first-party tokens (a sign-in's own, through `/auth/*`). A
    /// product that receives the tokens Gatehouse issues to its OAuth application sets its
    /// own client id: those tokens always name it, and name `gatehouse` only when they hold
    /// one of Gatehouse's API scopes.
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.audience = audience.into();
        self
    }

    /// The HTTP client the key set is fetched with; by default one of its own.
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http = Some(client);
        self
    }

    /// The clock skew tolerated on `exp` and `nbf`; at most (and by default) [`MAX_LEEWAY`].
    pub fn leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway.min(MAX_LEEWAY);
        self
    }

    /// The least time between two fetches of the key set; by default a minute.
    pub fn refetch_interval(mut self, interval: Duration) -> Self {
        self.refetch_interval = interval;
        self
    }

    /// The longest a verification waits for the key set; by default 5 seconds.
    pub fn fetch_timeout(mut self, timeout: Duration) -> Self {
        self.fetch_timeout = timeout;
        self
    }

    /// How long a fetched key set is used before it is refreshed (so that a key Gatehouse
    /// retired stops verifying); by default 10 minutes.
    pub fn max_age(mut self, max_age: Duration) -> Self {
        self.max_age = max_age;
        self
    }

    /// The verifier.
    pub fn build(self) -> Result<Verifier, BuildError> {
        let issuer = self.issuer.trim_end_matches('/').to_owned();
        let http = match self.http {
            Some(client) => client,
            None => reqwest::Client::builder()
                .timeout(self.fetch_timeout)
                .build()
                .map_err(|error| BuildError::Http(Arc::new(error)))?,
        };
        let mut validation = Validation::new(Algorithm::RS256);
        validation.leeway = self.leeway.as_secs();
        validation.validate_nbf = true;
        validation.set_issuer(&[&issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        Ok(Verifier {
            inner: Arc::new(Inner {
                jwks_url: self
                    .jwks_url
                    .unwrap_or_else(|| format!("{issuer}/.well-known/jwks.json")),
                issuer,
                audience: self.audience,
                http,
                validation,
                refetch_interval: self.refetch_interval,
                fetch_timeout: self.fetch_timeout,
                max_age: self.max_age,
                cache: RwLock::default(),
                fetching: Mutex::new(()),
            }),
        })
    }
}

impl Verifier {
    /// A verifier of the tokens `issuer` (Gatehouse's public URL, `GATEHOUSE_PUBLIC_URL`)
    /// issues for the audience `gatehouse`, with its keys at `{issuer}/.well-known/jwks.json`.
    pub fn new(issuer: impl Into<String>) -> Result<Self, BuildError> {
        Self::builder(issuer).build()
    }

    /// Settings for a verifier of the tokens `issuer` issues.
    pub fn builder(issuer: impl Into<String>) -> VerifierBuilder {
        VerifierBuilder {
            issuer: issuer.into(),
            jwks_url: None,
            audience: DEFAULT_AUDIENCE.to_owned(),
            http: None,
            leeway: MAX_LEEWAY,
            refetch_interval: Duration::from_secs(60),
            fetch_timeout: Duration::from_secs(5),
            max_age: Duration::from_secs(600),
        }
    }

    /// The issuer tokens must name.
    pub fn issuer(&self) -> &str {
        &self.inner.issuer
    }

    /// Where the key set is fetched from.
    pub fn jwks_url(&self) -> &str {
        &self.inner.jwks_url
    }

    /// Verifies a token (the bearer token, without `Bearer `): RS256 with a published key,
    /// `iss`, `aud`, `exp` and `nbf`; then reads its claims.
    pub async fn verify(&self, token: &str) -> Result<Claims, VerifyError> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| VerifyError::Malformed)?;
        if header.alg != Algorithm::RS256 {
            return Err(VerifyError::Algorithm(header.alg));
        }
        let kid = header.kid.ok_or(VerifyError::MissingKeyId)?;
        let key = self.key(&kid).await?;
        let data = jsonwebtoken::decode::<RawClaims>(token, &key, &self.inner.validation)
            .map_err(|error| rejection(error.kind()))?;
        Claims::read(data.claims, &self.inner.audience)
    }

    /// Fetches the key set now, unless it was fetched within the refetch interval (to warm the
    /// cache at start, say).
    pub async fn refresh(&self) -> Result<(), VerifyError> {
        let inner = self.inner.clone();
        // The fetch runs in a task of its own: a verification that is dropped while it waits
        // leaves the fetch to finish and record what it found for the others.
        let fetch = tokio::spawn(async move { inner.refresh_once().await });
        match tokio::time::timeout(self.inner.fetch_timeout, fetch).await {
            Err(_) => Err(VerifyError::KeySet(KeySetError::Timeout)),
            Ok(Err(_)) => Err(VerifyError::KeySet(KeySetError::Interrupted)),
            Ok(Ok(outcome)) => outcome.map_err(VerifyError::KeySet),
        }
    }

    /// The key the token names: from the cache, or after a refresh.
    async fn key(&self, kid: &str) -> Result<Arc<DecodingKey>, VerifyError> {
        let (cached, stale) = self.inner.lookup(kid);
        if let (Some(key), false) = (&cached, stale) {
            return Ok(key.clone());
        }
        if let Err(error) = self.refresh().await {
            // A stale key still verifies while its refresh fails.
            return cached.ok_or(error);
        }
        self.inner.lookup(kid).0.ok_or(VerifyError::UnknownKey)
    }
}

impl Inner {
    fn lookup(&self, kid: &str) -> (Option<Arc<DecodingKey>>, bool) {
        let cache = self.cache.read().unwrap_or_else(PoisonError::into_inner);
        let stale = cache
            .fetched_at
            .is_none_or(|at| at.elapsed() >= self.max_age);
        (cache.keys.get(kid).cloned(), stale)
    }

    async fn refresh_once(&self) -> Result<(), KeySetError> {
        let _one_at_a_time = self.fetching.lock().await;
        {
            let cache = self.cache.read().unwrap_or_else(PoisonError::into_inner);
            if let Some((at, outcome)) = &cache.attempt {
                if at.elapsed() < self.refetch_interval {
                    return outcome.clone();
                }
            }
        }
        let started = Instant::now();
        let fetched = match tokio::time::timeout(self.fetch_timeout, self.fetch()).await {
            Ok(fetched) => fetched,
            Err(_) => Err(KeySetError::Timeout),
        };
        let mut cache = self.cache.write().unwrap_or_else(PoisonError::into_inner);
        let outcome = match fetched {
            Ok(keys) => {
                cache.keys = keys;
                cache.fetched_at = Some(started);
                Ok(())
            }
            Err(error) => Err(error),
        };
        cache.attempt = Some((started, outcome.clone()));
        outcome
    }

    async fn fetch(&self) -> Result<HashMap<String, Arc<DecodingKey>>, KeySetError> {
        let mut response = self
            .http
            .get(&self.jwks_url)
            .send()
            .await
            .map_err(|error| KeySetError::Unreachable(Arc::new(error)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(KeySetError::Status(status.as_u16()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| KeySetError::Unreachable(Arc::new(error)))?
        {
            if body.len() + chunk.len() > MAX_KEY_SET_BYTES {
                return Err(KeySetError::TooLarge);
            }
            body.extend_from_slice(&chunk);
        }
        let set: KeySet =
            serde_json::from_slice(&body).map_err(|error| KeySetError::Invalid(Arc::new(error)))?;
        let keys: HashMap<_, _> = set
            .keys
            .into_iter()
            // A key of another kind, or one this version cannot read, is not Gatehouse's RS256
            // key: skipped, not an error.
            .filter_map(|key| serde_json::from_value::<RsaJwk>(key).ok())
            .filter(|key| {
                key.kty == "RSA"
                    && key.alg.as_deref().is_none_or(|alg| alg == "RS256")
                    && key.use_.as_deref().is_none_or(|use_| use_ == "sig")
            })
            .filter_map(|key| {
                let decoding = DecodingKey::from_rsa_components(&key.n, &key.e).ok()?;
                Some((key.kid, Arc::new(decoding)))
            })
            .collect();
        if keys.is_empty() {
            return Err(KeySetError::NoKeys);
        }
        Ok(keys)
    }
}

#[derive(Deserialize)]
struct KeySet {
    keys: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
struct RsaJwk {
    kty: String,
    kid: String,
    #[serde(default)]
    alg: Option<String>,
    #[serde(default, rename = "use")]
    use_: Option<String>,
    n: String,
    e: String,
}

/// Why jsonwebtoken refused a token whose header and key were fine.
fn rejection(kind: &ErrorKind) -> VerifyError {
    match kind {
        ErrorKind::ExpiredSignature => VerifyError::Expired,
        ErrorKind::ImmatureSignature => VerifyError::NotYetValid,
        ErrorKind::InvalidIssuer => VerifyError::Issuer,
        ErrorKind::InvalidAudience => VerifyError::Audience,
        // A key of another family than the header's algorithm: no signature of this key.
        ErrorKind::InvalidSignature | ErrorKind::InvalidAlgorithm => VerifyError::Signature,
        ErrorKind::InvalidToken | ErrorKind::Base64(_) | ErrorKind::Utf8(_) => {
            VerifyError::Malformed
        }
        _ => VerifyError::Claims,
    }
}
