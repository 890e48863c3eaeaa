//! The adapter against a real identity provider: pysaml2 signing with xmlsec1
//! (`gatehouse_testkit::saml_idp`), one IdP for the whole file. Needs the IdP's Python
//! (`GATEHOUSE_TEST_PYTHON`, with `scripts/test-requirements.txt`) and Debian's `xmlsec1`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::OnceLock;

use base64::Engine as _;
use gatehouse_domain::model::{
    IdpCertificate, IdpEntityId, IdpSsoUrl, OrganizationId, ReturnPath, SamlAssertion, SamlRequest,
    SamlRequestId, SamlTrust, SAML_REQUEST_TTL,
};
use gatehouse_domain::ports::{SamlProtocol, SamlRejection};
use gatehouse_saml::{XmlSecSaml, MAX_DEPTH, MAX_RESPONSE_BYTES};
use gatehouse_testkit::saml_idp::TestIdp;
use serde_json::{json, Value};
use time::{Duration, OffsetDateTime};

const ACS: &str = "https://gatehouse.example.com/sso/saml/0196/acs";
const SP: &str = "https://gatehouse.example.com/sso/saml/0196/metadata";
const REQUEST_ID: &str = "_00000000000000000000000000000abc";
const EMAIL: &str = "ada@example.com";
const EVIL: &str = "mallory@example.com";

fn idp() -> &'static TestIdp {
    static IDP: OnceLock<TestIdp> = OnceLock::new();
    IDP.get_or_init(TestIdp::start)
}

fn trust() -> SamlTrust {
    let idp = idp();
    SamlTrust {
        idp_entity_id: IdpEntityId::parse(idp.entity_id()).unwrap(),
        idp_certificate: IdpCertificate::parse(idp.certificate(), OffsetDateTime::now_utc())
            .unwrap(),
        idp_sso_url: IdpSsoUrl::parse(idp.sso_url()).unwrap(),
        sp_entity_id: SP.to_owned(),
        acs_url: ACS.to_owned(),
    }
}

/// A response from the IdP: for Ada, answering REQUEST_ID, with her name; `overrides` replace
/// or add fields (see idp.py's `build_response`).
async fn crafted(overrides: Value) -> Value {
    let mut spec = json!({
        "acs_url": ACS,
        "audience": SP,
        "email": EMAIL,
        "in_response_to": REQUEST_ID,
        "name": "Ada Lovelace",
    });
    for (key, value) in overrides.as_object().unwrap() {
        spec[key] = value.clone();
    }
    idp().respond(spec).await
}

fn verify(saml_response: &str) -> Result<SamlAssertion, SamlRejection> {
    XmlSecSaml::new().verify_blocking(saml_response, &trust())
}

fn verify_crafted(response: &Value) -> Result<SamlAssertion, SamlRejection> {
    verify(response["saml_response"].as_str().unwrap())
}

fn encode(xml: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(xml)
}

/// The assertion answers Ada's request, with the signed assertion's id.
fn assert_ada(assertion: &SamlAssertion, response: &Value) {
    assert_eq!(assertion.name_id, EMAIL);
    assert_eq!(assertion.id, response["assertion_id"].as_str().unwrap());
    assert_eq!(assertion.in_response_to.as_deref(), Some(REQUEST_ID));
    assert_eq!(assertion.full_name.as_deref(), Some("Ada Lovelace"));
    // The IdP's NotOnOrAfter is 300 s from now (whole seconds).
    let expected = OffsetDateTime::now_utc() + Duration::seconds(300);
    assert!(
        (assertion.valid_until - expected).abs() < Duration::seconds(10),
        "{} is not about {expected}",
        assertion.valid_until
    );
}

fn invalid_because(result: Result<SamlAssertion, SamlRejection>, words: &str) {
    match result {
        Err(SamlRejection::Invalid(why)) => assert!(why.contains(words), "{why:?}"),
        other => panic!("expected Invalid({words:?}…), got {other:?}"),
    }
}

// --- accepted -------------------------------------------------------------------------------

#[tokio::test]
async fn a_response_signed_on_the_assertion() {
    let response = crafted(json!({"sign": "assertion"})).await;
    assert_ada(&verify_crafted(&response).unwrap(), &response);
}

/// The port's own path: on the blocking pool, one verification at a time, while the one
/// runtime thread goes on running other tasks.
#[tokio::test(flavor = "current_thread")]
async fn responses_verified_through_the_port_one_at_a_time() {
    let response = crafted(json!({"sign": "both"})).await;
    let saml_response = response["saml_response"].as_str().unwrap().to_owned();
    let saml = XmlSecSaml::with_concurrency(1);
    let trust = trust();
    let ticks = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let ticker = tokio::spawn({
        let ticks = ticks.clone();
        async move {
            loop {
                ticks.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::task::yield_now().await;
            }
        }
    });
    // Four at once in this one task: were the work done on this thread, the ticker could not
    // run before they were all done.
    let verify = || saml.verify_response(&saml_response, &trust);
    let (a, b, c, d) = tokio::join!(verify(), verify(), verify(), verify());
    let ticked = ticks.load(std::sync::atomic::Ordering::SeqCst);
    ticker.abort();
    for assertion in [a, b, c, d] {
        assert_ada(&assertion.unwrap(), &response);
    }
    assert!(ticked > 0, "the runtime thread was blocked");
}

#[tokio::test]
async fn a_response_signed_on_the_response() {
    let response = crafted(json!({"sign": "response"})).await;
    assert_ada(&verify_crafted(&response).unwrap(), &response);
}

#[tokio::test]
async fn a_response_signed_on_both() {
    let response = crafted(json!({"sign": "both"})).await;
    assert_ada(&verify_crafted(&response).unwrap(), &response);
}

#[tokio::test]
async fn an_unsolicited_response_has_no_in_response_to_and_no_name_without_one() {
    let response = crafted(json!({"in_response_to": null, "name": null})).await;
    let assertion = verify_crafted(&response).unwrap();
    assert_eq!(assertion.name_id, EMAIL);
    assert_eq!(assertion.in_response_to, None);
    assert_eq!(assertion.full_name, None);
}

#[tokio::test]
async fn times_within_the_clock_skew_are_accepted() {
    // Expired a minute ago, or valid in a minute: within the two minutes of skew.
    for spec in [
        json!({"not_on_or_after_offset": -60}),
        json!({"not_before_offset": 60}),
    ] {
        let response = crafted(spec.clone()).await;
        assert!(verify_crafted(&response).is_ok(), "{spec}");
    }
}

#[tokio::test]
async fn comments_between_elements_are_harmless() {
    let response = crafted(json!({"sign": "both"})).await;
    let xml = response["xml"].as_str().unwrap();
    let at = xml.find("<saml:Subject>").unwrap();
    let commented = format!("{}<!-- a comment -->{}", &xml[..at], &xml[at..]);
    let assertion = verify(&encode(&commented)).unwrap();
    assert_ada(&assertion, &response);
}

#[tokio::test]
async fn base64_wrapped_in_lines_is_read() {
    let response = crafted(json!({})).await;
    let encoded = response["saml_response"].as_str().unwrap();
    let wrapped: Vec<String> = encoded
        .as_bytes()
        .chunks(76)
        .map(|line| String::from_utf8(line.to_vec()).unwrap())
        .collect();
    assert_ada(&verify(&wrapped.join("\r\n")).unwrap(), &response);
}

// --- our AuthnRequest, read by a real IdP ---------------------------------------------------

#[tokio::test]
async fn the_authn_request_is_accepted_by_the_idp() {
    let created_at = OffsetDateTime::now_utc();
    let request = SamlRequest {
        id: SamlRequestId::generate(uuid::Uuid::from_u128(0x0123_4567_89ab_cdef)),
        organization_id: OrganizationId::from_uuid(uuid::Uuid::from_u128(0x0196)),
        return_to: ReturnPath::parse("/oauth/authorize?client_id=app&state=x%20y").unwrap(),
        created_at,
        expires_at: created_at + SAML_REQUEST_TTL,
    };
    let trust = trust();
    let url = XmlSecSaml::new()
        .authn_request_url(&request, &trust)
        .unwrap();
    assert!(
        url.starts_with(&format!("{}?SAMLRequest=", idp().sso_url())),
        "{url}"
    );

    let answer = idp().answer(&url, "grace@example.com").await;
    assert_eq!(answer["request_id"], request.id.as_str());
    assert_eq!(answer["acs_url"], ACS);
    assert_eq!(answer["audience"], SP);
    assert_eq!(answer["relay_state"], request.id.as_str());

    // And its answer is one the adapter accepts.
    let assertion = verify(answer["saml_response"].as_str().unwrap()).unwrap();
    assert_eq!(assertion.name_id, "grace@example.com");
    assert_eq!(
        assertion.in_response_to.as_deref(),
        Some(request.id.as_str())
    );
    assert_eq!(assertion.id, answer["assertion_id"].as_str().unwrap());
}

// --- refused: signatures --------------------------------------------------------------------

#[tokio::test]
async fn an_unsigned_response_is_refused() {
    let response = crafted(json!({"sign": "none"})).await;
    assert!(matches!(
        verify_crafted(&response),
        Err(SamlRejection::Unsigned)
    ));
}

#[tokio::test]
async fn a_response_signed_by_another_key_is_refused() {
    for sign in ["assertion", "response", "both"] {
        let response = crafted(json!({"sign": sign, "key": "other"})).await;
        let result = verify_crafted(&response);
        assert!(
            matches!(result, Err(SamlRejection::BadSignature)),
            "{sign}: {result:?}"
        );
    }
}

#[tokio::test]
async fn sha1_is_refused() {
    for sign in ["assertion", "response"] {
        let response = crafted(json!({"sign": sign, "algorithm": "sha1"})).await;
        let result = verify_crafted(&response);
        assert!(
            matches!(result, Err(SamlRejection::WeakAlgorithm)),
            "{sign}: {result:?}"
        );
    }
}

// --- refused: the protocol's checks ---------------------------------------------------------

#[tokio::test]
async fn an_expired_assertion_is_refused() {
    // NotOnOrAfter three minutes ago: past the two minutes of skew.
    let response = crafted(json!({"not_on_or_after_offset": -180})).await;
    invalid_because(verify_crafted(&response), "expired");
}

#[tokio::test]
async fn a_not_yet_valid_assertion_is_refused() {
    // NotBefore in five minutes: past the two minutes of skew.
    let response = crafted(json!({"not_before_offset": 300})).await;
    invalid_because(verify_crafted(&response), "not valid yet");
}

#[tokio::test]
async fn a_response_issued_too_long_ago_is_refused() {
    let response = crafted(json!({"issue_instant_offset": -600})).await;
    invalid_because(verify_crafted(&response), "issued too long ago");
}

#[tokio::test]
async fn another_audience_is_refused() {
    let response = crafted(json!({"audience": "https://other-sp.example.com/metadata"})).await;
    invalid_because(verify_crafted(&response), "audience");
}

#[tokio::test]
async fn another_destination_is_refused_signed_or_not() {
    // Signed on the assertion only, the envelope's Destination is unsigned: the pre-scan
    // refuses it. Signed on the response, samael does.
    for sign in ["assertion", "response", "both"] {
        let response =
            crafted(json!({"sign": sign, "destination": "https://evil.example.com/acs"})).await;
        invalid_because(verify_crafted(&response), "Destination");
    }
}

#[tokio::test]
async fn another_recipient_is_refused() {
    let response = crafted(json!({"recipient": "https://evil.example.com/acs"})).await;
    invalid_because(verify_crafted(&response), "Recipient");
    let response = crafted(json!({"recipient": null})).await;
    invalid_because(verify_crafted(&response), "Recipient");
}

#[tokio::test]
async fn another_issuer_is_refused() {
    for sign in ["assertion", "response", "both"] {
        let response =
            crafted(json!({"sign": sign, "issuer": "https://evil.example.com/idp"})).await;
        invalid_because(verify_crafted(&response), "Issuer");
    }
}

#[tokio::test]
async fn a_failed_status_is_refused() {
    // Signed on the assertion only: the envelope (and its status) is unsigned, and samael would
    // drop it; the pre-scan refuses a status other than Success.
    let response = crafted(json!({"sign": "assertion"})).await;
    let xml = response["xml"].as_str().unwrap();
    let success = "urn:oasis:names:tc:SAML:2.0:status:Success";
    assert_eq!(xml.matches(success).count(), 1, "{xml}");
    let failed = xml.replace(success, "urn:oasis:names:tc:SAML:2.0:status:Requester");
    invalid_because(verify(&encode(&failed)), "status");
}

// --- attacks --------------------------------------------------------------------------------

/// An unsigned evil assertion next to the signed one (before it, after it, or with the signed
/// one hidden in samlp:Extensions): with the assertion signed, samael reduces the document to
/// the signed assertion, so the answer is Ada's, the signed one; with the response signed, the
/// response's digest breaks.
#[tokio::test]
async fn signature_wrapping_yields_the_signed_assertion_or_is_refused() {
    for attack in ["xsw_before", "xsw_after", "xsw_extensions"] {
        let response = crafted(json!({"attack": attack, "evil_email": EVIL})).await;
        let assertion = verify_crafted(&response).unwrap();
        assert_eq!(assertion.name_id, EMAIL, "{attack}");
        assert_ada(&assertion, &response);

        for sign in ["response", "both"] {
            let response =
                crafted(json!({"sign": sign, "attack": attack, "evil_email": EVIL})).await;
            let result = verify_crafted(&response);
            assert!(
                matches!(result, Err(SamlRejection::BadSignature)),
                "{attack}, {sign}: {result:?}"
            );
        }
    }
}

/// XSW8: the signed assertion inside a ds:Object of the signature copied onto the evil one.
#[tokio::test]
async fn a_signed_assertion_in_a_signature_object_is_refused() {
    for sign in ["assertion", "both"] {
        let response =
            crafted(json!({"sign": sign, "attack": "xsw_object", "evil_email": EVIL})).await;
        let result = verify_crafted(&response);
        assert!(
            matches!(result, Err(SamlRejection::BadSignature)),
            "{sign}: {result:?}"
        );
    }
}

#[tokio::test]
async fn a_duplicated_id_is_refused() {
    for sign in ["assertion", "response", "both"] {
        let response =
            crafted(json!({"sign": sign, "attack": "duplicate_id", "evil_email": EVIL})).await;
        let result = verify_crafted(&response);
        assert!(
            matches!(result, Err(SamlRejection::BadSignature)),
            "{sign}: {result:?}"
        );
    }
}

/// The IdP signed admin@example.com.evil.com; a comment after admin@example.com splits the
/// NameID (and the email attribute). samael refuses it: it is never read as admin@example.com.
#[tokio::test]
async fn a_nameid_split_by_a_comment_is_refused() {
    for sign in ["assertion", "response", "both"] {
        let response = crafted(json!({"sign": sign, "attack": "comment_nameid"})).await;
        let xml = response["xml"].as_str().unwrap();
        assert!(xml.contains("admin@example.com<!---->.evil.com"), "{xml}");
        let result = verify_crafted(&response);
        assert!(
            matches!(result, Err(SamlRejection::BadSignature)),
            "{sign}: {result:?}"
        );
    }
}

#[tokio::test]
async fn a_doctype_is_forbidden() {
    for sign in ["assertion", "response"] {
        let response = crafted(json!({"sign": sign, "attack": "doctype"})).await;
        let result = verify_crafted(&response);
        assert!(
            matches!(result, Err(SamlRejection::Forbidden)),
            "{sign}: {result:?}"
        );
    }
}

#[tokio::test]
async fn a_processing_instruction_is_forbidden() {
    let response = crafted(json!({})).await;
    let xml = response["xml"].as_str().unwrap();
    let at = xml.find("<saml:Subject>").unwrap();
    let with_pi = format!("{}<?evil data?>{}", &xml[..at], &xml[at..]);
    assert!(matches!(
        verify(&encode(&with_pi)),
        Err(SamlRejection::Forbidden)
    ));
}

// --- refused: bounds and encoding -----------------------------------------------------------

#[tokio::test]
async fn an_oversized_response_is_refused_before_parsing() {
    // A real, signed response with a 400 000-character name: over 512 KiB of base64.
    let response = crafted(json!({"name": "x".repeat(400_000)})).await;
    let encoded = response["saml_response"].as_str().unwrap();
    assert!(encoded.len() > MAX_RESPONSE_BYTES);
    assert!(matches!(
        verify(encoded),
        Err(SamlRejection::TooLarge(MAX_RESPONSE_BYTES))
    ));
}

#[tokio::test]
async fn a_deeply_nested_response_is_refused() {
    let response = crafted(json!({})).await;
    let xml = response["xml"].as_str().unwrap();
    let at = xml.rfind("</samlp:Response>").unwrap();
    let deep = format!(
        "{}{}{}{}",
        &xml[..at],
        "<x>".repeat(40),
        "</x>".repeat(40),
        &xml[at..]
    );
    assert!(matches!(
        verify(&encode(&deep)),
        Err(SamlRejection::TooDeep(MAX_DEPTH))
    ));
}

#[tokio::test]
async fn what_is_not_base64_utf8_xml_is_malformed() {
    let response = crafted(json!({})).await;
    let xml = response["xml"].as_str().unwrap();
    let truncated = &xml[..xml.len() - 10];
    for (label, field) in [
        ("not base64", "this is not base64!".to_owned()),
        (
            "not UTF-8",
            base64::engine::general_purpose::STANDARD.encode([0xff, 0xfe, 0x3c]),
        ),
        ("cut short", encode(truncated)),
        ("empty", String::new()),
    ] {
        let result = verify(&field);
        assert!(
            matches!(result, Err(SamlRejection::Malformed(_))),
            "{label}: {result:?}"
        );
    }
}
