//! Organization-scoped tokens: a sign-in or a refresh that names an organization gets a token
//! that speaks for it (`org_id`, `org_role`, `org_permissions`) only after the one admission,
//! and every refresh admits the member again.

use futures::executor::block_on;
use time::Duration;

use super::{
    tests::{
        acme_allows_only, acme_requires_mfa_at_once, ada_in_acme, ada_session, now, origin, ready,
        Mocks, OpenedSession, Seen, ACME, ADA, ADA_EMAIL, ADA_PASSWORD, ADA_SESSION, REFRESH_TOKEN,
        SIGNED,
    },
    LoginError, OrganizationRefused, RefreshError, SignIn,
};
use crate::{
    model::{
        GraceHours, IpAllowlist, IpRange, Membership, MfaMethod, MfaPolicy, OrganizationChoice,
        OrganizationId, OrganizationPolicies, Plan, Role,
    },
    ports::{MemberAccess, MockPolicyStore, SavedPolicies},
};

const GLOBEX: OrganizationId = OrganizationId::from_uuid(uuid::Uuid::from_u128(0x610b_e700));

fn login_into(mocks: Mocks, organization: OrganizationId) -> Result<SignIn, LoginError> {
    block_on(mocks.auth().login(
        ADA_EMAIL,
        ADA_PASSWORD.to_owned(),
        Some(organization),
        &origin(),
    ))
}

/// Why the organization did not admit the sign-in (the test fails if it did).
fn login_refusal(result: Result<SignIn, LoginError>) -> OrganizationRefused {
    match result {
        Err(LoginError::NotAdmitted(why)) => why,
        other => panic!("expected the organization to refuse, got {other:?}"),
    }
}

/// Why the organization did not admit the refresh (the test fails if it did).
fn refresh_refusal(result: Result<String, RefreshError>) -> OrganizationRefused {
    match result {
        Err(RefreshError::NotAdmitted(why)) => why,
        other => panic!("expected the organization to refuse, got {other:?}"),
    }
}

fn refresh(mocks: Mocks, choice: OrganizationChoice) -> Result<String, RefreshError> {
    block_on(
        mocks
            .auth()
            .refresh(REFRESH_TOKEN, None, choice, Some(origin().client())),
    )
    .map(|access| access.access_token)
}

impl Mocks {
    /// Ada signs in with her password, and the store keeps the session it is asked to open.
    fn ada_signs_in(&mut self) -> Seen<OpenedSession> {
        self.ada_is_registered();
        self.password_check_says(true);
        self.sessions_open()
    }

    /// Ada's membership of Acme is `role` (`None`: she is no member of it, or of anything), as
    /// the store reads it alone and with a refresh's session.
    fn ada_in_acme_as(&mut self, role: Option<Role>, plan: Plan) {
        if let Some(role) = role {
            self.refresh_reads_membership(MemberAccess {
                membership: Membership {
                    role: role.into(),
                    plan,
                    ..ada_in_acme()
                },
                policies: None,
            });
        }
        self.memberships
            .expect_membership()
            .returning(move |user, organization| {
                let found = (user == ADA && organization == ACME).then_some(());
                ready(Ok(found.and(role).map(|role| Membership {
                    role: role.into(),
                    plan,
                    ..ada_in_acme()
                })))
            });
    }
}

#[test]
fn a_login_naming_an_organization_gets_a_token_that_speaks_for_it() {
    let mut mocks = Mocks::new();
    let opened = mocks.ada_signs_in();
    mocks.ada_in_acme_as(Some(Role::Member), Plan::Pro);
    let signed = mocks.signer_signs();

    let SignIn::Tokens(pair) = login_into(mocks, ACME).unwrap() else {
        panic!("no second factor");
    };
    let claims = signed.only();

    assert_eq!(pair.access.access_token, SIGNED);
    assert_eq!(claims.org_id, Some(ACME));
    assert_eq!(claims.org_role, Some("member".to_owned()));
    assert_eq!(
        claims.org_permissions,
        [
            "organization.read",
            "organization.members.read",
            "organization.members.invite",
            "applications.read",
            "api_keys.create",
        ]
    );
    assert_eq!(
        opened.only().session.organization_id,
        Some(ACME),
        "the session keeps the organization for its refreshes"
    );
}

#[test]
fn a_login_naming_no_organization_gets_no_organization_claims() {
    let mut mocks = Mocks::new();
    let opened = mocks.ada_signs_in();
    mocks.memberships.expect_membership().never();
    let signed = mocks.signer_signs();

    block_on(
        mocks
            .auth()
            .login(ADA_EMAIL, ADA_PASSWORD.to_owned(), None, &origin()),
    )
    .unwrap();
    let claims = signed.only();

    assert_eq!(
        (claims.org_id, claims.org_role, claims.org_permissions.len()),
        (None, None, 0)
    );
    assert_eq!(opened.only().session.organization_id, None);
}

#[test]
fn a_login_into_an_organization_of_which_the_user_is_no_member_opens_nothing() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(true);
    mocks.ada_in_acme_as(Some(Role::Owner), Plan::Pro);
    mocks.sessions.expect_create_session().never();
    mocks.signer.expect_sign().never();

    let refused = login_into(mocks, GLOBEX);

    assert_eq!(login_refusal(refused), OrganizationRefused::NotMember);
}

/// Ada, an admin of Acme on the business plan, signs in with her password into Acme under
/// `policies`; no session may open, no token be signed.
fn login_into_acme_under(policies: MockPolicyStore) -> Result<SignIn, LoginError> {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(true);
    mocks.ada_in_acme_as(Some(Role::Admin), Plan::Business);
    mocks.policies = policies;
    mocks
        .policies
        .expect_policies_of_member()
        .returning(|_| ready(Ok(Vec::new())));
    mocks.sessions.expect_create_session().never();
    mocks.signer.expect_sign().never();
    login_into(mocks, ACME)
}

#[test]
fn a_login_into_an_organization_requiring_mfa_without_a_second_factor_is_refused() {
    let refused = login_into_acme_under(acme_requires_mfa_at_once(
        vec![MfaMethod::Totp],
        now() - Duration::days(1),
    ));

    assert_eq!(login_refusal(refused), OrganizationRefused::MfaRequired);
}

#[test]
fn a_login_into_an_organization_from_outside_its_allowlist_is_refused() {
    let refused = login_into_acme_under(acme_allows_only("203.0.113.0/24"));

    assert_eq!(
        login_refusal(refused),
        OrganizationRefused::AddressNotAllowed(origin().client())
    );
}

/// Ada refreshes her session, scoped to Acme when it opened, where she is now `role` (`None`:
/// no member) on the pro plan.
fn refreshing_in_acme_as(role: Option<Role>) -> Mocks {
    let mut mocks = Mocks::new();
    mocks.refresh_token_opens(Some(crate::model::Session {
        organization_id: Some(ACME),
        ..ada_session()
    }));
    mocks.ada_is_registered();
    mocks.ada_in_acme_as(role, Plan::Pro);
    mocks
}

#[test]
fn a_refresh_admits_again_and_carries_the_members_role_as_it_is_now() {
    let mut mocks = refreshing_in_acme_as(Some(Role::Viewer));
    mocks
        .sessions
        .expect_touch_session()
        .returning(|_, _| ready(Ok(true)));
    mocks.sessions.expect_scope_session().never();
    let signed = mocks.signer_signs();

    refresh(mocks, OrganizationChoice::Keep).unwrap();
    let claims = signed.only();

    assert_eq!(claims.org_id, Some(ACME));
    assert_eq!(
        claims.org_role,
        Some("viewer".to_owned()),
        "the role changed since"
    );
    assert_eq!(
        claims.org_permissions,
        [
            "organization.read",
            "organization.members.read",
            "applications.read"
        ]
    );
}

#[test]
fn a_member_removed_since_gets_no_token_for_the_organization_at_the_next_refresh() {
    let mut mocks = refreshing_in_acme_as(None);
    mocks.sessions.expect_touch_session().never();
    mocks.signer.expect_sign().never();

    let refused = refresh(mocks, OrganizationChoice::Keep);

    assert_eq!(refresh_refusal(refused), OrganizationRefused::NotMember);
}

#[test]
fn a_refresh_switches_the_sessions_organization_or_clears_it() {
    for (choice, scoped) in [
        (OrganizationChoice::Switch(ACME), Some(ACME)),
        (OrganizationChoice::Clear, None),
    ] {
        let mut mocks = Mocks::new();
        let mut session = ada_session();
        session.organization_id = match scoped {
            Some(_) => None,
            None => Some(ACME),
        };
        mocks.refresh_token_opens(Some(session));
        mocks.ada_is_registered();
        mocks.ada_in_acme_as(Some(Role::Admin), Plan::Pro);
        mocks
            .sessions
            .expect_scope_session()
            .withf(move |id, organization, at| {
                *id == ADA_SESSION && *organization == scoped && *at == now()
            })
            .times(1)
            .returning(|_, _, _| ready(Ok(true)));
        mocks.sessions.expect_touch_session().never();
        let signed = mocks.signer_signs();

        refresh(mocks, choice).unwrap();

        assert_eq!(signed.only().org_id, scoped, "{choice:?}");
    }
}

#[test]
fn switching_to_an_organization_that_does_not_admit_changes_nothing() {
    let mut mocks = refreshing_in_acme_as(Some(Role::Admin));
    mocks.sessions.expect_scope_session().never();
    mocks.signer.expect_sign().never();

    let refused = refresh(mocks, OrganizationChoice::Switch(GLOBEX));

    assert_eq!(refresh_refusal(refused), OrganizationRefused::NotMember);
}

#[test]
fn a_refresh_admits_under_the_policies_its_own_read_of_the_session_brought() {
    let mfa_at_once = OrganizationPolicies {
        mfa_policy: MfaPolicy::new(true, vec![MfaMethod::Totp], GraceHours::parse(0).unwrap())
            .unwrap(),
        ..OrganizationPolicies::default()
    };
    let elsewhere_only = OrganizationPolicies {
        ip_allowlist: IpAllowlist::new(true, vec![IpRange::parse("10.0.0.0/8").unwrap()]).unwrap(),
        ..OrganizationPolicies::default()
    };
    for (policies, why) in [
        (mfa_at_once, OrganizationRefused::MfaRequired),
        (
            elsewhere_only,
            OrganizationRefused::AddressNotAllowed(origin().client()),
        ),
    ] {
        let mut mocks = Mocks::new();
        mocks.refresh_token_opens(Some(crate::model::Session {
            organization_id: Some(ACME),
            ..ada_session()
        }));
        mocks.ada_is_registered();
        // Ada, an admin of Acme on the business plan, read with her session: the admission
        // reads neither her membership nor Acme's policies again.
        mocks.refresh_reads_membership(MemberAccess {
            membership: Membership {
                plan: Plan::Business,
                ..ada_in_acme()
            },
            policies: Some(SavedPolicies {
                policies,
                updated_at: now() - Duration::days(2),
                mfa_required_since: Some(now() - Duration::days(1)),
            }),
        });
        mocks.memberships.expect_membership().never();
        mocks.policies.expect_policies().never();
        mocks.sessions.expect_touch_session().never();
        mocks.signer.expect_sign().never();

        let refused = refresh(mocks, OrganizationChoice::Keep);

        assert_eq!(refresh_refusal(refused), why);
    }
}
