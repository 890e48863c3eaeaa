//! Answers Chromium itself produced (its virtual authenticator, through the hosted page's script
//! in the crate docs), kept with the options and state they answer: `toJSON()` as the browser
//! writes it is what the adapter reads. See `data/chromium_virtual_authenticator.json`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use gatehouse_domain::ports::{Webauthn, WebauthnError};
use gatehouse_webauthn::WebauthnRs;
use serde_json::Value;

fn recorded() -> Value {
    serde_json::from_str(include_str!("data/chromium_virtual_authenticator.json")).unwrap()
}

#[test]
fn chromiums_to_json_registers_and_authenticates() {
    let recorded = recorded();
    let rp = WebauthnRs::for_public_url(recorded["public_url"].as_str().unwrap());
    let registration = &recorded["registration"];
    let answer = &registration["answer"];
    // What toJSON() writes beyond what webauthn-rs reads is there, and ignored.
    assert_eq!(answer["authenticatorAttachment"], "cross-platform");
    assert_eq!(answer["clientExtensionResults"]["credProps"]["rk"], false);
    assert_eq!(answer["response"]["publicKeyAlgorithm"], -7);
    let stored = rp
        .finish_registration(answer, registration["state"].as_str().unwrap())
        .unwrap();
    assert_eq!(stored.credential_id, answer["rawId"].as_str().unwrap());

    let authentication = &recorded["authentication"];
    let answer = &authentication["answer"];
    assert!(answer["response"].get("userHandle").is_none());
    assert_eq!(
        authentication["options"]["publicKey"]["allowCredentials"][0]["id"],
        stored.credential_id.as_str()
    );
    let state = authentication["state"].as_str().unwrap();
    let used = rp
        .finish_authentication(answer, state, std::slice::from_ref(&stored))
        .unwrap();
    assert_eq!(used.credential_id, stored.credential_id);
    assert_ne!(used.passkey, stored.passkey);
    // Replayed once the moved counter is stored.
    match rp.finish_authentication(answer, state, std::slice::from_ref(&used)) {
        Err(WebauthnError::Refused(reason)) => assert!(reason.contains("counter"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn chromiums_answers_are_bound_to_the_origin_and_the_challenge() {
    let recorded = recorded();
    let registration = &recorded["registration"];
    let state = registration["state"].as_str().unwrap();
    // The same host on another port, or over https, is another origin.
    for public_url in ["http://localhost:34568", "https://localhost:34567"] {
        let rp = WebauthnRs::for_public_url(public_url);
        match rp.finish_registration(&registration["answer"], state) {
            Err(WebauthnError::Refused(reason)) => {
                assert!(reason.to_lowercase().contains("origin"), "{reason}");
            }
            other => panic!("{public_url}: {other:?}"),
        }
    }
    // The authentication's answer against the registration's challenge: a state of the wrong
    // kind, which the adapter cannot read.
    let rp = WebauthnRs::for_public_url(recorded["public_url"].as_str().unwrap());
    let stored = rp
        .finish_registration(&registration["answer"], state)
        .unwrap();
    assert!(matches!(
        rp.finish_authentication(&recorded["authentication"]["answer"], state, &[stored]),
        Err(WebauthnError::Failed(_))
    ));
}
