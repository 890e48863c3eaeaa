//! The adapter against an authenticator written by others: kanidm's software token
//! (`webauthn-authenticator-rs`, feature `softtoken`: a CTAP2 authenticator with packed
//! attestation and a signature counter), behind that crate's client, which checks the options
//! the way a browser does (RP id against the origin, `https` or `http://localhost`). The
//! options go to it as the JSON the browser gets; its answers come back in the shape of
//! Chromium's `PublicKeyCredential.toJSON()`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use gatehouse_domain::model::UserId;
use gatehouse_domain::ports::{Ceremony, StoredPasskey, Webauthn, WebauthnError, WebauthnUser};
use gatehouse_webauthn::WebauthnRs;
use serde_json::{json, Value};
use webauthn_authenticator_rs::prelude::{CreationChallengeResponse, RequestChallengeResponse};
use webauthn_authenticator_rs::softtoken::SoftToken;
use webauthn_authenticator_rs::WebauthnAuthenticator;

const PUBLIC_URL: &str = "https://gatehouse.example.com";

fn url(s: &str) -> url::Url {
    url::Url::parse(s).unwrap()
}

fn user() -> WebauthnUser {
    WebauthnUser {
        id: UserId::from_uuid(uuid::Uuid::from_u128(
            0x0190_0000_0000_7000_8000_0000_0000_0001,
        )),
        email: "ada@example.com".to_owned(),
        display_name: "Ada Lovelace".to_owned(),
    }
}

fn token() -> SoftToken {
    SoftToken::new(false).unwrap().0
}

/// What Chromium's `toJSON()` adds to webauthn-rs's own serialisation of an answer: the
/// extension results under their Level 3 name, the attachment, and (for a registration) the
/// public key and authenticator data, which webauthn-rs does not read.
fn as_browser_json(answer: Value) -> Value {
    let mut answer = answer;
    let object = answer.as_object_mut().unwrap();
    let extensions = object.remove("extensions").unwrap_or_else(|| json!({}));
    let extensions = match extensions {
        Value::Object(map) => {
            Value::Object(map.into_iter().filter(|(_, v)| !v.is_null()).collect())
        }
        other => other,
    };
    object.insert("clientExtensionResults".to_owned(), extensions);
    object.insert(
        "authenticatorAttachment".to_owned(),
        json!("cross-platform"),
    );
    let response = object["response"].as_object_mut().unwrap();
    if response.contains_key("attestationObject") {
        response.insert("publicKeyAlgorithm".to_owned(), json!(-7));
        response.insert(
            "publicKey".to_owned(),
            json!("MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE"),
        );
        response.insert(
            "authenticatorData".to_owned(),
            json!("SZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2M"),
        );
    } else if response.get("userHandle") == Some(&Value::Null) {
        // toJSON() leaves out a userHandle the authenticator did not return.
        response.remove("userHandle");
    }
    answer
}

fn register(
    rp: &WebauthnRs,
    origin: &str,
    token: &mut SoftToken,
    existing: &[StoredPasskey],
) -> StoredPasskey {
    let ceremony = rp.start_registration(&user(), existing).unwrap();
    let answer = create(origin, token, &ceremony);
    rp.finish_registration(&answer, &ceremony.state).unwrap()
}

/// `navigator.credentials.create` with the soft token, answering `ceremony`'s options.
fn create(origin: &str, token: &mut SoftToken, ceremony: &Ceremony) -> Value {
    let options: CreationChallengeResponse =
        serde_json::from_value(ceremony.options.clone()).unwrap();
    let answer = token.do_registration(url(origin), options).unwrap();
    as_browser_json(serde_json::to_value(answer).unwrap())
}

/// `navigator.credentials.get` with the soft token, answering `ceremony`'s options.
fn get(origin: &str, token: &mut SoftToken, ceremony: &Ceremony) -> Value {
    let options: RequestChallengeResponse =
        serde_json::from_value(ceremony.options.clone()).unwrap();
    let answer = token.do_authentication(url(origin), options).unwrap();
    as_browser_json(serde_json::to_value(answer).unwrap())
}

fn counter(stored: &StoredPasskey) -> u64 {
    let passkey: Value = serde_json::from_str(&stored.passkey).unwrap();
    passkey["cred"]["counter"].as_u64().unwrap()
}

fn refused<T: std::fmt::Debug>(result: Result<T, WebauthnError>) -> String {
    match result {
        Err(WebauthnError::Refused(reason)) => reason,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn unavailable<T: std::fmt::Debug>(result: Result<T, WebauthnError>) -> String {
    match result {
        Err(WebauthnError::Unavailable(reason)) => reason,
        other => panic!("expected WebAuthn to be unavailable, got {other:?}"),
    }
}

fn failure<T: std::fmt::Debug>(result: Result<T, WebauthnError>) -> String {
    match result {
        Err(WebauthnError::Failed(source)) => source.to_string(),
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[test]
fn a_registered_key_signs_in_twice_and_its_replayed_answer_is_refused() {
    let rp = WebauthnRs::for_public_url(PUBLIC_URL);
    let mut token = token();

    let ceremony = rp.start_registration(&user(), &[]).unwrap();
    let options = &ceremony.options["publicKey"];
    assert_eq!(
        options["rp"],
        json!({"id": "gatehouse.example.com", "name": "Gatehouse"})
    );
    assert_eq!(options["user"]["name"], "ada@example.com");
    assert_eq!(options["user"]["displayName"], "Ada Lovelace");
    assert_eq!(
        options["user"]["id"],
        URL_SAFE_NO_PAD.encode(user().id.as_uuid().as_bytes())
    );
    assert_eq!(
        options["authenticatorSelection"]["userVerification"],
        "preferred"
    );
    assert_eq!(options["attestation"], "none");
    assert!(options.get("hints").is_none(), "{options}");
    assert!(options.get("excludeCredentials").is_none(), "{options}");
    // Chromium refuses credProtect's userVerificationRequired unless verification is required.
    assert_eq!(
        options["extensions"],
        json!({"credProps": true, "uvm": true})
    );
    let answer = create(PUBLIC_URL, &mut token, &ceremony);
    let stored = rp.finish_registration(&answer, &ceremony.state).unwrap();
    assert_eq!(stored.credential_id, answer["rawId"].as_str().unwrap());
    assert_eq!(
        URL_SAFE_NO_PAD.decode(&stored.credential_id).unwrap().len(),
        32
    );
    assert_eq!(counter(&stored), 0);

    let first = rp
        .start_authentication(std::slice::from_ref(&stored))
        .unwrap();
    let options = &first.options["publicKey"];
    assert_eq!(options["rpId"], "gatehouse.example.com");
    assert_eq!(options["userVerification"], "preferred");
    assert_eq!(
        options["allowCredentials"][0]["id"],
        stored.credential_id.as_str()
    );
    assert_eq!(options["allowCredentials"][0]["type"], "public-key");
    assert!(options.get("hints").is_none(), "{options}");
    let answer = get(PUBLIC_URL, &mut token, &first);
    let after_first = rp
        .finish_authentication(&answer, &first.state, std::slice::from_ref(&stored))
        .unwrap();
    assert_eq!(after_first.credential_id, stored.credential_id);
    assert_eq!(counter(&after_first), 1);

    let second = rp
        .start_authentication(std::slice::from_ref(&after_first))
        .unwrap();
    let answer = get(PUBLIC_URL, &mut token, &second);
    let after_second = rp
        .finish_authentication(&answer, &second.state, std::slice::from_ref(&after_first))
        .unwrap();
    assert_eq!(counter(&after_second), 2);

    // The same answer again, with the same (undropped) state and the credential as now stored:
    // webauthn-rs alone would take it (the state remembers counter 1); the adapter does not.
    let reason = refused(rp.finish_authentication(
        &answer,
        &second.state,
        std::slice::from_ref(&after_second),
    ));
    assert!(reason.contains("signature counter"), "{reason}");
    // And with the state of a new ceremony: another challenge.
    let third = rp
        .start_authentication(std::slice::from_ref(&after_second))
        .unwrap();
    refused(rp.finish_authentication(&answer, &third.state, std::slice::from_ref(&after_second)));
    // The new ceremony still works.
    let answer = get(PUBLIC_URL, &mut token, &third);
    let after_third = rp
        .finish_authentication(&answer, &third.state, std::slice::from_ref(&after_second))
        .unwrap();
    assert_eq!(counter(&after_third), 3);
}

#[test]
fn a_counter_behind_the_stored_one_is_refused() {
    let rp = WebauthnRs::for_public_url(PUBLIC_URL);
    let mut token = token();
    let stored = register(&rp, PUBLIC_URL, &mut token, &[]);
    let ceremony = rp
        .start_authentication(std::slice::from_ref(&stored))
        .unwrap();
    let answer = get(PUBLIC_URL, &mut token, &ceremony);
    // The store says the key has already signed five times: this answer (counter 1) is old, or
    // comes from a clone.
    let mut ahead: Value = serde_json::from_str(&stored.passkey).unwrap();
    ahead["cred"]["counter"] = json!(5);
    let ahead = StoredPasskey {
        credential_id: stored.credential_id.clone(),
        passkey: ahead.to_string(),
    };
    let reason = refused(rp.finish_authentication(&answer, &ceremony.state, &[ahead]));
    assert!(reason.contains("1 <= 5"), "{reason}");
}

#[test]
fn an_answer_for_another_ceremony_is_refused() {
    let rp = WebauthnRs::for_public_url(PUBLIC_URL);
    let mut token = token();

    let answered = rp.start_registration(&user(), &[]).unwrap();
    let other = rp.start_registration(&user(), &[]).unwrap();
    let answer = create(PUBLIC_URL, &mut token, &answered);
    let reason = refused(rp.finish_registration(&answer, &other.state));
    assert!(reason.to_lowercase().contains("challenge"), "{reason}");
    let stored = rp.finish_registration(&answer, &answered.state).unwrap();

    let answered = rp
        .start_authentication(std::slice::from_ref(&stored))
        .unwrap();
    let other = rp
        .start_authentication(std::slice::from_ref(&stored))
        .unwrap();
    let answer = get(PUBLIC_URL, &mut token, &answered);
    let reason =
        refused(rp.finish_authentication(&answer, &other.state, std::slice::from_ref(&stored)));
    assert!(reason.to_lowercase().contains("challenge"), "{reason}");
    // A registration's state is no authentication's: the adapter cannot read it.
    let registration = rp.start_registration(&user(), &[]).unwrap();
    failure(rp.finish_authentication(&answer, &registration.state, std::slice::from_ref(&stored)));
    rp.finish_authentication(&answer, &answered.state, std::slice::from_ref(&stored))
        .unwrap();
}

#[test]
fn an_answer_from_another_origin_or_relying_party_is_refused() {
    let rp = WebauthnRs::for_public_url(PUBLIC_URL);
    let mut token = token();
    // A page on a subdomain may use the parent's RP id (the client allows it); the server does not.
    let ceremony = rp.start_registration(&user(), &[]).unwrap();
    let answer = create("https://evil.gatehouse.example.com", &mut token, &ceremony);
    let reason = refused(rp.finish_registration(&answer, &ceremony.state));
    assert!(reason.to_lowercase().contains("origin"), "{reason}");

    // A key registered with another relying party (same host, other port).
    let local = WebauthnRs::for_public_url("http://localhost:34567");
    let stored = register(&local, "http://localhost:34567", &mut token, &[]);
    let ceremony = local
        .start_authentication(std::slice::from_ref(&stored))
        .unwrap();
    let answer = get("http://localhost:9999", &mut token, &ceremony);
    let reason = refused(local.finish_authentication(
        &answer,
        &ceremony.state,
        std::slice::from_ref(&stored),
    ));
    assert!(reason.to_lowercase().contains("origin"), "{reason}");
}

#[test]
fn a_credential_that_is_not_among_the_users_is_refused() {
    let rp = WebauthnRs::for_public_url(PUBLIC_URL);
    let mut mine = token();
    let mut theirs = token();
    let my_key = register(&rp, PUBLIC_URL, &mut mine, &[]);
    let their_key = register(&rp, PUBLIC_URL, &mut theirs, &[]);

    // Their key answers a ceremony started for their key; the user's own credentials are mine.
    let ceremony = rp
        .start_authentication(std::slice::from_ref(&their_key))
        .unwrap();
    let answer = get(PUBLIC_URL, &mut theirs, &ceremony);
    let reason =
        refused(rp.finish_authentication(&answer, &ceremony.state, std::slice::from_ref(&my_key)));
    assert!(reason.contains("not one of the user's"), "{reason}");

    // A ceremony for my key, answered by theirs, though the caller lists both: the state
    // allows mine only.
    let ceremony = rp
        .start_authentication(std::slice::from_ref(&my_key))
        .unwrap();
    let mut options = ceremony.options.clone();
    options["publicKey"]["allowCredentials"][0]["id"] = json!(their_key.credential_id);
    let forged = Ceremony {
        options,
        state: ceremony.state.clone(),
    };
    let answer = get(PUBLIC_URL, &mut theirs, &forged);
    refused(rp.finish_authentication(
        &answer,
        &ceremony.state,
        &[my_key.clone(), their_key.clone()],
    ));

    // A key removed between the start and the answer.
    let ceremony = rp
        .start_authentication(&[my_key.clone(), their_key.clone()])
        .unwrap();
    let answer = get(PUBLIC_URL, &mut theirs, &ceremony);
    refused(rp.finish_authentication(&answer, &ceremony.state, std::slice::from_ref(&my_key)));
    rp.finish_authentication(&answer, &ceremony.state, &[my_key, their_key])
        .unwrap();
}

#[test]
fn the_users_credentials_are_excluded_from_a_new_registration() {
    let rp = WebauthnRs::for_public_url(PUBLIC_URL);
    let mut first = token();
    let mut second = token();
    let a = register(&rp, PUBLIC_URL, &mut first, &[]);
    let b = register(&rp, PUBLIC_URL, &mut second, std::slice::from_ref(&a));
    let ceremony = rp
        .start_registration(&user(), &[a.clone(), b.clone()])
        .unwrap();
    assert_eq!(
        ceremony.options["publicKey"]["excludeCredentials"],
        json!([
            {"type": "public-key", "id": a.credential_id},
            {"type": "public-key", "id": b.credential_id},
        ])
    );
}

#[test]
fn localhost_over_http_on_any_port_is_a_relying_party() {
    let public_url = "http://localhost:34567";
    let rp = WebauthnRs::for_public_url(public_url);
    let mut token = token();
    let ceremony = rp.start_registration(&user(), &[]).unwrap();
    assert_eq!(ceremony.options["publicKey"]["rp"]["id"], "localhost");
    let answer = create(public_url, &mut token, &ceremony);
    let stored = rp.finish_registration(&answer, &ceremony.state).unwrap();
    let ceremony = rp
        .start_authentication(std::slice::from_ref(&stored))
        .unwrap();
    assert_eq!(ceremony.options["publicKey"]["rpId"], "localhost");
    let answer = get(public_url, &mut token, &ceremony);
    let used = rp
        .finish_authentication(&answer, &ceremony.state, std::slice::from_ref(&stored))
        .unwrap();
    assert_eq!(counter(&used), 1);
}

#[test]
fn an_ip_address_leaves_every_ceremony_unavailable_with_the_reason() {
    let rp = WebauthnRs::for_public_url("http://127.0.0.1:8080");
    let expected = "WebAuthn needs a public URL whose host is a domain name (localhost included)";
    let stored = StoredPasskey {
        credential_id: "AAAA".to_owned(),
        passkey: "{}".to_owned(),
    };
    for message in [
        unavailable(rp.start_registration(&user(), &[])),
        unavailable(rp.finish_registration(&json!({}), "{}")),
        unavailable(rp.start_authentication(std::slice::from_ref(&stored))),
        unavailable(rp.finish_authentication(&json!({}), "{}", std::slice::from_ref(&stored))),
    ] {
        assert!(message.starts_with(expected), "{message}");
        assert!(message.contains("127.0.0.1"), "{message}");
    }
    assert!(rp.configuration_error().unwrap().starts_with(expected));
}

#[test]
fn what_the_adapter_cannot_read_is_a_failure() {
    let rp = WebauthnRs::for_public_url(PUBLIC_URL);
    let mut token = token();
    let stored = register(&rp, PUBLIC_URL, &mut token, &[]);
    let ceremony = rp
        .start_authentication(std::slice::from_ref(&stored))
        .unwrap();
    let answer = get(PUBLIC_URL, &mut token, &ceremony);

    assert_eq!(
        failure(rp.start_authentication(&[])),
        "no credential to authenticate with"
    );
    let garbled = StoredPasskey {
        credential_id: stored.credential_id.clone(),
        passkey: "{\"cred\": 1}".to_owned(),
    };
    failure(rp.start_authentication(std::slice::from_ref(&garbled)));
    failure(rp.finish_authentication(&answer, &ceremony.state, &[garbled]));
    failure(rp.finish_authentication(&answer, "not json", std::slice::from_ref(&stored)));
    failure(rp.finish_registration(&answer, ""));
    let bad_id = StoredPasskey {
        credential_id: "not base64url!".to_owned(),
        passkey: stored.passkey.clone(),
    };
    failure(rp.start_registration(&user(), &[bad_id]));
    // Nothing was spent: the genuine answer still verifies.
    rp.finish_authentication(&answer, &ceremony.state, std::slice::from_ref(&stored))
        .unwrap();
}

/// A small deterministic generator (xorshift64*), so that the mutations are the same each run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % u64::try_from(n).unwrap()).unwrap()
    }
}

fn bytes(answer: &Value, field: &str) -> Vec<u8> {
    URL_SAFE_NO_PAD
        .decode(answer["response"][field].as_str().unwrap())
        .unwrap()
}

fn with_bytes(answer: &Value, field: &str, value: &[u8]) -> Value {
    let mut answer = answer.clone();
    answer["response"][field] = json!(URL_SAFE_NO_PAD.encode(value));
    answer
}

/// Every truncation and a few hundred byte changes of each binary field: refused, never a
/// panic (which the adapter would turn into `Failed`).
fn hostile_variants(answer: &Value, fields: &[&str], rng: &mut Rng) -> Vec<Value> {
    let mut variants = Vec::new();
    for field in fields {
        let original = bytes(answer, field);
        for len in 0..original.len() {
            variants.push(with_bytes(answer, field, &original[..len]));
        }
        for _ in 0..150 {
            let mut changed = original.clone();
            for _ in 0..=rng.below(3) {
                let at = rng.below(changed.len());
                changed[at] = u8::try_from(rng.next() & 0xff).unwrap();
            }
            if changed != original {
                variants.push(with_bytes(answer, field, &changed));
            }
        }
        let mut longer = original.clone();
        longer.extend_from_slice(&[0xff; 64]);
        variants.push(with_bytes(answer, field, &longer));
    }
    variants
}

#[test]
fn malformed_or_tampered_answers_are_refused_never_a_panic() {
    let rp = WebauthnRs::for_public_url(PUBLIC_URL);
    let mut token = token();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);

    let shapes = [
        json!(null),
        json!([]),
        json!("credential"),
        json!(1e300),
        json!({}),
        json!({"id": 1}),
        json!({"id": "AA", "rawId": "%%%", "type": "public-key", "response": {}}),
        json!({"id": "AA", "rawId": "AA", "type": "public-key",
               "response": {"clientDataJSON": "AA", "attestationObject": "AA", "authenticatorData": "AA", "signature": "AA"}}),
        json!({"id": "AA", "rawId": "AA", "type": "public-key",
               "response": {"clientDataJSON": "bm90IGpzb24", "attestationObject": "", "authenticatorData": "", "signature": ""},
               "clientExtensionResults": {"credProps": "yes", "appid": "no"}}),
        json!({"id": "AA", "rawId": "AA", "type": "public-key",
               "response": {"clientDataJSON": "e30", "attestationObject": "oA", "authenticatorData": "AA", "signature": "AA",
                            "transports": [1, 2], "userHandle": 7}}),
    ];

    let registration = rp.start_registration(&user(), &[]).unwrap();
    for shape in &shapes {
        refused(rp.finish_registration(shape, &registration.state));
    }
    let answer = create(PUBLIC_URL, &mut token, &registration);
    let variants = hostile_variants(&answer, &["attestationObject", "clientDataJSON"], &mut rng);
    for variant in &variants {
        match rp.finish_registration(variant, &registration.state) {
            Err(WebauthnError::Refused(_)) => {}
            // A change in the attestation statement's padding or an unused CBOR byte can leave
            // an answer that still verifies; it is the same credential.
            Ok(stored) => assert_eq!(stored.credential_id, answer["rawId"].as_str().unwrap()),
            Err(e) => panic!("{variant}: {e:?}"),
        }
    }
    let stored = rp
        .finish_registration(&answer, &registration.state)
        .unwrap();

    let authentication = rp
        .start_authentication(std::slice::from_ref(&stored))
        .unwrap();
    for shape in &shapes {
        refused(rp.finish_authentication(
            shape,
            &authentication.state,
            std::slice::from_ref(&stored),
        ));
    }
    let answer = get(PUBLIC_URL, &mut token, &authentication);
    let variants = hostile_variants(
        &answer,
        &["authenticatorData", "clientDataJSON", "signature"],
        &mut rng,
    );
    for variant in &variants {
        refused(rp.finish_authentication(
            variant,
            &authentication.state,
            std::slice::from_ref(&stored),
        ));
    }
    rp.finish_authentication(
        &answer,
        &authentication.state,
        std::slice::from_ref(&stored),
    )
    .unwrap();
}
