//! The store's contract, run against both backends: every test below exists twice, as
//! `<name>::postgres` and `<name>::sqlite`, so that a failure names the backend.
//!
//! Tests talk to the store through the domain's ports only; where the contract is about what
//! lies in the database (the outbox events, the slugs, the schema) they read it with a raw
//! connection of their own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod support;

use gatehouse_domain::{
    model::{
        Email, EventType, FullName, KeyHolder, PageRequest, PasswordHash, Plan, Role, User, UserId,
    },
    ports::{StoreError, StoredSigningKey},
};
use gatehouse_store::{Backend, StoreOptions};
use support::{account, api_key, event, now, on_both_backends, session, Db, EmptyDatabase};
use time::Duration;

// ---------------------------------------------------------------------------------------------
// Migrations
// ---------------------------------------------------------------------------------------------

#[on_both_backends(worker_threads = 4)]
async fn migrations_apply_revert_and_apply_again(db: EmptyDatabase) {
    let all = db.migration_versions();
    assert!(!all.is_empty());

    let applied = gatehouse_store::migrate(&db.url).await.unwrap();
    assert_eq!(
        applied, all,
        "the first run applies every migration, oldest first"
    );
    assert!(db.table_names().await.contains(&"events".to_owned()));
    assert!(
        gatehouse_store::migrate(&db.url).await.unwrap().is_empty(),
        "a second run has nothing left to apply"
    );

    let mut reverted = gatehouse_store::revert_all(&db.url).await.unwrap();
    reverted.reverse();
    assert_eq!(
        reverted, all,
        "reverting undoes every migration, newest first"
    );
    assert_eq!(
        db.table_names().await,
        Vec::<String>::new(),
        "nothing is left behind"
    );

    let reapplied = gatehouse_store::migrate(&db.url).await.unwrap();
    assert_eq!(
        reapplied, all,
        "after a full revert every migration applies again"
    );

    let options = StoreOptions {
        migrate: false,
        ..StoreOptions::default()
    };
    let store = gatehouse_store::open(&db.url, &options).await.unwrap();
    assert_eq!(store.backend(), db.backend);
    store.ping().await.unwrap();
    let new = account("again@example.com", "Again");
    store
        .create_account(new.clone(), support::signed_in())
        .await
        .unwrap();
    assert!(store
        .credentials_by_id(new.user.id)
        .await
        .unwrap()
        .is_some());
}

#[on_both_backends(worker_threads = 4)]
async fn opening_runs_pending_migrations(db: EmptyDatabase) {
    let store = gatehouse_store::open(&db.url, &StoreOptions::default())
        .await
        .unwrap();
    store.ping().await.unwrap();
    assert!(
        gatehouse_store::migrate(&db.url).await.unwrap().is_empty(),
        "open applied them all"
    );
}

// ---------------------------------------------------------------------------------------------
// Accounts
// ---------------------------------------------------------------------------------------------

#[on_both_backends(worker_threads = 4)]
async fn creating_an_account_creates_the_user_their_workspace_and_the_owner_membership(db: Db) {
    let new = account("Ada.Lovelace@Example.com", "Ada Lovelace");
    db.store
        .create_account(new.clone(), support::signed_in())
        .await
        .unwrap();

    let by_email = db
        .store
        .credentials_by_email(&Email::parse("ada.lovelace@example.com").unwrap())
        .await
        .unwrap()
        .expect("found by the normalised email");
    assert_eq!(by_email.user.id, new.user.id);
    assert_eq!(by_email.user.email.as_ref(), "ada.lovelace@example.com");
    assert_eq!(by_email.user.full_name, new.user.full_name);
    assert_eq!(by_email.user.created_at, new.user.created_at);
    assert_eq!(by_email.user.updated_at, new.user.created_at);
    assert_eq!(by_email.password_hash, new.user.password_hash);

    let by_id = db.store.credentials_by_id(new.user.id).await.unwrap();
    assert_eq!(by_id, Some(by_email));

    let membership = db
        .store
        .membership(new.user.id, new.workspace.id)
        .await
        .unwrap()
        .expect("the owner is a member of their workspace");
    assert_eq!(membership.organization_id, new.workspace.id);
    assert_eq!(membership.user_id, new.user.id);
    assert_eq!(membership.role, Role::Owner);
    assert_eq!(membership.plan, Plan::Free);
    assert_eq!(
        db.store.highest_plan(new.user.id).await.unwrap(),
        Some(Plan::Free)
    );

    assert_eq!(new.workspace.slug.as_ref(), "ada-lovelace-s-workspace");
    assert_eq!(
        db.strings("SELECT slug AS value FROM organizations").await,
        [new.workspace.slug.as_ref()]
    );
}

#[on_both_backends(worker_threads = 4)]
async fn unknown_users_and_foreign_organizations_are_not_found(db: Db) {
    let ada = account("ada@example.com", "Ada");
    let bob = account("bob@example.com", "Bob");
    db.store
        .create_account(ada.clone(), support::signed_in())
        .await
        .unwrap();
    db.store
        .create_account(bob.clone(), support::signed_in())
        .await
        .unwrap();

    let nobody = UserId::from(uuid::Uuid::now_v7());
    assert!(db.store.credentials_by_id(nobody).await.unwrap().is_none());
    let unknown = Email::parse("nobody@example.com").unwrap();
    assert!(db
        .store
        .credentials_by_email(&unknown)
        .await
        .unwrap()
        .is_none());
    assert!(db
        .store
        .membership(bob.user.id, ada.workspace.id)
        .await
        .unwrap()
        .is_none());
    assert!(db.store.highest_plan(nobody).await.unwrap().is_none());
}

#[on_both_backends(worker_threads = 4)]
async fn creating_an_account_with_a_taken_email_is_a_conflict(db: Db) {
    let first = account("grace@example.com", "Grace Hopper");
    db.store
        .create_account(first.clone(), support::signed_in())
        .await
        .unwrap();
    let events_before = db.count("SELECT COUNT(*) AS n FROM events").await;

    // Email::parse normalises the case, so this is the same address.
    let second = account("  GRACE@Example.COM ", "Someone Else");
    let result = db
        .store
        .create_account(second.clone(), support::signed_in())
        .await;
    assert!(matches!(result, Err(StoreError::Conflict)), "{result:?}");

    // Nothing of the second account was written.
    assert!(db
        .store
        .credentials_by_id(second.user.id)
        .await
        .unwrap()
        .is_none());
    assert!(db
        .store
        .membership(second.user.id, second.workspace.id)
        .await
        .unwrap()
        .is_none());
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM organizations").await, 1);
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM memberships").await, 1);
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM events").await,
        events_before
    );
    // And the first is untouched.
    let owner = db
        .store
        .credentials_by_email(&second.user.email)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(owner.user.id, first.user.id);
    assert_eq!(owner.user.full_name.as_ref(), "Grace Hopper");
}

#[on_both_backends(worker_threads = 4)]
async fn accounts_whose_names_make_the_same_slug_get_the_next_free_candidate(db: Db) {
    let first = account("ada@example.com", "Ada Lovelace");
    let second = account("ada@example.org", "Ada  Lovelace!");
    let third = account("ada@example.net", "ada lovelace");
    assert_eq!(first.workspace.slug, second.workspace.slug);
    assert_eq!(first.workspace.slug, third.workspace.slug);

    for new in [&first, &second, &third] {
        db.store
            .create_account(new.clone(), support::signed_in())
            .await
            .unwrap();
        let membership = db
            .store
            .membership(new.user.id, new.workspace.id)
            .await
            .unwrap();
        assert_eq!(membership.map(|m| m.role), Some(Role::Owner.into()));
    }
    let base = &first.workspace.slug;
    assert_eq!(
        db.strings("SELECT slug AS value FROM organizations ORDER BY slug")
            .await,
        [base.candidate(1), base.candidate(2), base.candidate(3)].map(|s| s.as_ref().to_owned())
    );
}

#[on_both_backends(worker_threads = 4)]
async fn creating_an_account_records_its_events_in_the_same_transaction(db: Db) {
    let new = account("ada@example.com", "Ada Lovelace");
    db.store
        .create_account(new.clone(), support::signed_in())
        .await
        .unwrap();
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM events").await, 2);
    assert_eq!(
        db.strings("SELECT event_type AS value FROM events ORDER BY event_type")
            .await,
        ["organization.created", "user.created"]
    );

    // The second event cannot be recorded (its id is taken): the whole account goes.
    let mut broken = account("bob@example.com", "Bob");
    broken.events[1].id = broken.events[0].id;
    assert!(matches!(
        db.store
            .create_account(broken.clone(), support::signed_in())
            .await,
        Err(StoreError::Conflict)
    ));
    assert!(db
        .store
        .credentials_by_id(broken.user.id)
        .await
        .unwrap()
        .is_none());
    assert!(db
        .store
        .credentials_by_email(&broken.user.email)
        .await
        .unwrap()
        .is_none());
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM users").await, 1);
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM organizations").await, 1);
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM memberships").await, 1);
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM events").await, 2);

    // The email is still free.
    let fixed = account("bob@example.com", "Bob");
    db.store
        .create_account(fixed, support::signed_in())
        .await
        .unwrap();
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM events").await, 4);
}

#[on_both_backends(worker_threads = 4)]
async fn the_workspace_event_shows_the_slug_the_workspace_got(db: Db) {
    db.store
        .create_account(account("ada@example.com", "Ada"), support::signed_in())
        .await
        .unwrap();
    db.store
        .create_account(account("ada@example.org", "Ada"), support::signed_in())
        .await
        .unwrap();
    let slugs = db
        .strings(&format!(
            "SELECT CAST(data AS TEXT) AS value FROM events \
                 WHERE event_type = '{}' ORDER BY occurred_at, id",
            EventType::OrganizationCreated.as_str()
        ))
        .await
        .into_iter()
        .map(|data| serde_json::from_str::<serde_json::Value>(&data).unwrap()["slug"].clone())
        .collect::<Vec<_>>();
    assert_eq!(slugs, ["ada-s-workspace", "ada-s-workspace-2"]);
}

#[on_both_backends(worker_threads = 4)]
async fn updating_a_user_changes_their_name(db: Db) {
    let new = account("ada@example.com", "Ada");
    db.store
        .create_account(new.clone(), support::signed_in())
        .await
        .unwrap();
    let later = now() + Duration::seconds(5);
    let user = User {
        id: new.user.id,
        email: new.user.email.clone(),
        full_name: FullName::parse("Ada King, Countess of Lovelace").unwrap(),
        created_at: new.user.created_at,
        updated_at: later,
        email_verified: false,
    };
    let updated = db
        .store
        .update_user(
            user.clone(),
            event(EventType::UserUpdated, None, Some(user.id)),
            support::signed_in(),
        )
        .await
        .unwrap();
    assert!(updated);

    let stored = db
        .store
        .credentials_by_id(new.user.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.user, user);
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM events").await, 3);
}

#[on_both_backends(worker_threads = 4)]
async fn updating_an_unknown_user_returns_false_and_records_nothing(db: Db) {
    let ghost = account("ghost@example.com", "Ghost").user;
    let user = User {
        id: ghost.id,
        email: ghost.email,
        full_name: ghost.full_name,
        created_at: ghost.created_at,
        updated_at: ghost.created_at,
        email_verified: false,
    };
    let updated = db
        .store
        .update_user(
            user,
            event(EventType::UserUpdated, None, Some(ghost.id)),
            support::signed_in(),
        )
        .await
        .unwrap();
    assert!(!updated);
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM events").await, 0);
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM audit_log").await, 0);
}

// ---------------------------------------------------------------------------------------------
// Sessions
// ---------------------------------------------------------------------------------------------

#[on_both_backends(worker_threads = 4)]
async fn a_refresh_token_finds_its_live_session_and_a_touch_marks_it_used(db: Db) {
    let ada = db.registered("ada@example.com").await;
    let created = now();
    let (new, hash) = session(ada, created, Duration::days(30));
    db.store
        .create_session(
            new.clone(),
            event(EventType::AuthLogin, None, Some(ada)),
            None,
            support::signed_in(),
        )
        .await
        .unwrap();
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM events").await, 3);
    assert!(db.store.is_live(new.id, created).await.unwrap());

    let used_at = created + Duration::minutes(10);
    let found = db
        .store
        .session_by_refresh_token(&hash, used_at)
        .await
        .unwrap()
        .expect("the session is live");
    assert_eq!(found.id, new.id);
    assert_eq!(found.user_id, ada);
    assert_eq!(found.created_at, created);
    assert_eq!(found.expires_at, new.expires_at);
    // Finding it changes nothing: the idle check needs the last use before this one.
    assert_eq!(found.last_used_at, created);

    assert!(db.store.touch_session(new.id, used_at).await.unwrap());
    let found = db
        .store
        .session_by_refresh_token(&hash, used_at)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.last_used_at, used_at);

    let (_, unknown) = session(ada, created, Duration::days(30));
    assert!(db
        .store
        .session_by_refresh_token(&unknown, used_at)
        .await
        .unwrap()
        .is_none());
}

#[on_both_backends(worker_threads = 4)]
async fn an_expired_session_cannot_be_refreshed(db: Db) {
    let ada = db.registered("ada@example.com").await;
    let created = now();
    let (new, hash) = session(ada, created, Duration::hours(1));
    db.store
        .create_session(
            new.clone(),
            event(EventType::AuthLogin, None, Some(ada)),
            None,
            support::signed_in(),
        )
        .await
        .unwrap();

    let just_before = new.expires_at - Duration::microseconds(1);
    assert!(db.store.is_live(new.id, just_before).await.unwrap());
    assert!(!db.store.is_live(new.id, new.expires_at).await.unwrap());

    let past = new.expires_at + Duration::seconds(1);
    assert!(!db.store.is_live(new.id, past).await.unwrap());
    assert!(db
        .store
        .session_by_refresh_token(&hash, past)
        .await
        .unwrap()
        .is_none());
    assert!(db
        .store
        .session_by_refresh_token(&hash, new.expires_at)
        .await
        .unwrap()
        .is_none());

    // Still usable before it expires: the failed attempts changed nothing.
    let found = db
        .store
        .session_by_refresh_token(&hash, just_before)
        .await
        .unwrap();
    assert_eq!(found.map(|s| s.id), Some(new.id));
}

#[on_both_backends(worker_threads = 4)]
async fn an_ended_session_is_no_longer_live(db: Db) {
    let ada = db.registered("ada@example.com").await;
    let created = now();
    let (new, hash) = session(ada, created, Duration::days(30));
    db.store
        .create_session(
            new.clone(),
            event(EventType::AuthLogin, None, Some(ada)),
            None,
            support::signed_in(),
        )
        .await
        .unwrap();
    let events = db.count("SELECT COUNT(*) AS n FROM events").await;

    let ended_at = created + Duration::minutes(1);
    let ended = db
        .store
        .end_session(
            new.id,
            ended_at,
            event(EventType::AuthLogout, None, Some(ada)),
            support::signed_in(),
        )
        .await
        .unwrap();
    assert!(ended);
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM events").await,
        events + 1
    );

    assert!(!db.store.is_live(new.id, ended_at).await.unwrap());
    assert!(db
        .store
        .session_by_refresh_token(&hash, ended_at)
        .await
        .unwrap()
        .is_none());

    let again = db
        .store
        .end_session(
            new.id,
            ended_at,
            event(EventType::AuthLogout, None, Some(ada)),
            support::signed_in(),
        )
        .await
        .unwrap();
    assert!(!again, "a session ends once");
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM events").await,
        events + 1,
        "ending it again records nothing"
    );
}

#[on_both_backends(worker_threads = 4)]
async fn a_session_whose_event_cannot_be_recorded_is_not_stored(db: Db) {
    let ada = db.registered("ada@example.com").await;
    let created = now();
    let (first, _) = session(ada, created, Duration::days(1));
    let login = event(EventType::AuthLogin, None, Some(ada));
    db.store
        .create_session(first, login.clone(), None, support::signed_in())
        .await
        .unwrap();

    // The event's id is taken, so the event cannot be recorded: neither can the session.
    let (second, hash) = session(ada, created, Duration::days(1));
    assert!(matches!(
        db.store
            .create_session(second.clone(), login, None, support::signed_in())
            .await,
        Err(StoreError::Conflict)
    ));
    assert!(!db.store.is_live(second.id, created).await.unwrap());
    assert!(db
        .store
        .session_by_refresh_token(&hash, created)
        .await
        .unwrap()
        .is_none());
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM sessions").await, 1);
}

#[on_both_backends(worker_threads = 4)]
async fn an_account_without_a_password_has_none_to_check_or_remember(db: Db) {
    let mut new = account("sso@example.com", "Single Sign-On");
    new.user.password_hash = None;
    let user = new.user.id;
    db.store
        .create_account(new, support::signed_in())
        .await
        .unwrap();
    let stored = db.store.credentials_by_id(user).await.unwrap().unwrap();
    assert_eq!(stored.password_hash, None, "read back as no password");

    // Setting one later (a reset, say) leaves nothing in the history.
    let first = PasswordHash::from_phc("$argon2id$first".into());
    db.store
        .change_password(
            user,
            first.clone(),
            None,
            now(),
            event(EventType::AuthPasswordChanged, None, Some(user)),
            support::signed_in(),
        )
        .await
        .unwrap();
    let stored = db
        .store
        .credentials_by_email(&stored.user.email)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.password_hash, Some(first));
    assert_eq!(
        db.store.previous_password_hashes(user, 24).await.unwrap(),
        vec![]
    );
}

#[on_both_backends(worker_threads = 4)]
async fn changing_the_password_ends_every_other_session_but_the_kept_one(db: Db) {
    let ada = db.registered("ada@example.com").await;
    let bob = db.registered("bob@example.com").await;
    let created = now();
    let mut sessions = Vec::new();
    for user in [ada, ada, ada, bob] {
        let (new, hash) = session(user, created, Duration::days(30));
        db.store
            .create_session(
                new.clone(),
                event(EventType::AuthLogin, None, Some(user)),
                None,
                support::signed_in(),
            )
            .await
            .unwrap();
        sessions.push((new, hash));
    }
    let events = db.count("SELECT COUNT(*) AS n FROM events").await;

    let changed_at = created + Duration::minutes(1);
    let new_hash = PasswordHash::from_phc("$argon2id$changed".into());
    db.store
        .change_password(
            ada,
            new_hash.clone(),
            Some(sessions[0].0.id),
            changed_at,
            event(EventType::AuthPasswordChanged, None, Some(ada)),
            support::signed_in(),
        )
        .await
        .unwrap();

    let stored = db.store.credentials_by_id(ada).await.unwrap().unwrap();
    assert_eq!(stored.password_hash, Some(new_hash));
    assert_eq!(stored.user.updated_at, changed_at);
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM events").await,
        events + 1
    );

    let live = |i: usize| {
        let id = sessions[i].0.id;
        let store = db.store.clone();
        async move { store.is_live(id, changed_at).await.unwrap() }
    };
    assert!(live(0).await, "the kept session lives on");
    assert!(!live(1).await);
    assert!(!live(2).await);
    assert!(live(3).await, "another user's session is not touched");
    assert!(db
        .store
        .session_by_refresh_token(&sessions[1].1, changed_at)
        .await
        .unwrap()
        .is_none());
    assert!(db
        .store
        .session_by_refresh_token(&sessions[0].1, changed_at)
        .await
        .unwrap()
        .is_some());

    // Without a session to keep, every session of the user ends.
    db.store
        .change_password(
            ada,
            PasswordHash::from_phc("$argon2id$again".into()),
            None,
            changed_at + Duration::minutes(1),
            event(EventType::AuthPasswordChanged, None, Some(ada)),
            support::signed_in(),
        )
        .await
        .unwrap();
    assert!(!live(0).await, "keep = None ends them all");
    assert!(db
        .store
        .session_by_refresh_token(&sessions[0].1, changed_at)
        .await
        .unwrap()
        .is_none());
    assert!(live(3).await);
}

// ---------------------------------------------------------------------------------------------
// API keys
// ---------------------------------------------------------------------------------------------

#[on_both_backends(worker_threads = 4)]
async fn api_keys_are_listed_newest_first(db: Db) {
    let ada = account("ada@example.com", "Ada");
    db.store
        .create_account(ada.clone(), support::signed_in())
        .await
        .unwrap();
    let t = now();
    let mut created = Vec::new();
    for (i, name) in ["ci", "deploy", "backup"].into_iter().enumerate() {
        let at = t + Duration::seconds(i64::try_from(i).unwrap());
        let (new, _) = api_key(ada.user.id, ada.workspace.id, name, at);
        let key = db
            .store
            .create_api_key(new.clone(), support::signed_in())
            .await
            .unwrap()
            .expect("created");
        assert_eq!(key.id, new.id);
        assert_eq!(key.name, new.name);
        assert_eq!(key.prefix, new.prefix);
        assert_eq!(key.organization_id, ada.workspace.id);
        assert_eq!(key.holder, KeyHolder::User(ada.user.id));
        assert_eq!(key.created_at, at);
        assert_eq!(key.last_used_at, None);
        created.push(key);
    }
    created.reverse();
    assert_eq!(
        db.store
            .api_keys_of(ada.user.id, PageRequest::new(None, Some(100)).unwrap())
            .await
            .unwrap()
            .into_items(),
        created
    );
    // Paged by the query: the second page of two holds the oldest key.
    let second = db
        .store
        .api_keys_of(ada.user.id, PageRequest::new(Some(2), Some(2)).unwrap())
        .await
        .unwrap();
    assert_eq!(
        (second.items(), second.total(), second.has_next()),
        (&created[2..], 3, false)
    );
    assert_eq!(
        db.store
            .api_key_of(ada.user.id, created[1].id)
            .await
            .unwrap()
            .as_ref(),
        Some(&created[1])
    );

    let bob = db.registered("bob@example.com").await;
    assert!(db
        .store
        .api_keys_of(bob, PageRequest::new(None, Some(100)).unwrap())
        .await
        .unwrap()
        .into_items()
        .is_empty());
    assert_eq!(
        db.store.api_key_of(bob, created[1].id).await.unwrap(),
        None,
        "another user's key"
    );
}

#[on_both_backends(worker_threads = 4)]
async fn an_api_key_is_found_by_its_hash_and_marked_used(db: Db) {
    let ada = account("ada@example.com", "Ada");
    db.store
        .create_account(ada.clone(), support::signed_in())
        .await
        .unwrap();
    let t = now();
    let (new, hash) = api_key(ada.user.id, ada.workspace.id, "ci", t);
    db.store
        .create_api_key(new.clone(), support::signed_in())
        .await
        .unwrap()
        .expect("created");

    let used_at = t + Duration::seconds(30);
    let found = db
        .store
        .use_api_key(&hash, used_at)
        .await
        .unwrap()
        .expect("found by hash");
    assert_eq!(found.id, new.id);
    assert_eq!(found.holder, KeyHolder::User(ada.user.id));
    assert_eq!(found.organization_id, ada.workspace.id);
    let listed = db
        .store
        .api_keys_of(ada.user.id, PageRequest::new(None, Some(100)).unwrap())
        .await
        .unwrap()
        .into_items();
    assert_eq!(listed[0].last_used_at, Some(used_at));

    let much_later = used_at + Duration::hours(2);
    db.store
        .use_api_key(&hash, much_later)
        .await
        .unwrap()
        .unwrap();
    let listed = db
        .store
        .api_keys_of(ada.user.id, PageRequest::new(None, Some(100)).unwrap())
        .await
        .unwrap()
        .into_items();
    assert_eq!(listed[0].last_used_at, Some(much_later));

    let (_, unknown) = api_key(ada.user.id, ada.workspace.id, "nope", t);
    assert!(db
        .store
        .use_api_key(&unknown, used_at)
        .await
        .unwrap()
        .is_none());
}

#[on_both_backends(worker_threads = 4)]
async fn only_its_owner_can_delete_an_api_key(db: Db) {
    let ada = account("ada@example.com", "Ada");
    db.store
        .create_account(ada.clone(), support::signed_in())
        .await
        .unwrap();
    let bob = db.registered("bob@example.com").await;
    let t = now();
    let (new, hash) = api_key(ada.user.id, ada.workspace.id, "ci", t);
    db.store
        .create_api_key(new.clone(), support::signed_in())
        .await
        .unwrap()
        .expect("created");

    assert!(
        !db.store
            .delete_api_key(bob, new.id, support::signed_in())
            .await
            .unwrap(),
        "not Bob's key"
    );
    assert!(
        db.store.use_api_key(&hash, t).await.unwrap().is_some(),
        "still there"
    );

    assert!(db
        .store
        .delete_api_key(ada.user.id, new.id, support::signed_in())
        .await
        .unwrap());
    assert!(db.store.use_api_key(&hash, t).await.unwrap().is_none());
    assert!(db
        .store
        .api_keys_of(ada.user.id, PageRequest::new(None, Some(100)).unwrap())
        .await
        .unwrap()
        .into_items()
        .is_empty());
    assert!(
        !db.store
            .delete_api_key(ada.user.id, new.id, support::signed_in())
            .await
            .unwrap(),
        "already gone"
    );
}

#[on_both_backends(worker_threads = 4)]
async fn api_key_hashes_are_unique(db: Db) {
    let ada = account("ada@example.com", "Ada");
    db.store
        .create_account(ada.clone(), support::signed_in())
        .await
        .unwrap();
    let (first, _) = api_key(ada.user.id, ada.workspace.id, "ci", now());
    db.store
        .create_api_key(first.clone(), support::signed_in())
        .await
        .unwrap()
        .expect("created");
    let mut second = api_key(ada.user.id, ada.workspace.id, "other", now()).0;
    second.key_hash = first.key_hash.clone();
    let result = db.store.create_api_key(second, support::signed_in()).await;
    assert!(matches!(result, Err(StoreError::Conflict)), "{result:?}");
}

#[on_both_backends(worker_threads = 4)]
async fn a_user_holds_at_most_fifty_keys_in_an_organization_even_created_at_once(db: Db) {
    let ada = account("ada@example.com", "Ada");
    db.store
        .create_account(ada.clone(), support::signed_in())
        .await
        .unwrap();
    let t = now();
    for n in 0..45 {
        let (new, _) = api_key(ada.user.id, ada.workspace.id, &format!("key {n}"), t);
        db.store
            .create_api_key(new, support::signed_in())
            .await
            .unwrap()
            .expect("created");
    }
    // Ten at once, where five fit: five are created, five refused, none past the bound.
    let attempts = (45..55).map(|n| {
        let (new, _) = api_key(ada.user.id, ada.workspace.id, &format!("key {n}"), t);
        let store = db.store.clone();
        async move {
            store
                .create_api_key(new, support::signed_in())
                .await
                .unwrap()
        }
    });
    let results = futures::future::join_all(attempts).await;
    assert_eq!(results.iter().filter(|r| r.is_some()).count(), 5);
    assert_eq!(
        db.store
            .api_keys_of(ada.user.id, PageRequest::new(None, Some(100)).unwrap())
            .await
            .unwrap()
            .into_items()
            .len(),
        50
    );
    let (one_more, hash) = api_key(ada.user.id, ada.workspace.id, "one more", t);
    assert_eq!(
        db.store
            .create_api_key(one_more, support::signed_in())
            .await
            .unwrap(),
        None
    );
    assert!(
        db.store.use_api_key(&hash, t).await.unwrap().is_none(),
        "nothing written"
    );

    // Another user's keys are counted apart.
    let bob = account("bob@example.com", "Bob");
    db.store
        .create_account(bob.clone(), support::signed_in())
        .await
        .unwrap();
    let (new, _) = api_key(bob.user.id, bob.workspace.id, "bob's", t);
    assert!(db
        .store
        .create_api_key(new, support::signed_in())
        .await
        .unwrap()
        .is_some());
}

// ---------------------------------------------------------------------------------------------
// Signing keys and health
// ---------------------------------------------------------------------------------------------

#[on_both_backends(worker_threads = 4)]
async fn signing_keys_are_listed_newest_first_with_their_bytes_intact(db: Db) {
    assert!(db.store.signing_keys().await.unwrap().is_empty());
    let t = now();
    let older = StoredSigningKey {
        kid: "key-1".into(),
        private_key_sealed: vec![0, 1, 2, 0xff, 0xfe, 0, 0x80],
        public_key_der: (0..=255).collect(),
        created_at: t,
    };
    let newer = StoredSigningKey {
        kid: "key-2".into(),
        private_key_sealed: vec![0; 64],
        public_key_der: vec![0x30, 0x82, 0x01, 0x0a, 0x00, 0xff],
        created_at: t + Duration::days(1),
    };
    db.store.add_signing_key(older.clone()).await.unwrap();
    db.store.add_signing_key(newer.clone()).await.unwrap();
    assert_eq!(db.store.signing_keys().await.unwrap(), [newer, older]);
}

#[on_both_backends(worker_threads = 4)]
async fn the_store_answers_a_ping(db: Db) {
    db.store.ping().await.unwrap();
    assert_eq!(db.store.backend(), db.backend);
}

// ---------------------------------------------------------------------------------------------
// Concurrency
// ---------------------------------------------------------------------------------------------

#[on_both_backends(worker_threads = 4)]
async fn concurrent_registrations_of_the_same_email_leave_exactly_one_account(db: Db) {
    let attempts: Vec<_> = (0..8)
        .map(|i| account(&same_email_in_another_case(i), &format!("User {i}")))
        .map(|new| {
            let store = db.store.clone();
            tokio::spawn(async move { store.create_account(new, support::signed_in()).await })
        })
        .collect();
    let mut ok = 0;
    for attempt in attempts {
        match attempt.await.unwrap() {
            Ok(()) => ok += 1,
            Err(StoreError::Conflict) => {}
            Err(other) => panic!("expected Ok or Conflict, got {other:?}"),
        }
    }
    assert_eq!(ok, 1, "exactly one registration wins");
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM users").await, 1);
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM organizations").await, 1);
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM memberships").await, 1);
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM events").await, 2);
}

#[on_both_backends(worker_threads = 4)]
async fn concurrent_registrations_with_the_same_name_all_get_a_workspace(db: Db) {
    let accounts: Vec<_> = (0..8)
        .map(|i| account(&format!("ada{i}@example.com"), "Ada Lovelace"))
        .collect();
    let attempts: Vec<_> = accounts
        .iter()
        .cloned()
        .map(|new| {
            let store = db.store.clone();
            tokio::spawn(async move { store.create_account(new, support::signed_in()).await })
        })
        .collect();
    let mut outcomes = Vec::new();
    for attempt in attempts {
        outcomes.push(attempt.await.unwrap());
    }
    assert!(
        outcomes.iter().all(Result::is_ok),
        "every registration succeeds: {outcomes:?}"
    );
    for new in &accounts {
        let membership = db
            .store
            .membership(new.user.id, new.workspace.id)
            .await
            .unwrap();
        assert_eq!(membership.map(|m| m.role), Some(Role::Owner.into()));
    }
    let mut expected: Vec<String> = (1..=8)
        .map(|n| accounts[0].workspace.slug.candidate(n).as_ref().to_owned())
        .collect();
    expected.sort();
    let slugs = db
        .strings("SELECT slug AS value FROM organizations ORDER BY slug")
        .await;
    assert_eq!(slugs, expected);
}

/// SQLite only: concurrent writers queue (BEGIN IMMEDIATE + busy_timeout) instead of failing
/// with "database is locked".
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sqlite_serialises_sixteen_concurrent_registrations_without_database_is_locked() {
    let db = Db::new(Backend::Sqlite).await;
    let accounts: Vec<_> = (0..16)
        .map(|i| account(&format!("user{i}@example.com"), &format!("User {i}")))
        .collect();
    let attempts: Vec<_> = accounts
        .iter()
        .cloned()
        .map(|new| {
            let store = db.store.clone();
            tokio::spawn(async move { store.create_account(new, support::signed_in()).await })
        })
        .collect();
    for (i, attempt) in attempts.into_iter().enumerate() {
        if let Err(e) = attempt.await.unwrap() {
            panic!(
                "registration {i} failed: {e:?} ({:?})",
                std::error::Error::source(&e)
            );
        }
    }
    for new in &accounts {
        assert!(db
            .store
            .credentials_by_id(new.user.id)
            .await
            .unwrap()
            .is_some());
    }
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM users").await, 16);
    assert_eq!(db.count("SELECT COUNT(*) AS n FROM events").await, 32);
}

/// `same@example.com`, with the letters of `same` whose bit is set in `variant` in upper case.
fn same_email_in_another_case(variant: usize) -> String {
    let local: String = "same"
        .chars()
        .enumerate()
        .map(|(bit, c)| {
            if variant & (1 << bit) != 0 {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect();
    format!("{local}@Example.com")
}

/// A fresh SQLite database, its WAL and its shared-memory file are readable and writable by
/// their owner only: they hold password hashes, sealed secrets and personal data.
#[cfg(unix)]
#[tokio::test]
async fn a_fresh_sqlite_database_and_its_wal_and_shm_are_created_0600() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let url = gatehouse_testkit::sqlite_url(&dir);
    let store = gatehouse_store::open(
        &url,
        &StoreOptions {
            max_connections: 2,
            migrate: true,
            ..StoreOptions::default()
        },
    )
    .await
    .unwrap();
    store
        .create_account(account("ada@example.com", "Ada"), support::signed_in())
        .await
        .unwrap();
    let path = url.strip_prefix("sqlite://").unwrap();
    for file in [
        path.to_owned(),
        format!("{path}-wal"),
        format!("{path}-shm"),
    ] {
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{file} is {mode:o}");
    }
}

/// A PostgreSQL statement that runs past the statement timeout is cancelled by the server: the
/// store answers [`StoreError::Unavailable`] (the API's `503` with `Retry-After`), not a
/// failure, and its connection serves the next call as before. The statement here waits for a
/// lock another connection holds: the longest a statement can take without the data to make it.
#[tokio::test]
async fn a_postgres_statement_past_the_timeout_is_cancelled_and_the_store_stays_up() {
    use diesel_async::{AsyncConnection as _, AsyncPgConnection, SimpleAsyncConnection as _};

    let db = gatehouse_testkit::TestDatabase::create().await;
    let options = StoreOptions {
        max_connections: 1,
        statement_timeout: Some(std::time::Duration::from_millis(200)),
        ..StoreOptions::default()
    };
    let store = gatehouse_store::open(db.url(), &options).await.unwrap();
    let ada = account("ada@example.com", "Ada");
    store
        .create_account(ada.clone(), support::signed_in())
        .await
        .unwrap();

    let mut holder = AsyncPgConnection::establish(db.url()).await.unwrap();
    holder
        .batch_execute("BEGIN; LOCK TABLE users IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let cancelled = store.credentials_by_id(ada.user.id).await;
    assert!(
        matches!(cancelled, Err(StoreError::Unavailable(_))),
        "{cancelled:?}"
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(2));

    holder.batch_execute("ROLLBACK").await.unwrap();
    assert!(store
        .credentials_by_id(ada.user.id)
        .await
        .unwrap()
        .is_some());
}
