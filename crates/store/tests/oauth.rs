//! The OAuth store contract, run against both backends: authorization codes are kept by their
//! hash, redeemed once together with the session they open, and go with their application.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod support;

use gatehouse_domain::model::{
    Amr, ApiScopes, Application, AuditAction, AuthorizationCode, ClientGrant, ClientId,
    CodeVerifier, Consent, EventType, NewAuthorizationCode, NewEvent, Nonce, OAuthError,
    OrganizationId, PageRequest, RedirectUri, Scope, TokenHash, UserId,
};
use support::{account, application, audited, event, now, on_both_backends, session, Db};
use time::Duration;
use uuid::Uuid;

async fn registered(db: &Db, email: &str) -> (UserId, OrganizationId) {
    let new = account(email, "Someone");
    let ids = (new.user.id, new.workspace.id);
    db.store
        .create_account(new, support::signed_in())
        .await
        .unwrap();
    ids
}

fn code_for(app: &Application, user: UserId) -> (TokenHash, AuthorizationCode) {
    let verifier = CodeVerifier::parse(&"v".repeat(43)).unwrap();
    let code = AuthorizationCode {
        application_id: app.id,
        user_id: user,
        redirect_uri: RedirectUri::parse("https://app.example.com/cb").unwrap(),
        challenge: Some(verifier.challenge()),
        scope: Scope::parse("read:user read:resources").unwrap(),
        amr: Amr::external(),
        authenticated_at: now() - Duration::minutes(5),
        nonce: Some(Nonce::parse("n-0S6_WzA2Mj").unwrap()),
        created_at: now(),
        expires_at: now() + Duration::seconds(60),
    };
    (TokenHash::of(&format!("code-{}", Uuid::new_v4())), code)
}

fn login_event(user: UserId) -> NewEvent {
    event(EventType::AuthLogin, None, Some(user))
}

fn scopes(raw: &str) -> ApiScopes {
    ApiScopes::of(&Scope::parse(raw).unwrap())
}

#[on_both_backends(worker_threads = 4)]
async fn a_consent_is_remembered_replaced_listed_and_revoked_with_its_sessions(db: Db) {
    let (ada, org) = registered(&db, "ada@example.com").await;
    let (bob, _) = registered(&db, "bob@example.com").await;
    let app = application(&db, org).await;
    assert!(db
        .store
        .consented_scopes(ada, app.id)
        .await
        .unwrap()
        .is_empty());

    let consent = |user, raw: &str, at| Consent {
        user_id: user,
        application_id: app.id,
        scopes: scopes(raw),
        granted_at: at,
    };
    db.store
        .save_consent(
            consent(ada, "org:read", now()),
            audited(AuditAction::OAuthConsentGranted, ada),
        )
        .await
        .unwrap();
    let later = now() + Duration::minutes(1);
    db.store
        .save_consent(
            consent(ada, "org:read members:read", later),
            audited(AuditAction::OAuthConsentGranted, ada),
        )
        .await
        .unwrap();
    assert_eq!(
        db.store.consented_scopes(ada, app.id).await.unwrap(),
        scopes("org:read members:read"),
        "replaced"
    );
    assert!(
        db.store
            .consented_scopes(bob, app.id)
            .await
            .unwrap()
            .is_empty(),
        "per user"
    );
    let listed = db
        .store
        .consents_of(ada, PageRequest::default())
        .await
        .unwrap()
        .into_items();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (
            listed[0].client_id.clone(),
            listed[0].application_name.as_str(),
            listed[0].granted_at
        ),
        (app.client_id.clone(), "Billing", later)
    );
    assert_eq!(listed[0].scopes, scopes("org:read members:read"));

    // Ada's session of the application, and one of her own sign-in.
    let (mut granted, granted_hash) = session(ada, now(), Duration::days(30));
    granted.grant = Some(ClientGrant {
        application_id: app.id,
        client_id: app.client_id.clone(),
        scope: Scope::parse("org:read").unwrap(),
    });
    db.store
        .create_session(granted, login_event(ada), None, support::signed_in())
        .await
        .unwrap();
    let (own, own_hash) = session(ada, now(), Duration::days(30));
    db.store
        .create_session(own, login_event(ada), None, support::signed_in())
        .await
        .unwrap();

    assert!(
        !db.store
            .revoke_consent(
                bob,
                &app.client_id,
                later,
                audited(AuditAction::OAuthConsentRevoked, bob)
            )
            .await
            .unwrap(),
        "Bob gave none"
    );
    assert!(
        !db.store
            .revoke_consent(
                ada,
                &ClientId::generate(Uuid::new_v4()),
                later,
                audited(AuditAction::OAuthConsentRevoked, ada)
            )
            .await
            .unwrap(),
        "no such application"
    );
    assert!(db
        .store
        .revoke_consent(
            ada,
            &app.client_id,
            later,
            audited(AuditAction::OAuthConsentRevoked, ada)
        )
        .await
        .unwrap());
    assert!(db
        .store
        .consented_scopes(ada, app.id)
        .await
        .unwrap()
        .is_empty());
    assert!(db
        .store
        .consents_of(ada, PageRequest::default())
        .await
        .unwrap()
        .into_items()
        .is_empty());
    assert_eq!(
        db.store
            .session_by_refresh_token(&granted_hash, later)
            .await
            .unwrap(),
        None,
        "the application's session ended"
    );
    assert!(
        db.store
            .session_by_refresh_token(&own_hash, later)
            .await
            .unwrap()
            .is_some(),
        "her own sign-in did not"
    );
    assert!(
        !db.store
            .revoke_consent(
                ada,
                &app.client_id,
                later,
                audited(AuditAction::OAuthConsentRevoked, ada)
            )
            .await
            .unwrap(),
        "once"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM audit_log WHERE action = 'oauth.consent_granted'")
            .await,
        2
    );
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM audit_log WHERE action = 'oauth.consent_revoked'")
            .await,
        1,
        "what revoked nothing wrote nothing"
    );

    // Deleting the application forgets the consents given it.
    db.store
        .save_consent(
            consent(ada, "org:read", later),
            audited(AuditAction::OAuthConsentGranted, ada),
        )
        .await
        .unwrap();
    assert!(db
        .store
        .delete_application(
            org,
            app.id,
            event(EventType::ApplicationDeleted, Some(org), None),
            support::signed_in()
        )
        .await
        .unwrap());
    assert!(db
        .store
        .consents_of(ada, PageRequest::default())
        .await
        .unwrap()
        .into_items()
        .is_empty());
}

#[on_both_backends(worker_threads = 4)]
async fn a_code_is_kept_by_its_hash_and_redeemed_once_with_its_session(db: Db) {
    let (ada, org) = registered(&db, "ada@example.com").await;
    let app = application(&db, org).await;
    let (hash, code) = code_for(&app, ada);
    db.store
        .save_authorization_code(
            NewAuthorizationCode {
                hash: hash.clone(),
                code: code.clone(),
            },
            audited(AuditAction::OAuthAuthorized, ada),
        )
        .await
        .unwrap();
    assert_eq!(
        db.store
            .authorization_code(&TokenHash::of("unknown"))
            .await
            .unwrap(),
        None
    );
    let stored = db.store.authorization_code(&hash).await.unwrap().unwrap();
    assert_eq!(
        (stored.code, stored.used_at, stored.session_id),
        (code.clone(), None, None),
        "the nonce and the sign-in time too"
    );

    let at = now() + Duration::seconds(5);
    let (mut opened, refresh_hash) = session(ada, at, Duration::days(30));
    let grant = ClientGrant {
        application_id: app.id,
        client_id: app.client_id.clone(),
        scope: code.scope.clone(),
    };
    opened.grant = Some(grant.clone());
    opened.amr = code.amr.clone();
    assert!(db
        .store
        .redeem_authorization_code(
            &hash,
            opened.clone(),
            login_event(ada),
            None,
            at,
            audited(AuditAction::OAuthTokenIssued, ada)
        )
        .await
        .unwrap());
    let used = db.store.authorization_code(&hash).await.unwrap().unwrap();
    assert_eq!((used.used_at, used.session_id), (Some(at), Some(opened.id)));
    let live = db
        .store
        .session_by_refresh_token(&refresh_hash, at)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(live.id, opened.id);
    assert_eq!(
        live.grant,
        Some(grant),
        "the session belongs to the application"
    );
    assert_eq!(
        live.amr,
        Amr::external(),
        "signed in as the code's browser session was"
    );

    // Presented again: nothing is taken, no second session opens.
    let (again, again_hash) = session(ada, at, Duration::days(30));
    assert!(!db
        .store
        .redeem_authorization_code(
            &hash,
            again,
            login_event(ada),
            None,
            at,
            audited(AuditAction::OAuthTokenIssued, ada)
        )
        .await
        .unwrap());
    assert_eq!(
        db.store
            .session_by_refresh_token(&again_hash, at)
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        db.store
            .authorization_code(&hash)
            .await
            .unwrap()
            .unwrap()
            .session_id,
        Some(opened.id)
    );
    // A code that does not exist opens nothing either.
    let (other, other_hash) = session(ada, at, Duration::days(30));
    assert!(!db
        .store
        .redeem_authorization_code(
            &TokenHash::of("none"),
            other,
            login_event(ada),
            None,
            at,
            audited(AuditAction::OAuthTokenIssued, ada)
        )
        .await
        .unwrap());
    assert_eq!(
        db.store
            .session_by_refresh_token(&other_hash, at)
            .await
            .unwrap(),
        None
    );
    // One code, one record of its issue and one of its exchange: what took nothing wrote none.
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM audit_log WHERE action = 'oauth.authorized'")
            .await,
        1
    );
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM audit_log WHERE action = 'oauth.token_issued'")
            .await,
        1
    );
}

#[on_both_backends(worker_threads = 4)]
async fn a_code_issued_without_a_challenge_is_read_back_without_one(db: Db) {
    let (ada, org) = registered(&db, "ada@example.com").await;
    let app = application(&db, org).await;
    let (hash, mut code) = code_for(&app, ada);
    code.challenge = None;
    db.store
        .save_authorization_code(
            NewAuthorizationCode {
                hash: hash.clone(),
                code: code.clone(),
            },
            audited(AuditAction::OAuthAuthorized, ada),
        )
        .await
        .unwrap();
    let stored = db.store.authorization_code(&hash).await.unwrap().unwrap();
    assert_eq!(stored.code.challenge, None);
    assert_eq!(stored.code, code);
    assert!(stored.code.proven_by(None).is_ok());
    assert_eq!(
        stored.code.proven_by(Some(&"v".repeat(43))),
        Err(OAuthError::invalid_grant(
            "code_verifier was sent for a code issued without a code_challenge"
        )),
        "no verifier is taken for it"
    );
}

#[on_both_backends(worker_threads = 4)]
async fn a_password_login_session_has_no_grant(db: Db) {
    let (ada, _) = registered(&db, "ada@example.com").await;
    let (opened, hash) = session(ada, now(), Duration::days(30));
    db.store
        .create_session(opened, login_event(ada), None, support::signed_in())
        .await
        .unwrap();
    let live = db
        .store
        .session_by_refresh_token(&hash, now())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(live.grant, None);
    assert_eq!(live.amr, Amr::password());
}

#[on_both_backends(worker_threads = 4)]
async fn deleting_the_application_ends_its_sessions_and_codes(db: Db) {
    let (ada, org) = registered(&db, "ada@example.com").await;
    let app = application(&db, org).await;
    let (hash, code) = code_for(&app, ada);
    db.store
        .save_authorization_code(
            NewAuthorizationCode {
                hash: hash.clone(),
                code: code.clone(),
            },
            audited(AuditAction::OAuthAuthorized, ada),
        )
        .await
        .unwrap();
    let (mut opened, refresh_hash) = session(ada, now(), Duration::days(30));
    opened.grant = Some(ClientGrant {
        application_id: app.id,
        client_id: app.client_id.clone(),
        scope: code.scope,
    });
    assert!(db
        .store
        .redeem_authorization_code(
            &hash,
            opened,
            login_event(ada),
            Some(10),
            now(),
            audited(AuditAction::OAuthTokenIssued, ada)
        )
        .await
        .unwrap());
    let (unused, _) = code_for(&app, ada);
    let unused_code = unused.clone();
    let (_, mut second) = code_for(&app, ada);
    second.nonce = None;
    db.store
        .save_authorization_code(
            NewAuthorizationCode {
                hash: unused.clone(),
                code: second,
            },
            audited(AuditAction::OAuthAuthorized, ada),
        )
        .await
        .unwrap();

    assert!(db
        .store
        .delete_application(
            org,
            app.id,
            event(EventType::ApplicationDeleted, Some(org), None),
            support::signed_in()
        )
        .await
        .unwrap());
    assert_eq!(
        db.store
            .session_by_refresh_token(&refresh_hash, now())
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        db.store.authorization_code(&unused_code).await.unwrap(),
        None
    );
    assert_eq!(db.store.authorization_code(&hash).await.unwrap(), None);
}
