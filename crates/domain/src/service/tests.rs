//! The use cases against mocked ports: each test states one rule.
//!
//! A mock with no expectation panics when called, so a port a test does not set up is also a
//! port the use case must not touch; `never()` says so out loud where it is the rule.
//!
//! The ports are `#[async_trait]` traits mocked after `async_trait` has run, so an async method's
//! mock returns a boxed future: [`ready`] makes one.

use std::sync::{Arc, Mutex};

use futures::executor::block_on;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

use super::{
    Actor, Agent, ApiKeyService, AppGrant, AuthService, AuthSettings, AuthenticateError,
    Authenticator, ChangePasswordError, CreateApiKeyError, Forbidden, LoginError, OrgAccessError,
    Principal, RefreshError, RegisterError,
};
use crate::{
    mock::{MockFuture, MockPorts},
    model::{
        AccountKey, Amr, ApiKey, ApiKeyId, ApiKeyName, Application, ApplicationId, ApplicationName,
        AuditAction, AuditActor, AuditOutcome, AuditRecord, AuditTarget, ClientAddress,
        ClientGrant, ClientId, Email, EventType, FailedSignIns, FullName, GraceHours, Invitation,
        InvitationId, IpAllowlist, IpRange, KeyHolder, LockoutRule, Member, MemberStatus,
        Membership, MfaMethod, MfaPolicy, NewApiKey, NewEvent, NewInvitation, NewSession,
        Organization, OrganizationChoice, OrganizationId, OrganizationName, OrganizationPolicies,
        OrganizationSettings, OrganizationType, Origin, PasswordError, PasswordHash,
        PasswordStrength, Permission, Plan, RedirectUri, RedirectUris, Role, Scope, SecretToken,
        Session, SessionId, Slug, TargetKind, TokenHash, TokenKind, User, UserCredentials, UserId,
        SESSION_TOUCH_INTERVAL,
    },
    ports::{
        AccessClaims, Audience, BearerClaims, JudgeError, MachineClaims, MemberAccess,
        MockAuditStore, MockPasswordJudge, MockPolicyStore, MockSignInAttempts, NewAccount,
        PlanPolicies, Ports, RefreshContext, SavedPolicies, StoreError, TokenError,
    },
};

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

pub(super) const ADA: UserId = UserId::from_uuid(Uuid::from_u128(0xada));
pub(super) const ADA_SESSION: SessionId = SessionId::from_uuid(Uuid::from_u128(0x5e55_1011));
pub(super) const ACME: OrganizationId = OrganizationId::from_uuid(Uuid::from_u128(0xac3e));
pub(super) const GLOBEX: OrganizationId = OrganizationId::from_uuid(Uuid::from_u128(0x610b_e800));
const CI_KEY: ApiKeyId = ApiKeyId::from_uuid(Uuid::from_u128(0xc1_4e7));

/// Bob, whom Ada invites, and who is a member of Acme in some tests.
pub(super) const BOB: UserId = UserId::from_uuid(Uuid::from_u128(0xb0b));

pub(super) const ADA_EMAIL: &str = "ada@example.com";
pub(super) const ADA_PASSWORD: &str = "correct horse battery staple";
pub(super) const ADA_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$YWRhc2FsdA$YWRhaGFzaA";
pub(super) const NEW_PASSWORD: &str = "a much longer new passphrase";
pub(super) const NEW_HASH: &str = "$argon2id$v=19$m=19456,t=2,p=1$bmV3c2FsdA$bmV3aGFzaA";
pub(super) const ISSUER: &str = "https://id.example.com";
pub(super) const SIGNED: &str = "header.claims.signature";
/// The 43 random characters every fake secret gets after its kind's prefix.
const SECRET_BODY: &str = "Zq3xV9mK2pL7wR4tY8uN1bH6gF5dS0aJcEiOoUkMnBv";

/// The time every test runs at.
pub(super) fn now() -> OffsetDateTime {
    time::macros::datetime!(2024-05-01 12:00:00 UTC)
}

/// What `Random::secret` hands out for a kind.
pub(super) fn secret_of(kind: TokenKind) -> String {
    format!("{}{SECRET_BODY}", kind.prefix())
}

pub(super) fn email(raw: &str) -> Email {
    Email::parse(raw).unwrap()
}

pub(super) fn full_name(raw: &str) -> FullName {
    FullName::parse(raw).unwrap()
}

pub(super) fn hash(phc: &str) -> PasswordHash {
    PasswordHash::from_phc(phc.to_owned())
}

fn ada() -> User {
    User {
        id: ADA,
        email: email(ADA_EMAIL),
        full_name: full_name("Ada Lovelace"),
        created_at: now() - Duration::days(100),
        updated_at: now() - Duration::days(10),
        email_verified: false,
    }
}

pub(super) fn ada_credentials() -> UserCredentials {
    UserCredentials {
        user: ada(),
        password_hash: Some(hash(ADA_HASH)),
        password_changed_at: now() - Duration::days(40),
    }
}

/// Ada with a Bearer token of her session.
pub(super) fn ada_in_session() -> Principal {
    Principal::User {
        user_id: ADA,
        session_id: ADA_SESSION,
        amr: Amr::password(),
        application: None,
    }
}

/// Ada acting in Acme, in her session, with `role`, Acme being on `plan`.
/// Ada signed in with a password through an application's token limited to `scope`.
pub(super) fn ada_granted(scope: &str) -> Principal {
    Principal::User {
        user_id: ADA,
        session_id: ADA_SESSION,
        amr: Amr::password(),
        application: Some(AppGrant {
            client_id: ClientId::parse("ghc_0123456789abcdef0123456789abcdef").unwrap(),
            scope: Scope::parse(scope).unwrap(),
        }),
    }
}

pub(super) fn ada_acting(role: Role, plan: Plan) -> Actor {
    Actor::Member {
        principal: ada_in_session(),
        membership: Membership {
            organization_id: ACME,
            user_id: ADA,
            role: role.into(),
            plan,
            joined_at: now() - Duration::days(100),
        },
    }
}

/// Bob, an active member of Acme with `role` since a month ago.
pub(super) fn bob_in_acme(role: Role) -> Member {
    let joined_at = now() - Duration::days(30);
    Member {
        organization_id: ACME,
        user_id: Some(BOB),
        email: email("bob@example.com"),
        full_name: Some(full_name("Bob Babbage")),
        role: role.into(),
        status: MemberStatus::Active,
        invitation_id: None,
        invited_at: None,
        invited_by: None,
        accepted_at: Some(joined_at),
        joined_at,
    }
}

/// Ada's invitation of bob@example.com to Acme with `role`, sent yesterday.
pub(super) fn bobs_invitation(role: Role) -> Invitation {
    let invited_at = now() - Duration::days(1);
    Invitation {
        id: InvitationId::from_uuid(Uuid::from_u128(0x1417)),
        organization_id: ACME,
        organization_name: OrganizationName::parse("Acme").unwrap(),
        organization_slug: Slug::parse("acme").unwrap(),
        email: email("bob@example.com"),
        role: role.into(),
        invited_by: ADA,
        invited_at,
        expires_at: NewInvitation::expiry(invited_at),
    }
}

/// Ada's API key for Acme.
pub(super) fn ada_key_for_acme() -> Principal {
    Principal::ApiKey {
        key_id: CI_KEY,
        user_id: ADA,
        organization_id: ACME,
    }
}

/// Acme, a team on `plan`.
pub(super) fn acme(plan: Plan) -> Organization {
    Organization {
        id: ACME,
        name: OrganizationName::parse("Acme").unwrap(),
        slug: Slug::parse("acme").unwrap(),
        kind: OrganizationType::Team,
        plan,
        is_active: true,
        settings: OrganizationSettings::default(),
        member_count: 2,
        application_count: 0,
        created_at: now() - Duration::days(300),
        updated_at: now() - Duration::days(3),
    }
}

pub(super) fn ada_in_acme() -> Membership {
    Membership {
        organization_id: ACME,
        user_id: ADA,
        role: Role::Admin.into(),
        plan: Plan::Pro,
        joined_at: now() - Duration::days(100),
    }
}

pub(super) fn ada_session() -> Session {
    Session {
        id: ADA_SESSION,
        user_id: ADA,
        created_at: now() - Duration::days(3),
        expires_at: now() + Duration::days(27),
        last_used_at: now() - Duration::hours(1),
        grant: None,
        amr: Amr::password(),
        sso_organization_id: None,
        organization_id: None,
    }
}

pub(super) fn claims_of_ada() -> AccessClaims {
    AccessClaims {
        iss: ISSUER.to_owned(),
        sub: ADA,
        aud: Audience::gatehouse(),
        iat: now().unix_timestamp() - 60,
        nbf: now().unix_timestamp() - 60,
        exp: now().unix_timestamp() + 3540,
        jti: Uuid::from_u128(0x7),
        sid: ADA_SESSION,
        email: ADA_EMAIL.to_owned(),
        client_id: None,
        scope: None,
        amr: vec!["pwd".to_owned()],
        org_id: None,
        org_role: None,
        org_permissions: Vec::new(),
    }
}

pub(super) fn settings() -> AuthSettings {
    AuthSettings::new(ISSUER.to_owned())
}

pub(super) use crate::mock::ready;

/// Keeps what a mock was called with, for the test to look at afterwards.
pub(super) struct Seen<T>(Arc<Mutex<Vec<T>>>);

impl<T> Clone for Seen<T> {
    fn clone(&self) -> Self {
        Self(Arc::clone(&self.0))
    }
}

impl<T: Clone + Send + 'static> Seen<T> {
    /// A signer mock's answer: records the claims it is asked to sign, returns `signature`.
    pub(super) fn signing(
        &self,
        signature: &'static str,
    ) -> impl FnMut(&T) -> MockFuture<Result<String, TokenError>> + Send + 'static {
        let seen = self.clone();
        move |claims| {
            seen.record(claims.clone());
            ready(Ok(signature.to_owned()))
        }
    }
}

impl<T> Seen<T> {
    pub(super) fn new() -> Self {
        Self(Arc::new(Mutex::new(Vec::new())))
    }

    pub(super) fn record(&self, value: T) {
        self.0.lock().unwrap().push(value);
    }

    /// The one value recorded.
    pub(super) fn only(&self) -> T {
        let mut seen = self.0.lock().unwrap();
        assert_eq!(seen.len(), 1, "expected exactly one call");
        seen.remove(0)
    }

    /// Every value recorded, in order.
    pub(super) fn all(&self) -> Vec<T> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// Lets the mock `$expectation` (set up as the test needs: `.times(1)`, `.withf(…)`) answer
/// `ready($answer)` (which may use the arguments, after `$keep`) and keep what `$keep` makes of
/// each call's arguments; gives back the [`Seen`] that holds them:
/// `let saved = recording!(mocks.x.expect_save().times(1), |new, _| new, Ok(true));`.
macro_rules! recording {
    ($expectation:expr, |$($arg:pat_param),*| $keep:expr, $answer:expr) => {{
        let seen = $crate::service::tests::Seen::new();
        let kept = seen.clone();
        $expectation.returning(move |$($arg),*| {
            kept.record($keep);
            $crate::mock::ready($answer)
        });
        seen
    }};
}
pub(super) use recording;

/// Every port, mocked ([`MockPorts`]). The clock is stopped at [`now`], ids count up from
/// `f0000000-…-0001`, and secrets are [`secret_of`] their kind; everything else has no
/// expectations until a test sets them. Beside them, for the store's combined reads: the
/// policies of Ada's organizations as [`Mocks::policies_are`] last set them, and the memberships
/// [`Mocks::refresh_reads_membership`] added (what a refresh's read of the session brings).
pub(super) struct Mocks(
    MockPorts,
    Arc<Mutex<Vec<PlanPolicies>>>,
    Arc<Mutex<Vec<MemberAccess>>>,
);

impl std::ops::Deref for Mocks {
    type Target = MockPorts;
    fn deref(&self) -> &MockPorts {
        &self.0
    }
}

impl std::ops::DerefMut for Mocks {
    fn deref_mut(&mut self) -> &mut MockPorts {
        &mut self.0
    }
}

/// Where the tests' requests come from.
pub(super) fn origin() -> Origin {
    Origin::new([192, 0, 2, 7].into(), Some("curl/8.5"), Some("req-7"))
}

impl Mocks {
    pub(super) fn new() -> Self {
        let mut mocks = MockPorts::new();
        mocks.clock.expect_now().return_const(now());
        let mut issued: u128 = 0;
        mocks.random.expect_uuid().returning(move || {
            issued += 1;
            Uuid::from_u128((0xf000_0000 << 96) | issued)
        });
        let mut codes: u32 = 0;
        mocks.random.expect_recovery_code().returning(move || {
            codes += 1;
            SecretToken::new(format!("code{codes:01}-xxxxx"))
        });
        mocks
            .random
            .expect_secret()
            .returning(|kind| SecretToken::new(secret_of(kind)));
        mocks.policies = no_policies();
        // Nobody has a second factor unless a test says so (replace `mocks.mfa` to say so).
        mocks
            .mfa
            .expect_mfa_factors()
            .returning(|_| ready(Ok(Vec::new())));
        mocks.sign_in_attempts = no_failed_sign_ins();
        // Every password is hard to guess unless a test says otherwise (replace `mocks.judge`
        // to say so: mockall answers with the first expectation that matches).
        mocks.judge.expect_strength().returning(|_, _| {
            ready(Ok(PasswordStrength {
                score: 4,
                feedback: None,
            }))
        });
        mocks.sign_in_attempts = no_failed_sign_ins();
        // No domain is verified, so no single sign-on bars a password, unless a test says so
        // (replace `mocks.domains`).
        mocks
            .domains
            .expect_verifying_organization()
            .returning(|_| ready(Ok(None)));
        // Refused sign-ins are recorded; the audit tests replace `mocks.audit` to look.
        mocks
            .audit
            .expect_record_audit()
            .returning(|_| ready(Ok(())));
        Self(mocks, Arc::default(), Arc::default())
    }

    pub(super) fn ports(self) -> Ports {
        self.0.into_ports()
    }

    /// The cipher seals mail in the clear, so that a test reads what was queued with
    /// `mail::in_the_clear`; sealing is bound to the mail's id.
    pub(super) fn mail_is_sealed_in_the_clear(&mut self) {
        self.cipher
            .expect_seal()
            .withf(|_, context| context.starts_with(b"gatehouse mail "))
            .returning(|plaintext, _| Ok(plaintext.to_vec()));
    }

    /// Ada belongs to (and, registering, is invited by) organizations with these plans and
    /// policies; no organization has an IP allowlist.
    pub(super) fn policies_are(&mut self, organizations: Vec<PlanPolicies>) {
        *self.1.lock().unwrap() = organizations.clone();
        let mut policies = MockPolicyStore::new();
        let of_member = organizations.clone();
        policies
            .expect_policies_of_member()
            .returning(move |_| ready(Ok(of_member.clone())));
        policies
            .expect_policies_of_invitee()
            .returning(move |_, _| ready(Ok(organizations.clone())));
        policies.expect_policies().returning(|_| ready(Ok(None)));
        self.policies = policies;
    }

    /// A refresh's read of the session also brings this membership of Ada's (with its
    /// organization's saved policies): what admits her again to the organization the refresh
    /// speaks for.
    pub(super) fn refresh_reads_membership(&mut self, access: MemberAccess) {
        self.2.lock().unwrap().push(access);
    }

    /// A refresh token opens this session of Ada's (`None`: no live session, or its user is
    /// gone), read with her credentials, a membership of an organization of its own for each
    /// plan and policies [`Self::policies_are`] set, and the memberships
    /// [`Self::refresh_reads_membership`] added (as they stand when the refresh runs).
    pub(super) fn refresh_token_opens(&mut self, session: Option<Session>) {
        let policies = Arc::clone(&self.1);
        let memberships = Arc::clone(&self.2);
        self.sessions
            .expect_refresh_context()
            .withf(|_, at| *at == now())
            .returning(move |_, _| {
                let of_plans = policies.lock().unwrap().clone().into_iter().zip(1..).map(
                    |((plan, policies), n)| MemberAccess {
                        membership: Membership {
                            organization_id: OrganizationId::from_uuid(Uuid::from_u128(
                                0x0f0d_0000 + n,
                            )),
                            role: Role::Member.into(),
                            plan,
                            ..ada_in_acme()
                        },
                        policies: policies.map(|policies| SavedPolicies {
                            policies,
                            updated_at: now() - Duration::days(1),
                            mfa_required_since: None,
                        }),
                    },
                );
                let memberships = of_plans
                    .chain(memberships.lock().unwrap().iter().cloned())
                    .collect();
                ready(Ok(session.clone().map(|session| RefreshContext {
                    session,
                    credentials: ada_credentials(),
                    memberships,
                })))
            });
    }

    pub(super) fn auth(self) -> AuthService {
        AuthService::new((&self.ports()).into(), settings())
    }

    /// The ports, and the password sign-in service over them, for a use case built on both.
    pub(super) fn ports_with_auth(self) -> (Ports, AuthService) {
        let ports = self.ports();
        let auth = AuthService::new((&ports).into(), settings());
        (ports, auth)
    }

    /// No organization's single sign-on is on: a session's admission reads no address.
    pub(super) fn sso_is_off(&mut self) {
        self.memberships
            .expect_session_access()
            .returning(|_, _, _, _| ready(Ok(crate::ports::SessionAccess::default())));
    }

    fn api_key_service(self) -> ApiKeyService {
        {
            let ports = self.ports();
            ApiKeyService::new((&ports).into(), Authenticator::new((&ports).into(), ISSUER))
        }
    }

    // Common set-ups, named for what they make true.

    /// Every address is the one of the account of these credentials.
    pub(super) fn address_belongs_to(&mut self, credentials: UserCredentials) {
        self.accounts
            .expect_credentials_by_email()
            .returning(move |_| ready(Ok(Some(credentials.clone()))));
    }

    pub(super) fn email_is_free(&mut self) {
        self.accounts
            .expect_credentials_by_email()
            .returning(|_| ready(Ok(None)));
    }

    /// The store creates every account it is asked to, keeping what it was given.
    pub(super) fn accounts_are_created(&mut self) -> Seen<NewAccount> {
        recording!(
            self.accounts.expect_create_account(),
            |account, _| account,
            Ok(())
        )
    }

    pub(super) fn ada_is_registered(&mut self) {
        self.accounts
            .expect_credentials_by_email()
            .withf(|email| email.as_ref() == ADA_EMAIL)
            .returning(|_| ready(Ok(Some(ada_credentials()))));
        self.accounts
            .expect_credentials_by_id()
            .withf(|id| *id == ADA)
            .returning(|_| ready(Ok(Some(ada_credentials()))));
    }

    /// The use case must refuse before it hashes a new password, and save none.
    pub(super) fn no_new_password_is_hashed_or_saved(&mut self) {
        self.hasher.expect_hash().never();
        self.accounts.expect_change_password().never();
    }

    pub(super) fn hashing_gives(&mut self, phc: &'static str) {
        self.hasher
            .expect_hash()
            .times(1)
            .returning(move |_| ready(Ok(hash(phc))));
    }

    /// The password check answers `matches`, once, for a password checked against Ada's hash.
    pub(super) fn password_check_says(&mut self, matches: bool) {
        self.hasher
            .expect_verify()
            .withf(|_, stored| stored.as_ref().map(PasswordHash::as_phc) == Some(ADA_HASH))
            .times(1)
            .returning(move |_, _| ready(Ok(matches)));
    }

    /// Signs anything as [`SIGNED`] and keeps the claims.
    pub(super) fn signer_signs(&mut self) -> Seen<AccessClaims> {
        let signed = Seen::new();
        self.signer
            .expect_sign()
            .times(1)
            .returning(signed.signing(SIGNED));
        signed
    }

    /// The store opens every session it is asked to, keeping what it was given.
    pub(super) fn sessions_open(&mut self) -> Seen<OpenedSession> {
        recording!(
            self.sessions.expect_create_session(),
            |session, event, keep_at_most, audit| OpenedSession {
                session,
                event,
                keep_at_most,
                audit,
            },
            Ok(())
        )
    }

    /// The store finds no membership, whoever is asked about in whichever organization.
    pub(super) fn no_membership_is_found(&mut self) {
        self.memberships
            .expect_membership()
            .returning(|_, _| ready(Ok(None)));
    }

    pub(super) fn ada_is_in_acme(&mut self) {
        self.memberships
            .expect_membership()
            .withf(|user, org| *user == ADA && *org == ACME)
            .returning(|_, _| ready(Ok(Some(ada_in_acme()))));
    }
}

/// What the store was asked to open a session with ([`Mocks::sessions_open`]).
pub(super) struct OpenedSession {
    pub(super) session: NewSession,
    pub(super) event: NewEvent,
    pub(super) keep_at_most: Option<u32>,
    pub(super) audit: AuditRecord,
}

/// No organization with policies anywhere.
/// No account has failed sign-ins, and counting them succeeds.
pub(super) fn no_failed_sign_ins() -> MockSignInAttempts {
    let mut attempts = MockSignInAttempts::new();
    attempts
        .expect_failed_sign_ins()
        .returning(|_, _| ready(Ok(FailedSignIns::default())));
    attempts
        .expect_begin_check()
        .returning(|_, _, _| ready(Ok(crate::model::CheckAdmission::Admitted)));
    attempts.expect_release().returning(|_| ready(Ok(())));
    attempts
        .expect_record_failure()
        .returning(|_, _, _| ready(Ok(FailedSignIns::default())));
    attempts.expect_clear().returning(|_| ready(Ok(())));
    attempts
}

/// No run yet: every check is admitted under the default rule; keeps the keys failures and
/// clears were recorded for.
pub(super) fn counting(
    failures: &Seen<AccountKey>,
    clears: &Seen<AccountKey>,
) -> MockSignInAttempts {
    let mut attempts = MockSignInAttempts::new();
    attempts
        .expect_failed_sign_ins()
        .returning(|_, _| ready(Ok(FailedSignIns::default())));
    attempts
        .expect_begin_check()
        .withf(|_, at, rule| *at == now() && *rule == LockoutRule::DEFAULT)
        .returning(|_, _, _| ready(Ok(crate::model::CheckAdmission::Admitted)));
    // A right password with a second step to come gives its slot back.
    attempts.expect_release().returning(|_| ready(Ok(())));
    let seen = failures.clone();
    attempts
        .expect_record_failure()
        .withf(|_, at, rule| *at == now() && *rule == LockoutRule::DEFAULT)
        .returning(move |account, _, _| {
            seen.record(account.clone());
            ready(Ok(FailedSignIns {
                failures: 1,
                locked_until: None,
            }))
        });
    let seen = clears.clone();
    attempts.expect_clear().returning(move |account| {
        seen.record(account.clone());
        ready(Ok(()))
    });
    attempts
}

/// A policy store whose one organization (Acme) has these policies, saved two days ago,
/// requiring MFA since `mfa_required_since`.
pub(super) fn acme_policies_are(
    policies: OrganizationPolicies,
    mfa_required_since: Option<OffsetDateTime>,
) -> MockPolicyStore {
    let saved = SavedPolicies {
        policies,
        updated_at: now() - Duration::days(2),
        mfa_required_since,
    };
    let mut store = MockPolicyStore::new();
    store
        .expect_policies()
        .returning(move |_| ready(Ok(Some(saved.clone()))));
    store
}

/// A policy store whose one organization (Acme) admits requests from `range` only.
pub(super) fn acme_allows_only(range: &str) -> MockPolicyStore {
    let policies = OrganizationPolicies {
        ip_allowlist: IpAllowlist::new(true, vec![IpRange::parse(range).unwrap()]).unwrap(),
        ..OrganizationPolicies::default()
    };
    acme_policies_are(policies, None)
}

/// A policy store whose one organization (Acme) requires a second factor of `methods`, with
/// no grace period, since `since`.
pub(super) fn acme_requires_mfa_at_once(
    methods: Vec<MfaMethod>,
    since: OffsetDateTime,
) -> MockPolicyStore {
    let policies = OrganizationPolicies {
        mfa_policy: MfaPolicy::new(true, methods, GraceHours::parse(0).unwrap()).unwrap(),
        ..OrganizationPolicies::default()
    };
    acme_policies_are(policies, Some(since))
}

fn no_policies() -> MockPolicyStore {
    let mut policies = MockPolicyStore::new();
    policies
        .expect_policies_of_member()
        .returning(|_| ready(Ok(Vec::new())));
    policies
        .expect_policies_of_invitee()
        .returning(|_, _| ready(Ok(Vec::new())));
    policies.expect_policies().returning(|_| ready(Ok(None)));
    policies
}

// ---------------------------------------------------------------------------------------------
// register
// ---------------------------------------------------------------------------------------------

fn register(mocks: Mocks, password: &str) -> Result<super::Registered, RegisterError> {
    block_on(mocks.auth().register(
        email(ADA_EMAIL),
        password,
        full_name("Ada Lovelace"),
        &origin(),
    ))
}

#[test]
fn register_refuses_a_weak_password_without_hashing_it() {
    let mut mocks = Mocks::new();
    mocks.hasher.expect_hash().times(0);
    mocks.accounts.expect_credentials_by_email().never();
    mocks.accounts.expect_create_account().never();

    let result = register(mocks, "short");

    assert!(matches!(
        result,
        Err(RegisterError::WeakPassword(PasswordError::TooShort(8)))
    ));
}

#[test]
fn register_refuses_what_the_judge_finds_too_guessable_judged_with_who_registers() {
    let mut mocks = Mocks::new();
    let mut judge = MockPasswordJudge::new();
    judge
        .expect_strength()
        .withf(|password, inputs| {
            password.expose() == ADA_PASSWORD
                && inputs.iter().any(|input| input == ADA_EMAIL)
                && inputs.iter().any(|input| input == "Lovelace")
        })
        .times(1)
        .returning(|_, _| {
            ready(Ok(PasswordStrength {
                score: 2,
                feedback: Some("Avoid your own name.".into()),
            }))
        });
    mocks.judge = judge;
    mocks.hasher.expect_hash().times(0);
    mocks.accounts.expect_credentials_by_email().never();
    mocks.accounts.expect_create_account().never();

    let result = register(mocks, ADA_PASSWORD);

    assert!(
        matches!(
            &result,
            Err(RegisterError::WeakPassword(PasswordError::TooGuessable(why)))
                if why == "Avoid your own name."
        ),
        "{result:?}"
    );
}

#[test]
fn register_fails_without_hashing_when_the_judge_fails() {
    let mut mocks = Mocks::new();
    let mut judge = MockPasswordJudge::new();
    judge
        .expect_strength()
        .returning(|_, _| ready(Err(JudgeError("the pool is gone".into()))));
    mocks.judge = judge;
    mocks.hasher.expect_hash().times(0);
    mocks.accounts.expect_create_account().never();

    assert!(matches!(
        register(mocks, ADA_PASSWORD),
        Err(RegisterError::Internal(_))
    ));
}

#[test]
fn register_refuses_a_taken_email_without_hashing() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.hasher.expect_hash().times(0);
    mocks.accounts.expect_create_account().never();

    assert!(matches!(
        register(mocks, ADA_PASSWORD),
        Err(RegisterError::EmailTaken)
    ));
}

#[test]
fn register_losing_the_race_for_an_email_is_email_taken() {
    let mut mocks = Mocks::new();
    mocks.email_is_free();
    mocks.hashing_gives(ADA_HASH);
    mocks
        .accounts
        .expect_create_account()
        .times(1)
        .returning(|_, _| ready(Err(StoreError::Conflict)));

    assert!(matches!(
        register(mocks, ADA_PASSWORD),
        Err(RegisterError::EmailTaken)
    ));
}

#[test]
fn register_hashes_the_password_it_was_given() {
    let mut mocks = Mocks::new();
    mocks.email_is_free();
    mocks
        .hasher
        .expect_hash()
        .withf(|password| password.expose() == ADA_PASSWORD)
        .times(1)
        .returning(|_| ready(Ok(hash(ADA_HASH))));
    mocks
        .accounts
        .expect_create_account()
        .withf(|account, _| {
            account.user.password_hash.as_ref().map(|h| h.as_phc()) == Some(ADA_HASH)
        })
        .times(1)
        .returning(|_, _| ready(Ok(())));

    register(mocks, ADA_PASSWORD).unwrap();
}

#[test]
fn register_creates_the_user_with_a_free_personal_workspace_and_announces_both() {
    let mut mocks = Mocks::new();
    mocks.email_is_free();
    mocks.hashing_gives(ADA_HASH);
    let created = mocks.accounts_are_created();

    let registered = register(mocks, ADA_PASSWORD).unwrap();
    let NewAccount {
        user,
        workspace,
        events,
    } = created.only();

    assert_eq!(registered.user_id, user.id);
    assert_eq!(registered.organization_id, workspace.id);
    assert_eq!(registered.email.as_ref(), ADA_EMAIL);
    assert_eq!(user.email.as_ref(), ADA_EMAIL);
    assert_eq!(user.created_at, now());

    assert_eq!(workspace.kind, OrganizationType::Personal);
    assert_eq!(workspace.plan, Plan::Free);
    assert!(workspace.slug_generated);
    assert_eq!(workspace.name.as_ref(), "Ada Lovelace's workspace");
    assert_eq!(workspace.slug.as_ref(), "ada-lovelace-s-workspace");
    assert_eq!(workspace.created_at, now());

    let kinds: Vec<EventType> = events.iter().map(|e| e.event_type).collect();
    assert_eq!(
        kinds,
        [EventType::UserCreated, EventType::OrganizationCreated]
    );
    let (user_created, org_created) = (&events[0], &events[1]);

    assert_eq!(user_created.user_id, Some(user.id));
    assert_eq!(user_created.organization_id, None);
    assert_eq!(user_created.occurred_at, now());
    let data = &user_created.data;
    assert_eq!(data["id"], serde_json::json!(user.id));
    assert_eq!(data["email"], ADA_EMAIL);
    assert_eq!(data["full_name"], "Ada Lovelace");
    assert_eq!(
        data["created_at"],
        serde_json::json!(crate::model::timestamp::format(now()))
    );

    assert_eq!(org_created.organization_id, Some(workspace.id));
    assert_eq!(org_created.user_id, Some(user.id));
    assert_eq!(org_created.data["id"], serde_json::json!(workspace.id));
    assert_eq!(org_created.data["type"], "personal");
    assert_eq!(org_created.data["plan"], "free");

    assert_ne!(
        user_created.id, org_created.id,
        "every event has its own id"
    );
}

#[test]
fn register_events_carry_no_password_or_hash() {
    let mut mocks = Mocks::new();
    mocks.email_is_free();
    mocks.hashing_gives(ADA_HASH);
    let created = mocks.accounts_are_created();

    register(mocks, ADA_PASSWORD).unwrap();

    for event in created.only().events {
        let json = event.data.to_string();
        assert!(!json.contains(ADA_HASH), "{json}");
        assert!(!json.contains("argon2"), "{json}");
        assert!(!json.contains(ADA_PASSWORD), "{json}");
        assert!(!json.contains("password"), "{json}");
    }
}

// ---------------------------------------------------------------------------------------------
// login
// ---------------------------------------------------------------------------------------------

/// Signs in with a password, expecting tokens (no second factor asked).
pub(super) fn login(
    mocks: Mocks,
    email: &str,
    password: &str,
) -> Result<super::TokenPair, LoginError> {
    block_on(
        mocks
            .auth()
            .login(email, password.to_owned(), None, &origin()),
    )
    .map(|signed_in| signed_in.into_tokens().expect("no second factor"))
}

#[test]
fn login_with_an_unknown_email_still_verifies_once_and_says_invalid_credentials() {
    let mut mocks = Mocks::new();
    mocks.email_is_free();
    mocks
        .hasher
        .expect_verify()
        .withf(|presented, stored| presented == ADA_PASSWORD && stored.is_none())
        .times(1)
        .returning(|_, _| ready(Ok(false)));
    mocks.sessions.expect_create_session().never();

    assert!(matches!(
        login(mocks, "nobody@example.com", ADA_PASSWORD),
        Err(LoginError::InvalidCredentials)
    ));
}

#[test]
fn login_with_an_unparseable_email_still_verifies_once_and_says_invalid_credentials() {
    let mut mocks = Mocks::new();
    mocks.accounts.expect_credentials_by_email().never();
    mocks
        .hasher
        .expect_verify()
        .withf(|_, stored| stored.is_none())
        .times(1)
        .returning(|_, _| ready(Ok(false)));
    mocks.sessions.expect_create_session().never();

    assert!(matches!(
        login(mocks, "not an email", ADA_PASSWORD),
        Err(LoginError::InvalidCredentials)
    ));
}

#[test]
fn an_account_without_a_password_takes_none_and_looks_like_a_wrong_one() {
    let mut mocks = Mocks::new();
    mocks.accounts.expect_credentials_by_email().returning(|_| {
        ready(Ok(Some(UserCredentials {
            password_hash: None,
            ..ada_credentials()
        })))
    });
    mocks
        .hasher
        .expect_verify()
        .withf(|_, stored| stored.is_none())
        .times(1)
        .returning(|_, _| ready(Ok(false)));
    mocks.sessions.expect_create_session().never();

    assert!(matches!(
        login(mocks, ADA_EMAIL, ADA_PASSWORD),
        Err(LoginError::InvalidCredentials)
    ));
}

#[test]
fn login_with_a_wrong_password_opens_no_session() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(false);
    mocks.sessions.expect_create_session().never();
    mocks.signer.expect_sign().never();

    assert!(matches!(
        login(mocks, ADA_EMAIL, "wrong password"),
        Err(LoginError::InvalidCredentials)
    ));
}

#[test]
fn a_refused_sign_in_is_audited_on_its_own_naming_the_account_and_where_it_came_from() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(false);
    mocks.audit = MockAuditStore::new();
    mocks
        .audit
        .expect_record_audit()
        .withf(|record| {
            record.action == AuditAction::LoginFailed
                && record.actor == AuditActor::User(ADA)
                && record.target == Some(AuditTarget::new(TargetKind::User, ADA))
                && record.outcome == AuditOutcome::Failure
                && record.origin == origin()
                && record.organization_id.is_none()
        })
        .times(1)
        .returning(|_| ready(Ok(())));

    assert!(matches!(
        login(mocks, ADA_EMAIL, "wrong password"),
        Err(LoginError::InvalidCredentials)
    ));
}

#[test]
fn a_sign_in_for_no_account_is_audited_without_an_actor_id() {
    let mut mocks = Mocks::new();
    mocks.email_is_free();
    mocks
        .hasher
        .expect_verify()
        .returning(|_, _| ready(Ok(false)));
    mocks.audit = MockAuditStore::new();
    mocks
        .audit
        .expect_record_audit()
        .withf(|record| record.actor == AuditActor::UnknownUser && record.target.is_none())
        .times(1)
        .returning(|_| ready(Ok(())));

    assert!(matches!(
        login(mocks, "nobody@example.com", ADA_PASSWORD),
        Err(LoginError::InvalidCredentials)
    ));
}

#[test]
fn an_accepted_sign_in_is_audited_in_the_sessions_transaction() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(true);
    mocks.audit = MockAuditStore::new();
    mocks.audit.expect_record_audit().never();
    let opened = mocks.sessions_open();
    mocks.signer_signs();

    assert!(login(mocks, ADA_EMAIL, ADA_PASSWORD).is_ok());
    let OpenedSession { session, audit, .. } = opened.only();
    assert_eq!(audit.action, AuditAction::LoginSucceeded);
    assert_eq!(audit.actor, AuditActor::User(session.user_id));
    assert_eq!(audit.outcome, AuditOutcome::Success);
    assert_eq!(audit.occurred_at, now());
    assert_eq!(audit.origin, origin());
}

#[test]
fn login_normalises_the_email_before_looking_it_up() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(false);

    assert!(matches!(
        login(mocks, "  Ada@Example.COM ", "wrong password"),
        Err(LoginError::InvalidCredentials)
    ));
}

#[test]
fn login_opens_a_thirty_day_session_known_only_by_the_refresh_token_hash() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(true);
    let created = mocks.sessions_open();
    let signed = mocks.signer_signs();

    let pair = login(mocks, ADA_EMAIL, ADA_PASSWORD).unwrap();
    let OpenedSession {
        session,
        event: login_event,
        ..
    } = created.only();

    assert_eq!(pair.refresh_token.expose(), secret_of(TokenKind::Refresh));
    assert_eq!(
        session.refresh_token_hash,
        TokenHash::of(pair.refresh_token.expose())
    );
    assert_eq!(session.user_id, ADA);
    assert_eq!(session.created_at, now());
    assert_eq!(session.expires_at, now() + Duration::days(30));

    assert_eq!(login_event.event_type, EventType::AuthLogin);
    assert_eq!(login_event.user_id, Some(ADA));
    assert_eq!(login_event.organization_id, None);
    assert_eq!(login_event.occurred_at, now());
    assert_eq!(
        login_event.data["session_id"],
        serde_json::json!(session.id)
    );
    assert_eq!(login_event.data["method"], "password");
    assert_eq!(session.amr, Amr::password());

    let claims = signed.only();
    assert_eq!(claims.sid, session.id);
    assert_eq!(claims.amr, ["pwd"]);
    assert_eq!(pair.access.access_token, SIGNED);
}

#[test]
fn login_signs_an_hour_long_access_token_for_the_user_and_session() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(true);
    let created = mocks.sessions_open();
    let signed = mocks.signer_signs();

    let pair = login(mocks, ADA_EMAIL, ADA_PASSWORD).unwrap();
    let session = created.only().session;
    let claims = signed.only();

    assert_eq!(claims.iss, ISSUER);
    assert_eq!(claims.aud, Audience::One("gatehouse".into()));
    assert_eq!(claims.sub, ADA);
    assert_eq!(claims.sid, session.id);
    assert_eq!(claims.email, ADA_EMAIL);
    assert_eq!(claims.iat, now().unix_timestamp());
    assert_eq!(claims.nbf, now().unix_timestamp());
    assert_eq!(claims.exp, now().unix_timestamp() + 3600);
    assert_eq!(pair.access.token_type, "Bearer");
    assert_eq!(pair.access.expires_in, 3600);
}

#[test]
fn login_responses_do_not_debug_print_their_tokens() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(true);
    mocks
        .sessions
        .expect_create_session()
        .returning(|_, _, _, _| ready(Ok(())));
    mocks.signer_signs();

    let pair = login(mocks, ADA_EMAIL, ADA_PASSWORD).unwrap();
    let debug = format!("{pair:?} {:?}", pair.access);

    assert!(!debug.contains(SECRET_BODY), "{debug}");
    assert!(!debug.contains(SIGNED), "{debug}");
}

// ---------------------------------------------------------------------------------------------
// refresh
// ---------------------------------------------------------------------------------------------

pub(super) const REFRESH_TOKEN: &str = "ghr_Zq3xV9mK2pL7wR4tY8uN1bH6gF5dS0aJcEiOoUkMnBv";

#[test]
fn refresh_with_an_unknown_expired_or_revoked_token_is_invalid() {
    let mut mocks = Mocks::new();
    mocks
        .sessions
        .expect_refresh_context()
        .withf(|hash, at| *hash == TokenHash::of(REFRESH_TOKEN) && *at == now())
        .times(1)
        .returning(|_, _| ready(Ok(None)));
    mocks.sessions.expect_touch_session().never();
    mocks.accounts.expect_credentials_by_id().never();
    mocks.signer.expect_sign().never();

    let result = block_on(mocks.auth().refresh(
        REFRESH_TOKEN,
        None,
        OrganizationChoice::Keep,
        None,
    ));

    assert!(matches!(result, Err(RefreshError::InvalidToken)));
}

#[test]
fn refresh_of_a_live_session_signs_a_new_access_token_for_the_same_session() {
    let mut mocks = Mocks::new();
    mocks.refresh_token_opens(Some(ada_session()));
    mocks
        .sessions
        .expect_touch_session()
        .withf(|id, at| *id == ADA_SESSION && *at == now())
        .times(1)
        .returning(|_, _| ready(Ok(true)));
    mocks.ada_is_registered();
    let signed = mocks.signer_signs();

    let access = block_on(mocks.auth().refresh(
        REFRESH_TOKEN,
        None,
        OrganizationChoice::Keep,
        None,
    ))
    .unwrap();
    let claims = signed.only();

    assert_eq!(claims.sid, ADA_SESSION);
    assert_eq!(claims.sub, ADA);
    assert_eq!(claims.exp, now().unix_timestamp() + 3600);
    assert_eq!(access.access_token, SIGNED);
    assert_eq!(access.expires_in, 3600);
}

#[test]
fn a_refresh_soon_after_the_last_use_writes_nothing() {
    for (since, writes) in [
        (SESSION_TOUCH_INTERVAL - Duration::seconds(1), 0),
        (SESSION_TOUCH_INTERVAL, 1),
    ] {
        let mut mocks = Mocks::new();
        let mut session = ada_session();
        session.last_used_at = now() - since;
        mocks.refresh_token_opens(Some(session));
        mocks
            .sessions
            .expect_touch_session()
            .times(writes)
            .returning(|_, _| ready(Ok(true)));
        mocks.ada_is_registered();
        mocks.signer_signs();

        let access = block_on(mocks.auth().refresh(
            REFRESH_TOKEN,
            None,
            OrganizationChoice::Keep,
            None,
        ))
        .unwrap();
        assert_eq!(access.access_token, SIGNED, "used {since} ago");
    }
}

/// Ada's session, granted to an application through OAuth.
fn ada_session_granted_to(application: ApplicationId) -> Session {
    Session {
        grant: Some(ClientGrant {
            application_id: application,
            client_id: ClientId::generate(Uuid::from_u128(0xc1)),
            scope: Scope::parse("read:user").unwrap(),
        }),
        ..ada_session()
    }
}

#[test]
fn a_session_granted_to_an_application_refreshes_only_for_it_with_its_client_id_and_scope() {
    let billing = ApplicationId::from_uuid(Uuid::from_u128(0xa9));
    let other = ApplicationId::from_uuid(Uuid::from_u128(0xa8));
    for refused in [None, Some(other)] {
        let mut mocks = Mocks::new();
        mocks.refresh_token_opens(Some(ada_session_granted_to(billing)));
        mocks.sessions.expect_touch_session().never();
        mocks.signer.expect_sign().never();
        let result = block_on(mocks.auth().refresh(
            REFRESH_TOKEN,
            refused,
            OrganizationChoice::Keep,
            None,
        ));
        assert!(
            matches!(result, Err(RefreshError::InvalidToken)),
            "{refused:?}"
        );
    }
    // A password login's session does not refresh through OAuth either.
    let mut mocks = Mocks::new();
    mocks.refresh_token_opens(Some(ada_session()));
    mocks.signer.expect_sign().never();
    let result = block_on(mocks.auth().refresh(
        REFRESH_TOKEN,
        Some(billing),
        OrganizationChoice::Keep,
        None,
    ));
    assert!(matches!(result, Err(RefreshError::InvalidToken)));

    let mut mocks = Mocks::new();
    mocks.refresh_token_opens(Some(ada_session_granted_to(billing)));
    mocks
        .sessions
        .expect_touch_session()
        .returning(|_, _| ready(Ok(true)));
    mocks.ada_is_registered();
    let signed = mocks.signer_signs();
    block_on(
        mocks
            .auth()
            .refresh(REFRESH_TOKEN, Some(billing), OrganizationChoice::Keep, None),
    )
    .unwrap();
    let claims = signed.only();
    assert_eq!(
        claims.client_id.as_deref(),
        Some("ghc_000000000000000000000000000000c1")
    );
    assert_eq!(claims.scope.as_deref(), Some("read:user"));
}

#[test]
fn refresh_for_a_user_who_is_gone_is_invalid() {
    let mut mocks = Mocks::new();
    // The session's user is gone: the store finds no session with a user.
    mocks.refresh_token_opens(None);
    mocks.sessions.expect_touch_session().never();
    mocks.signer.expect_sign().never();

    let result = block_on(mocks.auth().refresh(
        REFRESH_TOKEN,
        None,
        OrganizationChoice::Keep,
        None,
    ));

    assert!(matches!(result, Err(RefreshError::InvalidToken)));
}

// ---------------------------------------------------------------------------------------------
// logout
// ---------------------------------------------------------------------------------------------

/// Whether a session's end is Ada's session ending now, announced as a logout.
pub(super) fn ada_logs_out_now(id: &SessionId, at: &OffsetDateTime, event: &NewEvent) -> bool {
    *id == ADA_SESSION && *at == now() && event.event_type == EventType::AuthLogout
}

#[test]
fn logout_ends_the_callers_session_and_announces_it() {
    let mut mocks = Mocks::new();
    mocks
        .sessions
        .expect_end_session()
        .withf(|id, at, event, _| {
            ada_logs_out_now(id, at, event)
                && event.user_id == Some(ADA)
                && event.organization_id.is_none()
                && event.data["session_id"] == serde_json::json!(ADA_SESSION)
        })
        .times(1)
        .returning(|_, _, _, _| ready(Ok(true)));

    block_on(mocks.auth().logout(&ada_in_session(), &origin())).unwrap();
}

#[test]
fn logout_with_an_api_key_does_nothing() {
    let mut mocks = Mocks::new();
    mocks.sessions.expect_end_session().never();

    block_on(mocks.auth().logout(&ada_key_for_acme(), &origin())).unwrap();
}

// ---------------------------------------------------------------------------------------------
// change_password
// ---------------------------------------------------------------------------------------------

/// Changes the password of `principal` from `current` to `new`.
pub(super) fn change_password(
    mocks: Mocks,
    principal: &Principal,
    current: &str,
    new: &str,
) -> Result<(), ChangePasswordError> {
    block_on(
        mocks
            .auth()
            .change_password(principal, current.to_owned(), new, &origin()),
    )
}

#[test]
fn change_password_with_a_wrong_current_password_writes_nothing() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(false);
    mocks.no_new_password_is_hashed_or_saved();

    assert!(matches!(
        change_password(mocks, &ada_in_session(), "not my password", NEW_PASSWORD),
        Err(ChangePasswordError::WrongPassword)
    ));
}

#[test]
fn change_password_to_the_same_password_is_refused() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    // The current password is checked first, so the answer reveals nothing without it.
    mocks.password_check_says(true);
    mocks.no_new_password_is_hashed_or_saved();

    assert!(matches!(
        change_password(mocks, &ada_in_session(), ADA_PASSWORD, ADA_PASSWORD),
        Err(ChangePasswordError::Unchanged)
    ));
}

#[test]
fn change_password_to_a_weak_password_is_refused() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.no_new_password_is_hashed_or_saved();

    assert!(matches!(
        change_password(mocks, &ada_in_session(), ADA_PASSWORD, "short"),
        Err(ChangePasswordError::WeakPassword(PasswordError::TooShort(
            8
        )))
    ));
}

#[test]
fn change_password_for_a_user_who_is_gone_fails() {
    let mut mocks = Mocks::new();
    mocks
        .accounts
        .expect_credentials_by_id()
        .returning(|_| ready(Ok(None)));
    mocks.accounts.expect_change_password().never();

    assert!(matches!(
        change_password(mocks, &ada_in_session(), ADA_PASSWORD, NEW_PASSWORD),
        Err(ChangePasswordError::UserGone)
    ));
}

#[test]
fn change_password_stores_the_new_hash_and_keeps_only_the_current_session() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(true);
    mocks
        .hasher
        .expect_hash()
        .withf(|password| password.expose() == NEW_PASSWORD)
        .times(1)
        .returning(|_| ready(Ok(hash(NEW_HASH))));
    mocks
        .accounts
        .expect_change_password()
        .withf(|user, new_hash, keep, at, event, _| {
            *user == ADA
                && new_hash.as_phc() == NEW_HASH
                && *keep == Some(ADA_SESSION)
                && *at == now()
                && event.event_type == EventType::AuthPasswordChanged
                && event.user_id == Some(ADA)
                && !event.data.to_string().contains("argon2")
        })
        .times(1)
        .returning(|_, _, _, _, _, _| ready(Ok(())));

    change_password(mocks, &ada_in_session(), ADA_PASSWORD, NEW_PASSWORD).unwrap();
}

#[test]
fn change_password_through_an_api_key_ends_every_session() {
    let mut mocks = Mocks::new();
    mocks.ada_is_registered();
    mocks.password_check_says(true);
    mocks.hashing_gives(NEW_HASH);
    mocks
        .accounts
        .expect_change_password()
        .withf(|_, _, keep, _, _, _| keep.is_none())
        .times(1)
        .returning(|_, _, _, _, _, _| ready(Ok(())));

    change_password(mocks, &ada_key_for_acme(), ADA_PASSWORD, NEW_PASSWORD).unwrap();
}

// ---------------------------------------------------------------------------------------------
// authenticate_bearer
// ---------------------------------------------------------------------------------------------

#[test]
fn a_bearer_token_the_signer_rejects_is_invalid_without_a_session_lookup() {
    let mut mocks = Mocks::new();
    mocks
        .signer
        .expect_verify()
        .returning(|_| ready(Err(TokenError::Invalid)));
    mocks.sessions.expect_is_live().never();

    let result =
        block_on(Authenticator::new((&mocks.ports()).into(), ISSUER).authenticate_bearer("forged"));

    assert!(matches!(result, Err(AuthenticateError::Invalid(_))));
}

#[test]
fn a_signer_failure_is_internal_not_invalid() {
    let mut mocks = Mocks::new();
    mocks
        .signer
        .expect_verify()
        .returning(|_| ready(Err(TokenError::Failed("no keys loaded".into()))));

    let result =
        block_on(Authenticator::new((&mocks.ports()).into(), ISSUER).authenticate_bearer(SIGNED));

    assert!(matches!(result, Err(AuthenticateError::Internal(_))));
}

#[test]
fn a_valid_bearer_token_of_an_ended_session_is_invalid() {
    let mut mocks = Mocks::new();
    mocks
        .signer
        .expect_verify()
        .returning(|_| ready(Ok(BearerClaims::User(claims_of_ada()))));
    mocks
        .sessions
        .expect_is_live()
        .withf(|id, at| *id == ADA_SESSION && *at == now())
        .times(1)
        .returning(|_, _| ready(Ok(false)));

    let result =
        block_on(Authenticator::new((&mocks.ports()).into(), ISSUER).authenticate_bearer(SIGNED));

    assert!(matches!(result, Err(AuthenticateError::Invalid(_))));
}

#[test]
fn a_valid_bearer_token_of_a_live_session_is_its_user() {
    let mut mocks = Mocks::new();
    mocks
        .signer
        .expect_verify()
        .withf(|token| token == SIGNED)
        .returning(|_| ready(Ok(BearerClaims::User(claims_of_ada()))));
    mocks
        .sessions
        .expect_is_live()
        .withf(|id, _| *id == ADA_SESSION)
        .times(1)
        .returning(|_, _| ready(Ok(true)));

    let agent =
        block_on(Authenticator::new((&mocks.ports()).into(), ISSUER).authenticate_bearer(SIGNED))
            .unwrap();

    assert_eq!(agent, Agent::Person(ada_in_session()));
}

// ---------------------------------------------------------------------------------------------
// Machine tokens and API scopes
// ---------------------------------------------------------------------------------------------

const MACHINE_CLIENT: &str = "ghc_000000000000000000000000000000c1";

fn acme_application(active: bool) -> Application {
    Application {
        id: ApplicationId::from_uuid(Uuid::from_u128(0xa9)),
        organization_id: ACME,
        name: ApplicationName::parse("Billing").unwrap(),
        client_id: ClientId::parse(MACHINE_CLIENT).unwrap(),
        redirect_uris: RedirectUris::new(vec![RedirectUri::parse(
            "https://billing.example.com/cb",
        )
        .unwrap()])
        .unwrap(),
        is_active: active,
        require_pkce: false,
        created_at: now() - Duration::days(1),
        updated_at: now() - Duration::days(1),
    }
}

/// The claims of a fifteen-minute machine token issued just now to `client_id` for Acme.
pub(super) fn machine_claims(client_id: &str, scope: &str) -> MachineClaims {
    MachineClaims {
        iss: ISSUER.into(),
        sub: client_id.into(),
        aud: Audience::gatehouse_and(client_id),
        iat: now().unix_timestamp(),
        nbf: now().unix_timestamp(),
        exp: now().unix_timestamp() + 900,
        jti: Uuid::from_u128(7),
        client_id: client_id.into(),
        org_id: ACME,
        scope: scope.into(),
    }
}

fn machine_token_verifies(mocks: &mut Mocks, scope: &'static str) {
    mocks.signer.expect_verify().returning(move |_| {
        ready(Ok(BearerClaims::Machine(machine_claims(
            MACHINE_CLIENT,
            scope,
        ))))
    });
    mocks.sessions.expect_is_live().never();
}

fn application_is(mocks: &mut Mocks, active: bool, plan: Plan) {
    mocks
        .applications
        .expect_application_by_client_id()
        .returning(move |_| ready(Ok(Some((acme_application(active), TokenHash::of("s"))))));
    mocks
        .organizations
        .expect_organization()
        .returning(move |_| ready(Ok(Some(acme(plan)))));
}

#[test]
fn a_machine_token_acts_for_its_application_in_its_organization_within_its_scopes() {
    let mut mocks = Mocks::new();
    machine_token_verifies(&mut mocks, "org:read members:read");
    application_is(&mut mocks, true, Plan::Enterprise);
    mocks.policies_are(vec![]);
    let authenticator = Authenticator::new((&mocks.ports()).into(), ISSUER);

    let agent = block_on(authenticator.authenticate_bearer(SIGNED)).unwrap();
    let Agent::Application(machine) = &agent else {
        panic!("{agent:?}");
    };
    assert_eq!(machine.application_id, acme_application(true).id);
    assert_eq!(machine.organization_id, ACME);

    let actor =
        block_on(authenticator.actor_of(agent.clone(), ACME, ClientAddress([192, 0, 2, 1].into())))
            .unwrap();
    assert!(actor.is_of(&agent));
    assert_eq!(actor.user_id(), None);
    assert_eq!(
        actor.audit_actor(),
        AuditActor::Application(acme_application(true).id)
    );
    for granted in [
        Permission::OrganizationRead,
        Permission::MembersRead,
        Permission::AuditRead,
    ] {
        assert_eq!(actor.require(granted), Ok(()), "{granted}");
    }
    for refused in [
        Permission::OrganizationUpdate,
        Permission::MembersUpdate,
        Permission::WebhooksRead,
        Permission::OrganizationDelete,
        Permission::ApiKeysCreate,
    ] {
        assert_eq!(actor.require(refused), Err(Forbidden(refused)), "{refused}");
    }
    // Another organization is not its to act in.
    assert!(matches!(
        block_on(authenticator.actor_of(agent, GLOBEX, ClientAddress([192, 0, 2, 1].into()))),
        Err(OrgAccessError::NotFound)
    ));
}

#[test]
fn a_machine_token_stops_with_its_application_or_the_enterprise_plan() {
    for (active, plan) in [(false, Plan::Enterprise), (true, Plan::Business)] {
        let mut mocks = Mocks::new();
        machine_token_verifies(&mut mocks, "org:read");
        application_is(&mut mocks, active, plan);
        let result = block_on(
            Authenticator::new((&mocks.ports()).into(), ISSUER).authenticate_bearer(SIGNED),
        );
        assert!(
            matches!(result, Err(AuthenticateError::Invalid(_))),
            "{active} {plan:?}"
        );
    }
}

#[test]
fn an_oauth_tokens_api_scopes_narrow_the_members_role_and_none_leave_it_whole() {
    let narrowed = |scope: &str| Actor::Member {
        principal: ada_granted(scope),
        membership: Membership {
            organization_id: ACME,
            user_id: ADA,
            role: Role::Owner.into(),
            plan: Plan::Enterprise,
            joined_at: now() - Duration::days(100),
        },
    };
    let reader = narrowed("openid org:read");
    assert_eq!(reader.require(Permission::OrganizationRead), Ok(()));
    assert_eq!(
        reader.require(Permission::OrganizationUpdate),
        Err(Forbidden(Permission::OrganizationUpdate))
    );
    assert_eq!(
        reader.require(Permission::MembersRead),
        Err(Forbidden(Permission::MembersRead))
    );
    let whole = narrowed("openid profile read:user");
    assert!(
        Permission::ALL.iter().all(|p| whole.require(*p).is_ok()),
        "no API scope: the owner's role"
    );
    // The scopes narrow; they never widen: a viewer with members:write still only reads.
    let Actor::Member {
        principal,
        mut membership,
    } = narrowed("members:write members:read")
    else {
        unreachable!()
    };
    membership.role = Role::Viewer.into();
    let viewer = Actor::Member {
        principal,
        membership,
    };
    assert!(viewer.require(Permission::MembersRead).is_ok());
    assert_eq!(
        viewer.require(Permission::MembersUpdate),
        Err(Forbidden(Permission::MembersUpdate))
    );
}

// ---------------------------------------------------------------------------------------------
// authenticate_api_key
// ---------------------------------------------------------------------------------------------

fn ada_acme_api_key() -> ApiKey {
    ApiKey {
        id: CI_KEY,
        name: ApiKeyName::parse("CI deploys").unwrap(),
        prefix: secret_of(TokenKind::ApiKey).chars().take(12).collect(),
        organization_id: ACME,
        holder: KeyHolder::User(ADA),
        created_at: now() - Duration::days(5),
        last_used_at: None,
    }
}

#[test]
fn an_unknown_api_key_is_invalid() {
    let key = secret_of(TokenKind::ApiKey);
    let mut mocks = Mocks::new();
    mocks
        .api_keys
        .expect_use_api_key()
        .withf(move |hash, at| *hash == TokenHash::of(&key) && *at == now())
        .times(1)
        .returning(|_, _| ready(Ok(None)));

    let result = block_on(
        Authenticator::new((&mocks.ports()).into(), ISSUER)
            .authenticate_api_key(&secret_of(TokenKind::ApiKey), ACME),
    );

    assert!(matches!(result, Err(AuthenticateError::Invalid(_))));
}

#[test]
fn an_api_key_sent_with_another_organization_is_invalid() {
    let mut mocks = Mocks::new();
    mocks
        .api_keys
        .expect_use_api_key()
        .returning(|_, _| ready(Ok(Some(ada_acme_api_key()))));

    let result = block_on(
        Authenticator::new((&mocks.ports()).into(), ISSUER)
            .authenticate_api_key(&secret_of(TokenKind::ApiKey), GLOBEX),
    );

    assert!(matches!(result, Err(AuthenticateError::Invalid(_))));
}

#[test]
fn an_api_key_sent_with_its_organization_acts_as_its_creator_there() {
    let mut mocks = Mocks::new();
    mocks
        .api_keys
        .expect_use_api_key()
        .returning(|_, _| ready(Ok(Some(ada_acme_api_key()))));

    let agent = block_on(
        Authenticator::new((&mocks.ports()).into(), ISSUER)
            .authenticate_api_key(&secret_of(TokenKind::ApiKey), ACME),
    )
    .unwrap();

    assert_eq!(agent, Agent::Person(ada_key_for_acme()));
}

// ---------------------------------------------------------------------------------------------
// membership_of
// ---------------------------------------------------------------------------------------------

#[test]
fn an_api_key_asking_for_another_organization_finds_nothing_without_asking_the_store() {
    let mut mocks = Mocks::new();
    mocks.memberships.expect_membership().never();

    let result = block_on(
        Authenticator::new((&mocks.ports()).into(), ISSUER)
            .membership_of(&ada_key_for_acme(), GLOBEX),
    );

    assert!(matches!(result, Err(OrgAccessError::NotFound)));
}

#[test]
fn an_api_key_in_its_own_organization_has_its_creators_membership() {
    let mut mocks = Mocks::new();
    mocks.ada_is_in_acme();

    let membership = block_on(
        Authenticator::new((&mocks.ports()).into(), ISSUER)
            .membership_of(&ada_key_for_acme(), ACME),
    )
    .unwrap();

    assert_eq!(membership, ada_in_acme());
}

#[test]
fn a_user_who_is_not_a_member_finds_nothing() {
    let mut mocks = Mocks::new();
    mocks
        .memberships
        .expect_membership()
        .withf(|user, org| *user == ADA && *org == GLOBEX)
        .times(1)
        .returning(|_, _| ready(Ok(None)));

    let result = block_on(
        Authenticator::new((&mocks.ports()).into(), ISSUER)
            .membership_of(&ada_in_session(), GLOBEX),
    );

    assert!(matches!(result, Err(OrgAccessError::NotFound)));
}

// ---------------------------------------------------------------------------------------------
// ApiKeyService::create
// ---------------------------------------------------------------------------------------------

fn create_key(
    mocks: Mocks,
    principal: &Principal,
    organization: OrganizationId,
) -> Result<super::CreatedApiKey, CreateApiKeyError> {
    let name = ApiKeyName::parse("CI deploys").unwrap();
    block_on(
        mocks
            .api_key_service()
            .create(principal, name, organization, &origin()),
    )
}

/// The store saves the key as given and hands it back, keeping what it got.
pub(super) fn store_saves_api_keys(mocks: &mut Mocks) -> Seen<NewApiKey> {
    recording!(
        mocks.api_keys.expect_create_api_key().times(1),
        |new, _| new.clone(),
        Ok(Some(ApiKey {
            id: new.id,
            name: new.name,
            prefix: new.prefix,
            organization_id: new.organization_id,
            holder: new.holder,
            created_at: new.created_at,
            last_used_at: None,
        }))
    )
}

#[test]
fn an_api_key_cannot_create_api_keys() {
    let mut mocks = Mocks::new();
    mocks.memberships.expect_membership().never();
    mocks.api_keys.expect_create_api_key().never();

    assert!(matches!(
        create_key(mocks, &ada_key_for_acme(), ACME),
        Err(CreateApiKeyError::NotAUser)
    ));
}

#[test]
fn an_api_key_for_an_organization_the_user_is_not_in_is_not_found() {
    let mut mocks = Mocks::new();
    mocks.no_membership_is_found();
    mocks.api_keys.expect_create_api_key().never();

    assert!(matches!(
        create_key(mocks, &ada_in_session(), GLOBEX),
        Err(CreateApiKeyError::Organization(OrgAccessError::NotFound))
    ));
}

/// Ada in Acme with `role` instead of admin.
fn ada_in_acme_as(mocks: &mut Mocks, role: Role) {
    mocks
        .memberships
        .expect_membership()
        .withf(|user, org| *user == ADA && *org == ACME)
        .returning(move |_, _| {
            ready(Ok(Some(Membership {
                role: role.into(),
                ..ada_in_acme()
            })))
        });
}

#[test]
fn a_viewer_may_not_create_an_api_key_for_the_organization() {
    let mut mocks = Mocks::new();
    ada_in_acme_as(&mut mocks, Role::Viewer);
    mocks.api_keys.expect_create_api_key().never();

    assert!(matches!(
        create_key(mocks, &ada_in_session(), ACME),
        Err(CreateApiKeyError::Forbidden(Forbidden(
            Permission::ApiKeysCreate
        )))
    ));
}

#[test]
fn a_member_may_create_an_api_key_for_the_organization() {
    let mut mocks = Mocks::new();
    ada_in_acme_as(&mut mocks, Role::Member);
    store_saves_api_keys(&mut mocks);

    let created = create_key(mocks, &ada_in_session(), ACME).unwrap();
    assert_eq!(created.organization_id, ACME);
}

#[test]
fn a_created_api_key_is_stored_only_as_its_hash_and_shown_once() {
    let mut mocks = Mocks::new();
    mocks.ada_is_in_acme();
    let stored = store_saves_api_keys(&mut mocks);

    let created = create_key(mocks, &ada_in_session(), ACME).unwrap();
    let new = stored.only();

    assert_eq!(created.key, secret_of(TokenKind::ApiKey));
    assert!(created.key.starts_with("ghk_"));
    assert_eq!(new.key_hash, TokenHash::of(&created.key));
    assert!(
        !format!("{new:?}").contains(&created.key),
        "the store gets no field holding the key"
    );
    assert_eq!(new.organization_id, ACME);
    assert_eq!(new.holder, KeyHolder::User(ADA));
    assert_eq!(new.created_at, now());
    assert_eq!(created.id, new.id);
    assert_eq!(created.organization_id, ACME);
}

#[test]
fn a_created_api_key_is_told_apart_by_its_first_twelve_characters() {
    let mut mocks = Mocks::new();
    mocks.ada_is_in_acme();
    let stored = store_saves_api_keys(&mut mocks);

    let created = create_key(mocks, &ada_in_session(), ACME).unwrap();
    let first_twelve: String = created.key.chars().take(12).collect();

    assert_eq!(created.prefix, first_twelve);
    assert_eq!(stored.only().prefix, first_twelve);
    assert_eq!(created.prefix, "ghk_Zq3xV9mK");
}

#[test]
fn a_created_api_key_does_not_debug_print_the_key() {
    let mut mocks = Mocks::new();
    mocks.ada_is_in_acme();
    store_saves_api_keys(&mut mocks);

    let created = create_key(mocks, &ada_in_session(), ACME).unwrap();
    let debug = format!("{created:?}");

    assert!(!debug.contains(&created.key), "{debug}");
    assert!(!debug.contains(SECRET_BODY), "{debug}");
}
