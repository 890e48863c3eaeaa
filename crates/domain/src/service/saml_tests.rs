//! SAML sign-in: the rules only Gatehouse can check (an outstanding request of this
//! organization, an assertion never seen, a whitelisted domain the organization verified, who
//! is provisioned), with the XML adapter and the store mocked.

use super::tests::origin;

use futures::executor::block_on;
use time::Duration;
use uuid::Uuid;

use super::{
    tests::{acme, now, ready, recording, Mocks, Seen, ACME, ADA, ADA_EMAIL},
    SamlService, SamlSignInError, SamlSignedIn,
};
use crate::{
    model::{
        Amr, AuditAction, AuditActor, DomainWhitelist, EventType, IdpCertificate, IdpEntityId,
        IdpSsoUrl, OrganizationId, Plan, ProvisionRole, ReturnPath, Role, SamlAssertion,
        SamlRequest, SamlRequestId, SsoConfiguration, SsoProvider, SAML_CLOCK_SKEW,
        SAML_REQUEST_TTL,
    },
    ports::{Provision, SamlRejection, SamlSignIn, SamlSignInOutcome},
};

const PUBLIC_URL: &str = "https://id.example.com";

fn request_id() -> SamlRequestId {
    SamlRequestId::generate(Uuid::from_u128(0x5a41))
}

fn certificate() -> IdpCertificate {
    let mut params = rcgen::CertificateParams::new(vec!["idp.example.com".to_owned()]).unwrap();
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2040, 1, 1);
    let key = rcgen::KeyPair::generate().unwrap();
    IdpCertificate::parse(&params.self_signed(&key).unwrap().pem(), now()).unwrap()
}

fn configuration(auto_provision: bool) -> SsoConfiguration {
    SsoConfiguration {
        organization_id: ACME,
        provider: SsoProvider::Saml,
        idp_entity_id: IdpEntityId::parse("https://idp.example.com/metadata").unwrap(),
        idp_sso_url: IdpSsoUrl::parse("https://idp.example.com/sso").unwrap(),
        idp_certificate: certificate(),
        domain_whitelist: DomainWhitelist::parse(vec!["example.com".to_owned()]).unwrap(),
        auto_provision,
        default_role: ProvisionRole::Viewer,
        is_active: true,
        created_at: now() - Duration::days(10),
        updated_at: now() - Duration::days(10),
    }
}

fn outstanding() -> SamlRequest {
    SamlRequest {
        id: request_id(),
        organization_id: ACME,
        return_to: ReturnPath::parse("/oauth/authorize?client_id=ghc_x").unwrap(),
        created_at: now() - Duration::minutes(1),
        expires_at: now() + Duration::minutes(9),
    }
}

fn assertion(name_id: &str) -> SamlAssertion {
    SamlAssertion {
        id: "_assertion-1".to_owned(),
        name_id: name_id.to_owned(),
        in_response_to: Some(request_id().as_str().to_owned()),
        valid_until: now() + Duration::minutes(5),
        full_name: Some("Grace Hopper".to_owned()),
    }
}

impl Mocks {
    /// Acme is on `plan` with this configuration, and verified `example.com`.
    fn acme_configured(&mut self, plan: Plan, configuration: Option<SsoConfiguration>) {
        self.example_com_verified_by(Some(ACME));
        self.acme_configured_unverified(plan, configuration);
    }

    /// `example.com` is verified by this organization, or none.
    fn example_com_verified_by(&mut self, organization: Option<OrganizationId>) {
        let mut domains = crate::ports::MockDomainStore::new();
        domains
            .expect_verifying_organization()
            .withf(|domain| domain.as_str() == "example.com")
            .returning(move |_| ready(Ok(organization)));
        self.domains = domains;
    }

    /// Acme is on `plan` with this configuration; no domain verification is set up.
    fn acme_configured_unverified(&mut self, plan: Plan, configuration: Option<SsoConfiguration>) {
        self.organizations
            .expect_organization()
            .returning(move |_| ready(Ok(Some(acme(plan)))));
        self.sso
            .expect_sso_configuration()
            .returning(move |_| ready(Ok(configuration.clone())));
    }

    /// The adapter verifies the response as `assertion` (or refuses it).
    fn idp_asserts(&mut self, assertion: Result<SamlAssertion, fn() -> SamlRejection>) {
        self.saml_protocol
            .expect_verify_response()
            .times(1)
            .returning(move |response, trust| {
                assert_eq!(response, "PHNhbWxwOlJlc3BvbnNlLz4=");
                assert_eq!(trust.acs_url, format!("{PUBLIC_URL}/sso/saml/{ACME}/acs"));
                assert_eq!(
                    trust.sp_entity_id,
                    format!("{PUBLIC_URL}/sso/saml/{ACME}/metadata")
                );
                assert_eq!(
                    trust.idp_entity_id.as_ref(),
                    "https://idp.example.com/metadata"
                );
                ready(assertion.clone().map_err(|rejection| rejection()))
            });
    }

    fn request_is_outstanding(&mut self) {
        self.saml
            .expect_saml_request()
            .withf(|org, id, at| *org == ACME && *id == request_id() && *at == now())
            .returning(|_, _, _| ready(Ok(Some(outstanding()))));
    }

    /// The store's sign-in answers `outcome` and keeps what it was given.
    fn store_signs_in(&mut self, outcome: SamlSignInOutcome) -> Seen<SamlSignIn> {
        recording!(
            self.saml.expect_saml_sign_in().times(1),
            |sign_in| sign_in,
            Ok(outcome)
        )
    }

    fn saml(self) -> SamlService {
        let (ports, auth) = self.ports_with_auth();
        SamlService::new((&ports).into(), auth, PUBLIC_URL.to_owned())
    }
}

fn sign_in(mocks: Mocks) -> Result<SamlSignedIn, SamlSignInError> {
    block_on(
        mocks
            .saml()
            .sign_in(ACME, "PHNhbWxwOlJlc3BvbnNlLz4=", &origin()),
    )
}

#[test]
fn a_sign_in_starts_with_a_remembered_request_sent_to_the_idp() {
    let mut mocks = Mocks::new();
    mocks.acme_configured(Plan::Business, Some(configuration(false)));
    let sent = Seen::new();
    let kept = sent.clone();
    mocks
        .saml_protocol
        .expect_authn_request_url()
        .times(1)
        .returning(move |request, trust| {
            kept.record((request.clone(), trust.idp_sso_url.clone()));
            Ok("https://idp.example.com/sso?SAMLRequest=x&RelayState=y".to_owned())
        });
    let saved = recording!(
        mocks.saml.expect_save_saml_request().times(1),
        |request| request,
        Ok(())
    );

    let url = block_on(
        mocks
            .saml()
            .begin(ACME, ReturnPath::parse("/oauth/authorize?a=b").unwrap()),
    )
    .unwrap();

    assert_eq!(
        url,
        "https://idp.example.com/sso?SAMLRequest=x&RelayState=y"
    );
    let (request, idp) = sent.only();
    assert_eq!(idp.as_str(), "https://idp.example.com/sso");
    assert_eq!(
        saved.only(),
        request,
        "the request sent is the one remembered"
    );
    assert_eq!(request.organization_id, ACME);
    assert_eq!(request.return_to.as_str(), "/oauth/authorize?a=b");
    assert_eq!(request.expires_at - request.created_at, SAML_REQUEST_TTL);
    assert!(SamlRequestId::parse(request.id.as_str()).is_some());
}

#[test]
fn no_sign_in_starts_without_an_active_configuration_on_a_plan_with_sso() {
    let inactive = SsoConfiguration {
        is_active: false,
        ..configuration(false)
    };
    for (plan, configuration) in [
        (Plan::Pro, Some(configuration(false))),
        (Plan::Business, None),
        (Plan::Enterprise, Some(inactive)),
    ] {
        let mut mocks = Mocks::new();
        mocks.acme_configured(plan, configuration);
        mocks.saml.expect_save_saml_request().never();
        let result = block_on(mocks.saml().begin(ACME, ReturnPath::done()));
        assert!(
            matches!(result, Err(SamlSignInError::NotConfigured)),
            "{plan:?}"
        );
    }
}

#[test]
fn a_member_signs_in_with_an_external_session_and_goes_where_the_request_said() {
    let mut mocks = Mocks::new();
    mocks.acme_configured(Plan::Business, Some(configuration(false)));
    mocks.idp_asserts(Ok(assertion("ADA@example.com")));
    mocks.request_is_outstanding();
    mocks.ada_is_registered();
    mocks.ada_is_in_acme();
    let signed = mocks.signer_signs();
    let stored = mocks.store_signs_in(SamlSignInOutcome::SignedIn);

    let signed_in = sign_in(mocks).unwrap();

    assert_eq!(signed_in.user_id, ADA);
    assert!(!signed_in.provisioned);
    assert_eq!(signed_in.return_to, outstanding().return_to);
    let sign_in = stored.only();
    assert_eq!(sign_in.organization_id, ACME);
    assert_eq!(sign_in.request_id, request_id());
    assert_eq!(sign_in.assertion_id, "_assertion-1");
    assert_eq!(
        sign_in.assertion_valid_until,
        assertion("x").valid_until + SAML_CLOCK_SKEW,
        "remembered as long as the adapter would take it"
    );
    assert_eq!(sign_in.provision, Provision::Nothing);
    assert_eq!(sign_in.session.user_id, ADA);
    assert_eq!(sign_in.session.amr, Amr::external());
    assert_eq!(sign_in.session.grant, None);
    let [login] = sign_in.events.as_slice() else {
        panic!("one event: {:?}", sign_in.events)
    };
    assert_eq!(login.event_type, EventType::AuthLogin);
    assert_eq!(login.data["method"], "saml");
    assert_eq!(signed.only().amr, ["ext"]);
}

#[test]
fn an_existing_user_joins_with_the_default_role_when_auto_provisioned() {
    let mut mocks = Mocks::new();
    mocks.acme_configured(Plan::Business, Some(configuration(true)));
    mocks.idp_asserts(Ok(assertion(ADA_EMAIL)));
    mocks.request_is_outstanding();
    mocks.ada_is_registered();
    mocks.no_membership_is_found();
    mocks.signer_signs();
    let stored = mocks.store_signs_in(SamlSignInOutcome::SignedIn);

    let signed_in = sign_in(mocks).unwrap();

    assert!(!signed_in.provisioned, "the account was there");
    let sign_in = stored.only();
    assert_eq!(sign_in.provision, Provision::Member { role: Role::Viewer });
    let types: Vec<_> = sign_in.events.iter().map(|e| e.event_type).collect();
    assert_eq!(types, [EventType::MemberJoined, EventType::AuthLogin]);
    // The joining is audited too, before the sign-in, as the person's own change.
    let audited: Vec<_> = sign_in.audit.iter().map(|r| (r.action, r.actor)).collect();
    assert_eq!(
        audited,
        [
            (AuditAction::MemberJoined, AuditActor::User(ADA)),
            (AuditAction::LoginSucceeded, AuditActor::User(ADA)),
        ]
    );
    let joined = &sign_in.events[0];
    assert_eq!(joined.organization_id, Some(ACME));
    assert_eq!(joined.data["role"], "viewer");
    assert_eq!(joined.data["status"], "active");
}

#[test]
fn an_account_nobody_verified_is_reclaimed_for_the_idps_user_and_a_verified_one_is_not() {
    for verified in [false, true] {
        let mut mocks = Mocks::new();
        mocks.acme_configured(Plan::Business, Some(configuration(true)));
        mocks.idp_asserts(Ok(assertion(ADA_EMAIL)));
        mocks.request_is_outstanding();
        let mut credentials = super::tests::ada_credentials();
        credentials.user.email_verified = verified;
        mocks.address_belongs_to(credentials);
        mocks.no_membership_is_found();
        mocks.signer_signs();
        let stored = mocks.store_signs_in(SamlSignInOutcome::SignedIn);

        sign_in(mocks).unwrap();

        let sign_in = stored.only();
        match (&sign_in.reclaim, verified) {
            (None, true) => {}
            (Some(reclaim), false) => {
                assert_eq!(reclaim.user_id, ADA);
                assert_eq!(reclaim.audit.action, AuditAction::UserReclaimed);
                assert_eq!(reclaim.audit.organization_id, Some(ACME));
            }
            (reclaim, verified) => panic!("verified {verified}: {reclaim:?}"),
        }
    }
}

#[test]
fn an_unknown_user_is_created_without_a_password_when_auto_provisioned() {
    let mut mocks = Mocks::new();
    mocks.acme_configured(Plan::Enterprise, Some(configuration(true)));
    mocks.idp_asserts(Ok(assertion("grace@example.com")));
    mocks.request_is_outstanding();
    mocks.email_is_free();
    mocks.signer_signs();
    let stored = mocks.store_signs_in(SamlSignInOutcome::SignedIn);

    let signed_in = sign_in(mocks).unwrap();

    assert!(signed_in.provisioned);
    let sign_in = stored.only();
    let Provision::Account { account, role } = &sign_in.provision else {
        panic!("an account: {:?}", sign_in.provision)
    };
    assert_eq!(*role, Role::Viewer);
    assert_eq!(account.user.email.as_ref(), "grace@example.com");
    assert_eq!(
        account.user.full_name.as_ref(),
        "Grace Hopper",
        "from the assertion"
    );
    assert_eq!(
        account.user.password_hash, None,
        "no password signs in to it"
    );
    assert_eq!(signed_in.user_id, account.user.id);
    assert_eq!(sign_in.session.user_id, account.user.id);
    let account_events: Vec<_> = account.events.iter().map(|e| e.event_type).collect();
    assert_eq!(
        account_events,
        [EventType::UserCreated, EventType::OrganizationCreated]
    );
    let types: Vec<_> = sign_in.events.iter().map(|e| e.event_type).collect();
    assert_eq!(types, [EventType::MemberJoined, EventType::AuthLogin]);
}

#[test]
fn without_auto_provision_only_members_sign_in() {
    // Unknown email.
    let mut mocks = Mocks::new();
    mocks.acme_configured(Plan::Business, Some(configuration(false)));
    mocks.idp_asserts(Ok(assertion("grace@example.com")));
    mocks.request_is_outstanding();
    mocks.email_is_free();
    mocks.saml.expect_saml_sign_in().never();
    assert!(matches!(
        sign_in(mocks),
        Err(SamlSignInError::NotProvisioned)
    ));

    // A user who is not a member.
    let mut mocks = Mocks::new();
    mocks.acme_configured(Plan::Business, Some(configuration(false)));
    mocks.idp_asserts(Ok(assertion(ADA_EMAIL)));
    mocks.request_is_outstanding();
    mocks.ada_is_registered();
    mocks.no_membership_is_found();
    mocks.saml.expect_saml_sign_in().never();
    assert!(matches!(
        sign_in(mocks),
        Err(SamlSignInError::NotProvisioned)
    ));
}

#[test]
fn a_response_no_request_asked_for_is_refused() {
    // IdP-initiated: no InResponseTo at all.
    let mut mocks = Mocks::new();
    mocks.acme_configured(Plan::Business, Some(configuration(true)));
    mocks.idp_asserts(Ok(SamlAssertion {
        in_response_to: None,
        ..assertion(ADA_EMAIL)
    }));
    mocks.saml.expect_saml_request().never();
    mocks.saml.expect_saml_sign_in().never();
    assert!(matches!(sign_in(mocks), Err(SamlSignInError::Unsolicited)));

    // An id Gatehouse never makes, and one it made that is not outstanding (answered,
    // expired, or another organization's).
    for (in_response_to, outstanding) in [("id-42", false), (request_id().as_str(), false)] {
        let mut mocks = Mocks::new();
        mocks.acme_configured(Plan::Business, Some(configuration(true)));
        mocks.idp_asserts(Ok(SamlAssertion {
            in_response_to: Some(in_response_to.to_owned()),
            ..assertion(ADA_EMAIL)
        }));
        mocks
            .saml
            .expect_saml_request()
            .returning(move |_, _, _| ready(Ok(outstanding.then(self::outstanding))));
        mocks.saml.expect_saml_sign_in().never();
        assert!(
            matches!(sign_in(mocks), Err(SamlSignInError::UnknownRequest)),
            "{in_response_to}"
        );
    }
}

#[test]
fn only_whitelisted_domains_and_email_name_ids_sign_in() {
    for (name_id, refusal) in [
        ("mallory@evil.example.net", "domain"),
        ("ada@eu.example.com", "domain"),
        ("not an email", "email"),
    ] {
        let mut mocks = Mocks::new();
        mocks.acme_configured(Plan::Business, Some(configuration(true)));
        mocks.idp_asserts(Ok(assertion(name_id)));
        mocks.request_is_outstanding();
        mocks.saml.expect_saml_sign_in().never();
        let result = sign_in(mocks);
        match refusal {
            "domain" => assert!(
                matches!(result, Err(SamlSignInError::DomainNotAllowed)),
                "{name_id}"
            ),
            _ => assert!(
                matches!(result, Err(SamlSignInError::NotAnEmail)),
                "{name_id}"
            ),
        }
    }
}

#[test]
fn a_whitelisted_domain_the_organization_did_not_verify_signs_nobody_in() {
    // Not verified at all, or verified by another organization: the IdP does not speak for it.
    let other = OrganizationId::from_uuid(Uuid::from_u128(0x07e));
    for verified_by in [None, Some(other)] {
        let mut mocks = Mocks::new();
        mocks.example_com_verified_by(verified_by);
        mocks.acme_configured_unverified(Plan::Business, Some(configuration(true)));
        mocks.idp_asserts(Ok(assertion(ADA_EMAIL)));
        mocks.request_is_outstanding();
        mocks.accounts.expect_credentials_by_email().never();
        mocks.saml.expect_saml_sign_in().never();
        assert!(
            matches!(sign_in(mocks), Err(SamlSignInError::DomainNotVerified)),
            "{verified_by:?}"
        );
    }
}

#[test]
fn what_the_adapter_refuses_is_refused_before_anything_is_read() {
    let mut mocks = Mocks::new();
    mocks.acme_configured(Plan::Business, Some(configuration(true)));
    mocks.idp_asserts(Err(|| SamlRejection::BadSignature));
    mocks.saml.expect_saml_request().never();
    mocks.accounts.expect_credentials_by_email().never();
    assert!(matches!(
        sign_in(mocks),
        Err(SamlSignInError::Rejected(SamlRejection::BadSignature))
    ));
}

#[test]
fn a_replayed_assertion_or_a_request_answered_meanwhile_opens_nothing() {
    for (outcome, refusal) in [
        (SamlSignInOutcome::Replayed, "replayed"),
        (SamlSignInOutcome::RequestGone, "request"),
    ] {
        let mut mocks = Mocks::new();
        mocks.acme_configured(Plan::Business, Some(configuration(false)));
        mocks.idp_asserts(Ok(assertion(ADA_EMAIL)));
        mocks.request_is_outstanding();
        mocks.ada_is_registered();
        mocks.ada_is_in_acme();
        mocks.signer.expect_sign().never();
        mocks.store_signs_in(outcome);
        let result = sign_in(mocks);
        match refusal {
            "replayed" => assert!(matches!(result, Err(SamlSignInError::Replayed))),
            _ => assert!(matches!(result, Err(SamlSignInError::UnknownRequest))),
        }
    }
}

#[test]
fn a_deactivated_configuration_or_a_lapsed_plan_takes_no_response() {
    for (plan, active) in [(Plan::Business, false), (Plan::Starter, true)] {
        let mut mocks = Mocks::new();
        mocks.acme_configured(
            plan,
            Some(SsoConfiguration {
                is_active: active,
                ..configuration(true)
            }),
        );
        mocks.saml_protocol.expect_verify_response().never();
        assert!(matches!(
            sign_in(mocks),
            Err(SamlSignInError::NotConfigured)
        ));
    }
}

#[test]
fn home_realm_discovery_finds_the_organization_that_whitelists_the_domain() {
    let mut mocks = Mocks::new();
    mocks.acme_configured(Plan::Business, Some(configuration(false)));
    mocks
        .sso
        .expect_sso_configurations_for_domain()
        .withf(|domain| domain.as_str() == "example.com")
        .returning(|_| ready(Ok(vec![configuration(false)])));
    let found = block_on(mocks.saml().lookup(" Grace@Example.com "))
        .unwrap()
        .unwrap();
    assert_eq!(found.organization_id, ACME);
    assert_eq!(
        found.login_url,
        format!("{PUBLIC_URL}/sso/saml/{ACME}/login")
    );

    // A domain the organization whitelisted but did not verify finds nothing.
    for verified_by in [
        None,
        Some(OrganizationId::from_uuid(Uuid::from_u128(0x07e))),
    ] {
        let mut mocks = Mocks::new();
        mocks.example_com_verified_by(verified_by);
        mocks.acme_configured_unverified(Plan::Business, Some(configuration(false)));
        mocks
            .sso
            .expect_sso_configurations_for_domain()
            .returning(|_| ready(Ok(vec![configuration(false)])));
        assert_eq!(
            block_on(mocks.saml().lookup("grace@example.com")).unwrap(),
            None
        );
    }

    // A plan without SSO, and an address that is not one, find nothing.
    let mut mocks = Mocks::new();
    mocks.acme_configured(Plan::Free, Some(configuration(false)));
    mocks
        .sso
        .expect_sso_configurations_for_domain()
        .returning(|_| ready(Ok(vec![configuration(false)])));
    let saml = mocks.saml();
    assert_eq!(block_on(saml.lookup("grace@example.com")).unwrap(), None);
    assert_eq!(block_on(saml.lookup("not an email")).unwrap(), None);
}

// ---------------------------------------------------------------------------------------------
// Single sign-on is enforced for its domains
// ---------------------------------------------------------------------------------------------

/// Acme (business) has an active configuration for example.com, which it verified; Ada, of
/// example.com, is registered with a password, as a member of Acme with `role`.
fn example_com_signs_in_with_acmes_idp(role: Option<Role>) -> Mocks {
    let mut mocks = Mocks::new();
    mocks.acme_configured(Plan::Business, Some(configuration(false)));
    mocks
        .sso
        .expect_sso_configurations_for_domain()
        .returning(|_| ready(Ok(vec![configuration(false)])));
    mocks.ada_is_registered();
    let membership = role.map(|role| crate::model::Membership {
        role: role.into(),
        plan: Plan::Business,
        ..super::tests::ada_in_acme()
    });
    if let Some(membership) = membership.clone() {
        mocks.refresh_reads_membership(crate::ports::MemberAccess {
            membership,
            policies: None,
        });
    }
    mocks
        .memberships
        .expect_membership()
        .returning(move |_, _| ready(Ok(membership.clone())));
    mocks
}

fn sso_url() -> String {
    format!("{PUBLIC_URL}/sso/saml/{ACME}/login")
}

#[test]
fn an_address_of_an_enforced_domain_is_sent_to_its_idp_instead_of_a_password() {
    for role in [None, Some(Role::Member), Some(Role::Admin)] {
        let mut mocks = example_com_signs_in_with_acmes_idp(role);
        mocks.hasher.expect_verify().never();
        mocks.sessions.expect_create_session().never();
        let refused = block_on(
            mocks
                .auth()
                .login(ADA_EMAIL, "any".to_owned(), None, &origin()),
        );
        match refused {
            Err(super::LoginError::SsoRequired(url)) => assert_eq!(url, sso_url(), "{role:?}"),
            other => panic!("{role:?}: expected the IdP, got {other:?}"),
        }
    }
}

#[test]
fn an_unknown_address_of_an_enforced_domain_is_told_the_same() {
    let mut mocks = example_com_signs_in_with_acmes_idp(None);
    mocks.accounts = crate::ports::MockAccountStore::new();
    mocks.email_is_free();
    mocks.hasher.expect_verify().never();
    let refused = block_on(mocks.auth().login(
        "nobody@example.com",
        "any".to_owned(),
        None,
        &origin(),
    ));
    assert!(matches!(refused, Err(super::LoginError::SsoRequired(_))));
}

#[test]
fn an_address_of_an_enforced_domain_cannot_register_a_password_in_advance() {
    // Pre-account takeover: a password registered for a colleague-to-be's address would be
    // linked to their account by the IdP. The address gets its account from the IdP alone.
    let mut mocks = example_com_signs_in_with_acmes_idp(None);
    mocks.accounts = crate::ports::MockAccountStore::new();
    mocks.email_is_free();
    mocks.hasher.expect_hash().never();
    mocks.accounts.expect_create_account().never();
    let refused = block_on(mocks.auth().register(
        crate::model::Email::parse("newhire@example.com").unwrap(),
        super::tests::ADA_PASSWORD,
        crate::model::FullName::parse("New Hire").unwrap(),
        &origin(),
    ));
    match refused {
        Err(super::RegisterError::SsoRequired(url)) => assert_eq!(url, sso_url()),
        other => panic!("expected the IdP, got {other:?}"),
    }
}

#[test]
fn the_owner_keeps_a_password_to_get_in_when_the_idp_cannot() {
    let mut mocks = example_com_signs_in_with_acmes_idp(Some(Role::Owner));
    mocks
        .hasher
        .expect_verify()
        .times(1)
        .returning(|_, _| ready(Ok(false)));
    let answer = block_on(mocks.auth().login(
        ADA_EMAIL,
        "wrong password".to_owned(),
        None,
        &origin(),
    ));
    assert!(
        matches!(answer, Err(super::LoginError::InvalidCredentials)),
        "the password is checked: {answer:?}"
    );
}

#[test]
fn a_token_for_an_sso_organization_needs_a_sign_in_through_its_idp() {
    use crate::model::{OrganizationChoice, Session};
    // A password session opened before Acme turned single sign-on on, or an owner's
    // break-glass password: the member's token for Acme needs its IdP's sign-in.
    let refreshed = |amr: Amr, sso_organization_id, role| {
        let mut mocks = example_com_signs_in_with_acmes_idp(Some(role));
        mocks.refresh_token_opens(Some(Session {
            amr,
            sso_organization_id,
            organization_id: Some(ACME),
            ..super::tests::ada_session()
        }));
        mocks
            .sessions
            .expect_touch_session()
            .returning(|_, _| ready(Ok(true)));
        mocks
            .signer
            .expect_sign()
            .returning(|_| ready(Ok(super::tests::SIGNED.to_owned())));
        block_on(mocks.auth().refresh(
            super::tests::REFRESH_TOKEN,
            None,
            OrganizationChoice::Keep,
            None,
        ))
    };
    match refreshed(Amr::password(), None, Role::Member) {
        Err(super::RefreshError::NotAdmitted(super::OrganizationRefused::SsoRequired(url))) => {
            assert_eq!(url, sso_url())
        }
        other => panic!("expected the IdP, got {other:?}"),
    }
    assert!(refreshed(Amr::external(), Some(ACME), Role::Member).is_ok());
    assert!(
        refreshed(Amr::password(), None, Role::Owner).is_ok(),
        "the owner's break-glass password"
    );
}

/// Ada acting in Acme through `admission`, in a session signed in by `amr` (through
/// `sso_organization`'s IdP, if any), as `role`; Acme signs `example.com` in with its IdP.
fn acting_in_acme(
    amr: Amr,
    sso_organization: Option<OrganizationId>,
    role: Role,
) -> Result<super::Actor, super::OrgAccessError> {
    let mut mocks = example_com_signs_in_with_acmes_idp(Some(role));
    mocks
        .memberships
        .expect_session_access()
        .returning(move |_, _, _, _| {
            ready(Ok(crate::ports::SessionAccess {
                session_live: true,
                sso_organization,
                sso_email: Some(crate::model::Email::parse(ADA_EMAIL).unwrap()),
                ..Default::default()
            }))
        });
    mocks
        .policies
        .expect_policies()
        .returning(|_| ready(Ok(None)));
    let principal = super::Principal::User {
        user_id: ADA,
        session_id: super::tests::ADA_SESSION,
        amr,
        application: None,
    };
    let authenticator = super::Authenticator::new((&mocks.ports()).into(), PUBLIC_URL);
    block_on(authenticator.actor(
        principal,
        ACME,
        crate::model::ClientAddress([192, 0, 2, 1].into()),
    ))
}

#[test]
fn a_session_from_before_single_sign_on_is_sent_to_the_idp_at_every_way_in() {
    // A password session, or one signed in by another organization's IdP: the IdP's sign-in.
    let globex = OrganizationId::from_uuid(Uuid::from_u128(0x610b));
    for (amr, signed_in_by) in [(Amr::password(), None), (Amr::external(), Some(globex))] {
        match acting_in_acme(amr.clone(), signed_in_by, Role::Member) {
            Err(super::OrgAccessError::SsoRequired(url)) => assert_eq!(url, sso_url()),
            other => panic!("{amr:?}: expected the IdP, got {other:?}"),
        }
    }
    // Acme's own IdP's session, and the owner's break-glass password, are admitted.
    acting_in_acme(Amr::external(), Some(ACME), Role::Member).unwrap();
    acting_in_acme(Amr::password(), None, Role::Owner).unwrap();
}
