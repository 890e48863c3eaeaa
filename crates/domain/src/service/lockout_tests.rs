//! Brute-force protection in the use cases: every password check for a sign-in goes through
//! the account's failed-sign-in count (see `model::lockout` for the rule itself).

use super::tests::origin;

use futures::executor::block_on;
use time::Duration;

use super::{
    tests::{
        ada_in_session, change_password, counting, login, ready, Mocks, Seen, ADA_EMAIL,
        ADA_PASSWORD, NEW_PASSWORD,
    },
    ChangePasswordError, LockedOut, LoginError,
};
use crate::{
    model::{AccountKey, CheckAdmission, LockoutRule, NewPassword},
    ports::{HashError, MockSignInAttempts, RateLimitError},
};

/// The account is locked for `seconds` more, or every check slot is taken (the store says
/// which wait): no slot is given.
fn locked_for(seconds: i64) -> MockSignInAttempts {
    let mut attempts = MockSignInAttempts::new();
    attempts
        .expect_begin_check()
        .returning(move |_, _, _| ready(Ok(CheckAdmission::Refused(Duration::seconds(seconds)))));
    attempts.expect_record_failure().never();
    attempts.expect_clear().never();
    attempts.expect_release().never();
    attempts
}

/// The counter store is down: it gives no slot, and fails to record the one failure.
fn unreachable_counter() -> MockSignInAttempts {
    let mut attempts = MockSignInAttempts::new();
    attempts
        .expect_begin_check()
        .returning(|_, _, _| ready(Err(RateLimitError("redis is down".into()))));
    attempts
        .expect_record_failure()
        .times(1)
        .returning(|_, _, _| ready(Err(RateLimitError("redis is down".into()))));
    attempts
}

impl Mocks {
    /// No account has the email; the password is still verified, once, against nothing.
    fn email_is_free_and_verified_once(&mut self) {
        self.email_is_free();
        self.hasher
            .expect_verify()
            .withf(|_, stored| stored.is_none())
            .times(1)
            .returning(|_, _| ready(Ok(false)));
    }
}

#[test]
fn a_locked_account_is_refused_without_checking_the_password_even_a_right_one() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.sign_in_attempts = locked_for(90);
    mocks.hasher.expect_verify().never();
    mocks.sessions.expect_create_session().never();

    match login(mocks, ADA_EMAIL, ADA_PASSWORD) {
        Err(LoginError::LockedOut(locked)) => {
            assert_eq!(locked.retry_after, Duration::seconds(90));
            assert_eq!(locked.seconds(), 90);
        }
        other => panic!("expected a lockout, got {:?}", other.err()),
    }
}

#[test]
fn with_every_check_slot_taken_the_password_is_not_checked_even_a_right_one() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.sign_in_attempts = locked_for(LockoutRule::BUSY_WAIT.whole_seconds());
    mocks.hasher.expect_verify().never();
    mocks.sessions.expect_create_session().never();

    match login(mocks, ADA_EMAIL, ADA_PASSWORD) {
        Err(LoginError::LockedOut(locked)) => assert_eq!(locked.seconds(), 1),
        other => panic!("expected a refusal, got {:?}", other.err()),
    }
}

#[test]
fn the_slot_is_taken_before_the_password_is_checked_and_given_back_without_a_verdict() {
    let order = Seen::new();
    let mut attempts = MockSignInAttempts::new();
    let seen = order.clone();
    attempts
        .expect_begin_check()
        .times(1)
        .returning(move |_, _, _| {
            seen.record("slot taken");
            ready(Ok(CheckAdmission::Admitted))
        });
    let seen = order.clone();
    attempts
        .expect_release()
        .times(1)
        .returning(move |account| {
            assert_eq!(*account, AccountKey::for_email(ADA_EMAIL));
            seen.record("slot given back");
            ready(Ok(()))
        });
    attempts.expect_record_failure().never();
    attempts.expect_clear().never();
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.sign_in_attempts = attempts;
    let seen = order.clone();
    mocks
        .hasher
        .expect_verify()
        .times(1)
        .returning(move |_, _| {
            seen.record("password checked");
            ready(Err(HashError("the hasher is gone".into())))
        });

    assert!(matches!(
        login(mocks, ADA_EMAIL, ADA_PASSWORD),
        Err(LoginError::Internal(_))
    ));
    assert_eq!(
        order.all(),
        vec!["slot taken", "password checked", "slot given back"]
    );
}

#[test]
fn an_unknown_email_is_locked_out_the_same_way() {
    let mut mocks = Mocks::new();
    mocks.email_is_free();
    mocks.sign_in_attempts = locked_for(60);
    mocks.hasher.expect_verify().never();

    assert!(matches!(
        login(mocks, "nobody@example.com", ADA_PASSWORD),
        Err(LoginError::LockedOut(_))
    ));
}

#[test]
fn a_wrong_password_counts_a_failure_for_the_account_under_the_default_rule() {
    let (failures, clears) = (Seen::new(), Seen::new());
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(false);
    mocks.sign_in_attempts = counting(&failures, &clears);

    assert!(matches!(
        login(mocks, " ADA@example.com", "wrong password"),
        Err(LoginError::InvalidCredentials)
    ));
    assert_eq!(failures.all(), vec![AccountKey::for_email(ADA_EMAIL)]);
    assert!(clears.all().is_empty());
}

#[test]
fn an_unknown_email_counts_a_failure_like_a_wrong_password() {
    let (failures, clears) = (Seen::new(), Seen::new());
    let mut mocks = Mocks::new();
    mocks.email_is_free_and_verified_once();
    mocks.sign_in_attempts = counting(&failures, &clears);

    assert!(matches!(
        login(mocks, "nobody@example.com", ADA_PASSWORD),
        Err(LoginError::InvalidCredentials)
    ));
    assert_eq!(
        failures.all(),
        vec![AccountKey::for_email("nobody@example.com")]
    );
    assert!(clears.all().is_empty());
}

#[test]
fn a_right_password_ends_the_run() {
    let (failures, clears) = (Seen::new(), Seen::new());
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(true);
    mocks.signer_signs();
    mocks
        .sessions
        .expect_create_session()
        .returning(|_, _, _, _| ready(Ok(())));
    mocks.sign_in_attempts = counting(&failures, &clears);

    assert!(login(mocks, ADA_EMAIL, ADA_PASSWORD).is_ok());
    assert_eq!(clears.all(), vec![AccountKey::for_email(ADA_EMAIL)]);
    assert!(failures.all().is_empty());
}

#[test]
fn a_password_longer_than_any_that_can_be_set_is_wrong_without_hashing_it() {
    let (failures, clears) = (Seen::new(), Seen::new());
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.hasher.expect_verify().never();
    mocks.sign_in_attempts = counting(&failures, &clears);

    let long = "x".repeat(NewPassword::MAX_CHARS + 1);
    assert!(matches!(
        login(mocks, ADA_EMAIL, &long),
        Err(LoginError::InvalidCredentials)
    ));
    assert_eq!(failures.all().len(), 1);
}

#[test]
fn an_unreachable_counter_store_lets_the_attempt_through() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(false);
    mocks.sign_in_attempts = unreachable_counter();

    assert!(matches!(
        login(mocks, ADA_EMAIL, "wrong password"),
        Err(LoginError::InvalidCredentials)
    ));
}

#[test]
fn a_wrong_current_password_on_change_counts_and_a_lockout_refuses_the_change() {
    let (failures, clears) = (Seen::new(), Seen::new());
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(false);
    mocks.sign_in_attempts = counting(&failures, &clears);
    let changed = change_password(mocks, &ada_in_session(), "not my password", NEW_PASSWORD);
    assert!(matches!(changed, Err(ChangePasswordError::WrongPassword)));
    assert_eq!(failures.all(), vec![AccountKey::for_email(ADA_EMAIL)]);

    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.sign_in_attempts = locked_for(120);
    mocks.hasher.expect_verify().never();
    mocks.accounts.expect_change_password().never();
    let changed = change_password(mocks, &ada_in_session(), ADA_PASSWORD, NEW_PASSWORD);
    assert!(matches!(
        changed,
        Err(ChangePasswordError::LockedOut(LockedOut { retry_after })) if retry_after == Duration::seconds(120)
    ));
}

#[test]
fn renewing_for_an_unknown_email_counts_a_failure_for_that_email() {
    let (failures, clears) = (Seen::new(), Seen::new());
    let mut mocks = Mocks::new();
    mocks.email_is_free_and_verified_once();
    mocks.sign_in_attempts = counting(&failures, &clears);

    let renewed = block_on(mocks.auth().renew_password(
        "nobody@example.com",
        ADA_PASSWORD.to_owned(),
        NEW_PASSWORD,
        &origin(),
    ));
    assert!(matches!(
        renewed,
        Err(ChangePasswordError::InvalidCredentials)
    ));
    assert_eq!(
        failures.all(),
        vec![AccountKey::for_email("nobody@example.com")]
    );
}

#[test]
fn lockouts_round_their_wait_up_to_whole_seconds() {
    let locked = |millis| LockedOut {
        retry_after: Duration::milliseconds(millis),
    };
    assert_eq!(locked(59_001).seconds(), 60);
    assert_eq!(locked(60_000).seconds(), 60);
    assert_eq!(locked(1).seconds(), 1);
    assert_eq!(locked(0).seconds(), 1);
    assert!(locked(60_000).to_string().contains("60 seconds"));
}
