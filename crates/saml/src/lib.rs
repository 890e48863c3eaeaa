//! Gatehouse's SAML 2.0 adapter: the [`SamlProtocol`] port over
//! [samael](https://docs.rs/samael) 0.0.22, which binds Debian's libxmlsec1 (and libxml2).
//!
//! [`XmlSecSaml::authn_request_url`] writes the `AuthnRequest` a service provider sends
//! (HTTP-Redirect binding). [`XmlSecSaml::verify_response`] checks what comes back, in this
//! order:
//!
//! 1. **Before any XML library that resolves anything sees it** (`prescan`): at most
//!    [`MAX_RESPONSE_BYTES`] of base64, decoding to UTF-8; then one streaming pass of quick-xml
//!    (which expands nothing): no DTD (hence no entity) and no processing instruction, at most
//!    [`MAX_DEPTH`] levels, well-formed, a `ds:Signature` somewhere, and only RSA/ECDSA with
//!    SHA-256/384/512 as `SignatureMethod` and `DigestMethod`. The same pass refuses a wrong
//!    `Destination` or a status other than `Success` on the `samlp:Response` envelope, which
//!    samael checks only when the response itself is signed (nothing is read from there).
//! 2. **samael**: the signatures verify with the trusted certificate (and only with the
//!    algorithms above); the document is reduced to what a verified signature covers (the
//!    signature-wrapping defence: unsigned siblings, wrappers and envelopes are dropped, a
//!    duplicated `ID` is refused); then the issuer, the destination (of a signed response), the
//!    audience, the time windows with [`CLOCK_SKEW`], the issue instant (at most
//!    [`MAX_ISSUE_DELAY`] old), the status and a bearer confirmation whose `Recipient` is the
//!    assertion consumer. samael runs inside `catch_unwind`: a panic is
//!    [`SamlRejection::Failed`], never a dead worker.
//! 3. **The assertion samael returned** (nothing is read from the raw document): see
//!    `assertion::read` for the checks added there (an audience restriction is required; the
//!    bearer confirmations must agree on `InResponseTo`).
//!
//! # What samael does with the classic attacks (observed with samael 0.0.22 and the test IdP)
//!
//! - **Signature wrapping** around a signed *assertion* (an unsigned evil assertion before or
//!   after it, or the signed one hidden in `samlp:Extensions`): the reduction keeps only the
//!   signed assertion, so the answer is the *signed* NameID, never the evil one. Around a signed
//!   *response*, the response's digest no longer matches: refused.
//! - **XSW8** (the signed assertion inside a `ds:Object` of a copied signature) and **a
//!   duplicated `ID`**: refused (the digest does not match; samael refuses duplicate IDs).
//! - **A comment splitting the NameID** (`admin@example.com<!---->.evil.com`, whose signature
//!   still verifies because exclusive C14N drops comments): samael cannot match the verified,
//!   comment-free content back to the document's two text nodes and refuses the response (as a
//!   signature failure, [`SamlRejection::BadSignature`]). Were it to let it through, its reader
//!   (quick-xml's deserializer) joins text across comments: the whole signed value, never the
//!   prefix. Comments *between* elements are harmless and accepted.
//! - **A DTD** (with or without entities): samael's libxml2 would parse it; the pre-scan refuses
//!   it first ([`SamlRejection::Forbidden`]).
//!
//! # Threads
//!
//! libxml2's and xmlsec's global initialisation is samael's (behind its own mutex). The first
//! verification of the process has samael do it, once, before any other verification parses
//! anything (samael alone would initialise xmlsec after its first parse, possibly while other
//! threads parse). After that each call has its own documents, keys and contexts;
//! `tests/threads.rs` verifies from eight threads at once, from a cold start. Note that xmlsec reports a failed verification on stderr itself (a line such as
//! `func=xmlSecOpenSSLEvpDigestVerify:...:data and digest do not match`); the adapter cannot
//! silence it without unsafe code.
//!
//! [`SamlProtocol::verify_response`] does all of its work (decoding, the pre-scan, samael's
//! parse and signature checks, reading the assertion) on tokio's blocking pool, never on an
//! async worker: a large response is tens of milliseconds of CPU. At most
//! [`XmlSecSaml::concurrency`] verifications run at once (one per core by default); the rest wait
//! for a slot as futures, holding no thread. Any thread of the pool may run any verification:
//! libxml2 keeps its per-thread state (errors, parser globals) in thread-local storage it sets up
//! itself on a thread's first use, the global initialisation is done once as above, and nothing
//! is shared between calls, so correctness does not depend on which thread runs a call; the
//! bound is about CPU, not thread safety. Writing an `AuthnRequest` is cheap (a small document,
//! deflated; nothing is signed) and stays on the caller's thread.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Once};

use async_trait::async_trait;
use tokio::sync::Semaphore;

use gatehouse_domain::model::{SamlAssertion, SamlRequest, SamlTrust};
use gatehouse_domain::ports::{BoxError, SamlProtocol, SamlRejection};
use samael::crypto::{AllowedSignatureAlgorithm, CryptoProvider, XmlSec};
use samael::key_info::{KeyInfo, X509Data};
use samael::metadata::{EntityDescriptor, IdpSsoDescriptor, KeyDescriptor, HTTP_POST_BINDING};
use samael::schema::{AuthnRequest, Issuer, NameIdPolicy};
use samael::service_provider::{Error as SamaelError, ServiceProvider, ServiceProviderBuilder};
use time::{Duration, OffsetDateTime};

mod assertion;
mod prescan;

pub use assertion::MAX_FULL_NAME_CHARS;
pub use prescan::{MAX_DEPTH, MAX_RESPONSE_BYTES};

/// How far the identity provider's clock may be from ours: the domain's two minutes.
pub use gatehouse_domain::model::SAML_CLOCK_SKEW as CLOCK_SKEW;

/// How old a response or assertion may be when it arrives (its `IssueInstant`): five minutes.
pub const MAX_ISSUE_DELAY: Duration = Duration::minutes(5);

const EMAIL_ADDRESS: &str = "urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress";
const ENTITY: &str = "urn:oasis:names:tc:SAML:2.0:nameid-format:entity";
const PROTOCOL: &str = "urn:oasis:names:tc:SAML:2.0:protocol";

/// The signature algorithms samael accepts (each with its own digest).
const ALLOWED_ALGORITHMS: [AllowedSignatureAlgorithm; 6] = [
    AllowedSignatureAlgorithm::RsaSha256,
    AllowedSignatureAlgorithm::RsaSha384,
    AllowedSignatureAlgorithm::RsaSha512,
    AllowedSignatureAlgorithm::EcdsaSha256,
    AllowedSignatureAlgorithm::EcdsaSha384,
    AllowedSignatureAlgorithm::EcdsaSha512,
];

/// The [`SamlProtocol`] adapter over samael and libxmlsec1. Holds only the bound on
/// verifications at once: what a response is checked against comes with each call, as a
/// [`SamlTrust`]. Clones share the bound.
#[derive(Clone)]
pub struct XmlSecSaml {
    permits: Arc<Semaphore>,
    concurrency: usize,
}

impl XmlSecSaml {
    /// The adapter, running at most [`Self::default_concurrency`] verifications at once.
    pub fn new() -> Self {
        Self::with_concurrency(Self::default_concurrency())
    }

    /// Verifications at once by default: one per core the process may run on.
    pub fn default_concurrency() -> usize {
        std::thread::available_parallelism().map_or(1, usize::from)
    }

    /// The adapter, running at most `concurrency` verifications at once (at least one).
    pub fn with_concurrency(concurrency: usize) -> Self {
        let concurrency = concurrency.max(1);
        Self {
            permits: Arc::new(Semaphore::new(concurrency)),
            concurrency,
        }
    }

    /// The most verifications that run at once.
    pub fn concurrency(&self) -> usize {
        self.concurrency
    }

    /// [`SamlProtocol::verify_response`]'s checks, on the calling thread and outside the bound:
    /// for a caller already off the async workers (a thread of its own, as in the tests).
    pub fn verify_blocking(
        &self,
        saml_response: &str,
        trust: &SamlTrust,
    ) -> Result<SamlAssertion, SamlRejection> {
        let xml = prescan::decode(saml_response)?;
        match catch_unwind(AssertUnwindSafe(|| verify(&xml, trust))) {
            Ok(verified) => verified,
            Err(_) => Err(SamlRejection::Failed(Box::new(AdapterError::Panicked))),
        }
    }
}

impl Default for XmlSecSaml {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for XmlSecSaml {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("XmlSecSaml")
            .field("concurrency", &self.concurrency)
            .finish()
    }
}

/// A failure of the adapter itself, for [`SamlRejection::Failed`]. Holds no document and no
/// certificate.
#[derive(Debug, thiserror::Error)]
enum AdapterError {
    #[error("samael panicked while verifying a response")]
    Panicked,
    #[error("the configured certificate is not usable as a signing certificate: {0}")]
    Certificate(&'static str),
    #[error("samael could not be configured: {0}")]
    Configuration(String),
    #[error("a time is outside the range samael writes")]
    TimeOutOfRange,
    #[error("writing the AuthnRequest failed: {0}")]
    AuthnRequest(String),
    #[error("no verification slot: {0}")]
    Closed(#[from] tokio::sync::AcquireError),
    #[error("the verification did not finish: {0}")]
    Aborted(#[from] tokio::task::JoinError),
}

#[async_trait]
impl SamlProtocol for XmlSecSaml {
    fn authn_request_url(
        &self,
        request: &SamlRequest,
        trust: &SamlTrust,
    ) -> Result<String, BoxError> {
        let authn_request = AuthnRequest {
            id: request.id.as_str().to_owned(),
            version: "2.0".to_owned(),
            issue_instant: to_chrono(request.created_at).ok_or(AdapterError::TimeOutOfRange)?,
            destination: Some(trust.idp_sso_url.as_str().to_owned()),
            issuer: Some(Issuer {
                format: Some(ENTITY.to_owned()),
                value: Some(trust.sp_entity_id.clone()),
                ..Issuer::default()
            }),
            name_id_policy: Some(NameIdPolicy {
                format: Some(EMAIL_ADDRESS.to_owned()),
                allow_create: Some(true),
                sp_name_qualifier: None,
            }),
            assertion_consumer_service_url: Some(trust.acs_url.clone()),
            protocol_binding: Some(HTTP_POST_BINDING.to_owned()),
            ..AuthnRequest::default()
        };
        // samael's HTTP-Redirect helper: deflate, base64, then SAMLRequest and RelayState
        // appended to the destination's own query.
        let url = authn_request
            .redirect(request.id.as_str())
            .map_err(|error| AdapterError::AuthnRequest(error.to_string()))?
            .ok_or_else(|| AdapterError::AuthnRequest("no destination".to_owned()))?;
        Ok(url.into())
    }

    async fn verify_response(
        &self,
        saml_response: &str,
        trust: &SamlTrust,
    ) -> Result<SamlAssertion, SamlRejection> {
        let failed = |error: AdapterError| SamlRejection::Failed(Box::new(error));
        // An oversized response is refused at once, without a copy or a wait for a slot.
        if saml_response.len() > MAX_RESPONSE_BYTES {
            return Err(SamlRejection::TooLarge(MAX_RESPONSE_BYTES));
        }
        // The slot first, so that a queued verification holds no thread; the permit moves into
        // the work and is released when it ends, even if the request was abandoned meanwhile.
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|error| failed(error.into()))?;
        let saml = self.clone();
        let (saml_response, trust) = (saml_response.to_owned(), trust.clone());
        tokio::task::spawn_blocking(move || {
            let verified = saml.verify_blocking(&saml_response, &trust);
            drop(permit);
            verified
        })
        .await
        .map_err(|error| failed(error.into()))?
    }
}

fn verify(xml: &str, trust: &SamlTrust) -> Result<SamlAssertion, SamlRejection> {
    prescan::scan(xml, &trust.acs_url)?;
    let certificate = certificate_base64(trust.idp_certificate.pem())
        .ok_or_else(|| SamlRejection::Failed(Box::new(AdapterError::Certificate("not PEM"))))?;
    initialise_once(&certificate);
    let service_provider = service_provider(trust, certificate)?;
    let verified = service_provider
        .parse_xml_response(xml, None)
        .map_err(rejection)?;
    assertion::read(&verified, trust)
}

/// samael's global initialisation of libxml2 and xmlsec, once per process and before any
/// other verification parses anything. samael initialises xmlsec lazily, after its first
/// libxml2 parse, so concurrent first calls could have xmlsec initialising (and registering
/// its libxml2 callbacks) while another thread parses; no failure was seen without this (the
/// eight-thread test passes either way), it only takes the race off the table. Verifying a tiny
/// unsigned document with a real certificate does it without a word on stderr.
fn initialise_once(certificate_base64: &str) {
    static INITIALISED: Once = Once::new();
    INITIALISED.call_once(|| {
        let _ = catch_unwind(|| {
            if let Ok(der) = samael::crypto::decode_x509_cert(certificate_base64) {
                let _ = XmlSec::verify_signed_xml("<initialise/>", &der, None);
            }
        });
    });
}

/// The base64 body of a PEM certificate, as metadata carries it in `ds:X509Certificate`.
fn certificate_base64(pem: &str) -> Option<String> {
    let body: String = pem
        .lines()
        .map(str::trim)
        .skip_while(|line| !line.starts_with("-----BEGIN CERTIFICATE-----"))
        .skip(1)
        .take_while(|line| !line.starts_with("-----END CERTIFICATE-----"))
        .collect();
    (!body.is_empty()).then_some(body)
}

/// samael's service provider for one organization: its entity id and assertion consumer, and
/// the identity provider's metadata reduced to its entity id and signing certificate.
fn service_provider(
    trust: &SamlTrust,
    certificate_base64: String,
) -> Result<ServiceProvider, SamlRejection> {
    let idp = IdpSsoDescriptor {
        id: None,
        valid_until: None,
        cache_duration: None,
        protocol_support_enumeration: Some(PROTOCOL.to_owned()),
        error_url: None,
        signature: None,
        key_descriptors: vec![KeyDescriptor {
            key_use: Some("signing".to_owned()),
            key_info: KeyInfo {
                id: None,
                x509_data: Some(X509Data {
                    certificates: vec![certificate_base64],
                }),
            },
            encryption_methods: None,
        }],
        organization: None,
        contact_people: Vec::new(),
        artifact_resolution_service: Vec::new(),
        single_logout_services: Vec::new(),
        manage_name_id_services: Vec::new(),
        name_id_formats: Vec::new(),
        want_authn_requests_signed: None,
        single_sign_on_services: Vec::new(),
        name_id_mapping_services: Vec::new(),
        assertion_id_request_services: Vec::new(),
        attribute_profiles: Vec::new(),
        attributes: Vec::new(),
    };
    let metadata = EntityDescriptor {
        entity_id: Some(trust.idp_entity_id.as_str().to_owned()),
        idp_sso_descriptors: Some(vec![idp]),
        ..EntityDescriptor::default()
    };
    ServiceProviderBuilder::default()
        .entity_id(trust.sp_entity_id.clone())
        .acs_url(trust.acs_url.clone())
        .idp_metadata(metadata)
        // The domain checks InResponseTo against the requests it stored.
        .allow_idp_initiated(true)
        .max_clock_skew(chrono::Duration::seconds(CLOCK_SKEW.whole_seconds()))
        .max_issue_delay(chrono::Duration::seconds(MAX_ISSUE_DELAY.whole_seconds()))
        .allowed_signature_algorithms(ALLOWED_ALGORITHMS.to_vec())
        .build()
        .map_err(|error| {
            SamlRejection::Failed(Box::new(AdapterError::Configuration(error.to_string())))
        })
}

fn to_chrono(at: OffsetDateTime) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::from_timestamp(at.unix_timestamp(), at.nanosecond())
}

/// samael's error as a rejection: a signature that does not verify (or whose reduction fails)
/// is [`SamlRejection::BadSignature`]; a failed protocol check is [`SamlRejection::Invalid`]
/// with a reason of our own words (no document, certificate or attacker-chosen text);
/// samael failing to use our configuration is [`SamlRejection::Failed`].
fn rejection(error: SamaelError) -> SamlRejection {
    let invalid = |why: &str| SamlRejection::Invalid(why.to_owned());
    match error {
        SamaelError::FailedToValidateSignature => SamlRejection::BadSignature,
        SamaelError::DestinationValidationError { .. } => {
            invalid("the response's Destination is not this service's assertion consumer")
        }
        SamaelError::ResponseIssuerMismatch { .. } => {
            invalid("the response's Issuer is not the identity provider")
        }
        SamaelError::AssertionIssuerMismatch { .. } => {
            invalid("the assertion's Issuer is not the identity provider")
        }
        SamaelError::ResponseExpired { .. } => invalid("the response was issued too long ago"),
        SamaelError::AssertionExpired { .. } => invalid("the assertion was issued too long ago"),
        SamaelError::AssertionConditionExpired { .. } => {
            invalid("the assertion's conditions have expired (NotOnOrAfter)")
        }
        SamaelError::AssertionConditionExpiredBefore { .. } => {
            invalid("the assertion's conditions are not valid yet (NotBefore)")
        }
        SamaelError::AssertionConditionAudienceRestrictionFailed { .. } => {
            invalid("the assertion's audience is not this service provider")
        }
        SamaelError::AssertionBearerSubjectConfirmationMissing => {
            invalid("the assertion has no bearer subject confirmation")
        }
        SamaelError::AssertionSubjectConfirmationMissing => invalid(
            "the assertion's bearer confirmation has no SubjectConfirmationData or NotOnOrAfter",
        ),
        SamaelError::AssertionSubjectConfirmationExpired { .. } => {
            invalid("the assertion's subject confirmation has expired (NotOnOrAfter)")
        }
        SamaelError::AssertionSubjectConfirmationExpiredBefore { .. } => {
            invalid("the assertion's subject confirmation is not valid yet (NotBefore)")
        }
        SamaelError::AssertionRecipientMismatch { .. } => {
            invalid("the subject confirmation's Recipient is not this service's assertion consumer")
        }
        SamaelError::AssertionInResponseToInvalid { .. }
        | SamaelError::ResponseInResponseToInvalid { .. } => {
            invalid("the response answers no request of this service")
        }
        SamaelError::ResponseBadStatusCode { .. } => {
            invalid("the identity provider's status is not Success")
        }
        SamaelError::UnexpectedError => invalid("the response holds no assertion"),
        SamaelError::EncryptedAssertionsNotYetSupported
        | SamaelError::MissingPrivateKeySP
        | SamaelError::MissingEncryptedKeyInfo
        | SamaelError::MissingEncryptedValueInfo
        | SamaelError::EncryptedAssertionKeyMethodUnsupported { .. }
        | SamaelError::EncryptedAssertionValueMethodUnsupported { .. }
        | SamaelError::EncryptedAssertionInvalid
        | SamaelError::FailedToDecryptAssertion => {
            invalid("encrypted assertions are not supported")
        }
        SamaelError::DeserializeResponseError
        | SamaelError::FailedToParseSamlResponse(_)
        | SamaelError::FailedToParseSamlAssertion(_)
        | SamaelError::CryptoXmlError(_) => {
            invalid("the signed content is not a SAML response or assertion")
        }
        SamaelError::FailedToParseCert { .. } | SamaelError::UnsupportedKey => {
            SamlRejection::Failed(Box::new(AdapterError::Certificate(
                "samael could not read it",
            )))
        }
        other => SamlRejection::Failed(Box::new(AdapterError::Configuration(
            error_kind(&other).to_owned(),
        ))),
    }
}

/// A fixed description of the samael errors left: none of them carries the document.
fn error_kind(error: &SamaelError) -> &'static str {
    match error {
        SamaelError::MissingAcsUrl => "no assertion consumer URL",
        SamaelError::MissingSloUrl => "no single logout URL",
        SamaelError::CryptoProviderError(_) => "the crypto provider failed",
        _ => "an unexpected samael error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatehouse_domain::model::{
        IdpCertificate, IdpEntityId, IdpSsoUrl, OrganizationId, ReturnPath, SamlRequestId,
    };
    use std::io::Read as _;

    // A self-signed RSA certificate whose key was thrown away
    // (openssl req -x509 -newkey rsa:2048 -nodes -days 36500).
    const CERTIFICATE: &str = include_str!("../tests/data/certificate.pem");

    fn trust(sso_url: &str) -> SamlTrust {
        SamlTrust {
            idp_entity_id: IdpEntityId::parse("https://idp.example.com/metadata").unwrap(),
            idp_certificate: IdpCertificate::from_stored(CERTIFICATE).unwrap(),
            idp_sso_url: IdpSsoUrl::parse(sso_url).unwrap(),
            sp_entity_id: "https://sp.example.com/metadata".to_owned(),
            acs_url: "https://sp.example.com/acs".to_owned(),
        }
    }

    fn request() -> SamlRequest {
        let created_at = time::macros::datetime!(2030-01-02 03:04:05.678 UTC);
        SamlRequest {
            id: SamlRequestId::generate(uuid::Uuid::from_u128(0xabc)),
            organization_id: OrganizationId::from_uuid(uuid::Uuid::from_u128(1)),
            return_to: ReturnPath::parse("/oauth/authorize?client_id=a&state=b").unwrap(),
            created_at,
            expires_at: created_at + gatehouse_domain::model::SAML_REQUEST_TTL,
        }
    }

    fn query(url: &url::Url, name: &str) -> Vec<String> {
        url.query_pairs()
            .filter(|(key, _)| key == name)
            .map(|(_, value)| value.into_owned())
            .collect()
    }

    #[test]
    fn the_authn_request_is_ours_and_keeps_the_idp_query() {
        let trust = trust("https://idp.example.com/sso?tenant=a%20b&x=1");
        let url = XmlSecSaml::new()
            .authn_request_url(&request(), &trust)
            .unwrap();
        let url = url::Url::parse(&url).unwrap();
        assert_eq!(url.host_str(), Some("idp.example.com"));
        assert_eq!(url.path(), "/sso");
        assert_eq!(query(&url, "tenant"), ["a b"]);
        assert_eq!(query(&url, "x"), ["1"]);
        assert_eq!(query(&url, "RelayState"), [request().id.as_str()]);

        let [saml_request] = query(&url, "SAMLRequest").try_into().unwrap();
        let deflated =
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, saml_request)
                .unwrap();
        let mut xml = String::new();
        flate2::read::DeflateDecoder::new(&deflated[..])
            .read_to_string(&mut xml)
            .unwrap();
        for expected in [
            r#"ID="_00000000000000000000000000000abc""#,
            r#"IssueInstant="2030-01-02T03:04:05.678Z""#,
            r#"Destination="https://idp.example.com/sso?tenant=a%20b&amp;x=1""#,
            r#"AssertionConsumerServiceURL="https://sp.example.com/acs""#,
            r#"ProtocolBinding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-POST""#,
            ">https://sp.example.com/metadata</saml2:Issuer>",
            r#"Format="urn:oasis:names:tc:SAML:1.1:nameid-format:emailAddress""#,
            r#"AllowCreate="true""#,
        ] {
            assert!(xml.contains(expected), "{expected} not in {xml}");
        }
    }

    #[test]
    fn the_certificate_body_is_the_pem_base64() {
        let body = certificate_base64(CERTIFICATE).unwrap();
        assert!(!body.contains('-') && !body.contains('\n'));
        assert!(samael::crypto::decode_x509_cert(&body).is_ok());
        assert_eq!(certificate_base64("garbage"), None);
    }

    /// A signature that verifies nothing, base64 as posted.
    fn unverifiable() -> String {
        let xml = r#"<r xmlns:ds="http://www.w3.org/2000/09/xmldsig#"><ds:Signature><ds:SignedInfo><ds:SignatureMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"/></ds:SignedInfo></ds:Signature></r>"#;
        base64::Engine::encode(&base64::engine::general_purpose::STANDARD, xml)
    }

    #[tokio::test]
    async fn a_signature_that_verifies_nothing_is_refused_without_a_panic() {
        let trust = trust("https://idp.example.com/sso");
        let rejection = XmlSecSaml::new()
            .verify_response(&unverifiable(), &trust)
            .await
            .unwrap_err();
        assert!(
            matches!(rejection, SamlRejection::BadSignature),
            "{rejection:?}"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_verification_waits_for_a_free_slot_without_blocking_the_runtime() {
        let saml = XmlSecSaml::with_concurrency(1);
        let held = Arc::clone(&saml.permits).acquire_owned().await.unwrap();
        let waiting = tokio::spawn({
            let saml = saml.clone();
            async move {
                let trust = trust("https://idp.example.com/sso");
                saml.verify_response(&unverifiable(), &trust).await
            }
        });
        // The one runtime thread stays free: this task runs while the verification waits.
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert!(!waiting.is_finished(), "verified without a slot");
        drop(held);
        let rejection = waiting.await.unwrap().unwrap_err();
        assert!(
            matches!(rejection, SamlRejection::BadSignature),
            "{rejection:?}"
        );
        assert_eq!(saml.permits.available_permits(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn abandoned_and_concurrent_verifications_give_their_slots_back() {
        let saml = XmlSecSaml::with_concurrency(2);
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let saml = saml.clone();
                tokio::spawn(async move {
                    let trust = trust("https://idp.example.com/sso");
                    saml.verify_response(&unverifiable(), &trust).await
                })
            })
            .collect();
        // Half are abandoned, wherever they are (waiting, verifying or done).
        for (i, task) in tasks.into_iter().enumerate() {
            if i % 2 == 0 {
                task.abort();
                let _ = task.await;
            } else {
                let rejection = task.await.unwrap().unwrap_err();
                assert!(matches!(rejection, SamlRejection::BadSignature));
            }
        }
        // Every slot comes back: a verification after them all still runs.
        let trust = trust("https://idp.example.com/sso");
        let after = tokio::time::timeout(
            std::time::Duration::from_secs(60),
            saml.verify_response(&unverifiable(), &trust),
        )
        .await;
        assert!(
            matches!(after, Ok(Err(SamlRejection::BadSignature))),
            "a slot leaked: {after:?}"
        );
    }

    #[tokio::test]
    async fn an_oversized_response_is_refused_without_waiting_for_a_slot() {
        let saml = XmlSecSaml::with_concurrency(1);
        let _held = Arc::clone(&saml.permits).acquire_owned().await.unwrap();
        let trust = trust("https://idp.example.com/sso");
        let huge = "A".repeat(MAX_RESPONSE_BYTES + 1);
        let rejection = saml.verify_response(&huge, &trust).await.unwrap_err();
        assert!(
            matches!(rejection, SamlRejection::TooLarge(_)),
            "{rejection:?}"
        );
    }

    #[test]
    fn the_bound_is_at_least_one() {
        assert_eq!(XmlSecSaml::with_concurrency(0).concurrency(), 1);
        assert_eq!(
            XmlSecSaml::new().concurrency(),
            XmlSecSaml::default_concurrency()
        );
    }

    #[test]
    fn debug_shows_nothing_secret() {
        assert_eq!(
            format!("{:?}", XmlSecSaml::with_concurrency(3)),
            "XmlSecSaml { concurrency: 3 }"
        );
        let failed = SamlRejection::Failed(Box::new(AdapterError::Panicked));
        assert!(!format!("{failed:?}").contains("BEGIN"));
    }
}
