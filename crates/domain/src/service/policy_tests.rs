//! Organization policies against mocked ports: what each policy does to registration, login,
//! refresh, password changes and requests in the organization's context.

use super::tests::origin;

use std::net::IpAddr;

use futures::executor::block_on;
use time::Duration;

use super::{
    oauth::tests::{billing, CALLBACK},
    tests::{
        acme, acme_policies_are, ada_credentials, ada_in_acme, ada_in_session, ada_session,
        change_password, claims_of_ada, email, full_name, hash, login, now, ready, recording,
        store_saves_api_keys, Mocks, OpenedSession, Seen, ACME, ADA, ADA_EMAIL, ADA_PASSWORD,
        ADA_SESSION, GLOBEX, NEW_PASSWORD, REFRESH_TOKEN, SIGNED,
    },
    Actor, Agent, ApiKeyService, AppGrant, AuthenticateError, Authenticator, ChangePasswordError,
    CreateApiKeyError, LoginError, OrgAccessError, PolicyService, Principal, RefreshError,
    RegisterError, SettingsError,
};
use crate::{
    model::{
        Amr, ApiKeyName, AuthMethod, ClientAddress, ConcurrentSessions, GraceHours, IdleMinutes,
        IpAllowlist, IpRange, MaxAgeDays, Membership, MfaMethod, MfaPolicy, MinLength,
        OrganizationChoice, OrganizationId, OrganizationPolicies, Origin, PasswordError,
        Permission, Plan, ReuseCount, Role, Scope, Session, SessionHours, TokenHash,
    },
    ports::{
        BearerClaims, MockMembershipStore, MockPolicyStore, MockSessionStore, SavedPolicies,
        SessionAccess,
    },
};

fn policies(edit: impl FnOnce(&mut OrganizationPolicies)) -> OrganizationPolicies {
    let mut policies = OrganizationPolicies::default();
    edit(&mut policies);
    policies
}

fn address(raw: &str) -> ClientAddress {
    ClientAddress(raw.parse::<IpAddr>().unwrap())
}

fn office_only() -> IpAllowlist {
    IpAllowlist::new(true, vec![IpRange::parse("192.0.2.0/24").unwrap()]).unwrap()
}

fn ada_acting_in_acme(role: Role, plan: Plan) -> Actor {
    let mut membership = ada_in_acme();
    membership.role = role.into();
    membership.plan = plan;
    Actor::Member {
        principal: ada_in_session(),
        membership,
    }
}

// ---------------------------------------------------------------------------------------------
// password policy
// ---------------------------------------------------------------------------------------------

#[test]
fn registering_into_an_invitation_meets_the_inviting_organizations_password_policy() {
    let mut mocks = Mocks::new();
    mocks.email_is_free();
    mocks.policies_are(vec![(
        Plan::Business,
        Some(policies(|p| {
            p.password_policy.min_length = MinLength::parse(20).unwrap();
        })),
    )]);
    mocks.hasher.expect_hash().never();

    let result = block_on(mocks.auth().register(
        email(ADA_EMAIL),
        "twelve chars",
        full_name("Ada Lovelace"),
        &origin(),
    ));

    assert!(matches!(
        result,
        Err(RegisterError::WeakPassword(PasswordError::TooShort(20)))
    ));
}

#[test]
fn a_password_change_meets_the_strictest_policy_of_the_users_organizations() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.policies_are(vec![
        (
            Plan::Business,
            Some(policies(|p| p.password_policy.require_numbers = true)),
        ),
        (
            Plan::Enterprise,
            Some(policies(|p| p.password_policy.require_uppercase = true)),
        ),
    ]);
    mocks.accounts.expect_change_password().never();

    let result = change_password(
        mocks,
        &ada_in_session(),
        ADA_PASSWORD,
        "Has Uppercase But No Digit",
    );

    assert!(matches!(
        result,
        Err(ChangePasswordError::WeakPassword(PasswordError::NoDigit))
    ));
}

#[test]
fn a_remembered_previous_password_cannot_be_chosen_again() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.policies_are(vec![(
        Plan::Business,
        Some(policies(|p| {
            p.password_policy.prevent_reuse_count = ReuseCount::parse(3).unwrap();
        })),
    )]);
    mocks.password_check_says(true);
    mocks
        .accounts
        .expect_previous_password_hashes()
        .withf(|user, limit| *user == ADA && *limit == 3)
        .returning(|_, _| ready(Ok(vec![hash("$old-1"), hash("$old-2")])));
    mocks
        .hasher
        .expect_verify()
        .withf(|presented, stored| {
            presented == NEW_PASSWORD && stored.as_ref().map(|h| h.as_phc()) == Some("$old-1")
        })
        .returning(|_, _| ready(Ok(false)));
    mocks
        .hasher
        .expect_verify()
        .withf(|presented, stored| {
            presented == NEW_PASSWORD && stored.as_ref().map(|h| h.as_phc()) == Some("$old-2")
        })
        .returning(|_, _| ready(Ok(true)));
    mocks.no_new_password_is_hashed_or_saved();

    let result = change_password(mocks, &ada_in_session(), ADA_PASSWORD, NEW_PASSWORD);

    assert!(matches!(result, Err(ChangePasswordError::Reused(3))));
}

#[test]
fn login_with_a_password_older_than_max_age_is_refused_before_a_session_opens() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered(); // her password was set 40 days ago
    mocks.password_check_says(true);
    mocks.policies_are(vec![(
        Plan::Business,
        Some(policies(|p| {
            p.password_policy.max_age_days = MaxAgeDays::parse(30).unwrap();
        })),
    )]);
    mocks.sessions.expect_create_session().never();

    let result = login(mocks, ADA_EMAIL, ADA_PASSWORD);

    assert!(matches!(result, Err(LoginError::PasswordExpired)));
}

#[test]
fn an_expired_password_is_renewed_with_email_and_current_password_ending_every_session() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.policies_are(vec![(
        Plan::Business,
        Some(policies(|p| {
            p.password_policy.max_age_days = MaxAgeDays::parse(30).unwrap();
        })),
    )]);
    mocks.password_check_says(true);
    mocks.hashing_gives("$new");
    mocks
        .accounts
        .expect_change_password()
        .withf(|user, new_hash, keep, _, _, _| {
            *user == ADA && new_hash.as_phc() == "$new" && keep.is_none()
        })
        .times(1)
        .returning(|_, _, _, _, _, _| ready(Ok(())));

    block_on(mocks.auth().renew_password(
        ADA_EMAIL,
        ADA_PASSWORD.to_owned(),
        NEW_PASSWORD,
        &origin(),
    ))
    .unwrap();
}

#[test]
fn renewing_with_a_wrong_password_says_only_that_the_credentials_are_invalid() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(false);
    mocks.accounts.expect_change_password().never();

    let result = block_on(mocks.auth().renew_password(
        ADA_EMAIL,
        "not my password".to_owned(),
        NEW_PASSWORD,
        &origin(),
    ));

    assert!(matches!(
        result,
        Err(ChangePasswordError::InvalidCredentials)
    ));
}

// ---------------------------------------------------------------------------------------------
// session policy
// ---------------------------------------------------------------------------------------------

fn tight_sessions() -> OrganizationPolicies {
    policies(|p| {
        p.session_policy.max_session_duration_hours = SessionHours::parse(8).unwrap();
        p.session_policy.idle_timeout_minutes = IdleMinutes::parse(15).unwrap();
        p.session_policy.max_concurrent_sessions = ConcurrentSessions::parse(2).unwrap();
    })
}

#[test]
fn login_under_a_session_policy_bounds_the_session_the_token_and_the_session_count() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(true);
    mocks.policies_are(vec![(Plan::Business, Some(tight_sessions()))]);
    let created = mocks.sessions_open();
    let signed = mocks.signer_signs();

    let pair = login(mocks, ADA_EMAIL, ADA_PASSWORD).unwrap();
    let OpenedSession {
        session,
        keep_at_most,
        ..
    } = created.only();

    assert_eq!(session.expires_at, now() + Duration::hours(8));
    assert_eq!(keep_at_most, Some(2));
    // The access token lasts no longer than the idle window.
    assert_eq!(
        signed.only().exp,
        (now() + Duration::minutes(15)).unix_timestamp()
    );
    assert_eq!(pair.access.expires_in, 15 * 60);
}

#[test]
fn policies_of_an_organization_whose_plan_lapsed_are_not_enforced() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(true);
    mocks.policies_are(vec![(Plan::Pro, Some(tight_sessions()))]);
    mocks
        .sessions
        .expect_create_session()
        .withf(|session, _, keep, _| {
            session.expires_at == now() + Duration::days(30) && keep.is_none()
        })
        .times(1)
        .returning(|_, _, _, _| ready(Ok(())));
    mocks.signer_signs();

    let pair = login(mocks, ADA_EMAIL, ADA_PASSWORD).unwrap();

    assert_eq!(pair.access.expires_in, 3600);
}

fn refresh_with(mocks: Mocks) -> Result<super::AccessToken, RefreshError> {
    block_on(
        mocks
            .auth()
            .refresh(REFRESH_TOKEN, None, OrganizationChoice::Keep, None),
    )
}

#[test]
fn a_refresh_after_the_idle_timeout_fails() {
    let mut mocks = Mocks::new();
    // Ada's session was last used an hour ago; the policy allows 15 minutes.
    mocks.refresh_token_opens(Some(ada_session()));
    mocks.sessions.expect_touch_session().never();
    mocks.ada_is_registered();
    mocks.policies_are(vec![(Plan::Business, Some(tight_sessions()))]);
    mocks.signer.expect_sign().never();

    assert!(matches!(refresh_with(mocks), Err(RefreshError::Idle(15))));
}

#[test]
fn a_refresh_past_the_maximum_session_duration_fails() {
    let mut mocks = Mocks::new();
    let mut session = ada_session(); // opened three days ago
    session.last_used_at = now() - Duration::minutes(1);
    mocks.refresh_token_opens(Some(session.clone()));
    mocks.sessions.expect_touch_session().never();
    mocks.ada_is_registered();
    mocks.policies_are(vec![(Plan::Business, Some(tight_sessions()))]);

    assert!(matches!(refresh_with(mocks), Err(RefreshError::TooOld(8))));
}

#[test]
fn a_refresh_within_the_policy_gets_a_token_bounded_by_the_idle_window() {
    let mut mocks = Mocks::new();
    let mut session = ada_session();
    session.created_at = now() - Duration::hours(1);
    session.last_used_at = now() - Duration::minutes(10);
    mocks.refresh_token_opens(Some(session.clone()));
    mocks
        .sessions
        .expect_touch_session()
        .withf(|id, at| *id == ADA_SESSION && *at == now())
        .times(1)
        .returning(|_, _| ready(Ok(true)));
    mocks.ada_is_registered();
    mocks.policies_are(vec![(Plan::Business, Some(tight_sessions()))]);
    mocks.signer_signs();

    let access = refresh_with(mocks).unwrap();

    assert_eq!(access.expires_in, 15 * 60);
}

#[test]
fn a_refresh_with_an_expired_password_fails() {
    let mut mocks = Mocks::new();
    mocks.refresh_token_opens(Some(ada_session()));
    mocks.sessions.expect_touch_session().never();
    mocks.ada_is_registered();
    mocks.policies_are(vec![(
        Plan::Enterprise,
        Some(policies(|p| {
            p.password_policy.max_age_days = MaxAgeDays::parse(7).unwrap();
        })),
    )]);

    assert!(matches!(
        refresh_with(mocks),
        Err(RefreshError::PasswordExpired)
    ));
    // The fixture's password really is older than that.
    assert!(ada_credentials().password_changed_at < now() - Duration::days(7));
}

#[test]
fn a_single_sign_on_session_does_not_depend_on_the_password() {
    let mut mocks = Mocks::new();
    mocks.refresh_token_opens(Some(Session {
        amr: Amr::external(),
        ..ada_session()
    }));
    mocks
        .sessions
        .expect_touch_session()
        .returning(|_, _| ready(Ok(true)));
    mocks.ada_is_registered();
    mocks.policies_are(vec![(
        Plan::Enterprise,
        Some(policies(|p| {
            p.password_policy.max_age_days = MaxAgeDays::parse(7).unwrap();
        })),
    )]);
    let signed = mocks.signer_signs();

    refresh_with(mocks).unwrap();
    assert_eq!(
        signed.only().amr,
        ["ext"],
        "the token says how the user signed in"
    );
}

// ---------------------------------------------------------------------------------------------
// IP allowlist
// ---------------------------------------------------------------------------------------------

fn allowlisted_acme(mocks: &mut Mocks, plan: Plan) {
    mocks.sso_is_off();
    mocks
        .memberships
        .expect_membership()
        .returning(move |_, _| {
            let mut membership = ada_in_acme();
            membership.plan = plan;
            ready(Ok(Some(membership)))
        });
    let saved = SavedPolicies {
        policies: policies(|p| p.ip_allowlist = office_only()),
        updated_at: now(),
        mfa_required_since: None,
    };
    mocks
        .policies
        .expect_policies()
        .withf(|org| *org == ACME)
        .returning(move |_| ready(Ok(Some(saved.clone()))));
}

#[test]
fn a_request_from_outside_the_allowlist_is_refused_and_one_from_inside_admitted() {
    let mut mocks = Mocks::new();
    mocks.policies = MockPolicyStore::new();
    allowlisted_acme(&mut mocks, Plan::Business);
    let authenticator = Authenticator::new((&mocks.ports()).into(), super::tests::ISSUER);

    let outside = block_on(authenticator.actor(ada_in_session(), ACME, address("198.51.100.7")));
    assert!(matches!(
        outside,
        Err(OrgAccessError::AddressNotAllowed(a)) if a == address("198.51.100.7")
    ));
    let inside =
        block_on(authenticator.actor(ada_in_session(), ACME, address("192.0.2.44"))).unwrap();
    assert_eq!(inside.organization_id(), ACME);
}

#[test]
fn the_allowlist_of_a_downgraded_organization_is_not_enforced() {
    let mut mocks = Mocks::new();
    mocks.policies = MockPolicyStore::new();
    allowlisted_acme(&mut mocks, Plan::Pro);
    mocks.policies.checkpoint();
    mocks.policies.expect_policies().never();
    let authenticator = Authenticator::new((&mocks.ports()).into(), super::tests::ISSUER);

    assert!(block_on(authenticator.actor(ada_in_session(), ACME, address("198.51.100.7"))).is_ok());
}

/// Ada's Bearer token inside Acme, with the store answering `access` in its one read (and
/// never the three separate ones).
fn bearer_in_acme(
    access: SessionAccess,
    from: &str,
) -> Result<(Agent, Result<Actor, OrgAccessError>), AuthenticateError> {
    let mut mocks = Mocks::new();
    mocks
        .signer
        .expect_verify()
        .withf(|token| token == SIGNED)
        .returning(|_| ready(Ok(BearerClaims::User(claims_of_ada()))));
    mocks.sessions = MockSessionStore::new();
    mocks.sessions.expect_is_live().never();
    mocks.policies = MockPolicyStore::new();
    mocks.policies.expect_policies().never();
    mocks.memberships = MockMembershipStore::new();
    mocks.memberships.expect_membership().never();
    mocks
        .memberships
        .expect_session_access()
        .withf(|session, user, org, at| {
            (*session, *user, *org, *at) == (ADA_SESSION, ADA, ACME, now())
        })
        .times(1)
        .returning(move |_, _, _, _| ready(Ok(access.clone())));
    block_on(
        Authenticator::new((&mocks.ports()).into(), super::tests::ISSUER).authenticate_bearer_in(
            SIGNED,
            ACME,
            address(from),
        ),
    )
}

#[test]
fn inside_an_organization_a_bearer_token_takes_one_store_read_and_the_same_rules() {
    let allowlisted = |plan: Plan| SessionAccess {
        session_live: true,
        membership: Some(Membership {
            plan,
            ..ada_in_acme()
        }),
        policies: Some(SavedPolicies {
            policies: policies(|p| p.ip_allowlist = office_only()),
            updated_at: now(),
            mfa_required_since: None,
        }),
        sso_organization: None,
        sso_email: None,
    };
    // Admitted from inside the allowlist; refused from outside, the principal known either way.
    let (principal, inside) = bearer_in_acme(allowlisted(Plan::Business), "192.0.2.44").unwrap();
    assert_eq!(principal, Agent::Person(ada_in_session()));
    assert_eq!(inside.unwrap().organization_id(), ACME);
    let (_, outside) = bearer_in_acme(allowlisted(Plan::Business), "198.51.100.7").unwrap();
    assert!(matches!(outside, Err(OrgAccessError::AddressNotAllowed(_))));
    // A downgraded plan's saved allowlist binds no more.
    let (_, downgraded) = bearer_in_acme(allowlisted(Plan::Pro), "198.51.100.7").unwrap();
    assert!(downgraded.is_ok());
    // Not a member: not found. An ended session: the token is refused, member or not.
    let outsider = SessionAccess {
        session_live: true,
        ..SessionAccess::default()
    };
    let (_, refused) = bearer_in_acme(outsider, "192.0.2.44").unwrap();
    assert!(matches!(refused, Err(OrgAccessError::NotFound)));
    let ended = SessionAccess {
        session_live: false,
        ..allowlisted(Plan::Business)
    };
    assert!(matches!(
        bearer_in_acme(ended, "192.0.2.44"),
        Err(AuthenticateError::Invalid(_))
    ));
}

// ---------------------------------------------------------------------------------------------
// the policies endpoints' use cases
// ---------------------------------------------------------------------------------------------

#[test]
fn policies_need_the_business_plan_and_say_so() {
    let mocks = Mocks::new();
    let service = PolicyService::new((&mocks.ports()).into());

    let error =
        block_on(service.policies(&ada_acting_in_acme(Role::Owner, Plan::Pro))).unwrap_err();

    assert!(matches!(
        error,
        SettingsError::PlanRequired {
            plan: Plan::Pro,
            ..
        }
    ));
    assert_eq!(
        error.to_string(),
        "policies need the business or enterprise plan; this organization is on the pro plan"
    );
}

#[test]
fn policies_are_for_owners_and_admins() {
    let mocks = Mocks::new();
    let service = PolicyService::new((&mocks.ports()).into());

    let error =
        block_on(service.policies(&ada_acting_in_acme(Role::Member, Plan::Business))).unwrap_err();

    assert!(matches!(
        error,
        SettingsError::Forbidden(f) if f.0 == Permission::PoliciesManage
    ));
}

#[test]
fn an_organization_that_never_saved_policies_has_the_defaults_since_its_creation() {
    let mut mocks = Mocks::new();
    mocks
        .organizations
        .expect_organization()
        .returning(|_| ready(Ok(Some(acme(Plan::Business)))));
    let service = PolicyService::new((&mocks.ports()).into());

    let view =
        block_on(service.policies(&ada_acting_in_acme(Role::Admin, Plan::Business))).unwrap();

    assert_eq!(view.policies, OrganizationPolicies::default());
    assert_eq!(view.updated_at, acme(Plan::Business).created_at);
}

#[test]
fn saving_an_allowlist_without_your_own_address_is_refused_as_a_lockout() {
    let mut mocks = Mocks::new();
    mocks.policies.expect_save_policies().never();
    let service = PolicyService::new((&mocks.ports()).into());

    let result = block_on(service.replace(
        &ada_acting_in_acme(Role::Owner, Plan::Business),
        policies(|p| p.ip_allowlist = office_only()),
        address("198.51.100.7"),
        &origin(),
    ));

    assert!(matches!(result, Err(SettingsError::LockOut(_))));
}

#[test]
fn saving_policies_records_organization_updated_naming_the_changed_sections() {
    let mut mocks = Mocks::new();
    mocks
        .organizations
        .expect_organization()
        .returning(|_| ready(Ok(Some(acme(Plan::Business)))));
    let saved = Seen::new();
    let seen = saved.clone();
    mocks.policies.expect_save_policies().times(1).returning(
        move |org, policies, since, at, event, _| {
            assert_eq!(since, None, "MFA is not required");
            seen.record((org, policies, at, event));
            ready(Ok(true))
        },
    );
    let service = PolicyService::new((&mocks.ports()).into());
    let new = policies(|p| {
        p.ip_allowlist = office_only();
        p.session_policy = tight_sessions().session_policy;
    });

    let view = block_on(service.replace(
        &ada_acting_in_acme(Role::Admin, Plan::Business),
        new.clone(),
        address("192.0.2.1"),
        &origin(),
    ))
    .unwrap();
    let (org, policies, at, event) = saved.only();

    assert_eq!((org, &policies, at), (ACME, &new, now()));
    assert_eq!(view.policies, new);
    assert_eq!(
        event.data["changed"],
        serde_json::json!(["policies.session_policy", "policies.ip_allowlist"])
    );
    assert_eq!(event.organization_id, Some(ACME));
    assert_eq!(event.user_id, Some(ADA));
}

// ---------------------------------------------------------------------------------------------
// MFA policy
// ---------------------------------------------------------------------------------------------

/// Acme requires MFA (with `allowed`) since `since_hours` ago, with 72 hours of grace; Ada
/// joined `joined_hours` ago.
fn acme_requires_mfa(
    mocks: &mut Mocks,
    allowed: Vec<MfaMethod>,
    since_hours: i64,
    joined_hours: i64,
) {
    mocks
        .memberships
        .expect_membership()
        .returning(move |_, _| {
            let mut membership = ada_in_acme();
            membership.plan = Plan::Business;
            membership.joined_at = now() - Duration::hours(joined_hours);
            ready(Ok(Some(membership)))
        });
    let saved = SavedPolicies {
        policies: policies(|p| {
            p.mfa_policy =
                MfaPolicy::new(true, allowed.clone(), GraceHours::parse(72).unwrap()).unwrap();
        }),
        updated_at: now() - Duration::hours(1),
        mfa_required_since: Some(now() - Duration::hours(since_hours)),
    };
    let mut store = MockPolicyStore::new();
    store
        .expect_policies()
        .returning(move |_| ready(Ok(Some(saved.clone()))));
    mocks.policies = store;
}

fn as_ada_with(amr: Amr) -> Principal {
    Principal::User {
        user_id: ADA,
        session_id: ADA_SESSION,
        amr,
        application: None,
    }
}

fn acting(mocks: Mocks, principal: Principal) -> Result<Actor, OrgAccessError> {
    let authenticator = Authenticator::new((&mocks.ports()).into(), super::tests::ISSUER);
    block_on(authenticator.actor(principal, ACME, address("192.0.2.44")))
}

#[test]
fn after_the_grace_period_a_member_without_a_second_factor_is_refused() {
    let mut mocks = Mocks::new();
    acme_requires_mfa(&mut mocks, MfaMethod::ALL.to_vec(), 100, 1000);
    mocks.sso_is_off();
    assert!(matches!(
        acting(mocks, as_ada_with(Amr::password())),
        Err(OrgAccessError::MfaRequired)
    ));
}

#[test]
fn the_grace_period_counts_from_the_policy_or_from_joining_whichever_is_later() {
    for (since, joined) in [(10, 1000), (100, 10)] {
        let mut mocks = Mocks::new();
        acme_requires_mfa(&mut mocks, MfaMethod::ALL.to_vec(), since, joined);
        mocks.sso_is_off();
        acting(mocks, as_ada_with(Amr::password())).unwrap();
    }
}

#[test]
fn only_an_allowed_second_factor_or_the_organizations_idp_counts() {
    let otp = Amr::password().and(AuthMethod::Otp);
    let key = Amr::password().and(AuthMethod::HardwareKey);
    for (allowed, amr, admitted) in [
        (vec![MfaMethod::Totp], otp.clone(), true),
        (vec![MfaMethod::Webauthn], otp, false),
        (vec![MfaMethod::Webauthn], key, true),
    ] {
        let mut mocks = Mocks::new();
        acme_requires_mfa(&mut mocks, allowed.clone(), 100, 1000);
        mocks.sso_is_off();
        let result = acting(mocks, as_ada_with(amr.clone()));
        assert_eq!(result.is_ok(), admitted, "{allowed:?} {amr:?}");
    }
}

#[test]
fn an_idps_ext_counts_for_its_own_organization_only() {
    let globex = OrganizationId::from_uuid(uuid::Uuid::from_u128(0x610b));
    // The session was signed in by Acme's IdP, by another organization's, or by none.
    for (signed_in_by, admitted) in [(Some(ACME), true), (Some(globex), false), (None, false)] {
        let mut mocks = Mocks::new();
        acme_requires_mfa(&mut mocks, vec![MfaMethod::Totp], 100, 1000);
        mocks
            .memberships
            .expect_session_access()
            .withf(|session, user, org, _| (*session, *user, *org) == (ADA_SESSION, ADA, ACME))
            .returning(move |_, _, _, _| {
                ready(Ok(SessionAccess {
                    session_live: true,
                    membership: Some(ada_in_acme()),
                    policies: None,
                    sso_organization: signed_in_by,
                    sso_email: None,
                }))
            });
        let result = acting(mocks, as_ada_with(Amr::external()));
        assert_eq!(result.is_ok(), admitted, "{signed_in_by:?}");
        if !admitted {
            assert!(matches!(result, Err(OrgAccessError::MfaRequired)));
        }
    }
}

#[test]
fn api_keys_are_not_asked_for_a_second_factor() {
    let mut mocks = Mocks::new();
    acme_requires_mfa(&mut mocks, MfaMethod::ALL.to_vec(), 100, 1000);
    acting(mocks, crate::service::tests::ada_key_for_acme()).unwrap();
}

#[test]
fn mfa_is_required_since_the_save_that_turned_it_on() {
    let required = |on: bool| {
        policies(|p| {
            p.mfa_policy =
                MfaPolicy::new(on, MfaMethod::ALL.to_vec(), GraceHours::parse(72).unwrap())
                    .unwrap();
        })
    };
    let earlier = now() - Duration::days(3);
    // (saved before, since before, saved now) -> since saved
    for (before, since_before, after, expected) in [
        (None, None, required(true), Some(now())),
        (Some(required(false)), None, required(true), Some(now())),
        (
            Some(required(true)),
            Some(earlier),
            required(true),
            Some(earlier),
        ),
        (Some(required(true)), Some(earlier), required(false), None),
    ] {
        let mut mocks = Mocks::new();
        mocks
            .organizations
            .expect_organization()
            .returning(|_| ready(Ok(Some(acme(Plan::Business)))));
        let mut store = MockPolicyStore::new();
        let stored = before.clone().map(|policies| SavedPolicies {
            policies,
            updated_at: earlier,
            mfa_required_since: since_before,
        });
        store
            .expect_policies()
            .returning(move |_| ready(Ok(stored.clone())));
        let since = recording!(
            store.expect_save_policies(),
            |_, _, since, _, _, _| since,
            Ok(true)
        );
        mocks.policies = store;
        let service = PolicyService::new((&mocks.ports()).into());
        // A change other than MFA too, so that every case saves.
        let mut after = after;
        after.session_policy = tight_sessions().session_policy;
        block_on(service.replace(
            &ada_acting_in_acme(Role::Admin, Plan::Business),
            after,
            address("192.0.2.1"),
            &origin(),
        ))
        .unwrap();
        assert_eq!(since.only(), expected, "{before:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// One admission: every way into an organization admits as its routes do
// ---------------------------------------------------------------------------------------------

fn create_key_from(
    mocks: Mocks,
    principal: Principal,
    from: &str,
) -> Result<crate::service::CreatedApiKey, CreateApiKeyError> {
    let service = {
        let ports = mocks.ports();
        ApiKeyService::new(
            (&ports).into(),
            Authenticator::new((&ports).into(), super::tests::ISSUER),
        )
    };
    block_on(service.create(
        &principal,
        ApiKeyName::parse("CI deploys").unwrap(),
        ACME,
        &Origin::new(address(from).0, None, None),
    ))
}

#[test]
fn an_api_key_is_not_a_way_around_the_mfa_policy() {
    let mut mocks = Mocks::new();
    acme_requires_mfa(&mut mocks, MfaMethod::ALL.to_vec(), 100, 1000);
    mocks.sso_is_off();
    mocks.api_keys.expect_create_api_key().never();

    assert!(matches!(
        create_key_from(mocks, as_ada_with(Amr::password()), "192.0.2.44"),
        Err(CreateApiKeyError::Organization(OrgAccessError::MfaRequired))
    ));
}

#[test]
fn an_api_key_is_not_a_way_around_the_ip_allowlist() {
    let mut mocks = Mocks::new();
    mocks.sso_is_off();
    mocks.memberships.expect_membership().returning(|_, _| {
        let mut membership = ada_in_acme();
        membership.plan = Plan::Business;
        ready(Ok(Some(membership)))
    });
    mocks.policies = acme_policies_are(policies(|p| p.ip_allowlist = office_only()), None);
    mocks.api_keys.expect_create_api_key().never();

    assert!(matches!(
        create_key_from(mocks, as_ada_with(Amr::password()), "198.51.100.7"),
        Err(CreateApiKeyError::Organization(
            OrgAccessError::AddressNotAllowed(_)
        ))
    ));
}

#[test]
fn a_member_with_the_required_second_factor_creates_an_api_key() {
    let mut mocks = Mocks::new();
    acme_requires_mfa(&mut mocks, MfaMethod::ALL.to_vec(), 100, 1000);
    mocks.sso_is_off();
    store_saves_api_keys(&mut mocks);

    let with_otp = as_ada_with(Amr::password().and(AuthMethod::Otp));
    assert!(create_key_from(mocks, with_otp, "192.0.2.44").is_ok());
}

/// Ada's token of the OAuth flow, issued to Acme's Billing application with `scope`.
fn issued_to_billing(scope: &str) -> Principal {
    Principal::User {
        user_id: ADA,
        session_id: ADA_SESSION,
        amr: Amr::password(),
        application: Some(AppGrant {
            client_id: billing(&[CALLBACK]).client_id,
            scope: Scope::parse(scope).unwrap(),
        }),
    }
}

#[test]
fn a_token_issued_to_an_application_reads_nothing_outside_organizations() {
    assert!(issued_to_billing("openid email")
        .outside_organizations()
        .is_err());
    assert!(issued_to_billing("openid org:read")
        .outside_organizations()
        .is_err());
    assert!(as_ada_with(Amr::password()).outside_organizations().is_ok());
}

#[test]
fn a_token_issued_to_an_application_without_api_scopes_reads_nothing_of_the_organization() {
    let mut mocks = Mocks::new();
    mocks.ada_is_in_acme();
    mocks.applications.expect_application_by_client_id().never();

    assert!(matches!(
        acting(mocks, issued_to_billing("openid profile email")),
        Err(OrgAccessError::NoApiScope)
    ));
}

#[test]
fn a_token_with_api_scopes_acts_only_in_its_applications_organization() {
    for (organization, active, admitted) in [
        (ACME, true, true),
        (GLOBEX, true, false),
        (ACME, false, false),
    ] {
        let mut mocks = Mocks::new();
        mocks.ada_is_in_acme();
        let mut application = billing(&[CALLBACK]);
        application.organization_id = organization;
        application.is_active = active;
        mocks
            .applications
            .expect_application_by_client_id()
            .returning(move |_| ready(Ok(Some((application.clone(), TokenHash::of("s"))))));

        let result = acting(mocks, issued_to_billing("openid org:read"));
        match admitted {
            true => assert!(result.is_ok(), "{organization:?} {active}"),
            false => assert!(
                matches!(result, Err(OrgAccessError::NotFound)),
                "{organization:?} {active}"
            ),
        }
    }
}
