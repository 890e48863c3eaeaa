//! The page of a mailed invitation link: what the use case reads for it, against mocked ports.

use futures::executor::block_on;
use time::Duration;
use uuid::Uuid;

use super::{
    mail::in_the_clear,
    tests::{
        ada_acting, ada_credentials, bobs_invitation, email, now, origin, ready, recording,
        secret_of, Mocks, ACME, ADA,
    },
    AnswerRefused, Answered, AuthService, BrowserSession, FormPosted, InvitationAnswer,
    InvitationLink, InvitationLinkService, InvitationStep, MemberService, Opened,
};
use crate::{
    model::{
        Amr, AuditAction, Branding, HexColor, InvitationRecord, InvitationState, LoginTitle, Plan,
        Role, SessionId, TokenHash, TokenKind, UserCredentials, UserId,
    },
    ports::SavedBranding,
};

const TOKEN: &str = "ghi_the-token-of-the-mailed-link";

fn record(plan: Plan) -> InvitationRecord {
    InvitationRecord {
        invitation: bobs_invitation(Role::Member),
        accepted_at: None,
        revoked_at: None,
        plan,
    }
}

/// An invitation on the free plan, accepted now.
fn accepted_invitation() -> InvitationRecord {
    InvitationRecord {
        accepted_at: Some(now()),
        ..record(Plan::Free)
    }
}

/// An invitation on the free plan, withdrawn now.
fn withdrawn_invitation() -> InvitationRecord {
    InvitationRecord {
        revoked_at: Some(now()),
        ..record(Plan::Free)
    }
}

fn acme_look() -> Branding {
    let mut look = Branding::default();
    look.custom_login.title = LoginTitle::parse("Acme sign-in").unwrap();
    look.primary_color = HexColor::parse("#0F766E").unwrap();
    look
}

impl Mocks {
    fn member_service(self) -> MemberService {
        MemberService::new((&self.ports()).into(), "https://id.example.com".to_owned())
    }

    /// The store knows the invitation of [`TOKEN`] (looked up by its hash only, once), sent by
    /// Ada, to an address whose account is `invitee` (`None`: it has none).
    fn invitation_of_the_token(
        &mut self,
        found: InvitationRecord,
        invitee: Option<UserCredentials>,
    ) {
        self.members
            .expect_invitation_record()
            .withf(|hash| *hash == TokenHash::of(TOKEN))
            .times(1)
            .returning(move |_| ready(Ok(Some(found.clone()))));
        self.accounts
            .expect_credentials_by_id()
            .withf(|id| *id == ADA)
            .returning(|_| ready(Ok(Some(ada_credentials()))));
        self.accounts
            .expect_credentials_by_email()
            .returning(move |_| ready(Ok(invitee.clone())));
    }
}

fn link(mocks: Mocks) -> Option<InvitationLink> {
    block_on(mocks.member_service().invitation_link(TOKEN)).unwrap()
}

#[test]
fn a_pending_link_names_the_inviter_in_the_organizations_branding() {
    let mut mocks = Mocks::new();
    mocks.invitation_of_the_token(record(Plan::Business), None);
    mocks
        .branding
        .expect_branding()
        .withf(|id| *id == ACME)
        .times(1)
        .returning(|_| {
            ready(Ok(Some(SavedBranding {
                branding: acme_look(),
                updated_at: now(),
            })))
        });

    let link = link(mocks).unwrap();

    assert_eq!(link.state, InvitationState::Pending);
    assert_eq!(link.inviter, "Ada Lovelace");
    assert_eq!(link.invitee, None, "no account yet: the page registers one");
    assert_eq!(link.branding, acme_look());
    assert_eq!(link.invitation.organization_name.as_ref(), "Acme");
}

#[test]
fn below_the_business_plan_the_page_has_the_default_look() {
    let mut mocks = Mocks::new();
    mocks.invitation_of_the_token(record(Plan::Pro), None);
    mocks.branding.expect_branding().never();

    assert_eq!(link(mocks).unwrap().branding, Branding::default());
}

#[test]
fn used_withdrawn_and_expired_invitations_say_so_used_first() {
    let mut used = accepted_invitation();
    used.revoked_at = Some(now());
    assert_eq!(used.state(now()), InvitationState::Accepted);
    let withdrawn = withdrawn_invitation();
    assert_eq!(
        withdrawn.state(now() + Duration::days(30)),
        InvitationState::Revoked
    );
    let pending = record(Plan::Free);
    assert_eq!(
        pending.state(pending.invitation.expires_at),
        InvitationState::Expired
    );

    let mut mocks = Mocks::new();
    mocks.invitation_of_the_token(withdrawn, None);
    assert_eq!(link(mocks).unwrap().state, InvitationState::Revoked);
}

#[test]
fn a_token_that_names_no_invitation_finds_nothing_and_reads_nothing_else() {
    let mut mocks = Mocks::new();
    mocks.no_invitation_has_the_token();
    mocks.accounts.expect_credentials_by_id().never();
    mocks.accounts.expect_credentials_by_email().never();
    mocks.branding.expect_branding().never();

    assert_eq!(link(mocks), None);
}

// The use case of the page: what it asks of the browser, and what an answer does.

const BOB: UserId = UserId::from_uuid(Uuid::from_u128(0xb0b));

impl Mocks {
    fn no_invitation_has_the_token(&mut self) {
        self.members
            .expect_invitation_record()
            .returning(|_| ready(Ok(None)));
    }

    fn invitation_link_service(self) -> InvitationLinkService {
        let ports = self.ports();
        InvitationLinkService::new(
            AuthService::new((&ports).into(), super::tests::settings()),
            MemberService::new((&ports).into(), "https://id.example.com".to_owned()),
        )
    }

    /// The invitation of [`TOKEN`] is pending, and the invited address has an account (Bob's)
    /// or not.
    fn pending_invitation(&mut self, invitee_has_an_account: bool) {
        let mut found = record(Plan::Free);
        let mut bob = None;
        if invitee_has_an_account {
            found.invitation.email = email("ada@example.com");
            let mut credentials = ada_credentials();
            credentials.user.id = BOB;
            bob = Some(credentials);
        }
        self.invitation_of_the_token(found, bob);
    }
}

fn signed_in_as(user_id: UserId) -> BrowserSession {
    BrowserSession {
        user_id,
        session_id: SessionId::from_uuid(Uuid::from_u128(0x5e5)),
        amr: Amr::password(),
        authenticated_at: now(),
    }
}

fn opened(mocks: Mocks, session: Option<&BrowserSession>) -> Opened {
    block_on(mocks.invitation_link_service().open(TOKEN, session)).unwrap()
}

fn pending_step(opened: Opened) -> (InvitationStep, bool) {
    match opened {
        Opened::Pending(pending) => (pending.step, pending.other_account),
        other => panic!("expected a pending invitation, got {other:?}"),
    }
}

/// The step the page of a pending invitation asks for, when the invited address has an account
/// (Bob's) or not, and the browser is signed in as `signed_in` or as nobody.
fn step_for(invitee_has_an_account: bool, signed_in: Option<UserId>) -> (InvitationStep, bool) {
    let mut mocks = Mocks::new();
    mocks.pending_invitation(invitee_has_an_account);
    let session = signed_in.map(signed_in_as);
    pending_step(opened(mocks, session.as_ref()))
}

#[test]
fn the_page_asks_a_new_address_to_register_and_a_known_one_for_its_password() {
    assert_eq!(step_for(false, None), (InvitationStep::Register, false));
    assert_eq!(step_for(true, None), (InvitationStep::SignIn, false));
}

#[test]
fn the_signed_in_invitee_only_accepts_and_anyone_else_is_told_to_sign_in_as_the_invitee() {
    assert_eq!(step_for(true, Some(BOB)), (InvitationStep::Accept, false));
    assert_eq!(step_for(true, Some(ADA)), (InvitationStep::SignIn, true));
}

#[test]
fn a_spent_link_opens_its_closed_page_and_an_unknown_one_nothing() {
    let mut mocks = Mocks::new();
    mocks.invitation_of_the_token(accepted_invitation(), None);
    match opened(mocks, None) {
        Opened::Closed(link) => assert_eq!(link.state, InvitationState::Accepted),
        other => panic!("expected the closed page, got {other:?}"),
    }

    let mut mocks = Mocks::new();
    mocks.no_invitation_has_the_token();
    assert_eq!(opened(mocks, None), Opened::Unknown);
}

/// Posts the page's form with a password and `full_name`, signed in as nobody.
fn answer_anonymously(mocks: Mocks, full_name: &str) -> FormPosted {
    let answer = InvitationAnswer {
        password: "a long and unusual passphrase",
        full_name,
    };
    let service = mocks.invitation_link_service();
    block_on(service.answer(TOKEN, None, answer, &origin())).unwrap()
}

#[test]
fn registering_without_a_name_asks_again_and_creates_no_account() {
    let mut mocks = Mocks::new();
    mocks.pending_invitation(false);
    // No account is created and nobody signs in: mockall fails any call not expected.
    mocks.accounts.expect_create_account().never();

    let answered = answer_anonymously(mocks, "  ");

    match answered {
        FormPosted::Answered(
            _,
            Answered::Again {
                step: InvitationStep::Register,
                refused: AnswerRefused::NameMissing,
            },
        ) => {}
        other => panic!("expected the registration form again, got {other:?}"),
    }
}

#[test]
fn answering_a_spent_link_changes_nothing_and_says_what_the_link_opens() {
    let mut mocks = Mocks::new();
    mocks.invitation_of_the_token(withdrawn_invitation(), None);
    mocks.accounts.expect_create_account().never();

    let answered = answer_anonymously(mocks, "Bob");

    match answered {
        FormPosted::NotPending(Opened::Closed(link)) => {
            assert_eq!(link.state, InvitationState::Revoked)
        }
        other => panic!("expected the closed page, got {other:?}"),
    }
}

#[test]
fn an_invitation_s_mail_is_written_with_it_in_the_branding_and_nothing_is_sent_meanwhile() {
    let mut mocks = Mocks::new();
    mocks
        .organizations
        .expect_organization()
        .returning(|_| ready(Ok(Some(super::tests::acme(Plan::Free)))));
    mocks
        .members
        .expect_is_member_email()
        .returning(|_, _| ready(Ok(false)));
    mocks
        .accounts
        .expect_credentials_by_id()
        .withf(|id| *id == ADA)
        .returning(|_| ready(Ok(Some(ada_credentials()))));
    mocks.mail_is_sealed_in_the_clear();
    let written = recording!(
        mocks.members.expect_create_invitation().times(1),
        |invitation, event, audit, mail| (invitation, event, audit, in_the_clear(&mail)),
        Ok(())
    );
    // Nothing goes to the relay on the request's time: the worker sends the queued mail.
    mocks.mailer.expect_send().never();

    let member = block_on(mocks.member_service().invite(
        &ada_acting(Role::Admin, Plan::Free),
        email("bob@example.com"),
        None,
        &origin(),
    ))
    .unwrap();

    let (invitation, event, audit, mail) = written.only();
    assert_eq!(member.invitation_id, Some(invitation.id));
    assert_eq!(event.event_type.as_str(), "member.invited");
    assert_eq!(audit.action, AuditAction::MemberInvited);
    assert_eq!(mail.to, email("bob@example.com"));
    assert_eq!(
        mail.subject,
        "Ada Lovelace invited you to Acme on Gatehouse"
    );
    let link = format!(
        "https://id.example.com/invitations/{}",
        secret_of(TokenKind::Invitation)
    );
    assert!(mail.text.contains(&link), "{}", mail.text);
    assert_eq!(
        invitation.token_hash,
        TokenHash::of(&secret_of(TokenKind::Invitation))
    );
}
