//! The SAML sign-in store contract, run against both backends (`<name>::postgres` and
//! `<name>::sqlite`): outstanding requests, the sign-in transaction (single-use requests,
//! replayed assertions, provisioning, the session), and home realm discovery.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod support;

use gatehouse_domain::{
    model::{
        AccountToken, AccountTokenPurpose, Amr, AuditAction, DomainWhitelist, Email, EventType,
        IdpCertificate, IdpEntityId, IdpSsoUrl, OrganizationId, Plan, ProvisionRole, ReturnPath,
        Role, SamlRequest, SamlRequestId, SsoConfiguration, SsoProvider, UserId,
    },
    ports::{Provision, Reclaim, SamlSignIn, SamlSignInOutcome, StoreError},
};
use rcgen::{date_time_ymd, CertificateParams, KeyPair};
use support::{account, api_key, audited, event, now, on_both_backends, session, Db};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

fn configuration(org: OrganizationId, domains: &[&str], at: OffsetDateTime) -> SsoConfiguration {
    let mut params = CertificateParams::new(vec!["idp.example.com".to_owned()]).unwrap();
    params.not_before = date_time_ymd(2020, 1, 1);
    params.not_after = date_time_ymd(2049, 12, 31);
    let pem = params
        .self_signed(&KeyPair::generate().unwrap())
        .unwrap()
        .pem();
    SsoConfiguration {
        organization_id: org,
        provider: SsoProvider::Saml,
        idp_entity_id: IdpEntityId::parse("https://idp.example.com/metadata").unwrap(),
        idp_sso_url: IdpSsoUrl::parse("https://idp.example.com/sso").unwrap(),
        idp_certificate: IdpCertificate::parse(&pem, now()).unwrap(),
        domain_whitelist: DomainWhitelist::parse(domains.iter().map(|d| (*d).to_owned()).collect())
            .unwrap(),
        auto_provision: true,
        default_role: ProvisionRole::Member,
        is_active: true,
        created_at: at,
        updated_at: at,
    }
}

fn request(org: OrganizationId, at: OffsetDateTime) -> SamlRequest {
    SamlRequest {
        id: SamlRequestId::generate(Uuid::new_v4()),
        organization_id: org,
        return_to: ReturnPath::parse("/oauth/authorize?client_id=ghc_x&state=s").unwrap(),
        created_at: at,
        expires_at: at + Duration::minutes(10),
    }
}

/// A sign-in of `user` answering `request` with the assertion `assertion_id`.
fn sign_in(
    user: UserId,
    request: &SamlRequest,
    assertion_id: &str,
    provision: Provision,
) -> SamlSignIn {
    let at = request.created_at + Duration::minutes(1);
    let (mut opened, _) = session(user, at, Duration::days(30));
    opened.amr = Amr::external();
    SamlSignIn {
        organization_id: request.organization_id,
        request_id: request.id.clone(),
        assertion_id: assertion_id.to_owned(),
        assertion_valid_until: at + Duration::minutes(7),
        provision,
        reclaim: None,
        session: opened,
        keep_at_most: None,
        events: vec![event(EventType::AuthLogin, None, Some(user))],
        at,
        audit: vec![support::signed_in()],
    }
}

#[on_both_backends(worker_threads = 4)]
async fn a_request_is_outstanding_for_its_organization_until_it_expires(db: Db) {
    let owner = db.registered("owner@acme.example").await;
    let acme = db.team(owner, "acme", Plan::Business).await;
    let globex = db.team(owner, "globex", Plan::Business).await;
    let sent = request(acme, now());
    db.store.save_saml_request(sent.clone()).await.unwrap();

    let at = now() + Duration::minutes(9);
    assert_eq!(
        db.store.saml_request(acme, &sent.id, at).await.unwrap(),
        Some(sent.clone())
    );
    assert_eq!(
        db.store.saml_request(globex, &sent.id, at).await.unwrap(),
        None,
        "not theirs"
    );
    assert_eq!(
        db.store
            .saml_request(acme, &sent.id, sent.expires_at)
            .await
            .unwrap(),
        None,
        "expired"
    );
    let unknown = SamlRequestId::generate(Uuid::new_v4());
    assert_eq!(
        db.store.saml_request(acme, &unknown, at).await.unwrap(),
        None
    );

    // A request made after the first expired forgets it.
    db.store
        .save_saml_request(request(acme, sent.expires_at))
        .await
        .unwrap();
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM saml_requests").await, 1);
}

#[on_both_backends(worker_threads = 4)]
async fn a_member_signs_in_once_per_request_and_once_per_assertion(db: Db) {
    let owner = db.registered("owner@acme.example").await;
    let acme = db.team(owner, "acme", Plan::Business).await;
    let first = request(acme, now());
    db.store.save_saml_request(first.clone()).await.unwrap();
    let events = db.count("SELECT COUNT(*) AS n FROM events").await;

    let signing_in = sign_in(owner, &first, "_a1", Provision::Nothing);
    let outcome = db.store.saml_sign_in(signing_in.clone()).await.unwrap();
    assert_eq!(outcome, SamlSignInOutcome::SignedIn);
    let live = db
        .store
        .session_by_refresh_token(&signing_in.session.refresh_token_hash, signing_in.at)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(live.amr, Amr::external());
    let recorded = db.count("SELECT COUNT(*) AS n FROM events").await;
    assert!(
        recorded > events,
        "auth.login is recorded (once per organization of the user)"
    );
    assert_eq!(
        db.store
            .saml_request(acme, &first.id, signing_in.at)
            .await
            .unwrap(),
        None,
        "answered"
    );

    // The same request again: gone, nothing written.
    let again = sign_in(owner, &first, "_a2", Provision::Nothing);
    assert_eq!(
        db.store.saml_sign_in(again.clone()).await.unwrap(),
        SamlSignInOutcome::RequestGone
    );
    assert_eq!(
        db.store
            .session_by_refresh_token(&again.session.refresh_token_hash, again.at)
            .await
            .unwrap(),
        None
    );

    // The same assertion with a fresh request: replayed, and the request stays unanswered.
    let second = request(acme, now());
    db.store.save_saml_request(second.clone()).await.unwrap();
    let replay = sign_in(owner, &second, "_a1", Provision::Nothing);
    assert_eq!(
        db.store.saml_sign_in(replay.clone()).await.unwrap(),
        SamlSignInOutcome::Replayed
    );
    assert_eq!(
        db.store
            .session_by_refresh_token(&replay.session.refresh_token_hash, replay.at)
            .await
            .unwrap(),
        None
    );
    assert!(
        db.store
            .saml_request(acme, &second.id, replay.at)
            .await
            .unwrap()
            .is_some(),
        "rolled back"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM events").await,
        recorded,
        "nothing recorded"
    );

    // Another organization's request is not this one's to answer.
    let globex = db.team(owner, "globex", Plan::Business).await;
    let theirs = request(globex, now());
    db.store.save_saml_request(theirs.clone()).await.unwrap();
    let crossed = SamlSignIn {
        organization_id: acme,
        ..sign_in(owner, &theirs, "_a3", Provision::Nothing)
    };
    assert_eq!(
        db.store.saml_sign_in(crossed).await.unwrap(),
        SamlSignInOutcome::RequestGone
    );
}

#[on_both_backends(worker_threads = 4)]
async fn an_unknown_user_is_provisioned_with_their_workspace_and_membership(db: Db) {
    let owner = db.registered("owner@acme.example").await;
    let acme = db.team(owner, "acme", Plan::Business).await;
    let sent = request(acme, now());
    db.store.save_saml_request(sent.clone()).await.unwrap();
    let mut new = account("grace@acme.example", "Grace Hopper");
    new.user.password_hash = None;
    let grace = new.user.id;

    let provision = Provision::Account {
        account: Box::new(new),
        role: Role::Viewer,
    };
    let mut signing_in = sign_in(grace, &sent, "_g1", provision);
    signing_in
        .events
        .insert(0, event(EventType::MemberJoined, Some(acme), Some(grace)));
    assert_eq!(
        db.store.saml_sign_in(signing_in).await.unwrap(),
        SamlSignInOutcome::SignedIn
    );

    let credentials = db.store.credentials_by_id(grace).await.unwrap().unwrap();
    assert_eq!(credentials.password_hash, None);
    assert_eq!(
        db.store
            .membership(grace, acme)
            .await
            .unwrap()
            .unwrap()
            .role,
        Role::Viewer
    );
    assert_eq!(
        db.count(&format!(
            "SELECT COUNT(*) AS n FROM memberships WHERE user_id = '{grace}' AND role = 'owner'"
        ))
        .await,
        1,
        "and their own workspace"
    );
    let types = db.strings(&format!(
            "SELECT event_type AS value FROM events WHERE user_id = '{grace}' ORDER BY occurred_at, id")).await;
    for expected in [
        "user.created",
        "organization.created",
        "member.joined",
        "auth.login",
    ] {
        assert!(
            types.contains(&expected.to_owned()),
            "{expected} in {types:?}"
        );
    }
    // The user's events reach the organization they joined, not only their workspace.
    for kind in ["user.created", "auth.login"] {
        let to_acme = format!("SELECT COUNT(*) AS n FROM events WHERE event_type = '{kind}' AND organization_id = '{acme}'");
        assert_eq!(db.count(&to_acme).await, 1, "{kind}");
    }
}

#[on_both_backends(worker_threads = 4)]
async fn an_existing_user_joins_and_an_email_taken_meanwhile_rolls_everything_back(db: Db) {
    let owner = db.registered("owner@acme.example").await;
    let acme = db.team(owner, "acme", Plan::Business).await;
    let ada = db.registered("ada@acme.example").await;
    let sent = request(acme, now());
    db.store.save_saml_request(sent.clone()).await.unwrap();
    let joining = sign_in(ada, &sent, "_j1", Provision::Member { role: Role::Admin });
    assert_eq!(
        db.store.saml_sign_in(joining).await.unwrap(),
        SamlSignInOutcome::SignedIn
    );
    assert_eq!(
        db.store.membership(ada, acme).await.unwrap().unwrap().role,
        Role::Admin
    );

    // Someone registered the email between the read and the sign-in.
    let sent = request(acme, now());
    db.store.save_saml_request(sent.clone()).await.unwrap();
    let mut taken = account("ada@acme.example", "Ada Again");
    taken.user.password_hash = None;
    let racer = taken.user.id;
    let provision = Provision::Account {
        account: Box::new(taken),
        role: Role::Member,
    };
    let result = db
        .store
        .saml_sign_in(sign_in(racer, &sent, "_j2", provision))
        .await;
    assert!(matches!(result, Err(StoreError::Conflict)), "{result:?}");
    assert!(
        db.store
            .saml_request(acme, &sent.id, now())
            .await
            .unwrap()
            .is_some(),
        "not taken"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM saml_assertions WHERE assertion_id = '_j2'")
            .await,
        0
    );
}

#[on_both_backends(worker_threads = 4)]
async fn home_realm_discovery_reads_the_whitelists(db: Db) {
    let owner = db.registered("owner@acme.example").await;
    let acme = db.team(owner, "acme", Plan::Business).await;
    let globex = db.team(owner, "globex", Plan::Enterprise).await;
    let at = now();
    let configured = |org, domains: &[&str], at| configuration(org, domains, at);
    db.store
        .create_sso_configuration(
            configured(acme, &["acme.example", "shared.example"], at),
            event(EventType::OrganizationUpdated, Some(acme), None),
            support::signed_in(),
        )
        .await
        .unwrap();
    db.store
        .create_sso_configuration(
            configured(globex, &["shared.example"], at + Duration::seconds(1)),
            event(EventType::OrganizationUpdated, Some(globex), None),
            support::signed_in(),
        )
        .await
        .unwrap();
    let domain = |d: &str| gatehouse_domain::model::EmailDomain::parse(d).unwrap();
    let orgs = |found: Vec<SsoConfiguration>| {
        found
            .into_iter()
            .map(|c| c.organization_id)
            .collect::<Vec<_>>()
    };

    assert_eq!(
        orgs(
            db.store
                .sso_configurations_for_domain(&domain("acme.example"))
                .await
                .unwrap()
        ),
        [acme]
    );
    assert_eq!(
        orgs(
            db.store
                .sso_configurations_for_domain(&domain("shared.example"))
                .await
                .unwrap()
        ),
        [acme, globex],
        "oldest first"
    );
    assert!(db
        .store
        .sso_configurations_for_domain(&domain("other.example"))
        .await
        .unwrap()
        .is_empty());

    // A changed whitelist, and a deactivated configuration, are what discovery sees.
    let mut changed = configured(acme, &["renamed.example"], at);
    changed.is_active = false;
    db.store
        .update_sso_configuration(
            changed,
            event(EventType::OrganizationUpdated, Some(acme), None),
            support::signed_in(),
        )
        .await
        .unwrap();
    assert_eq!(
        orgs(
            db.store
                .sso_configurations_for_domain(&domain("shared.example"))
                .await
                .unwrap()
        ),
        [globex]
    );
    assert!(
        db.store
            .sso_configurations_for_domain(&domain("renamed.example"))
            .await
            .unwrap()
            .is_empty(),
        "inactive"
    );
    let reactivated = configured(acme, &["renamed.example"], at);
    db.store
        .update_sso_configuration(
            reactivated,
            event(EventType::OrganizationUpdated, Some(acme), None),
            support::signed_in(),
        )
        .await
        .unwrap();
    assert_eq!(
        orgs(
            db.store
                .sso_configurations_for_domain(&domain("renamed.example"))
                .await
                .unwrap()
        ),
        [acme]
    );
}

#[on_both_backends(worker_threads = 4)]
async fn an_unverified_account_the_idp_links_is_reclaimed_in_the_sign_in(db: Db) {
    // Someone registered newhire@acme.example with a password of their own before Acme's
    // IdP signed its new hire in: a session, an API key, a pending mailed link.
    let owner = db.registered("owner@acme.example").await;
    let acme = db.team(owner, "acme", Plan::Business).await;
    let squatter = db.registered("newhire@acme.example").await;
    let (theirs, their_refresh) = session(squatter, now(), Duration::days(30));
    db.store
        .create_session(
            theirs,
            event(EventType::AuthLogin, None, Some(squatter)),
            None,
            support::signed_in(),
        )
        .await
        .unwrap();
    let theirs_too = db.team(squatter, "squatters", Plan::Free).await;
    let (key, key_hash) = api_key(squatter, theirs_too, "spare", now());
    db.store
        .create_api_key(key, support::signed_in())
        .await
        .unwrap();
    let link = secret_hash("ghl_pending");
    let mailed = AccountToken {
        purpose: AccountTokenPurpose::MagicLink,
        user_id: squatter,
        email: Email::parse("newhire@acme.example").unwrap(),
        created_at: now(),
        expires_at: now() + Duration::minutes(15),
    };
    db.store
        .save_account_token(link.clone(), mailed, support::signed_in(), support::mail())
        .await
        .unwrap();

    let sent = request(acme, now());
    db.store.save_saml_request(sent.clone()).await.unwrap();
    let signing_in = SamlSignIn {
        reclaim: Some(Reclaim {
            user_id: squatter,
            audit: audited(AuditAction::UserReclaimed, squatter),
        }),
        ..sign_in(
            squatter,
            &sent,
            "_r1",
            Provision::Member { role: Role::Member },
        )
    };
    assert_eq!(
        db.store.saml_sign_in(signing_in.clone()).await.unwrap(),
        SamlSignInOutcome::SignedIn
    );

    let at = signing_in.at;
    assert_eq!(
        db.store
            .session_by_refresh_token(&their_refresh, at)
            .await
            .unwrap(),
        None,
        "their refresh token ended"
    );
    assert!(
        db.store
            .session_by_refresh_token(&signing_in.session.refresh_token_hash, at)
            .await
            .unwrap()
            .is_some(),
        "the IdP's session is open"
    );
    assert_eq!(
        db.store.use_api_key(&key_hash, at).await.unwrap(),
        None,
        "their key ended"
    );
    assert_eq!(
        db.store
            .take_account_token(&link, AccountTokenPurpose::MagicLink, at)
            .await
            .unwrap(),
        None,
        "their mailed link ended"
    );
    let credentials = db.store.credentials_by_id(squatter).await.unwrap().unwrap();
    assert!(
        credentials.user.email_verified,
        "the IdP vouched for the address"
    );
    assert_eq!(credentials.password_hash, None, "their password is gone");
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM audit_log WHERE action = 'user.reclaimed'")
            .await,
        1
    );

    // Verified now: the next sign-in links it as it is, and records no second reclaim.
    let (kept, kept_refresh) = session(squatter, at, Duration::days(30));
    db.store
        .create_session(
            kept,
            event(EventType::AuthLogin, None, Some(squatter)),
            None,
            support::signed_in(),
        )
        .await
        .unwrap();
    let again = request(acme, now());
    db.store.save_saml_request(again.clone()).await.unwrap();
    let second = SamlSignIn {
        reclaim: Some(Reclaim {
            user_id: squatter,
            audit: audited(AuditAction::UserReclaimed, squatter),
        }),
        ..sign_in(squatter, &again, "_r2", Provision::Nothing)
    };
    assert_eq!(
        db.store.saml_sign_in(second.clone()).await.unwrap(),
        SamlSignInOutcome::SignedIn
    );
    assert!(
        db.store
            .session_by_refresh_token(&kept_refresh, second.at)
            .await
            .unwrap()
            .is_some(),
        "a verified account keeps its sessions"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM audit_log WHERE action = 'user.reclaimed'")
            .await,
        1
    );
}

fn secret_hash(token: &str) -> gatehouse_domain::model::TokenHash {
    gatehouse_domain::model::TokenHash::of(token)
}
