//! The MFA store contract, run against both backends (`<name>::postgres` and `<name>::sqlite`):
//! factors and their confirmation, recovery codes, and the second step of a sign-in, whose
//! token, code and session are spent together or not at all.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod support;

use gatehouse_domain::{
    model::{
        Amr, AuditAction, AuthMethod, EventType, MfaFactor, MfaFactorId, MfaLogin, MfaMethod,
        PasswordHash, TokenHash, UserId,
    },
    ports::{SecondFactorUse, StoreError, StoredPasskey},
};
use support::{audited, event, now, on_both_backends, session, Db};
use time::Duration;
use uuid::Uuid;

fn factor(user: UserId, kind: MfaMethod, confirmed: bool) -> MfaFactor {
    MfaFactor {
        id: MfaFactorId::from_uuid(Uuid::now_v7()),
        user_id: user,
        kind,
        created_at: at(),
        confirmed_at: confirmed.then(at),
        last_used_at: None,
    }
}

/// A second step begun at the test's fixed moment, [`at`].
fn login(user: UserId) -> MfaLogin {
    MfaLogin {
        user_id: user,
        first_factor: Amr::password(),
        created_at: at(),
        expires_at: at() + Duration::minutes(5),
        failures: 0,
        webauthn_state: None,
        password_checked: None,
    }
}

/// One moment for the whole test file, to the microsecond (as the store keeps it).
fn at() -> time::OffsetDateTime {
    static AT: std::sync::OnceLock<time::OffsetDateTime> = std::sync::OnceLock::new();
    *AT.get_or_init(now)
}

const ADDED: &str = "SELECT COUNT(*) AS n FROM audit_log WHERE action = 'mfa.factor_added'";
const REMOVED: &str = "SELECT COUNT(*) AS n FROM audit_log WHERE action = 'mfa.factor_removed'";

fn codes(names: &[&str]) -> Vec<TokenHash> {
    names.iter().map(|c| TokenHash::of(c)).collect()
}

/// A confirmed TOTP factor of the user, whose last step is `step`.
async fn confirmed_totp(db: &Db, user: UserId, step: u64) -> MfaFactor {
    let pending = factor(user, MfaMethod::Totp, false);
    db.store
        .add_totp_factor(pending.clone(), b"sealed".to_vec())
        .await
        .unwrap();
    let enabled = event(EventType::AuthMfaEnabled, None, Some(user));
    assert!(db
        .store
        .confirm_totp_factor(
            user,
            pending.id,
            step,
            at(),
            codes(&["one", "two"]),
            vec![enabled],
            audited(AuditAction::MfaFactorAdded, user)
        )
        .await
        .unwrap());
    pending
}

/// Completes a second step of `user` with `used`: whether it took.
async fn complete(db: &Db, user: UserId, token: &str, used: SecondFactorUse) -> bool {
    let (mut opened, _) = session(user, at(), Duration::days(30));
    opened.amr = Amr::password().and(AuthMethod::Otp);
    db.store
        .complete_mfa_login(
            &TokenHash::of(token),
            used,
            opened,
            event(EventType::AuthLogin, None, Some(user)),
            None,
            at(),
            support::signed_in(),
        )
        .await
        .unwrap()
}

#[on_both_backends(worker_threads = 4)]
async fn a_totp_factor_is_pending_until_confirmed_once(db: Db) {
    let ada = db.registered("ada@example.com").await;
    let pending = factor(ada, MfaMethod::Totp, false);
    db.store
        .add_totp_factor(pending.clone(), b"sealed".to_vec())
        .await
        .unwrap();
    let stored = db
        .store
        .totp_factor(ada, pending.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (stored.factor, stored.sealed_secret, stored.last_step),
        (pending.clone(), b"sealed".to_vec(), None)
    );
    assert!(db
        .store
        .confirmed_totp_factors(ada)
        .await
        .unwrap()
        .is_empty());
    let bob = db.registered("bob@example.com").await;
    assert_eq!(
        db.store.totp_factor(bob, pending.id).await.unwrap(),
        None,
        "not his"
    );

    let events = db.count("SELECT COUNT(*) AS n FROM events").await;
    let enabled = event(EventType::AuthMfaEnabled, None, Some(ada));
    let added = || audited(AuditAction::MfaFactorAdded, ada);
    assert!(db
        .store
        .confirm_totp_factor(
            ada,
            pending.id,
            100,
            at(),
            codes(&["a", "b", "c"]),
            vec![enabled.clone()],
            added()
        )
        .await
        .unwrap());
    assert!(
        !db.store
            .confirm_totp_factor(
                ada,
                pending.id,
                101,
                at(),
                Vec::new(),
                vec![enabled],
                added()
            )
            .await
            .unwrap(),
        "once"
    );
    assert!(db.count("SELECT COUNT(*) AS n FROM events").await > events);
    assert_eq!(
        db.count(ADDED).await,
        1,
        "the second confirmation, which took nothing, is not on record"
    );
    let confirmed = db.store.confirmed_totp_factors(ada).await.unwrap();
    assert_eq!(confirmed.len(), 1);
    assert_eq!(confirmed[0].last_step, Some(100));
    assert_eq!(confirmed[0].factor.confirmed_at, Some(at()));
    assert_eq!(db.store.recovery_codes_left(ada).await.unwrap(), 3);
    assert_eq!(db.store.mfa_factors(ada).await.unwrap().len(), 1);
}

#[on_both_backends(worker_threads = 4)]
async fn a_second_step_spends_its_token_and_its_code_with_the_session(db: Db) {
    let ada = db.registered("ada@example.com").await;
    let totp = confirmed_totp(&db, ada, 100).await;
    db.store
        .create_mfa_login(TokenHash::of("ghm_1"), login(ada), support::signed_in())
        .await
        .unwrap();
    assert_eq!(
        db.store
            .mfa_login(&TokenHash::of("ghm_1"), at())
            .await
            .unwrap(),
        Some(login(ada))
    );

    // A step no later than the last one taken: nothing is spent, the token stays.
    let replay = SecondFactorUse::Totp {
        factor_id: totp.id,
        step: 100,
    };
    assert!(!complete(&db, ada, "ghm_1", replay).await);
    assert!(db
        .store
        .mfa_login(&TokenHash::of("ghm_1"), at())
        .await
        .unwrap()
        .is_some());
    let sessions = db.count("SELECT COUNT(*) AS n FROM sessions").await;
    assert!(
        complete(
            &db,
            ada,
            "ghm_1",
            SecondFactorUse::Totp {
                factor_id: totp.id,
                step: 101
            }
        )
        .await
    );
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM sessions").await,
        sessions + 1
    );
    assert_eq!(
        db.store.confirmed_totp_factors(ada).await.unwrap()[0].last_step,
        Some(101)
    );
    // The token is used.
    assert_eq!(
        db.store
            .mfa_login(&TokenHash::of("ghm_1"), at())
            .await
            .unwrap(),
        None
    );
    assert!(
        !complete(
            &db,
            ada,
            "ghm_1",
            SecondFactorUse::Totp {
                factor_id: totp.id,
                step: 102
            }
        )
        .await
    );

    // A recovery code works once.
    db.store
        .create_mfa_login(TokenHash::of("ghm_2"), login(ada), support::signed_in())
        .await
        .unwrap();
    let code = || SecondFactorUse::RecoveryCode {
        hash: TokenHash::of("one"),
    };
    assert!(complete(&db, ada, "ghm_2", code()).await);
    db.store
        .create_mfa_login(TokenHash::of("ghm_3"), login(ada), support::signed_in())
        .await
        .unwrap();
    assert!(!complete(&db, ada, "ghm_3", code()).await);
    assert_eq!(db.store.recovery_codes_left(ada).await.unwrap(), 1);
    // Another user's token is not hers to complete.
    let bob = db.registered("bob@example.com").await;
    db.store
        .create_mfa_login(TokenHash::of("ghm_bob"), login(bob), support::signed_in())
        .await
        .unwrap();
    assert!(
        !complete(
            &db,
            ada,
            "ghm_bob",
            SecondFactorUse::RecoveryCode {
                hash: TokenHash::of("two")
            }
        )
        .await
    );
}

#[on_both_backends(worker_threads = 4)]
async fn a_second_step_opens_only_while_the_password_its_first_step_checked_is_the_accounts(
    db: Db,
) {
    let ada = db.registered("ada@example.com").await;
    let totp = confirmed_totp(&db, ada, 100).await;
    let checked = db
        .store
        .credentials_by_id(ada)
        .await
        .unwrap()
        .unwrap()
        .password_hash;
    assert!(checked.is_some());
    let step = |checked: Option<PasswordHash>| MfaLogin {
        password_checked: checked,
        ..login(ada)
    };
    let finish = |token: &'static str, checked: Option<PasswordHash>, step: u64| {
        let db = &db;
        async move {
            let (mut opened, _) = session(ada, at(), Duration::days(30));
            opened.amr = Amr::password().and(AuthMethod::Otp);
            opened.password_checked = checked;
            db.store
                .complete_mfa_login(
                    &TokenHash::of(token),
                    SecondFactorUse::Totp {
                        factor_id: totp.id,
                        step,
                    },
                    opened,
                    event(EventType::AuthLogin, None, Some(ada)),
                    None,
                    at(),
                    support::signed_in(),
                )
                .await
        }
    };
    // The password kept with the first step comes back with it.
    db.store
        .create_mfa_login(
            TokenHash::of("ghm_kept"),
            step(checked.clone()),
            support::signed_in(),
        )
        .await
        .unwrap();
    let kept = db
        .store
        .mfa_login(&TokenHash::of("ghm_kept"), at())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(kept.password_checked, checked);

    // A password that is no longer the account's (a reset between the steps): nothing opens,
    // nothing is spent.
    let old = Some(PasswordHash::from_phc(
        "$argon2id$v=19$m=19456,t=2,p=1$b2xk$b2xk".to_owned(),
    ));
    db.store
        .create_mfa_login(
            TokenHash::of("ghm_old"),
            step(old.clone()),
            support::signed_in(),
        )
        .await
        .unwrap();
    let sessions = db.count("SELECT COUNT(*) AS n FROM sessions").await;
    assert!(matches!(
        finish("ghm_old", old, 101).await,
        Err(StoreError::Conflict)
    ));
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM sessions").await,
        sessions
    );
    assert!(
        db.store
            .mfa_login(&TokenHash::of("ghm_old"), at())
            .await
            .unwrap()
            .is_some(),
        "the token is not spent"
    );
    assert_eq!(
        db.store.confirmed_totp_factors(ada).await.unwrap()[0].last_step,
        Some(100),
        "nor the code"
    );

    // The password as it is: the session opens.
    assert!(finish("ghm_kept", checked, 101).await.unwrap());
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM sessions").await,
        sessions + 1
    );
}

#[on_both_backends(worker_threads = 4)]
async fn five_failures_or_the_clock_end_a_token(db: Db) {
    let ada = db.registered("ada@example.com").await;
    let token = TokenHash::of("ghm_x");
    db.store
        .create_mfa_login(token.clone(), login(ada), support::signed_in())
        .await
        .unwrap();
    for expected in 1..=4 {
        assert_eq!(db.store.fail_mfa_login(&token).await.unwrap(), expected);
        assert!(db.store.mfa_login(&token, at()).await.unwrap().is_some());
    }
    assert_eq!(db.store.fail_mfa_login(&token).await.unwrap(), 5);
    assert_eq!(
        db.store.mfa_login(&token, at()).await.unwrap(),
        None,
        "dead after five"
    );

    let late = TokenHash::of("ghm_late");
    db.store
        .create_mfa_login(late.clone(), login(ada), support::signed_in())
        .await
        .unwrap();
    assert_eq!(
        db.store
            .mfa_login(&late, at() + Duration::minutes(5))
            .await
            .unwrap(),
        None
    );
}

#[on_both_backends(worker_threads = 4)]
async fn removing_the_last_factor_takes_the_recovery_codes(db: Db) {
    let ada = db.registered("ada@example.com").await;
    let first = confirmed_totp(&db, ada, 1).await;
    let key = factor(ada, MfaMethod::Webauthn, true);
    let passkey = StoredPasskey {
        credential_id: "cred-1".into(),
        passkey: "{}".into(),
    };
    let added = || audited(AuditAction::MfaFactorAdded, ada);
    db.store
        .add_webauthn_factor(
            key.clone(),
            passkey.clone(),
            Vec::new(),
            Vec::new(),
            added(),
        )
        .await
        .unwrap();
    let taken = db
        .store
        .add_webauthn_factor(
            factor(ada, MfaMethod::Webauthn, true),
            passkey.clone(),
            Vec::new(),
            Vec::new(),
            added(),
        )
        .await;
    assert!(
        matches!(taken, Err(StoreError::Conflict)),
        "one credential, one factor"
    );
    assert_eq!(
        db.count(ADDED).await,
        2,
        "the TOTP factor and the key; the refused key has no record"
    );
    assert_eq!(
        db.store.webauthn_factors(ada).await.unwrap()[0].passkey,
        passkey
    );

    let removed = || Some(audited(AuditAction::MfaFactorRemoved, ada));
    assert!(db
        .store
        .remove_factor(ada, first.id, removed())
        .await
        .unwrap());
    assert_eq!(
        db.store.recovery_codes_left(ada).await.unwrap(),
        2,
        "a factor is left"
    );
    assert!(!db
        .store
        .remove_factor(ada, first.id, removed())
        .await
        .unwrap());
    assert_eq!(
        db.count(REMOVED).await,
        1,
        "removing nothing is not on record"
    );
    assert!(db.store.remove_factor(ada, key.id, None).await.unwrap());
    assert_eq!(
        db.store.recovery_codes_left(ada).await.unwrap(),
        0,
        "none left: codes go too"
    );
    assert_eq!(
        db.count(REMOVED).await,
        1,
        "a removal without a record writes none"
    );
}

#[on_both_backends(worker_threads = 4)]
async fn new_recovery_codes_replace_the_old_ones_on_record(db: Db) {
    let ada = db.registered("ada@example.com").await;
    confirmed_totp(&db, ada, 1).await;
    db.store
        .replace_recovery_codes(
            ada,
            codes(&["x", "y", "z"]),
            at(),
            audited(AuditAction::RecoveryCodesRegenerated, ada),
        )
        .await
        .unwrap();
    assert_eq!(db.store.recovery_codes_left(ada).await.unwrap(), 3);
    let regenerated =
        "SELECT COUNT(*) AS n FROM audit_log WHERE action = 'mfa.recovery_codes_regenerated'";
    assert_eq!(db.count(regenerated).await, 1);
}

#[on_both_backends(worker_threads = 4)]
async fn a_webauthn_registration_is_taken_once_before_it_expires(db: Db) {
    let ada = db.registered("ada@example.com").await;
    let registration = gatehouse_domain::model::WebauthnRegistration {
        id: MfaFactorId::from_uuid(Uuid::now_v7()),
        user_id: ada,
        state: "{\"state\":1}".into(),
        created_at: at(),
        expires_at: at() + Duration::minutes(5),
    };
    db.store
        .save_webauthn_registration(registration.clone())
        .await
        .unwrap();
    let bob = db.registered("bob@example.com").await;
    assert_eq!(
        db.store
            .take_webauthn_registration(bob, registration.id, at())
            .await
            .unwrap(),
        None
    );
    assert_eq!(
        db.store
            .take_webauthn_registration(ada, registration.id, at())
            .await
            .unwrap(),
        Some(registration.clone())
    );
    assert_eq!(
        db.store
            .take_webauthn_registration(ada, registration.id, at())
            .await
            .unwrap(),
        None,
        "once"
    );
}
