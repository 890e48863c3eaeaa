//! A stand-in for Gatehouse in a product's tests (feature `test-issuer`): RSA keys generated on
//! the spot, a key set served on loopback, and tokens signed with them.
//!
//! ```no_run
//! # async fn test() -> Result<(), Box<dyn std::error::Error>> {
//! use gatehouse_verify::{testing::TestIssuer, Verifier};
//!
//! let issuer = TestIssuer::start("https://id.example.test").await?;
//! let verifier = Verifier::builder(issuer.issuer()).jwks_url(issuer.jwks_url()).build()?;
//! let claims = verifier.verify(&issuer.sign(&issuer.claims())).await?;
//! assert_eq!(claims.email(), Some("member@example.com"));
//! # Ok(())
//! # }
//! ```
// Test support: a key that cannot be generated or a token that cannot be signed is the test's
// failure, said at once.
#![allow(clippy::expect_used)]

use std::{
    fmt, io,
    net::SocketAddr,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex, PoisonError,
    },
};

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rsa::{pkcs1::EncodeRsaPrivateKey as _, traits::PublicKeyParts as _, RsaPrivateKey};
use serde_json::{json, Value};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::TcpListener,
    task::JoinHandle,
};

/// An RS256 signing key of the test's own, with its `kid`.
#[derive(Clone)]
pub struct TestKey {
    kid: String,
    encoding: EncodingKey,
    jwk: Value,
}

impl fmt::Debug for TestKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestKey").field("kid", &self.kid).finish()
    }
}

impl TestKey {
    /// A fresh 2048-bit RSA key named `kid`.
    pub fn generate(kid: &str) -> Self {
        let private =
            RsaPrivateKey::new(&mut rand::rngs::OsRng, 2048).expect("an RSA key is generated");
        let der = private.to_pkcs1_der().expect("the key is DER-encoded");
        Self {
            kid: kid.to_owned(),
            encoding: EncodingKey::from_rsa_der(der.as_bytes()),
            jwk: json!({
                "kty": "RSA",
                "use": "sig",
                "alg": "RS256",
                "kid": kid,
                "n": URL_SAFE_NO_PAD.encode(private.n().to_bytes_be()),
                "e": URL_SAFE_NO_PAD.encode(private.e().to_bytes_be()),
            }),
        }
    }

    /// The key's id.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The public key, as a JWKS lists it.
    pub fn jwk(&self) -> &Value {
        &self.jwk
    }

    /// The claims signed with RS256 under this key's `kid`.
    pub fn sign(&self, claims: &Value) -> String {
        self.sign_as(&self.kid, claims)
    }

    /// The claims signed with this key under another `kid` (a forgery, for tests).
    pub fn sign_as(&self, kid: &str, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = Some(kid.to_owned());
        jsonwebtoken::encode(&header, claims, &self.encoding).expect("the claims are signed")
    }
}

/// Gatehouse as a product's tests see it: an issuer URL and a key set served on
/// `127.0.0.1`, which counts its fetches. The server stops when this is dropped.
pub struct TestIssuer {
    issuer: String,
    address: SocketAddr,
    published: Arc<Mutex<Vec<TestKey>>>,
    fetches: Arc<AtomicUsize>,
    server: JoinHandle<()>,
}

impl fmt::Debug for TestIssuer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestIssuer")
            .field("issuer", &self.issuer)
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl Drop for TestIssuer {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl TestIssuer {
    /// Serves a key set of one fresh key (`k1`) for tokens of `issuer`.
    pub async fn start(issuer: &str) -> io::Result<Self> {
        Self::start_with(issuer, vec![TestKey::generate("k1")]).await
    }

    /// Serves these keys (the last one signs) for tokens of `issuer`.
    pub async fn start_with(issuer: &str, keys: Vec<TestKey>) -> io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let published = Arc::new(Mutex::new(keys));
        let fetches = Arc::new(AtomicUsize::new(0));
        let server = tokio::spawn(serve(listener, published.clone(), fetches.clone()));
        Ok(Self {
            issuer: issuer.to_owned(),
            address,
            published,
            fetches,
            server,
        })
    }

    /// The issuer its tokens name.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// Where its key set is served.
    pub fn jwks_url(&self) -> String {
        format!("http://{}/.well-known/jwks.json", self.address)
    }

    /// How many times the key set was fetched.
    pub fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }

    /// The key that signs now (the last published).
    pub fn signing_key(&self) -> TestKey {
        let keys = self
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        keys.last().cloned().expect("a key is published")
    }

    /// Publishes `key` beside the others; it signs from now on.
    pub fn rotate_to(&self, key: TestKey) {
        let mut keys = self
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        keys.push(key);
    }

    /// The claims signed with the signing key.
    pub fn sign(&self, claims: &Value) -> String {
        self.signing_key().sign(claims)
    }

    /// The claims of a member's organization-scoped access token from this issuer, valid for
    /// five minutes from now (change what the test needs).
    pub fn claims(&self) -> Value {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        json!({
            "iss": self.issuer,
            "sub": "0190a0a0-0000-7000-8000-000000000001",
            "aud": "gatehouse",
            "iat": now,
            "nbf": now,
            "exp": now + 300,
            "jti": "0190a0a0-0000-7000-8000-0000000000aa",
            "sid": "0190a0a0-0000-7000-8000-0000000000bb",
            "email": "member@example.com",
            "amr": ["pwd"],
            "org_id": "0190a0a0-0000-7000-8000-0000000000cc",
            "org_role": "member",
            "org_permissions": [
                "organization.read",
                "organization.members.read",
                "applications.read",
                "organization.members.invite",
                "api_keys.create",
            ],
        })
    }
}

/// Answers every request with the published key set, one request a connection.
async fn serve(
    listener: TcpListener,
    published: Arc<Mutex<Vec<TestKey>>>,
    fetches: Arc<AtomicUsize>,
) {
    while let Ok((mut stream, _)) = listener.accept().await {
        let published = published.clone();
        let fetches = fetches.clone();
        tokio::spawn(async move {
            let mut head = Vec::new();
            let mut buffer = [0; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buffer).await {
                    Ok(0) | Err(_) => return,
                    Ok(read) => head.extend_from_slice(&buffer[..read]),
                }
            }
            fetches.fetch_add(1, Ordering::SeqCst);
            let body = {
                let keys = published.lock().unwrap_or_else(PoisonError::into_inner);
                json!({ "keys": keys.iter().map(|key| key.jwk.clone()).collect::<Vec<_>>() })
                    .to_string()
            };
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.shutdown().await;
        });
    }
}
