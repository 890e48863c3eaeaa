//! Multi-factor authentication: enrolment, the once-only codes, recovery codes, the rule that
//! keeps an organization's required factor, and the second step of a sign-in; with every port
//! mocked.

use super::tests::origin;

use futures::executor::block_on;
use time::Duration;
use uuid::Uuid;

use super::{
    tests::{
        ada_credentials, ada_in_session, counting, now, ready, recording, secret_of, Mocks, Seen,
        ADA, ADA_EMAIL, ADA_PASSWORD,
    },
    Confirmed, MfaError, MfaService, SecondFactorProof, SignIn, TokenPair, VerifyError,
};
use crate::{
    model::{
        AccountKey, Amr, AuditAction, AuditActor, AuditTarget, AuthMethod, EventType, MfaFactor,
        MfaFactorId, MfaLogin, MfaMethod, MfaPolicy, OrganizationPolicies, Plan, TargetKind,
        TokenHash, TokenKind, TotpSecret, MFA_TOKEN_TTL,
    },
    ports::{CipherError, MockMfaStore, SecondFactorUse, StoredTotp},
};

const FACTOR: MfaFactorId = MfaFactorId::from_uuid(Uuid::from_u128(0xfac7));
const STEP: u64 = 57_133_360;

fn factor(confirmed: bool) -> MfaFactor {
    MfaFactor {
        id: FACTOR,
        user_id: ADA,
        kind: MfaMethod::Totp,
        created_at: now() - Duration::days(1),
        confirmed_at: confirmed.then(|| now() - Duration::days(1)),
        last_used_at: None,
    }
}

fn stored(confirmed: bool, last_step: Option<u64>) -> StoredTotp {
    StoredTotp {
        factor: factor(confirmed),
        sealed_secret: b"sealed".to_vec(),
        last_step,
    }
}

impl Mocks {
    fn mfa(self) -> MfaService {
        let (ports, auth) = self.ports_with_auth();
        MfaService::new((&ports).into(), auth)
    }

    /// The cipher opens the factor's sealed secret (under the factor's own context).
    fn cipher_opens(&mut self) {
        self.cipher
            .expect_open()
            .withf(|sealed, context| {
                sealed == b"sealed" && context == format!("mfa-totp:{FACTOR}").as_bytes()
            })
            .returning(|_, _| Ok(b"secret".to_vec()));
    }

    /// Any code the app would show matches `step`.
    fn code_matches(&mut self, step: Option<u64>) {
        self.totp
            .expect_matching_step()
            .returning(move |secret, _, _| {
                assert_eq!(secret, &TotpSecret::from_bytes(b"secret".to_vec()));
                step
            });
    }

    /// A fresh MfaStore mock whose user has `factors`.
    fn factors_are(&mut self, factors: Vec<MfaFactor>) -> &mut MockMfaStore {
        let mut mfa = MockMfaStore::new();
        mfa.expect_mfa_factors()
            .returning(move |_| ready(Ok(factors.clone())));
        self.mfa = mfa;
        &mut self.mfa
    }

    /// Ada's live second step.
    /// No sign-in waits for a second step under any token (it expired, or was never made).
    fn second_step_is_dead(&mut self) {
        self.mfa
            .expect_mfa_login()
            .returning(|_, _| ready(Ok(None)));
    }

    fn second_step_is_live(&mut self) {
        self.mfa
            .expect_mfa_login()
            .withf(|token, at| *token == TokenHash::of("ghm_token") && *at == now())
            .returning(|_, _| {
                ready(Ok(Some(MfaLogin {
                    user_id: ADA,
                    first_factor: Amr::password(),
                    created_at: now() - Duration::minutes(1),
                    expires_at: now() + Duration::minutes(4),
                    failures: 0,
                    webauthn_state: None,
                    password_checked: None,
                })))
            });
        self.accounts
            .expect_credentials_by_id()
            .returning(|_| ready(Ok(Some(ada_credentials()))));
    }
}

#[test]
fn enrolment_seals_a_new_secret_under_its_factor_and_shows_it_once() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    let pending_totp = MfaFactor {
        confirmed_at: None,
        ..factor(false)
    };
    let store = mocks.factors_are(vec![pending_totp]);
    store
        .expect_remove_factor()
        .withf(|user, id, record| *user == ADA && *id == FACTOR && record.is_none())
        .times(1)
        .returning(|_, _, _| ready(Ok(true)));
    let added = recording!(
        store.expect_add_totp_factor().times(1),
        |factor, sealed| (factor, sealed),
        Ok(())
    );
    mocks
        .totp
        .expect_generate()
        .returning(|| TotpSecret::from_bytes(b"secret".to_vec()));
    mocks
        .totp
        .expect_base32()
        .returning(|_| "ONSWG4TFOQ".to_owned());
    mocks
        .totp
        .expect_provisioning_uri()
        .withf(|_, issuer, account| issuer == "Gatehouse" && account == ADA_EMAIL)
        .returning(|_, _, _| "otpauth://totp/x".to_owned());
    mocks
        .cipher
        .expect_seal()
        .withf(|plain, context| plain == b"secret" && context.starts_with(b"mfa-totp:"))
        .returning(|_, _| Ok(b"sealed".to_vec()));

    let enrolment = block_on(mocks.mfa().enroll_totp(&ada_in_session())).unwrap();

    let (factor, sealed) = added.only();
    assert_eq!(sealed, b"sealed", "only the sealed secret is stored");
    assert_eq!(
        factor.confirmed_at, None,
        "pending until a code confirms it"
    );
    assert_eq!(enrolment.id, factor.id);
    assert_eq!(enrolment.secret, "ONSWG4TFOQ");
    assert!(
        !format!("{enrolment:?}").contains("ONSWG4TFOQ"),
        "no secret in Debug"
    );
}

/// Ada, in her session, confirms her factor with `code`.
fn confirm(mocks: Mocks, code: &str) -> Result<Confirmed, MfaError> {
    block_on(
        mocks
            .mfa()
            .confirm_totp(&ada_in_session(), FACTOR, code, &origin()),
    )
}

#[test]
fn the_first_confirmed_factor_brings_ten_recovery_codes_and_mfa_enabled() {
    let mut mocks = Mocks::new();
    let store = mocks.factors_are(vec![factor(false)]);
    store
        .expect_totp_factor()
        .returning(|_, _| ready(Ok(Some(stored(false, None)))));
    let confirmed = recording!(
        store.expect_confirm_totp_factor().times(1),
        |_, _, step, _, codes, events, record| (step, codes, events, record),
        Ok(true)
    );
    mocks.cipher_opens();
    mocks.code_matches(Some(STEP));

    let done = confirm(mocks, "123 456").unwrap();

    assert_eq!(done.recovery_codes.len(), 10);
    let (step, hashes, events, record) = confirmed.only();
    assert_eq!(record.action, AuditAction::MfaFactorAdded);
    assert_eq!(record.actor, AuditActor::User(ADA));
    assert_eq!(
        record.target,
        Some(AuditTarget::new(TargetKind::MfaFactor, FACTOR))
    );
    assert_eq!(record.origin, origin());
    assert_eq!(step, STEP, "the confirming code's step is spent");
    assert_eq!(hashes.len(), 10);
    assert_eq!(
        hashes[0],
        TokenHash::of(done.recovery_codes[0].expose()),
        "stored hashed"
    );
    let [enabled] = events.as_slice() else {
        panic!("{events:?}")
    };
    assert_eq!(enabled.event_type, EventType::AuthMfaEnabled);
    assert_eq!(enabled.data["method"], "totp");
}

#[test]
fn a_second_factor_keeps_the_codes_and_a_wrong_code_confirms_nothing() {
    let mut mocks = Mocks::new();
    let other = MfaFactor {
        id: MfaFactorId::from_uuid(Uuid::from_u128(0x07e5)),
        ..factor(true)
    };
    let store = mocks.factors_are(vec![other, factor(false)]);
    store
        .expect_totp_factor()
        .returning(|_, _| ready(Ok(Some(stored(false, None)))));
    store
        .expect_confirm_totp_factor()
        .withf(|_, _, _, _, codes, events, _| codes.is_empty() && events.is_empty())
        .times(1)
        .returning(|_, _, _, _, _, _, _| ready(Ok(true)));
    mocks.cipher_opens();
    mocks.code_matches(Some(STEP));
    let done = confirm(mocks, "123456").unwrap();
    assert!(done.recovery_codes.is_empty());

    let mut mocks = Mocks::new();
    let store = mocks.factors_are(vec![factor(false)]);
    store
        .expect_totp_factor()
        .returning(|_, _| ready(Ok(Some(stored(false, None)))));
    store.expect_confirm_totp_factor().never();
    mocks.cipher_opens();
    mocks.code_matches(None);
    let wrong = confirm(mocks, "000000");
    assert!(matches!(wrong, Err(MfaError::WrongCode)));
}

#[test]
fn the_last_factor_stays_while_an_organization_requires_mfa() {
    let requiring = |required: bool| {
        let mut policies = OrganizationPolicies::default();
        policies.mfa_policy = MfaPolicy::new(
            required,
            MfaMethod::ALL.to_vec(),
            policies.mfa_policy.grace_period_hours(),
        )
        .unwrap();
        vec![(Plan::Business, Some(policies))]
    };
    for required in [true, false] {
        let mut mocks = Mocks::new();
        mocks.ada_is_registered();
        mocks.password_check_says(true);
        mocks.policies_are(requiring(required));
        let store = mocks.factors_are(vec![factor(true)]);
        let removals = recording!(
            store.expect_remove_factor().times(usize::from(!required)),
            |_, _, record| record,
            Ok(true)
        );
        let removed = block_on(mocks.mfa().remove(
            &ada_in_session(),
            FACTOR,
            ADA_PASSWORD.to_owned(),
            &origin(),
        ));
        if required {
            assert!(matches!(removed, Err(MfaError::RequiredByOrganization)));
        } else {
            removed.unwrap();
            let record = removals.only().expect("a removal is audited");
            assert_eq!(record.action, AuditAction::MfaFactorRemoved);
            assert_eq!(
                record.target,
                Some(AuditTarget::new(TargetKind::MfaFactor, FACTOR))
            );
        }
    }

    // And never without the password.
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(false);
    mocks
        .factors_are(vec![factor(true)])
        .expect_remove_factor()
        .never();
    let removed = block_on(mocks.mfa().remove(
        &ada_in_session(),
        FACTOR,
        "guess".to_owned(),
        &origin(),
    ));
    assert!(matches!(removed, Err(MfaError::WrongPassword)));
}

#[test]
fn a_user_with_a_factor_gets_a_second_step_not_tokens_and_keeps_the_failure_count() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(true);
    let (failures, clears) = (Seen::new(), Seen::new());
    mocks.sign_in_attempts = counting(&failures, &clears);
    let store = mocks.factors_are(vec![factor(true)]);
    let created = recording!(
        store.expect_create_mfa_login().times(1),
        |token, login, _| (token, login),
        Ok(())
    );
    mocks.sessions.expect_create_session().never();
    mocks.signer.expect_sign().never();

    let signed_in = block_on(mocks.auth().login(
        ADA_EMAIL,
        ADA_PASSWORD.to_owned(),
        None,
        &origin(),
    ))
    .unwrap();

    let SignIn::SecondFactor(needed) = signed_in else {
        panic!("no tokens before the second factor")
    };
    assert_eq!(needed.mfa_token.expose(), secret_of(TokenKind::MfaToken));
    assert_eq!(needed.methods, [MfaMethod::Totp]);
    assert_eq!(needed.webauthn_options, None);
    let (token, login) = created.only();
    assert_eq!(
        token,
        TokenHash::of(&secret_of(TokenKind::MfaToken)),
        "kept hashed"
    );
    assert_eq!((login.user_id, login.failures), (ADA, 0));
    assert_eq!(login.expires_at - login.created_at, MFA_TOKEN_TTL);
    assert!(failures.all().is_empty());
    assert!(clears.all().is_empty(), "the failure count is kept");
}

/// Takes the second step of a sign-in with the mailed `mfa_token` and `proof`, naming no
/// organization.
fn second_step(
    mocks: Mocks,
    mfa_token: &str,
    proof: SecondFactorProof,
) -> Result<TokenPair, VerifyError> {
    block_on(mocks.mfa().verify(mfa_token, proof, None, &origin()))
}

#[test]
fn the_second_step_opens_a_session_whose_tokens_say_otp() {
    let mut mocks = Mocks::new();
    mocks.second_step_is_live();
    mocks
        .mfa
        .expect_confirmed_totp_factors()
        .returning(|_| ready(Ok(vec![stored(true, Some(STEP - 2))])));
    mocks.cipher_opens();
    mocks.code_matches(Some(STEP));
    let completed = recording!(
        mocks.mfa.expect_complete_mfa_login().times(1),
        |_, used, session, event, _, _, _| (used, session, event),
        Ok(true)
    );
    let signed = mocks.signer_signs();

    second_step(mocks, "ghm_token", SecondFactorProof::Code("123456".into())).unwrap();

    let (used, session, event) = completed.only();
    assert_eq!(
        used,
        SecondFactorUse::Totp {
            factor_id: FACTOR,
            step: STEP
        }
    );
    assert_eq!(session.amr, Amr::password().and(AuthMethod::Otp));
    assert_eq!(event.event_type, EventType::AuthLogin);
    assert_eq!(signed.only().amr, ["pwd", "otp"]);
}

#[test]
fn a_code_is_taken_once_and_a_wrong_one_counts_against_token_and_account() {
    for (matching, last) in [(Some(STEP), Some(STEP)), (None, None)] {
        let mut mocks = Mocks::new();
        mocks.second_step_is_live();
        mocks
            .mfa
            .expect_confirmed_totp_factors()
            .returning(move |_| ready(Ok(vec![stored(true, last)])));
        mocks.cipher_opens();
        mocks.code_matches(matching);
        mocks.mfa.expect_complete_mfa_login().never();
        mocks
            .mfa
            .expect_fail_mfa_login()
            .times(1)
            .returning(|_| ready(Ok(1)));
        let (failures, clears) = (Seen::new(), Seen::new());
        mocks.sign_in_attempts = counting(&failures, &clears);
        let result = second_step(mocks, "ghm_token", SecondFactorProof::Code("123456".into()));
        assert!(matches!(result, Err(VerifyError::WrongFactor)), "{last:?}");
        assert_eq!(
            failures.all(),
            [AccountKey::for_email(ADA_EMAIL)],
            "{last:?}"
        );
        assert!(clears.all().is_empty(), "{last:?}");
    }
}

#[test]
fn a_dead_token_goes_nowhere() {
    let mut mocks = Mocks::new();
    mocks.second_step_is_dead();
    mocks.mfa.expect_complete_mfa_login().never();
    let result = second_step(
        mocks,
        "ghm_expired",
        SecondFactorProof::RecoveryCode("abcde-fghjk".into()),
    );
    assert!(matches!(result, Err(VerifyError::InvalidToken)));
}

#[test]
fn a_recovery_code_is_spent_by_its_hash_as_typed_loosely() {
    let mut mocks = Mocks::new();
    mocks.second_step_is_live();
    mocks
        .mfa
        .expect_complete_mfa_login()
        .withf(|_, used, session, _, _, _, _| {
            *used
                == SecondFactorUse::RecoveryCode {
                    hash: TokenHash::of("abcde-fghjk"),
                }
                && session.amr == Amr::password().and(AuthMethod::Otp)
        })
        .times(1)
        .returning(|_, _, _, _, _, _, _| ready(Ok(true)));
    mocks.signer_signs();
    second_step(
        mocks,
        "ghm_token",
        SecondFactorProof::RecoveryCode(" ABCDE-fghjk ".into()),
    )
    .unwrap();
}

#[test]
fn a_secret_that_will_not_open_is_an_internal_error_not_a_wrong_code() {
    let mut mocks = Mocks::new();
    mocks.second_step_is_live();
    mocks
        .mfa
        .expect_confirmed_totp_factors()
        .returning(|_| ready(Ok(vec![stored(true, None)])));
    mocks
        .cipher
        .expect_open()
        .returning(|_, _| Err(CipherError("tampered".into())));
    let result = second_step(mocks, "ghm_token", SecondFactorProof::Code("123456".into()));
    assert!(matches!(result, Err(VerifyError::Internal(_))));
}
