//! Eight threads verifying at once, from a cold start: the first verifications of this process
//! (a test file of its own), so libxml2's and xmlsec's initialisation happens under them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Barrier};

use gatehouse_domain::model::{IdpCertificate, IdpEntityId, IdpSsoUrl, SamlTrust};
use gatehouse_domain::ports::SamlRejection;
use gatehouse_saml::XmlSecSaml;
use gatehouse_testkit::saml_idp::TestIdp;
use serde_json::json;
use time::OffsetDateTime;

const ACS: &str = "https://gatehouse.example.com/sso/saml/0196/acs";
const SP: &str = "https://gatehouse.example.com/sso/saml/0196/metadata";
const THREADS: usize = 8;
const ROUNDS: usize = 25;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_threads_verify_at_once() {
    let idp = TestIdp::start();
    let trust = SamlTrust {
        idp_entity_id: IdpEntityId::parse(idp.entity_id()).unwrap(),
        idp_certificate: IdpCertificate::parse(idp.certificate(), OffsetDateTime::now_utc())
            .unwrap(),
        idp_sso_url: IdpSsoUrl::parse(idp.sso_url()).unwrap(),
        sp_entity_id: SP.to_owned(),
        acs_url: ACS.to_owned(),
    };

    // Each thread has its own user, signed its own way; odd threads also verify a response
    // signed by the other key, so that xmlsec's failure paths run concurrently too.
    let mut work = Vec::new();
    for thread in 0..THREADS {
        let email = format!("user{thread}@example.com");
        let sign = ["assertion", "response", "both"][thread % 3];
        let spec = |key: &str| {
            json!({
                "acs_url": ACS, "audience": SP, "email": email, "sign": sign, "key": key,
                "in_response_to": format!("_{thread:032x}"),
            })
        };
        let good = idp.respond(spec("main")).await["saml_response"]
            .as_str()
            .unwrap()
            .to_owned();
        let bad = idp.respond(spec("other")).await["saml_response"]
            .as_str()
            .unwrap()
            .to_owned();
        work.push((email, good, bad));
    }

    let barrier = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = work
        .into_iter()
        .enumerate()
        .map(|(thread, (email, good, bad))| {
            let barrier = Arc::clone(&barrier);
            let trust = trust.clone();
            std::thread::spawn(move || {
                let saml = XmlSecSaml::new();
                barrier.wait();
                for round in 0..ROUNDS {
                    let assertion = saml.verify_blocking(&good, &trust).unwrap();
                    assert_eq!(assertion.name_id, email, "thread {thread}, round {round}");
                    let expected = format!("_{thread:032x}");
                    assert_eq!(assertion.in_response_to.as_deref(), Some(expected.as_str()));
                    if thread % 2 == 1 {
                        let refused = saml.verify_blocking(&bad, &trust);
                        assert!(
                            matches!(refused, Err(SamlRejection::BadSignature)),
                            "thread {thread}, round {round}: {refused:?}"
                        );
                    }
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
}
