//! The business-plan store contract, run against both backends (`<name>::postgres` and
//! `<name>::sqlite`): organization policies and what they apply to, the session limit, the
//! password history, branding and SSO configurations.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[allow(dead_code)]
mod support;

use gatehouse_domain::{
    model::{
        Amr, AssetUrl, Branding, ConcurrentSessions, CustomLogin, DomainWhitelist, Email,
        EmailBranding, EventType, FooterText, GraceHours, HexColor, IdleMinutes, IdpCertificate,
        IdpEntityId, IdpSsoUrl, InvitableRole, InvitationId, IpAllowlist, IpRange, LoginSubtitle,
        LoginTitle, MaxAgeDays, MfaMethod, MfaPolicy, MinLength, NewInvitation, OpenInvitation,
        OrganizationId, OrganizationPolicies, PasswordHash, PasswordPolicy, Plan, ProvisionRole,
        ReuseCount, Role, SenderName, SessionHours, SessionId, SessionPolicy, SsoConfiguration,
        SsoProvider, TokenHash, UserId,
    },
    ports::{PlanPolicies, SavedBranding, SavedPolicies, StoreError},
};
use rcgen::{date_time_ymd, CertificateParams, DnType, KeyPair};
use support::{account, event, now, on_both_backends, session, Db};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

/// Registers an account; returns the user and their personal workspace.
async fn registered(db: &Db, email: &str) -> (UserId, OrganizationId) {
    let new = account(email, "Someone");
    let ids = (new.user.id, new.workspace.id);
    db.store
        .create_account(new, support::signed_in())
        .await
        .unwrap();
    ids
}

fn updated(org: OrganizationId) -> gatehouse_domain::model::NewEvent {
    event(EventType::OrganizationUpdated, Some(org), None)
}

/// Soft-deletes the organization.
async fn delete(db: &Db, org: OrganizationId, at: OffsetDateTime) {
    assert!(db
        .store
        .delete_organization(org, at, updated(org), support::signed_in())
        .await
        .unwrap());
}

/// Invites the email to the organization at `at`, to expire a week later.
async fn invite(
    db: &Db,
    org: OrganizationId,
    email: &str,
    by: UserId,
    at: OffsetDateTime,
) -> InvitationId {
    let id = InvitationId::from_uuid(Uuid::now_v7());
    db.store
        .create_invitation(
            NewInvitation {
                id,
                organization_id: org,
                email: Email::parse(email).unwrap(),
                role: InvitableRole::new(Role::Member).unwrap(),
                token_hash: TokenHash::of(&Uuid::new_v4().to_string()),
                invited_by: by,
                invited_at: at,
                expires_at: NewInvitation::expiry(at),
                open: OpenInvitation::Kept,
            },
            event(EventType::MemberInvited, Some(org), Some(by)),
            support::signed_in(),
            support::mail(),
        )
        .await
        .unwrap();
    id
}

async fn events(db: &Db) -> i64 {
    db.count("SELECT COUNT(*) AS n FROM events").await
}

/// Policies far from the defaults in every part.
fn strict_policies() -> OrganizationPolicies {
    OrganizationPolicies {
        password_policy: PasswordPolicy {
            min_length: MinLength::parse(14).unwrap(),
            require_uppercase: true,
            require_lowercase: false,
            require_numbers: true,
            require_special_chars: true,
            max_age_days: MaxAgeDays::parse(90).unwrap(),
            prevent_reuse_count: ReuseCount::parse(5).unwrap(),
        },
        mfa_policy: MfaPolicy::new(
            true,
            vec![MfaMethod::Webauthn],
            GraceHours::parse(24).unwrap(),
        )
        .unwrap(),
        session_policy: SessionPolicy {
            max_session_duration_hours: SessionHours::parse(12).unwrap(),
            idle_timeout_minutes: IdleMinutes::parse(15).unwrap(),
            max_concurrent_sessions: ConcurrentSessions::parse(2).unwrap(),
        },
        ip_allowlist: IpAllowlist::new(
            true,
            vec![
                IpRange::parse("203.0.113.7").unwrap(),
                IpRange::parse("10.0.0.0/8").unwrap(),
                IpRange::parse("2001:db8::/32").unwrap(),
            ],
        )
        .unwrap(),
    }
}

/// Other policies, different from both the defaults and [`strict_policies`].
fn other_policies() -> OrganizationPolicies {
    let mut policies = OrganizationPolicies::default();
    policies.password_policy.min_length = MinLength::parse(10).unwrap();
    policies.session_policy.idle_timeout_minutes = IdleMinutes::parse(60).unwrap();
    policies.ip_allowlist =
        IpAllowlist::new(false, vec![IpRange::parse("192.0.2.0/24").unwrap()]).unwrap();
    policies
}

/// Sorts plan-and-policies pairs by plan (the store promises no order).
fn by_plan(mut found: Vec<PlanPolicies>) -> Vec<PlanPolicies> {
    found.sort_by_key(|(plan, _)| *plan);
    found
}

/// A self-signed IdP certificate, valid for years around today.
fn certificate(common_name: &str) -> IdpCertificate {
    let mut params = CertificateParams::new(vec!["idp.example.com".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.not_before = date_time_ymd(2020, 1, 1);
    params.not_after = date_time_ymd(2049, 12, 31);
    let pem = params
        .self_signed(&KeyPair::generate().unwrap())
        .unwrap()
        .pem();
    IdpCertificate::parse(&pem, now()).unwrap()
}

fn whitelist(domains: &[&str]) -> DomainWhitelist {
    DomainWhitelist::parse(domains.iter().map(|d| (*d).to_owned()).collect()).unwrap()
}

fn sso_configuration(org: OrganizationId, at: OffsetDateTime) -> SsoConfiguration {
    SsoConfiguration {
        organization_id: org,
        provider: SsoProvider::Saml,
        idp_entity_id: IdpEntityId::parse("https://idp.example.com/metadata").unwrap(),
        idp_sso_url: IdpSsoUrl::parse("https://idp.example.com/sso/saml?tenant=acme").unwrap(),
        idp_certificate: certificate("Example IdP"),
        // Not in alphabetical order: the order given is kept.
        domain_whitelist: whitelist(&["zeta.example.com", "acme.example", "mid.example.net"]),
        auto_provision: true,
        default_role: ProvisionRole::Viewer,
        is_active: true,
        created_at: at,
        updated_at: at,
    }
}

fn full_branding() -> Branding {
    Branding {
        logo_url: Some(AssetUrl::logo("https://cdn.example.com/acme/logo.svg").unwrap()),
        favicon_url: None,
        primary_color: HexColor::parse("#112233").unwrap(),
        accent_color: HexColor::parse("#aBcDeF").unwrap(),
        custom_login: CustomLogin {
            title: LoginTitle::parse("Welcome to Acme").unwrap(),
            subtitle: LoginSubtitle::parse("Sign in with your work account").unwrap(),
            background_url: Some(
                AssetUrl::background("https://cdn.example.com/acme/bg.webp?v=2").unwrap(),
            ),
        },
        email_branding: EmailBranding {
            from_name: SenderName::parse("Acme Identity").unwrap(),
            reply_to: Some(Email::parse("support@acme.example").unwrap()),
            footer_text: FooterText::parse("Acme Inc.\n1 Main Street").unwrap(),
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Policies
// ---------------------------------------------------------------------------------------------

#[on_both_backends(worker_threads = 4)]
async fn an_organization_that_never_saved_policies_has_none(db: Db) {
    let (ada, workspace) = registered(&db, "ada@example.com").await;
    let acme = db.team(ada, "acme", Plan::Business).await;
    assert_eq!(db.store.policies(workspace).await.unwrap(), None);
    assert_eq!(db.store.policies(acme).await.unwrap(), None);
    let unknown = OrganizationId::from_uuid(Uuid::now_v7());
    assert_eq!(db.store.policies(unknown).await.unwrap(), None);
}

#[on_both_backends(worker_threads = 4)]
async fn a_sessions_access_to_an_organization_is_read_in_one_go(db: Db) {
    let (ada, workspace) = registered(&db, "ada@example.com").await;
    let acme = db.team(ada, "acme", Plan::Business).await;
    let (opened, _) = session(ada, now(), Duration::days(30));
    db.store
        .create_session(
            opened.clone(),
            event(EventType::AuthLogin, None, Some(ada)),
            None,
            support::signed_in(),
        )
        .await
        .unwrap();
    let at = now();

    // A member without saved policies, then with them: what `membership` and `policies` say.
    let access = db
        .store
        .session_access(opened.id, ada, workspace, at)
        .await
        .unwrap();
    assert!(access.session_live);
    assert_eq!(
        access.membership,
        db.store.membership(ada, workspace).await.unwrap()
    );
    assert_eq!(access.policies, None);
    assert!(db
        .store
        .save_policies(
            acme,
            strict_policies(),
            Some(at),
            at,
            updated(acme),
            support::signed_in()
        )
        .await
        .unwrap());
    let access = db
        .store
        .session_access(opened.id, ada, acme, at)
        .await
        .unwrap();
    assert_eq!(
        access.membership.as_ref().map(|m| (m.role.clone(), m.plan)),
        Some((Role::Owner.into(), Plan::Business))
    );
    assert_eq!(access.policies, db.store.policies(acme).await.unwrap());
    assert!(access.policies.is_some());
    assert_eq!(access.sso_organization, None, "a password sign-in");
    // A session an organization's IdP signed in remembers that organization.
    let (mut by_idp, _) = session(ada, now(), Duration::days(30));
    by_idp.amr = Amr::external();
    by_idp.sso_organization_id = Some(acme);
    db.store
        .create_session(
            by_idp.clone(),
            event(EventType::AuthLogin, None, Some(ada)),
            None,
            support::signed_in(),
        )
        .await
        .unwrap();
    for org in [acme, workspace] {
        let access = db
            .store
            .session_access(by_idp.id, ada, org, at)
            .await
            .unwrap();
        assert_eq!(access.sso_organization, Some(acme));
    }
    // The address comes with it only while the organization's single sign-on is on.
    assert_eq!(
        db.store
            .session_access(opened.id, ada, acme, at)
            .await
            .unwrap()
            .sso_email,
        None
    );
    let config = sso_configuration(acme, at);
    assert!(db
        .store
        .create_sso_configuration(config.clone(), updated(acme), support::signed_in())
        .await
        .unwrap());
    let ada_email = Some(Email::parse("ada@example.com").unwrap());
    assert_eq!(
        db.store
            .session_access(opened.id, ada, acme, at)
            .await
            .unwrap()
            .sso_email,
        ada_email
    );
    assert_eq!(
        db.store
            .session_access(opened.id, ada, workspace, at)
            .await
            .unwrap()
            .sso_email,
        None,
        "another organization"
    );
    let off = SsoConfiguration {
        is_active: false,
        ..config
    };
    assert!(db
        .store
        .update_sso_configuration(off, updated(acme), support::signed_in())
        .await
        .unwrap());
    assert_eq!(
        db.store
            .session_access(opened.id, ada, acme, at)
            .await
            .unwrap()
            .sso_email,
        None,
        "turned off"
    );

    // Not a member: no membership, no policies, and still whether the session is live.
    let (bob, _) = registered(&db, "bob@example.com").await;
    let access = db
        .store
        .session_access(opened.id, bob, acme, at)
        .await
        .unwrap();
    assert_eq!(
        (access.session_live, access.membership, access.policies),
        (true, None, None)
    );
    let unknown = SessionId::from_uuid(Uuid::now_v7());
    let access = db
        .store
        .session_access(unknown, bob, acme, at)
        .await
        .unwrap();
    assert!(!access.session_live);

    // An ended or expired session is not live, member or not.
    let access = db
        .store
        .session_access(opened.id, ada, acme, opened.expires_at)
        .await
        .unwrap();
    assert!(!access.session_live && access.membership.is_some());
    assert!(db
        .store
        .end_session(
            opened.id,
            at,
            event(EventType::AuthLogout, None, Some(ada)),
            support::signed_in()
        )
        .await
        .unwrap());
    assert!(
        !db.store
            .session_access(opened.id, ada, acme, at)
            .await
            .unwrap()
            .session_live
    );

    // A deleted organization has no members.
    delete(&db, acme, at).await;
    assert_eq!(
        db.store
            .session_access(opened.id, ada, acme, at)
            .await
            .unwrap()
            .membership,
        None
    );
}

#[on_both_backends(worker_threads = 4)]
async fn saved_policies_round_trip_and_saving_again_replaces_them(db: Db) {
    let (ada, workspace) = registered(&db, "ada@example.com").await;
    let acme = db.team(ada, "acme", Plan::Business).await;
    let before = events(&db).await;

    let first_at = now();
    let saved = db
        .store
        .save_policies(
            acme,
            strict_policies(),
            Some(first_at),
            first_at,
            updated(acme),
            support::signed_in(),
        )
        .await
        .unwrap();
    assert!(saved);
    assert_eq!(
        db.store.policies(acme).await.unwrap(),
        Some(SavedPolicies {
            policies: strict_policies(),
            updated_at: first_at,
            mfa_required_since: Some(first_at)
        })
    );
    assert_eq!(events(&db).await, before + 1, "one event per save");

    let second_at = first_at + Duration::minutes(5);
    let saved = db
        .store
        .save_policies(
            acme,
            other_policies(),
            None,
            second_at,
            updated(acme),
            support::signed_in(),
        )
        .await
        .unwrap();
    assert!(saved);
    assert_eq!(
        db.store.policies(acme).await.unwrap(),
        Some(SavedPolicies {
            policies: other_policies(),
            updated_at: second_at,
            mfa_required_since: None
        })
    );
    assert_eq!(events(&db).await, before + 2, "one event per save");
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM organization_policies")
            .await,
        1,
        "saving again replaces the one row"
    );
    assert_eq!(
        db.store.policies(workspace).await.unwrap(),
        None,
        "another organization's policies are untouched"
    );
}

#[on_both_backends(worker_threads = 4)]
async fn policies_are_not_saved_for_a_deleted_or_unknown_organization(db: Db) {
    let (ada, _) = registered(&db, "ada@example.com").await;
    let acme = db.team(ada, "acme", Plan::Business).await;
    let at = now();
    assert!(db
        .store
        .save_policies(
            acme,
            strict_policies(),
            None,
            at,
            updated(acme),
            support::signed_in()
        )
        .await
        .unwrap());
    delete(&db, acme, at + Duration::seconds(1)).await;
    let before = events(&db).await;

    let later = at + Duration::minutes(1);
    let saved = db
        .store
        .save_policies(
            acme,
            other_policies(),
            None,
            later,
            updated(acme),
            support::signed_in(),
        )
        .await
        .unwrap();
    assert!(!saved, "a soft-deleted organization saves nothing");
    assert_eq!(events(&db).await, before, "and records nothing");
    assert_eq!(
        db.store.policies(acme).await.unwrap(),
        Some(SavedPolicies {
            policies: strict_policies(),
            updated_at: at,
            mfa_required_since: None
        }),
        "the policies saved before are unchanged"
    );

    let unknown = OrganizationId::from_uuid(Uuid::now_v7());
    let saved = db
        .store
        .save_policies(
            unknown,
            other_policies(),
            None,
            later,
            updated(unknown),
            support::signed_in(),
        )
        .await
        .unwrap();
    assert!(!saved);
    assert_eq!(events(&db).await, before);
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM organization_policies")
            .await,
        1
    );
}

#[on_both_backends(worker_threads = 4)]
async fn policies_of_member_are_those_of_the_live_organizations_the_user_belongs_to(db: Db) {
    let (ada, _workspace) = registered(&db, "ada@example.com").await;
    let (bob, _) = registered(&db, "bob@example.com").await;
    let at = now();

    // Ada's: a team on Business with saved policies, and a deleted one with policies too.
    let acme = db.team(ada, "acme", Plan::Business).await;
    assert!(db
        .store
        .save_policies(
            acme,
            strict_policies(),
            None,
            at,
            updated(acme),
            support::signed_in()
        )
        .await
        .unwrap());
    let gone = db.team(ada, "gone", Plan::Pro).await;
    assert!(db
        .store
        .save_policies(
            gone,
            other_policies(),
            None,
            at,
            updated(gone),
            support::signed_in()
        )
        .await
        .unwrap());
    delete(&db, gone, at).await;

    // Bob's: one Ada joins, and one she is only invited to.
    let joined = db.team(bob, "joined", Plan::Enterprise).await;
    let invitation = invite(&db, joined, "ada@example.com", bob, at).await;
    let accepted = db
        .store
        .accept_invitation(
            invitation,
            ada,
            at,
            event(EventType::MemberJoined, Some(joined), Some(ada)),
            support::signed_in(),
        )
        .await
        .unwrap();
    assert!(accepted);
    let pending = db.team(bob, "pending", Plan::Business).await;
    assert!(db
        .store
        .save_policies(
            pending,
            other_policies(),
            None,
            at,
            updated(pending),
            support::signed_in()
        )
        .await
        .unwrap());
    invite(&db, pending, "ada@example.com", bob, at).await;

    assert_eq!(
        by_plan(db.store.policies_of_member(ada).await.unwrap()),
        vec![
            (Plan::Free, None),
            (Plan::Business, Some(strict_policies())),
            (Plan::Enterprise, None),
        ],
        "the personal workspace, her team and the team she joined; not the deleted one, \
             not the one she is only invited to"
    );
    assert_eq!(
        by_plan(db.store.policies_of_member(bob).await.unwrap()),
        vec![
            (Plan::Free, None),
            (Plan::Business, Some(other_policies())),
            (Plan::Enterprise, None),
        ]
    );
    let stranger = UserId::from(Uuid::now_v7());
    assert_eq!(db.store.policies_of_member(stranger).await.unwrap(), vec![]);

    // What a refresh reads in one statement: the session, its user and the same policies.
    let (new, hash) = session(ada, at, Duration::hours(1));
    let id = new.id;
    db.store
        .create_session(
            new,
            event(EventType::AuthLogin, None, Some(ada)),
            None,
            support::signed_in(),
        )
        .await
        .unwrap();
    let used = at + Duration::minutes(1);
    let context = db
        .store
        .refresh_context(&hash, used)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        Some(context.session.clone()),
        db.store
            .session_by_refresh_token(&hash, used)
            .await
            .unwrap()
    );
    assert_eq!(context.session.id, id);
    assert_eq!(context.credentials.user.id, ada);
    assert_eq!(context.credentials.user.email.as_ref(), "ada@example.com");
    let plans = context
        .memberships
        .iter()
        .map(|access| {
            let policies = access.policies.as_ref().map(|saved| saved.policies.clone());
            (access.membership.plan, policies)
        })
        .collect();
    assert_eq!(
        by_plan(plans),
        by_plan(db.store.policies_of_member(ada).await.unwrap())
    );
    // Each membership as the admission would read it alone, with its saved policies.
    for access in &context.memberships {
        let organization = access.membership.organization_id;
        assert_eq!(
            Some(&access.membership),
            db.store
                .membership(ada, organization)
                .await
                .unwrap()
                .as_ref()
        );
        assert_eq!(
            access.policies,
            db.store.policies(organization).await.unwrap()
        );
    }
    assert!(
        db.store
            .refresh_context(&hash, at + Duration::hours(1))
            .await
            .unwrap()
            .is_none(),
        "an expired session refreshes nothing"
    );
    let unknown = TokenHash::of("ghr_not-a-token-anyone-holds");
    assert!(db
        .store
        .refresh_context(&unknown, used)
        .await
        .unwrap()
        .is_none());
    let logout = event(EventType::AuthLogout, None, Some(ada));
    assert!(db
        .store
        .end_session(id, used, logout, support::signed_in())
        .await
        .unwrap());
    assert!(
        db.store
            .refresh_context(&hash, used)
            .await
            .unwrap()
            .is_none(),
        "an ended session refreshes nothing"
    );
}

#[on_both_backends(worker_threads = 4)]
async fn policies_of_invitee_are_those_of_live_organizations_inviting_the_email(db: Db) {
    let (bob, _) = registered(&db, "bob@example.com").await;
    let (carol, _) = registered(&db, "carol@example.com").await;
    let t0 = now();

    // Counted: a pending invitation to a team with policies, and to one without.
    let open = db.team(bob, "open", Plan::Business).await;
    assert!(db
        .store
        .save_policies(
            open,
            strict_policies(),
            None,
            t0,
            updated(open),
            support::signed_in()
        )
        .await
        .unwrap());
    invite(&db, open, "ada@example.com", bob, t0).await;
    let plain = db.team(bob, "plain", Plan::Pro).await;
    invite(&db, plain, "ada@example.com", bob, t0).await;

    // Not counted: expired, revoked, accepted, deleted organization, another email.
    let mut not_counted = Vec::new();
    for slug in ["expired", "revoked", "accepted", "deleted", "elsewhere"] {
        let org = db.team(bob, slug, Plan::Enterprise).await;
        assert!(db
            .store
            .save_policies(
                org,
                other_policies(),
                None,
                t0,
                updated(org),
                support::signed_in()
            )
            .await
            .unwrap());
        not_counted.push(org);
    }
    invite(
        &db,
        not_counted[0],
        "ada@example.com",
        bob,
        t0 - Duration::days(8),
    )
    .await;
    let revoked = invite(&db, not_counted[1], "ada@example.com", bob, t0).await;
    assert!(db
        .store
        .revoke_invitation(not_counted[1], revoked, t0, support::signed_in())
        .await
        .unwrap());
    let accepted = invite(&db, not_counted[2], "ada@example.com", bob, t0).await;
    assert!(db
        .store
        .accept_invitation(
            accepted,
            carol,
            t0,
            event(EventType::MemberJoined, Some(not_counted[2]), Some(carol)),
            support::signed_in(),
        )
        .await
        .unwrap());
    invite(&db, not_counted[3], "ada@example.com", bob, t0).await;
    delete(&db, not_counted[3], t0).await;
    invite(&db, not_counted[4], "dave@example.com", bob, t0).await;

    let ada = Email::parse("Ada@Example.com").unwrap();
    let counted = vec![(Plan::Pro, None), (Plan::Business, Some(strict_policies()))];
    let at = t0 + Duration::minutes(1);
    assert_eq!(
        by_plan(db.store.policies_of_invitee(&ada, at).await.unwrap()),
        counted
    );

    let just_before = NewInvitation::expiry(t0) - Duration::microseconds(1);
    assert_eq!(
        by_plan(
            db.store
                .policies_of_invitee(&ada, just_before)
                .await
                .unwrap()
        ),
        counted
    );
    assert_eq!(
        db.store
            .policies_of_invitee(&ada, NewInvitation::expiry(t0))
            .await
            .unwrap(),
        vec![],
        "an invitation has expired at its expiry"
    );

    let nobody = Email::parse("nobody@example.com").unwrap();
    assert_eq!(
        db.store.policies_of_invitee(&nobody, at).await.unwrap(),
        vec![]
    );
}

// ---------------------------------------------------------------------------------------------
// The session limit
// ---------------------------------------------------------------------------------------------

#[on_both_backends(worker_threads = 4)]
async fn a_session_limit_revokes_the_oldest_live_sessions_of_that_user_only(db: Db) {
    let (ada, _) = registered(&db, "ada@example.com").await;
    let (bob, _) = registered(&db, "bob@example.com").await;
    let t0 = now();
    let second = |n: i64| t0 + Duration::seconds(n);

    let mut bobs = Vec::new();
    for n in 0..3 {
        let (new, _) = session(bob, second(n), Duration::days(30));
        bobs.push(new.id);
        db.store
            .create_session(
                new,
                event(EventType::AuthLogin, None, Some(bob)),
                None,
                support::signed_in(),
            )
            .await
            .unwrap();
    }

    let before = events(&db).await;
    let mut adas: Vec<SessionId> = Vec::new();
    for n in 0..3 {
        let (new, _) = session(ada, second(n), Duration::days(30));
        adas.push(new.id);
        db.store
            .create_session(
                new,
                event(EventType::AuthLogin, None, Some(ada)),
                Some(2),
                support::signed_in(),
            )
            .await
            .unwrap();
    }
    assert_eq!(events(&db).await, before + 3, "one login event per session");

    let check = second(3);
    let live = |id: SessionId| {
        let store = db.store.clone();
        async move { store.is_live(id, check).await.unwrap() }
    };
    assert!(!live(adas[0]).await, "the oldest is revoked");
    assert!(live(adas[1]).await);
    assert!(live(adas[2]).await);
    for id in &bobs {
        assert!(live(*id).await, "another user's sessions are untouched");
    }
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM sessions WHERE revoked_at IS NOT NULL")
            .await,
        1
    );

    // Without a limit, nothing is revoked.
    let (fourth, _) = session(ada, second(3), Duration::days(30));
    adas.push(fourth.id);
    db.store
        .create_session(
            fourth,
            event(EventType::AuthLogin, None, Some(ada)),
            None,
            support::signed_in(),
        )
        .await
        .unwrap();
    let check = second(4);
    for id in &adas[1..] {
        assert!(
            db.store.is_live(*id, check).await.unwrap(),
            "None revokes nothing"
        );
    }
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM sessions WHERE revoked_at IS NOT NULL")
            .await,
        1
    );

    // A limit of one leaves only the new session.
    let (fifth, _) = session(ada, second(4), Duration::days(30));
    let fifth_id = fifth.id;
    db.store
        .create_session(
            fifth,
            event(EventType::AuthLogin, None, Some(ada)),
            Some(1),
            support::signed_in(),
        )
        .await
        .unwrap();
    let check = second(5);
    assert!(
        db.store.is_live(fifth_id, check).await.unwrap(),
        "the new session is kept"
    );
    for id in &adas {
        assert!(!db.store.is_live(*id, check).await.unwrap());
    }
    for id in &bobs {
        assert!(db.store.is_live(*id, check).await.unwrap());
    }
}

#[on_both_backends(worker_threads = 4)]
async fn sessions_already_ended_do_not_count_against_the_limit(db: Db) {
    let (ada, _) = registered(&db, "ada@example.com").await;
    let t0 = now();
    let login = || event(EventType::AuthLogin, None, Some(ada));

    // An expired session and an ended one: neither is live.
    let (expired, _) = session(ada, t0, Duration::minutes(1));
    db.store
        .create_session(expired, login(), None, support::signed_in())
        .await
        .unwrap();
    let (ended, _) = session(ada, t0 + Duration::seconds(1), Duration::days(1));
    let ended_id = ended.id;
    db.store
        .create_session(ended, login(), None, support::signed_in())
        .await
        .unwrap();
    let logout = event(EventType::AuthLogout, None, Some(ada));
    assert!(db
        .store
        .end_session(
            ended_id,
            t0 + Duration::seconds(2),
            logout,
            support::signed_in()
        )
        .await
        .unwrap());

    let (older, _) = session(ada, t0 + Duration::minutes(2), Duration::days(1));
    let older_id = older.id;
    db.store
        .create_session(older, login(), Some(2), support::signed_in())
        .await
        .unwrap();
    let (newer, _) = session(ada, t0 + Duration::minutes(3), Duration::days(1));
    let newer_id = newer.id;
    db.store
        .create_session(newer, login(), Some(2), support::signed_in())
        .await
        .unwrap();

    let check = t0 + Duration::minutes(4);
    assert!(
        db.store.is_live(older_id, check).await.unwrap(),
        "two live sessions fit a limit of two"
    );
    assert!(db.store.is_live(newer_id, check).await.unwrap());
}

#[on_both_backends(worker_threads = 4)]
async fn touching_a_session_marks_it_used_only_while_it_is_live(db: Db) {
    let (ada, _) = registered(&db, "ada@example.com").await;
    let t0 = now();
    let (new, hash) = session(ada, t0, Duration::hours(1));
    let id = new.id;
    db.store
        .create_session(
            new,
            event(EventType::AuthLogin, None, Some(ada)),
            None,
            support::signed_in(),
        )
        .await
        .unwrap();

    let used = t0 + Duration::minutes(1);
    assert!(db.store.touch_session(id, used).await.unwrap());
    let found = db
        .store
        .session_by_refresh_token(&hash, used)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.last_used_at, used);

    assert!(
        !db.store
            .touch_session(id, t0 + Duration::hours(1))
            .await
            .unwrap(),
        "an expired session is not touched"
    );
    let found = db
        .store
        .session_by_refresh_token(&hash, used)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        found.last_used_at, used,
        "the refused touch changed nothing"
    );
    let unknown = SessionId::from(Uuid::now_v7());
    assert!(!db.store.touch_session(unknown, used).await.unwrap());

    let ended_at = t0 + Duration::minutes(2);
    let logout = event(EventType::AuthLogout, None, Some(ada));
    assert!(db
        .store
        .end_session(id, ended_at, logout, support::signed_in())
        .await
        .unwrap());
    assert!(
        !db.store
            .touch_session(id, ended_at + Duration::seconds(1))
            .await
            .unwrap(),
        "an ended session is not touched"
    );
}

#[on_both_backends(worker_threads = 4)]
async fn a_session_keeps_the_organization_its_tokens_speak_for_until_a_refresh_changes_it(db: Db) {
    let (ada, workspace) = registered(&db, "ada@example.com").await;
    let t0 = now();
    let (mut new, hash) = session(ada, t0, Duration::hours(1));
    new.organization_id = Some(workspace);
    let id = new.id;
    db.store
        .create_session(
            new,
            event(EventType::AuthLogin, None, Some(ada)),
            None,
            support::signed_in(),
        )
        .await
        .unwrap();
    let found = |at| {
        let store = db.store.clone();
        let hash = hash.clone();
        async move {
            store
                .refresh_context(&hash, at)
                .await
                .unwrap()
                .unwrap()
                .session
        }
    };
    assert_eq!(
        found(t0).await.organization_id,
        Some(workspace),
        "kept as opened"
    );

    let cleared = t0 + Duration::minutes(1);
    assert!(db.store.scope_session(id, None, cleared).await.unwrap());
    let session = found(cleared).await;
    assert_eq!(session.organization_id, None);
    assert_eq!(session.last_used_at, cleared, "a scoping refresh is a use");

    let other = OrganizationId::from_uuid(Uuid::now_v7());
    let switched = t0 + Duration::minutes(2);
    assert!(db
        .store
        .scope_session(id, Some(other), switched)
        .await
        .unwrap());
    assert_eq!(found(switched).await.organization_id, Some(other));

    assert!(
        !db.store
            .scope_session(id, None, t0 + Duration::hours(1))
            .await
            .unwrap(),
        "an expired session is not scoped"
    );
    assert_eq!(
        found(switched).await.organization_id,
        Some(other),
        "the refusal changed nothing"
    );
}

// ---------------------------------------------------------------------------------------------
// Password history
// ---------------------------------------------------------------------------------------------

fn hash(n: usize) -> PasswordHash {
    PasswordHash::from_phc(format!("$argon2id$v=19$password-{n}"))
}

/// Changes the user's password to [`hash`]`(n)`, `n` seconds after `t0`.
async fn change_password(db: &Db, user: UserId, n: usize, t0: OffsetDateTime) {
    let at = t0 + Duration::seconds(i64::try_from(n).unwrap());
    db.store
        .change_password(
            user,
            hash(n),
            None,
            at,
            event(EventType::AuthPasswordChanged, None, Some(user)),
            support::signed_in(),
        )
        .await
        .unwrap();
}

#[on_both_backends(worker_threads = 4)]
async fn previous_password_hashes_are_the_retired_ones_newest_first(db: Db) {
    let (ada, _) = registered(&db, "ada@example.com").await;
    let (bob, _) = registered(&db, "bob@example.com").await;
    let original = db
        .store
        .credentials_by_id(ada)
        .await
        .unwrap()
        .unwrap()
        .password_hash
        .unwrap();
    assert_eq!(
        db.store.previous_password_hashes(ada, 10).await.unwrap(),
        vec![]
    );

    let t0 = now();
    for n in 1..=3 {
        change_password(&db, ada, n, t0).await;
    }
    assert_eq!(
        db.store
            .credentials_by_id(ada)
            .await
            .unwrap()
            .unwrap()
            .password_hash,
        Some(hash(3))
    );
    assert_eq!(
        db.store.previous_password_hashes(ada, 10).await.unwrap(),
        vec![hash(2), hash(1), original],
        "the current hash is not in the history; the registration hash is the oldest"
    );
    assert_eq!(
        db.store.previous_password_hashes(ada, 2).await.unwrap(),
        vec![hash(2), hash(1)],
        "the limit keeps the newest"
    );
    assert_eq!(
        db.store.previous_password_hashes(ada, 0).await.unwrap(),
        vec![]
    );
    assert_eq!(
        db.store.previous_password_hashes(bob, 10).await.unwrap(),
        vec![],
        "another user's history is their own"
    );
    let stranger = UserId::from(Uuid::now_v7());
    assert_eq!(
        db.store
            .previous_password_hashes(stranger, 10)
            .await
            .unwrap(),
        vec![]
    );
}

#[on_both_backends(worker_threads = 4)]
async fn the_password_history_keeps_the_24_newest(db: Db) {
    let (ada, _) = registered(&db, "ada@example.com").await;
    let t0 = now();
    for n in 1..=26 {
        change_password(&db, ada, n, t0).await;
    }
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM password_history").await,
        24
    );
    let previous = db.store.previous_password_hashes(ada, 100).await.unwrap();
    let expected: Vec<PasswordHash> = (2..=25).rev().map(hash).collect();
    assert_eq!(
        previous, expected,
        "hashes 25 down to 2: the registration one and 1 went"
    );
}

#[on_both_backends(worker_threads = 4)]
async fn password_changes_at_the_same_instant_keep_their_order(db: Db) {
    let (ada, _) = registered(&db, "ada@example.com").await;
    let at = now();
    for n in 1..=3 {
        db.store
            .change_password(
                ada,
                hash(n),
                None,
                at,
                event(EventType::AuthPasswordChanged, None, Some(ada)),
                support::signed_in(),
            )
            .await
            .unwrap();
    }
    let previous = db.store.previous_password_hashes(ada, 2).await.unwrap();
    assert_eq!(
        previous,
        vec![hash(2), hash(1)],
        "the last retired comes first"
    );
}

// ---------------------------------------------------------------------------------------------
// Branding
// ---------------------------------------------------------------------------------------------

#[on_both_backends(worker_threads = 4)]
async fn saved_branding_round_trips_and_saving_again_replaces_it(db: Db) {
    let (ada, workspace) = registered(&db, "ada@example.com").await;
    let acme = db.team(ada, "acme", Plan::Business).await;
    assert_eq!(db.store.branding(acme).await.unwrap(), None);
    let before = events(&db).await;

    let first_at = now();
    let saved = db
        .store
        .save_branding(
            acme,
            full_branding(),
            first_at,
            updated(acme),
            support::signed_in(),
        )
        .await;
    assert!(saved.unwrap());
    assert_eq!(
        db.store.branding(acme).await.unwrap(),
        Some(SavedBranding {
            branding: full_branding(),
            updated_at: first_at
        })
    );
    assert_eq!(events(&db).await, before + 1);

    // Every nullable field empty, the reply-to address included.
    let second_at = first_at + Duration::minutes(1);
    let plain = Branding::default();
    assert_eq!(plain.email_branding.reply_to, None);
    let saved = db
        .store
        .save_branding(
            acme,
            plain.clone(),
            second_at,
            updated(acme),
            support::signed_in(),
        )
        .await;
    assert!(saved.unwrap());
    assert_eq!(
        db.store.branding(acme).await.unwrap(),
        Some(SavedBranding {
            branding: plain,
            updated_at: second_at
        })
    );
    assert_eq!(events(&db).await, before + 2);
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM organization_branding")
            .await,
        1
    );
    assert_eq!(db.store.branding(workspace).await.unwrap(), None);
}

#[on_both_backends(worker_threads = 4)]
async fn branding_is_not_saved_for_a_deleted_organization(db: Db) {
    let (ada, _) = registered(&db, "ada@example.com").await;
    let acme = db.team(ada, "acme", Plan::Business).await;
    let at = now();
    delete(&db, acme, at).await;
    let before = events(&db).await;
    let saved = db
        .store
        .save_branding(
            acme,
            full_branding(),
            at,
            updated(acme),
            support::signed_in(),
        )
        .await
        .unwrap();
    assert!(!saved);
    assert_eq!(events(&db).await, before);
    assert_eq!(db.store.branding(acme).await.unwrap(), None);
}

// ---------------------------------------------------------------------------------------------
// SSO
// ---------------------------------------------------------------------------------------------

#[on_both_backends(worker_threads = 4)]
async fn an_sso_configuration_is_created_once_and_read_back_as_saved(db: Db) {
    let (ada, _) = registered(&db, "ada@example.com").await;
    let acme = db.team(ada, "acme", Plan::Business).await;
    assert_eq!(db.store.sso_configuration(acme).await.unwrap(), None);
    let before = events(&db).await;

    let config = sso_configuration(acme, now());
    assert!(db
        .store
        .create_sso_configuration(config.clone(), updated(acme), support::signed_in())
        .await
        .unwrap());
    let stored = db
        .store
        .sso_configuration(acme)
        .await
        .unwrap()
        .expect("created");
    assert_eq!(stored, config);
    assert_eq!(stored.idp_certificate.pem(), config.idp_certificate.pem());
    let domains: Vec<&str> = stored
        .domain_whitelist
        .as_slice()
        .iter()
        .map(|d| d.as_str())
        .collect();
    assert_eq!(
        domains,
        ["zeta.example.com", "acme.example", "mid.example.net"]
    );
    assert_eq!(stored.default_role, ProvisionRole::Viewer);
    assert_eq!(events(&db).await, before + 1);

    let again = SsoConfiguration {
        idp_entity_id: IdpEntityId::parse("urn:another:idp").unwrap(),
        ..sso_configuration(acme, now())
    };
    let result = db
        .store
        .create_sso_configuration(again, updated(acme), support::signed_in())
        .await;
    assert!(matches!(result, Err(StoreError::Conflict)), "{result:?}");
    assert_eq!(
        events(&db).await,
        before + 1,
        "a refused create records nothing"
    );
    assert_eq!(
        db.store.sso_configuration(acme).await.unwrap(),
        Some(config)
    );
}

#[on_both_backends(worker_threads = 4)]
async fn an_sso_configuration_is_updated_only_where_one_exists(db: Db) {
    let (ada, workspace) = registered(&db, "ada@example.com").await;
    let acme = db.team(ada, "acme", Plan::Business).await;
    let created_at = now();
    let config = sso_configuration(acme, created_at);
    assert!(db
        .store
        .create_sso_configuration(config.clone(), updated(acme), support::signed_in())
        .await
        .unwrap());
    let before = events(&db).await;

    let changed = SsoConfiguration {
        idp_entity_id: IdpEntityId::parse("urn:example:idp:v2").unwrap(),
        idp_sso_url: IdpSsoUrl::parse("https://login.example.org/saml2").unwrap(),
        idp_certificate: certificate("Rotated IdP"),
        domain_whitelist: whitelist(&["b.example.com", "a.example.com"]),
        auto_provision: false,
        default_role: ProvisionRole::Admin,
        is_active: false,
        updated_at: created_at + Duration::minutes(3),
        ..config.clone()
    };
    assert_ne!(changed.idp_certificate, config.idp_certificate);
    assert!(db
        .store
        .update_sso_configuration(changed.clone(), updated(acme), support::signed_in())
        .await
        .unwrap());
    assert_eq!(
        db.store.sso_configuration(acme).await.unwrap(),
        Some(changed.clone())
    );
    assert_eq!(events(&db).await, before + 1);

    // An organization without a configuration: nothing is updated, or created.
    let elsewhere = sso_configuration(workspace, created_at);
    assert!(!db
        .store
        .update_sso_configuration(elsewhere, updated(workspace), support::signed_in())
        .await
        .unwrap());
    assert_eq!(db.store.sso_configuration(workspace).await.unwrap(), None);
    assert_eq!(
        events(&db).await,
        before + 1,
        "a refused update records nothing"
    );
    assert_eq!(
        db.count("SELECT COUNT(*) AS n FROM sso_configurations")
            .await,
        1
    );
}

#[on_both_backends(worker_threads = 4)]
async fn sso_configurations_are_not_written_for_a_deleted_organization(db: Db) {
    let (ada, _) = registered(&db, "ada@example.com").await;
    let acme = db.team(ada, "acme", Plan::Business).await;
    let beta = db.team(ada, "beta", Plan::Business).await;
    let at = now();
    let config = sso_configuration(acme, at);
    assert!(db
        .store
        .create_sso_configuration(config.clone(), updated(acme), support::signed_in())
        .await
        .unwrap());
    delete(&db, acme, at).await;
    delete(&db, beta, at).await;
    let before = events(&db).await;

    let changed = SsoConfiguration {
        auto_provision: false,
        ..config.clone()
    };
    assert!(!db
        .store
        .update_sso_configuration(changed, updated(acme), support::signed_in())
        .await
        .unwrap());
    assert_eq!(
        db.store.sso_configuration(acme).await.unwrap(),
        Some(config)
    );
    let created = db
        .store
        .create_sso_configuration(
            sso_configuration(beta, at),
            updated(beta),
            support::signed_in(),
        )
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(db.store.sso_configuration(beta).await.unwrap(), None);
    assert_eq!(events(&db).await, before);
}

#[on_both_backends(worker_threads = 4)]
async fn purging_an_organization_removes_its_policies_branding_and_sso(db: Db) {
    let (ada, workspace) = registered(&db, "ada@example.com").await;
    let acme = db.team(ada, "acme", Plan::Business).await;
    let at = now();
    for org in [acme, workspace] {
        let saved = db
            .store
            .save_policies(
                org,
                strict_policies(),
                None,
                at,
                updated(org),
                support::signed_in(),
            )
            .await;
        assert!(saved.unwrap());
        assert!(db
            .store
            .save_branding(org, full_branding(), at, updated(org), support::signed_in())
            .await
            .unwrap());
        let config = sso_configuration(org, at);
        assert!(db
            .store
            .create_sso_configuration(config, updated(org), support::signed_in())
            .await
            .unwrap());
    }
    delete(&db, acme, at).await;
    let purged = db
        .store
        .purge_organizations(at + Duration::seconds(1), 1_000)
        .await
        .unwrap();
    assert_eq!(purged.organizations, 1);

    assert_eq!(db.store.policies(acme).await.unwrap(), None);
    assert_eq!(db.store.branding(acme).await.unwrap(), None);
    assert_eq!(db.store.sso_configuration(acme).await.unwrap(), None);
    for table in [
        "organization_policies",
        "organization_branding",
        "sso_configurations",
    ] {
        let sql = format!("SELECT COUNT(*) AS n FROM {table}");
        assert_eq!(
            db.count(&sql).await,
            1,
            "{table}: only the workspace's row is left"
        );
    }
    assert!(db.store.policies(workspace).await.unwrap().is_some());
    assert!(db.store.branding(workspace).await.unwrap().is_some());
    assert!(db
        .store
        .sso_configuration(workspace)
        .await
        .unwrap()
        .is_some());
}
