//! The writes of the hottest requests are prepared once per connection and kept: on
//! PostgreSQL a statement that is not kept costs a round trip of its own to prepare it, and a
//! parse and a plan, every time it runs (issue 50, point 7: the code exchange and
//! `client_credentials` at half their signing limit or better).
//!
//! What is watched: diesel's instrumentation, installed as every connection's default, so that
//! it sees the pool's connections. A statement the connection keeps is announced once, when it
//! is prepared for the cache (`CacheQuery`); every statement run is announced as it starts
//! (`StartQuery`). After a first run of each request, every statement of a second run must have
//! been announced as kept. Transaction control (`BEGIN`, `COMMIT`) goes over the simple
//! protocol, prepares nothing and is not counted.
//!
//! The instrumentation is global to the process: this file is a test binary of its own, with
//! one test, so that no other test's statements are counted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// One test, on both backends in turn (see above): the per-backend macro is not used.
#[allow(dead_code, unused_macros, unused_imports)]
mod support;

use std::{
    collections::BTreeSet,
    sync::{Mutex, PoisonError},
};

use diesel::connection::{Instrumentation, InstrumentationEvent};
use gatehouse_domain::model::{
    Amr, Application, AuditAction, AuthorizationCode, ClientGrant, EventType, FullName,
    NewAuthorizationCode, OrganizationId, RedirectUri, Scope, TokenHash, User, UserId,
};
use gatehouse_store::Backend;
use support::{account, application, audited, event, now, session, Db};
use time::Duration;
use uuid::Uuid;

/// What the connections announced, in order.
#[derive(Default)]
struct Seen {
    /// The text of each statement prepared for a connection's cache.
    kept: BTreeSet<String>,
    /// The text of each statement run over the extended protocol (with binds), in order.
    started: Vec<String>,
}

static SEEN: Mutex<Option<Seen>> = Mutex::new(None);

/// Every connection's instrumentation: adds what it announces to [`SEEN`].
struct Watch;

impl Instrumentation for Watch {
    fn on_connection_event(&mut self, event: InstrumentationEvent<'_>) {
        let mut seen = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(seen) = seen.as_mut() else { return };
        match event {
            InstrumentationEvent::CacheQuery { sql, .. } => {
                seen.kept.insert(sql.to_owned());
            }
            InstrumentationEvent::StartQuery { query, .. } => {
                // A statement with binds displays as `<sql> -- binds: [..]`; a simple-protocol
                // batch (transaction control, settings) displays as its text alone.
                let shown = query.to_string();
                if let Some((sql, _)) = shown.split_once(" -- binds: ") {
                    seen.started.push(sql.to_owned());
                }
            }
            _ => {}
        }
    }
}

fn watch() -> Option<Box<dyn Instrumentation>> {
    Some(Box::new(Watch))
}

/// The statements started since `from` (an index into what was started) that no connection
/// keeps. Panics when none started: then nothing was watched.
fn not_kept_since(from: usize) -> Vec<String> {
    let seen = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
    let seen = seen.as_ref().expect("watching");
    assert!(
        seen.started.len() > from,
        "the instrumentation saw the statements"
    );
    seen.started[from..]
        .iter()
        .filter(|sql| !seen.kept.contains(*sql))
        .cloned()
        .collect()
}

fn started() -> usize {
    let seen = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
    seen.as_ref().expect("watching").started.len()
}

async fn registered(db: &Db, email: &str) -> (User, OrganizationId) {
    let new = account(email, "Someone");
    let user = User {
        id: new.user.id,
        email: new.user.email.clone(),
        full_name: new.user.full_name.clone(),
        created_at: new.user.created_at,
        updated_at: new.user.created_at,
        email_verified: false,
    };
    let org = new.workspace.id;
    db.store
        .create_account(new, support::signed_in())
        .await
        .unwrap();
    (user, org)
}

/// One code exchange, as the token endpoint makes it: the code saved at `/authorize`, the
/// token endpoint's reads, then the code redeemed with the session it opens, its event and its
/// audit record.
async fn exchange(db: &Db, app: &Application, user: UserId) {
    let code = AuthorizationCode {
        application_id: app.id,
        user_id: user,
        redirect_uri: RedirectUri::parse("https://app.example.com/cb").unwrap(),
        challenge: None,
        scope: Scope::parse("openid").unwrap(),
        amr: Amr::password(),
        authenticated_at: now(),
        nonce: None,
        created_at: now(),
        expires_at: now() + Duration::seconds(60),
    };
    let hash = TokenHash::of(&format!("code-{}", Uuid::new_v4()));
    db.store
        .save_authorization_code(
            NewAuthorizationCode {
                hash: hash.clone(),
                code: code.clone(),
            },
            audited(AuditAction::OAuthAuthorized, user),
        )
        .await
        .unwrap();
    // What the token endpoint reads before it redeems: the client, the code, the member, the
    // user, their organizations' policies and the application's organization (its plan).
    assert!(db
        .store
        .application_by_client_id(&app.client_id)
        .await
        .unwrap()
        .is_some());
    assert!(db.store.authorization_code(&hash).await.unwrap().is_some());
    assert!(db
        .store
        .membership(user, app.organization_id)
        .await
        .unwrap()
        .is_some());
    assert!(db.store.credentials_by_id(user).await.unwrap().is_some());
    assert!(!db.store.policies_of_member(user).await.unwrap().is_empty());
    assert!(db
        .store
        .organization(app.organization_id)
        .await
        .unwrap()
        .is_some());
    let (mut opened, _) = session(user, now(), Duration::days(30));
    opened.grant = Some(ClientGrant {
        application_id: app.id,
        client_id: app.client_id.clone(),
        scope: code.scope.clone(),
    });
    assert!(db
        .store
        .redeem_authorization_code(
            &hash,
            opened,
            event(EventType::AuthLogin, None, Some(user)),
            None,
            now(),
            audited(AuditAction::OAuthTokenIssued, user),
        )
        .await
        .unwrap());
}

/// A machine token's only write: its audit record, alone.
async fn machine_token(db: &Db, user: UserId) {
    db.store
        .record_audit(audited(AuditAction::OAuthClientCredentialsIssued, user))
        .await
        .unwrap();
}

/// `PATCH /users/me`: the user's new name, with its event and audit record.
async fn rename(db: &Db, user: &User, name: &str) {
    let renamed = User {
        full_name: FullName::parse(name).unwrap(),
        updated_at: now(),
        ..user.clone()
    };
    assert!(db
        .store
        .update_user(
            renamed,
            event(EventType::UserUpdated, None, Some(user.id)),
            support::signed_in(),
        )
        .await
        .unwrap());
}

/// A password sign-in's session, then a refresh of it (its read and its touch), then its
/// sign-out.
async fn session_life(db: &Db, user: UserId) -> [Vec<String>; 3] {
    let from = started();
    let (opened, hash) = session(user, now(), Duration::days(30));
    let id = opened.id;
    db.store
        .create_session(
            opened,
            event(EventType::AuthLogin, None, Some(user)),
            Some(100),
            support::signed_in(),
        )
        .await
        .unwrap();
    let signed_in = not_kept_since(from);
    let from = started();
    assert!(db
        .store
        .refresh_context(&hash, now())
        .await
        .unwrap()
        .is_some());
    assert!(db.store.touch_session(id, now()).await.unwrap());
    let refreshed = not_kept_since(from);
    let from = started();
    assert!(db
        .store
        .end_session(
            id,
            now(),
            event(EventType::AuthLogout, None, Some(user)),
            audited(AuditAction::Logout, user),
        )
        .await
        .unwrap());
    [signed_in, refreshed, not_kept_since(from)]
}

/// Runs each request twice on `backend` and returns, by request, the statements of the second
/// run that no connection keeps.
async fn not_kept_on(backend: Backend) -> Vec<(&'static str, Vec<String>)> {
    let db = Db::new(backend).await;
    let (ada, org) = registered(&db, "ada@example.com").await;
    let app = application(&db, org).await;
    let mut found = Vec::new();
    for round in 0..2 {
        let from = started();
        exchange(&db, &app, ada.id).await;
        let exchanged = not_kept_since(from);
        let from = started();
        machine_token(&db, ada.id).await;
        let machine = not_kept_since(from);
        let from = started();
        rename(&db, &ada, &format!("Ada {round}")).await;
        let renamed = not_kept_since(from);
        let [signed_in, refreshed, signed_out] = session_life(&db, ada.id).await;
        if round == 1 {
            found = vec![
                ("the code exchange", exchanged),
                ("a machine token's record", machine),
                ("a user's change", renamed),
                ("a sign-in", signed_in),
                ("a refresh", refreshed),
                ("a sign-out", signed_out),
            ];
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_hot_writes_are_prepared_once_and_kept_on_both_backends() {
    *SEEN.lock().unwrap_or_else(PoisonError::into_inner) = Some(Seen::default());
    diesel::connection::set_default_instrumentation(watch).expect("the default is set once");
    for backend in [Backend::Postgres, Backend::Sqlite] {
        for (request, statements) in not_kept_on(backend).await {
            assert!(
                statements.is_empty(),
                "{backend:?}: {request} ran statements its connection prepared afresh:\n{}",
                statements.join("\n")
            );
        }
    }
}
