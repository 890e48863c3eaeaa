//! The verifier against a key set served on loopback, with keys generated here.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use gatehouse_verify::types::{Permission, Role};
use gatehouse_verify::{
    testing::{TestIssuer, TestKey},
    KeySetError, Subject, Verifier, VerifierBuilder, VerifyError,
};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};

const ISSUER: &str = "https://id.example.test";

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

fn builder(issuer: &TestIssuer) -> VerifierBuilder {
    Verifier::builder(issuer.issuer()).jwks_url(issuer.jwks_url())
}

async fn setup() -> (TestIssuer, Verifier) {
    let issuer = TestIssuer::start(ISSUER).await.unwrap();
    let verifier = builder(&issuer).build().unwrap();
    (issuer, verifier)
}

fn with(mut claims: Value, changes: Value) -> Value {
    for (name, value) in changes.as_object().unwrap() {
        if value.is_null() {
            claims.as_object_mut().unwrap().remove(name);
        } else {
            claims[name] = value.clone();
        }
    }
    claims
}

#[tokio::test]
async fn a_members_organization_token_is_verified_into_typed_claims() {
    let (issuer, verifier) = setup().await;
    let mut claims = issuer.claims();
    claims["org_permissions"]
        .as_array_mut()
        .unwrap()
        .push(json!("billing.read.from.the.future"));
    let verified = verifier.verify(&issuer.sign(&claims)).await.unwrap();

    assert_eq!(verified.issuer(), ISSUER);
    let Subject::User(user) = verified.subject() else {
        panic!("{:?}", verified.subject())
    };
    assert_eq!(user.to_string(), "0190a0a0-0000-7000-8000-000000000001");
    assert_eq!(verified.audience(), ["gatehouse"]);
    assert_eq!(verified.email(), Some("member@example.com"));
    assert_eq!(verified.amr(), ["pwd"]);
    let organization = verified.organization().unwrap();
    assert_eq!(
        organization.id.to_string(),
        "0190a0a0-0000-7000-8000-0000000000cc"
    );
    assert_eq!(organization.role, Some(Role::Member));
    assert!(verified.can(Permission::MembersRead));
    assert!(verified.can(Permission::ApiKeysCreate));
    assert!(!verified.can(Permission::MembersUpdate));
    assert_eq!(
        verified.permissions().count(),
        5,
        "the unknown name is ignored"
    );
    assert_eq!(issuer.fetches(), 1);

    // Cached: a second verification fetches nothing.
    verifier.verify(&issuer.sign(&claims)).await.unwrap();
    assert_eq!(issuer.fetches(), 1);
}

#[tokio::test]
async fn a_token_without_an_organization_grants_nothing_in_one() {
    let (issuer, verifier) = setup().await;
    let claims = with(
        issuer.claims(),
        json!({"org_id": null, "org_role": null, "org_permissions": null}),
    );
    let verified = verifier.verify(&issuer.sign(&claims)).await.unwrap();
    assert_eq!(verified.organization(), None);
    assert!(Permission::ALL.iter().all(|p| !verified.can(*p)));
}

#[tokio::test]
async fn application_and_machine_tokens_are_read() {
    let (issuer, verifier) = setup().await;
    let application = with(
        issuer.claims(),
        json!({"aud": ["gatehouse", "app_123"], "client_id": "app_123", "scope": "openid members:read"}),
    );
    let verified = verifier.verify(&issuer.sign(&application)).await.unwrap();
    assert_eq!(verified.audience(), ["gatehouse", "app_123"]);
    assert_eq!(verified.client_id(), Some("app_123"));
    assert_eq!(verified.scope(), Some("openid members:read"));
    assert!(verified.user_id().is_some());

    // The application's own verifier asks for its client id.
    let own = builder(&issuer).audience("app_123").build().unwrap();
    let for_it = own.verify(&issuer.sign(&application)).await.unwrap();
    assert!(for_it.is_for_this_audience());
    assert!(for_it.can(Permission::MembersRead));
    assert!(matches!(
        own.verify(&issuer.sign(&issuer.claims())).await,
        Err(VerifyError::Audience)
    ));

    let now = now();
    let machine = json!({
        "iss": ISSUER, "sub": "app_123", "aud": "gatehouse", "iat": now, "nbf": now,
        "exp": now + 300, "jti": "0190a0a0-0000-7000-8000-0000000000dd", "client_id": "app_123",
        "org_id": "0190a0a0-0000-7000-8000-0000000000cc", "scope": "members:read",
    });
    let verified = verifier.verify(&issuer.sign(&machine)).await.unwrap();
    assert_eq!(verified.subject(), &Subject::Application("app_123".into()));
    assert_eq!(verified.user_id(), None);
    let organization = verified.organization().unwrap();
    assert_eq!(organization.role, None);
    assert!(
        !verified.can(Permission::MembersRead),
        "machine tokens carry scopes"
    );

    // A subject that is neither a user id nor the token's client id.
    let stranger = with(issuer.claims(), json!({"sub": "someone"}));
    assert!(matches!(
        verifier.verify(&issuer.sign(&stranger)).await,
        Err(VerifyError::Subject)
    ));
}

#[tokio::test]
async fn times_are_checked_with_at_most_five_seconds_of_leeway() {
    let (issuer, verifier) = setup().await;
    let now = now();
    let expired = with(
        issuer.claims(),
        json!({"iat": now - 400, "nbf": now - 400, "exp": now - 10}),
    );
    assert!(matches!(
        verifier.verify(&issuer.sign(&expired)).await,
        Err(VerifyError::Expired)
    ));
    let just_expired = with(issuer.claims(), json!({"exp": now - 2}));
    verifier.verify(&issuer.sign(&just_expired)).await.unwrap();

    let early = with(issuer.claims(), json!({"nbf": now + 60}));
    assert!(matches!(
        verifier.verify(&issuer.sign(&early)).await,
        Err(VerifyError::NotYetValid)
    ));

    // A longer leeway is not granted.
    let lenient = builder(&issuer)
        .leeway(Duration::from_secs(3600))
        .build()
        .unwrap();
    assert!(matches!(
        lenient.verify(&issuer.sign(&expired)).await,
        Err(VerifyError::Expired)
    ));

    let no_exp = with(issuer.claims(), json!({"exp": null}));
    assert!(matches!(
        verifier.verify(&issuer.sign(&no_exp)).await,
        Err(VerifyError::Claims)
    ));
}

#[tokio::test]
async fn another_issuer_or_audience_is_refused() {
    let (issuer, verifier) = setup().await;
    let elsewhere = with(issuer.claims(), json!({"iss": "https://evil.example"}));
    assert!(matches!(
        verifier.verify(&issuer.sign(&elsewhere)).await,
        Err(VerifyError::Issuer)
    ));
    for audience in [json!("billing"), json!(["billing", "app_1"])] {
        let other = with(issuer.claims(), json!({ "aud": audience }));
        assert!(matches!(
            verifier.verify(&issuer.sign(&other)).await,
            Err(VerifyError::Audience)
        ));
    }
}

#[tokio::test]
async fn only_rs256_is_accepted() {
    let (issuer, verifier) = setup().await;
    let claims = issuer.claims();

    // HS256, keyed with what an attacker could take for the public key.
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("k1".into());
    let public = issuer.signing_key().jwk()["n"].as_str().unwrap().to_owned();
    let hs256 = jsonwebtoken::encode(
        &header,
        &claims,
        &EncodingKey::from_secret(public.as_bytes()),
    )
    .unwrap();
    assert!(matches!(
        verifier.verify(&hs256).await,
        Err(VerifyError::Algorithm(Algorithm::HS256))
    ));

    // `alg: none`, with no signature.
    use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
    let none = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT","kid":"k1"}"#),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    assert!(matches!(
        verifier.verify(&none).await,
        Err(VerifyError::Malformed)
    ));

    // A real signature with another key, under the published kid.
    let forged = TestKey::generate("k1").sign(&claims);
    assert!(matches!(
        verifier.verify(&forged).await,
        Err(VerifyError::Signature)
    ));
    let unsigned = issuer.sign(&claims);
    let (head, _) = unsigned.rsplit_once('.').unwrap();
    assert!(matches!(
        verifier.verify(&format!("{head}.")).await,
        Err(VerifyError::Signature | VerifyError::Malformed)
    ));
    for garbage in ["", "abc", "a.b.c", "Bearer x.y.z"] {
        assert!(matches!(
            verifier.verify(garbage).await,
            Err(VerifyError::Malformed)
        ));
    }
    assert_eq!(issuer.fetches(), 1, "only the forged token needed the keys");
}

#[tokio::test]
async fn an_unknown_kid_refetches_at_most_once_per_interval() {
    let (issuer, verifier) = setup().await;
    verifier
        .verify(&issuer.sign(&issuer.claims()))
        .await
        .unwrap();
    assert_eq!(issuer.fetches(), 1);

    // Generated first: a key takes longer than the short interval below.
    let stranger = TestKey::generate("k9");
    let another = TestKey::generate("k8");
    assert!(matches!(
        verifier.verify(&stranger.sign(&issuer.claims())).await,
        Err(VerifyError::UnknownKey)
    ));
    // Fetched less than a minute ago (at start): no refetch yet.
    assert_eq!(issuer.fetches(), 1);

    let quick = builder(&issuer)
        .refetch_interval(Duration::from_millis(300))
        .build()
        .unwrap();
    quick.verify(&issuer.sign(&issuer.claims())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(350)).await;
    let before = issuer.fetches();
    assert!(matches!(
        quick.verify(&stranger.sign(&issuer.claims())).await,
        Err(VerifyError::UnknownKey)
    ));
    assert_eq!(issuer.fetches(), before + 1, "one refetch");
    // A second unknown kid within the interval does not refetch.
    assert!(matches!(
        quick.verify(&another.sign(&issuer.claims())).await,
        Err(VerifyError::UnknownKey)
    ));
    assert_eq!(issuer.fetches(), before + 1, "no second refetch");
    // Known keys verify all along.
    quick.verify(&issuer.sign(&issuer.claims())).await.unwrap();
}

#[tokio::test]
async fn a_rotated_key_is_picked_up_and_the_old_one_still_verifies() {
    let (issuer, _) = setup().await;
    let verifier = builder(&issuer)
        .refetch_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let old = issuer.sign(&issuer.claims());
    verifier.verify(&old).await.unwrap();

    tokio::time::sleep(Duration::from_millis(250)).await;
    issuer.rotate_to(TestKey::generate("k2"));
    let new = issuer.sign(&issuer.claims());
    let verified = verifier.verify(&new).await.unwrap();
    assert_eq!(verified.email(), Some("member@example.com"));
    assert_eq!(issuer.fetches(), 2);
    verifier.verify(&old).await.unwrap();
    assert_eq!(issuer.fetches(), 2);
}

#[tokio::test]
async fn concurrent_verifications_fetch_the_key_set_once() {
    let (issuer, verifier) = setup().await;
    let token = issuer.sign(&issuer.claims());
    let stranger = TestKey::generate("k7").sign(&issuer.claims());
    let mut tasks = Vec::new();
    for i in 0..40 {
        let verifier = verifier.clone();
        let token = if i % 2 == 0 {
            token.clone()
        } else {
            stranger.clone()
        };
        tasks.push(tokio::spawn(async move { verifier.verify(&token).await }));
    }
    let mut verified = 0;
    for task in tasks {
        if task.await.unwrap().is_ok() {
            verified += 1;
        }
    }
    assert_eq!(verified, 20);
    assert_eq!(issuer.fetches(), 1);
}

#[tokio::test]
async fn a_dropped_verification_leaves_the_cache_working() {
    let (issuer, verifier) = setup().await;
    let token = issuer.sign(&issuer.claims());
    // Dropped as soon as it is polled: its fetch goes on without it.
    let _ = tokio::time::timeout(Duration::from_micros(1), verifier.verify(&token)).await;
    verifier.verify(&token).await.unwrap();
    assert_eq!(issuer.fetches(), 1);
}

#[tokio::test]
async fn a_key_set_that_cannot_be_fetched_is_an_error() {
    // Nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!(
        "http://{}/.well-known/jwks.json",
        closed.local_addr().unwrap()
    );
    drop(closed);
    let key = TestKey::generate("k1");
    let claims = TestIssuer::start(ISSUER).await.unwrap().claims();
    let verifier = Verifier::builder(ISSUER).jwks_url(&url).build().unwrap();
    assert!(matches!(
        verifier.verify(&key.sign(&claims)).await,
        Err(VerifyError::KeySet(KeySetError::Unreachable(_)))
    ));

    // Listens, never answers: the wait is bounded.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks.json", silent.local_addr().unwrap());
    let verifier = Verifier::builder(ISSUER)
        .jwks_url(&url)
        .fetch_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let started = Instant::now();
    let refused = verifier.verify(&key.sign(&claims)).await;
    assert!(
        matches!(
            refused,
            Err(VerifyError::KeySet(
                KeySetError::Timeout | KeySetError::Unreachable(_)
            ))
        ),
        "{refused:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn nothing_prints_the_token() {
    let (issuer, verifier) = setup().await;
    let token = issuer.sign(&issuer.claims());
    let verified = verifier.verify(&token).await.unwrap();
    let signature = token.rsplit('.').next().unwrap();
    for printed in [
        format!("{verified:?}"),
        format!("{verifier:?}"),
        format!("{:?}", verifier.verify(&format!("{token}x")).await),
    ] {
        assert!(!printed.contains(signature), "{printed}");
        assert!(!printed.contains(&token[..40]), "{printed}");
    }
}

/// A user's token issued to the application `app_123`, naming `aud`, with the scope granted
/// and the permissions Gatehouse listed.
fn application_token(issuer: &TestIssuer, aud: Value, scope: &str, permissions: Value) -> Value {
    with(
        issuer.claims(),
        json!({"aud": aud, "client_id": "app_123", "scope": scope, "org_permissions": permissions}),
    )
}

#[tokio::test]
async fn can_is_false_for_a_token_issued_for_another_audience() {
    let (issuer, first_party) = setup().await;
    // Issued to app_123 with `members:read`: it names `gatehouse` for Gatehouse's own API.
    let token = issuer.sign(&application_token(
        &issuer,
        json!(["gatehouse", "app_123"]),
        "openid members:read",
        json!(["organization.members.read"]),
    ));

    // A first-party product's verifier reads it, but it is not for that product.
    let verified = first_party.verify(&token).await.unwrap();
    assert!(!verified.is_for_this_audience());
    assert!(!verified.can(Permission::MembersRead));
    assert_eq!(verified.permissions().count(), 0);

    // app_123's own verifier grants what it lists.
    let own = builder(&issuer).audience("app_123").build().unwrap();
    assert!(own
        .verify(&token)
        .await
        .unwrap()
        .can(Permission::MembersRead));

    // Another product's application does not take it at all.
    let other = builder(&issuer).audience("app_456").build().unwrap();
    assert!(matches!(
        other.verify(&token).await,
        Err(VerifyError::Audience)
    ));

    // An `openid` token names its application alone: the first-party verifier refuses it.
    let openid = issuer.sign(&application_token(
        &issuer,
        json!(["app_123"]),
        "openid email",
        json!([]),
    ));
    assert!(matches!(
        first_party.verify(&openid).await,
        Err(VerifyError::Audience)
    ));
    let verified = own.verify(&openid).await.unwrap();
    assert!(verified.is_for_this_audience());
    assert!(Permission::ALL.iter().all(|p| !verified.can(*p)));
}

#[tokio::test]
async fn can_is_false_for_a_permission_outside_the_granted_scope() {
    let issuer = TestIssuer::start(ISSUER).await.unwrap();
    let own = builder(&issuer).audience("app_123").build().unwrap();
    let org_read = own
        .verify(&issuer.sign(&application_token(
            &issuer,
            json!(["gatehouse", "app_123"]),
            "openid org:read",
            json!(["organization.read"]),
        )))
        .await
        .unwrap();
    assert!(org_read.can(Permission::OrganizationRead));
    assert!(!org_read.can(Permission::MembersRead));
    assert!(!org_read.can(Permission::ApiKeysCreate));

    // A token that lists the whole role (as Gatehouse wrote them before it narrowed them) still
    // grants only what its scopes cover.
    let whole_role = json!([
        "organization.read",
        "organization.members.read",
        "applications.read",
        "organization.members.invite",
        "api_keys.create",
    ]);
    let openid = own
        .verify(&issuer.sign(&application_token(
            &issuer,
            json!(["gatehouse", "app_123"]),
            "openid email",
            whole_role.clone(),
        )))
        .await
        .unwrap();
    assert!(Permission::ALL.iter().all(|p| !openid.can(*p)));
    let members = own
        .verify(&issuer.sign(&application_token(
            &issuer,
            json!(["gatehouse", "app_123"]),
            "members:read",
            whole_role,
        )))
        .await
        .unwrap();
    assert_eq!(
        members.permissions().collect::<Vec<_>>(),
        [Permission::MembersRead]
    );
}

#[tokio::test]
async fn a_scope_gatehouse_could_not_have_written_grants_nothing() {
    let issuer = TestIssuer::start(ISSUER).await.unwrap();
    let own = builder(&issuer).audience("app_123").build().unwrap();
    let members = json!(["organization.members.read"]);
    // The scope's own grammar (RFC 6749 §3.3, as `gatehouse-types` parses it for the server
    // too): a quote is no scope character, and no scope runs past 1,024 characters. A token
    // carrying either was not written by Gatehouse, whatever its `org_permissions` say.
    let long = format!("members:read {}", "x".repeat(1_024));
    for scope in ["members:read org\"read", long.as_str()] {
        let verified = own
            .verify(&issuer.sign(&application_token(
                &issuer,
                json!(["gatehouse", "app_123"]),
                scope,
                members.clone(),
            )))
            .await
            .unwrap();
        assert!(!verified.can(Permission::MembersRead), "{scope:.40}");
        assert_eq!(verified.permissions().count(), 0);
    }
}
