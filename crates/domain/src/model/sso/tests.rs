//! The SSO configuration's value types: each test states one rule.

use rcgen::{date_time_ymd, CertificateParams, DnType, KeyPair};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;
use uuid::Uuid;

use super::*;
use crate::model::{
    text::{HttpsUrlError, TextError},
    Email, OrganizationId, Role,
};

/// The "now" of every certificate test.
fn now() -> OffsetDateTime {
    time::macros::datetime!(2026-06-01 12:00:00 UTC)
}

/// A self-signed certificate valid from `from` to `until` (year, month, day).
fn certificate_pem(from: (i32, u8, u8), until: (i32, u8, u8)) -> String {
    let mut params = CertificateParams::new(vec!["idp.example.com".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "Example IdP");
    params.not_before = date_time_ymd(from.0, from.1, from.2);
    params.not_after = date_time_ymd(until.0, until.1, until.2);
    let key = KeyPair::generate().unwrap();
    params.self_signed(&key).unwrap().pem()
}

fn valid_pem() -> String {
    certificate_pem((2024, 1, 1), (2034, 1, 1))
}

#[test]
fn provider_is_saml_only() {
    assert_eq!(SsoProvider::parse("saml"), Ok(SsoProvider::Saml));
    assert_eq!(SsoProvider::Saml.as_str(), "saml");
    for bad in ["", "SAML", "oidc", "saml2", " saml"] {
        assert_eq!(SsoProvider::parse(bad), Err(SsoProviderError), "{bad:?}");
    }
    assert_eq!(SsoProviderError.to_string(), "must be saml");
}

#[test]
fn entity_ids_are_trimmed_bounded_and_free_of_control_characters() {
    assert_eq!(
        IdpEntityId::parse("  https://idp.example.com/metadata ")
            .unwrap()
            .as_str(),
        "https://idp.example.com/metadata"
    );
    assert!(IdpEntityId::parse("urn:example:idp").is_ok());
    assert!(IdpEntityId::parse(&"é".repeat(1024)).is_ok());
    for (bad, why) in [
        (" ".to_owned(), TextError::Empty),
        ("é".repeat(1025), TextError::TooLong { max: 1024 }),
        ("urn:a\nb".to_owned(), TextError::ControlCharacter),
    ] {
        assert_eq!(IdpEntityId::parse(&bad), Err(why), "{bad:?}");
    }
}

#[test]
fn sso_urls_are_absolute_https_without_credentials() {
    let url = IdpSsoUrl::parse(" https://idp.example.com/sso/saml?x=1 ").unwrap();
    assert_eq!(url.as_str(), "https://idp.example.com/sso/saml?x=1");
    assert!(IdpSsoUrl::parse("https://10.0.0.1:8443/sso").is_ok());
    // A test IdP on one's own machine may speak plain http.
    for local in [
        "http://127.0.0.1:8081/sso",
        "http://localhost/sso",
        "http://[::1]:9/sso",
    ] {
        assert!(IdpSsoUrl::parse(local).is_ok(), "{local}");
    }
    let long = format!("https://idp.example.com/{}", "a".repeat(2048));
    for (bad, why) in [
        ("http://idp.example.com/sso", HttpsUrlError::NotHttps),
        ("http://10.0.0.1/sso", HttpsUrlError::NotHttps),
        ("", HttpsUrlError::Invalid),
        ("idp.example.com/sso", HttpsUrlError::Invalid),
        ("https://", HttpsUrlError::Invalid),
        ("https://idp.example.com/a b", HttpsUrlError::Invalid),
        (&long, HttpsUrlError::TooLong),
        (
            "https://admin:secret@idp.example.com/sso",
            HttpsUrlError::Credentials,
        ),
    ] {
        assert_eq!(IdpSsoUrl::parse(bad), Err(why), "{bad:?}");
    }
}

#[test]
fn a_valid_certificate_is_read() {
    let pem = valid_pem();
    let cert = IdpCertificate::parse(&pem, now()).unwrap();
    assert_eq!(cert.subject(), "CN=Example IdP");
    assert_eq!(
        cert.not_before(),
        time::macros::datetime!(2024-01-01 00:00:00 UTC)
    );
    assert_eq!(
        cert.not_after(),
        time::macros::datetime!(2034-01-01 00:00:00 UTC)
    );
    let fingerprint = cert.fingerprint_sha256();
    assert_eq!(fingerprint.len(), 64);
    assert!(fingerprint
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    // rcgen writes canonical PEM already: normalising keeps it as it is.
    assert_eq!(cert.pem(), pem);
}

#[test]
fn the_fingerprint_is_sha256_of_the_der() {
    let mut params = CertificateParams::new(vec!["idp.example.com".to_owned()]).unwrap();
    params.not_before = date_time_ymd(2024, 1, 1);
    params.not_after = date_time_ymd(2034, 1, 1);
    let issued = params.self_signed(&KeyPair::generate().unwrap()).unwrap();
    let cert = IdpCertificate::parse(&issued.pem(), now()).unwrap();
    assert_eq!(
        cert.fingerprint_sha256(),
        hex::encode(Sha256::digest(issued.der()))
    );
}

#[test]
fn pem_is_normalised() {
    let pem = valid_pem();
    // CRLF line endings, surrounding white space, and the base64 rewrapped differently.
    let mut lines = pem.lines();
    let begin = lines.next().unwrap();
    let body: Vec<&str> = lines.take_while(|l| !l.starts_with("-----END")).collect();
    let messy = format!(
        "\n\n  {begin}\r\n{}\r\n-----END CERTIFICATE-----  \n\n",
        body.concat()
    );
    let cert = IdpCertificate::parse(&messy, now()).unwrap();
    assert_eq!(cert.pem(), pem);
    assert_eq!(cert, IdpCertificate::parse(&pem, now()).unwrap());
}

#[test]
fn expired_and_not_yet_valid_certificates_are_refused() {
    let expired = certificate_pem((2019, 1, 1), (2021, 1, 1));
    let not_after = time::macros::datetime!(2021-01-01 00:00:00 UTC);
    let err = IdpCertificate::parse(&expired, now()).unwrap_err();
    assert_eq!(err, CertificateError::Expired { not_after });
    assert_eq!(err.to_string(), "expired on 2021-01-01T00:00:00Z");

    let early = certificate_pem((2030, 1, 1), (2040, 1, 1));
    let not_before = time::macros::datetime!(2030-01-01 00:00:00 UTC);
    let err = IdpCertificate::parse(&early, now()).unwrap_err();
    assert_eq!(err, CertificateError::NotYetValid { not_before });
    assert_eq!(err.to_string(), "is not valid before 2030-01-01T00:00:00Z");
}

#[test]
fn stored_certificates_load_whatever_their_validity_period() {
    let expired = certificate_pem((2019, 1, 1), (2021, 1, 1));
    let cert = IdpCertificate::from_stored(&expired).unwrap();
    assert_eq!(
        cert.not_after(),
        time::macros::datetime!(2021-01-01 00:00:00 UTC)
    );
    assert_eq!(
        IdpCertificate::from_stored("garbage"),
        Err(CertificateError::NotPem)
    );
}

#[test]
fn what_is_not_one_pem_certificate_is_refused() {
    let pem = valid_pem();
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    for not_pem in [
        String::new(),
        "garbage".to_owned(),
        body.clone(),
        format!("{pem}{pem}"),
        format!("{pem}\n{}", valid_pem()),
        format!("subject=CN=Example IdP\n{pem}"),
        format!("{pem}trailing"),
        pem.replace("CERTIFICATE", "PRIVATE KEY"),
        pem.replace("-----END CERTIFICATE-----", ""),
        "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----".to_owned(),
        "-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----".to_owned(),
        "-----BEGIN CERTIFICATE-----\nProc-Type: 4,ENCRYPTED\nAAAA\n-----END CERTIFICATE-----"
            .to_owned(),
        // Base64 characters, but not valid base64.
        "-----BEGIN CERTIFICATE-----\nAAAAA\n-----END CERTIFICATE-----".to_owned(),
    ] {
        assert_eq!(
            IdpCertificate::parse(&not_pem, now()),
            Err(CertificateError::NotPem),
            "{not_pem:?}"
        );
    }
    assert_eq!(
        CertificateError::NotPem.to_string(),
        "must be an X.509 certificate in PEM form"
    );
}

#[test]
fn pem_that_is_not_a_certificate_is_invalid() {
    // "hello world", properly framed and encoded.
    let hello = "-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----";
    assert_eq!(
        IdpCertificate::parse(hello, now()),
        Err(CertificateError::Invalid)
    );
    // A real certificate cut short.
    let pem = valid_pem();
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let cut = format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----",
        &body[..body.len() / 2 / 4 * 4]
    );
    assert_eq!(
        IdpCertificate::parse(&cut, now()),
        Err(CertificateError::Invalid)
    );
    assert_eq!(
        CertificateError::Invalid.to_string(),
        "is not a valid X.509 certificate"
    );
}

#[test]
fn oversized_input_is_refused_before_parsing() {
    let padded = format!("{}{}", valid_pem(), " ".repeat(IdpCertificate::MAX_BYTES));
    assert_eq!(
        IdpCertificate::parse(&padded, now()),
        Err(CertificateError::TooLarge)
    );
}

#[test]
fn debug_shows_the_summary_not_the_pem() {
    let cert = IdpCertificate::parse(&valid_pem(), now()).unwrap();
    let debug = format!("{cert:?}");
    assert!(debug.contains("CN=Example IdP"), "{debug}");
    assert!(debug.contains(cert.fingerprint_sha256()), "{debug}");
    assert!(!debug.contains("BEGIN CERTIFICATE"), "{debug}");
}

#[test]
fn domains_are_normalised() {
    assert_eq!(
        EmailDomain::parse("  Example.COM ").unwrap().as_str(),
        "example.com"
    );
    for ok in [
        "example.com",
        "mail.example.co.uk",
        "a-b.example",
        "xn--bcher-kva.example",
        "1password.com",
        "example.xn--p1ai",
        &format!("{}.com", "a".repeat(63)),
    ] {
        assert!(EmailDomain::parse(ok).is_ok(), "{ok}");
    }
}

#[test]
fn domain_rules() {
    let long_label = format!("{}.com", "a".repeat(64));
    // 4 labels of 63 + 3 dots = 255 characters.
    let too_long = [&"a".repeat(63)[..]; 4].join(".");
    for bad in [
        "",
        "com",
        "localhost",
        "-bad.com",
        "bad-.com",
        "a..b",
        ".example.com",
        "example.com.",
        "exa mple.com",
        "exa_mple.com",
        "user@example.com",
        "bücher.example",
        "127.0.0.1",
        "example.123",
        long_label.as_str(),
        too_long.as_str(),
    ] {
        assert_eq!(
            EmailDomain::parse(bad),
            Err(EmailDomainError::Invalid),
            "{bad:?}"
        );
    }
    assert_eq!(
        EmailDomainError::Invalid.to_string(),
        "must be a domain name such as example.com"
    );
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn whitelists_dedupe_keeping_the_first_seen_order() {
    let list =
        DomainWhitelist::parse(strings(&["b.com", "A.com", "b.com", " a.com ", "c.com"])).unwrap();
    let domains: Vec<&str> = list.as_slice().iter().map(EmailDomain::as_str).collect();
    assert_eq!(domains, ["b.com", "a.com", "c.com"]);
    assert!(DomainWhitelist::parse(Vec::new())
        .unwrap()
        .as_slice()
        .is_empty());
}

#[test]
fn whitelists_report_the_index_of_the_first_bad_entry() {
    assert_eq!(
        DomainWhitelist::parse(strings(&["ok.com", "also-ok.com", "-bad.com", "a..b"])),
        Err((2, EmailDomainError::Invalid))
    );
}

#[test]
fn whitelists_hold_at_most_100_domains() {
    let hundred: Vec<String> = (0..100).map(|i| format!("d{i}.example")).collect();
    assert_eq!(
        DomainWhitelist::parse(hundred.clone())
            .unwrap()
            .as_slice()
            .len(),
        100
    );

    let mut with_repeats = hundred.clone();
    with_repeats.push("D0.example".to_owned());
    assert_eq!(
        DomainWhitelist::parse(with_repeats)
            .unwrap()
            .as_slice()
            .len(),
        100
    );

    let mut hundred_and_one = hundred;
    hundred_and_one.push("one-more.example".to_owned());
    assert_eq!(
        DomainWhitelist::parse(hundred_and_one),
        Err((100, EmailDomainError::TooMany))
    );
}

#[test]
fn whitelists_match_an_address_by_its_domain() {
    let list = DomainWhitelist::parse(strings(&["example.com", "acme.test"])).unwrap();
    let email = |raw| Email::parse(raw).unwrap();
    assert!(list.contains_email_domain(&email("ada@example.com")));
    assert!(list.contains_email_domain(&email("Ada@ACME.test")));
    assert!(!list.contains_email_domain(&email("ada@eu.example.com")));
    assert!(!list.contains_email_domain(&email("ada@example.org")));
    assert!(!DomainWhitelist::default().contains_email_domain(&email("ada@example.com")));
}

#[test]
fn provision_roles_never_include_owner() {
    for (raw, role) in [
        ("admin", Role::Admin),
        ("member", Role::Member),
        ("viewer", Role::Viewer),
    ] {
        let parsed = ProvisionRole::parse(raw).unwrap();
        assert_eq!(parsed.role(), role);
        assert_eq!(parsed.as_str(), raw);
    }
    assert_eq!(ProvisionRole::parse("owner"), Err(ProvisionRoleError));
    assert_eq!(ProvisionRole::parse("Admin"), Err(ProvisionRoleError));
    assert_eq!(
        ProvisionRoleError.to_string(),
        "must be one of: admin, member, viewer"
    );
    assert_eq!(ProvisionRole::default(), ProvisionRole::Member);
}

fn org() -> OrganizationId {
    OrganizationId::from_uuid(Uuid::from_u128(0x0196_0000_0000_7000_8000_0000_0000_0001))
}

fn configuration() -> SsoConfiguration {
    SsoConfiguration {
        organization_id: org(),
        provider: SsoProvider::Saml,
        idp_entity_id: IdpEntityId::parse("https://idp.example.com/metadata").unwrap(),
        idp_sso_url: IdpSsoUrl::parse("https://idp.example.com/sso").unwrap(),
        idp_certificate: IdpCertificate::parse(&valid_pem(), now()).unwrap(),
        domain_whitelist: DomainWhitelist::parse(strings(&["example.com"])).unwrap(),
        auto_provision: false,
        default_role: ProvisionRole::Member,
        is_active: true,
        created_at: now(),
        updated_at: now(),
    }
}

#[test]
fn applying_a_change_reports_what_changed() {
    let mut config = configuration();
    let changed = config.apply(SsoChange {
        idp_sso_url: Some(IdpSsoUrl::parse("https://idp.example.com/sso/v2").unwrap()),
        domain_whitelist: Some(
            DomainWhitelist::parse(strings(&["example.com", "example.org"])).unwrap(),
        ),
        auto_provision: Some(true),
        default_role: Some(ProvisionRole::Viewer),
        // Same as now.
        provider: Some(SsoProvider::Saml),
        is_active: Some(true),
        ..SsoChange::default()
    });
    assert_eq!(
        changed,
        [
            "idp_sso_url",
            "domain_whitelist",
            "auto_provision",
            "default_role"
        ]
    );
    assert_eq!(
        config.idp_sso_url.as_str(),
        "https://idp.example.com/sso/v2"
    );
    assert!(config.auto_provision);
    assert_eq!(config.default_role, ProvisionRole::Viewer);
    assert!(config.is_active);
}

#[test]
fn a_new_certificate_is_a_change_only_when_its_fingerprint_differs() {
    let mut config = configuration();
    let same = IdpCertificate::from_stored(config.idp_certificate.pem()).unwrap();
    let changed = config.apply(SsoChange {
        idp_certificate: Some(same),
        ..SsoChange::default()
    });
    assert!(changed.is_empty(), "{changed:?}");

    let other = IdpCertificate::parse(&valid_pem(), now()).unwrap();
    let fingerprint = other.fingerprint_sha256().to_owned();
    let changed = config.apply(SsoChange {
        idp_certificate: Some(other),
        ..SsoChange::default()
    });
    assert_eq!(changed, ["idp_certificate"]);
    assert_eq!(config.idp_certificate.fingerprint_sha256(), fingerprint);
}

#[test]
fn a_no_op_change_changes_nothing() {
    let mut config = configuration();
    assert!(config.apply(SsoChange::default()).is_empty());
    let same = configuration();
    let changed = config.apply(SsoChange {
        provider: Some(same.provider),
        idp_entity_id: Some(same.idp_entity_id.clone()),
        idp_sso_url: Some(same.idp_sso_url.clone()),
        idp_certificate: Some(config.idp_certificate.clone()),
        domain_whitelist: Some(same.domain_whitelist.clone()),
        auto_provision: Some(same.auto_provision),
        default_role: Some(same.default_role),
        is_active: Some(same.is_active),
    });
    assert!(changed.is_empty(), "{changed:?}");
}

#[test]
fn service_provider_urls() {
    let org = org();
    let expected = format!("https://auth.example.com/sso/saml/{org}/metadata");
    assert_eq!(sp_entity_id("https://auth.example.com", org), expected);
    assert_eq!(sp_entity_id("https://auth.example.com/", org), expected);
    assert_eq!(
        sp_acs_url("https://auth.example.com/", org),
        format!("https://auth.example.com/sso/saml/{org}/acs")
    );
    assert!(expected.contains("/sso/saml/01960000-0000-7000-8000-000000000001/metadata"));
}
