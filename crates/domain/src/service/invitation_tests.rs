//! The page of a mailed invitation link: what the use case reads for it, against mocked ports.

use futures::executor::block_on;
use time::Duration;
use uuid::Uuid;

use super::{
    tests::{ada_credentials, email, now, ready, Mocks, ACME, ADA},
    InvitationLink, MemberService,
};
use crate::{
    model::{
        Branding, HexColor, Invitation, InvitationId, InvitationRecord, InvitationState,
        LoginTitle, NewInvitation, OrganizationName, Plan, Role, Slug, TokenHash,
    },
    ports::SavedBranding,
};

const TOKEN: &str = "ghi_the-token-of-the-mailed-link";

fn record(plan: Plan) -> InvitationRecord {
    let invited_at = now() - Duration::days(1);
    InvitationRecord {
        invitation: Invitation {
            id: InvitationId::from_uuid(Uuid::from_u128(0x1417)),
            organization_id: ACME,
            organization_name: OrganizationName::parse("Acme").unwrap(),
            organization_slug: Slug::parse("acme").unwrap(),
            email: email("bob@example.com"),
            role: Role::Member.into(),
            invited_by: ADA,
            invited_at,
            expires_at: NewInvitation::expiry(invited_at),
        },
        accepted_at: None,
        revoked_at: None,
        plan,
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

    /// The store knows the invitation of [`TOKEN`] (looked up by its hash only), sent by Ada,
    /// to an address without an account.
    fn invitation_of_the_token(&mut self, found: InvitationRecord) {
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
            .returning(|_| ready(Ok(None)));
    }
}

fn link(mocks: Mocks) -> Option<InvitationLink> {
    block_on(mocks.member_service().invitation_link(TOKEN)).unwrap()
}

#[test]
fn a_pending_link_names_the_inviter_in_the_organizations_branding() {
    let mut mocks = Mocks::new();
    mocks.invitation_of_the_token(record(Plan::Business));
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
    mocks.invitation_of_the_token(record(Plan::Pro));
    mocks.branding.expect_branding().never();

    assert_eq!(link(mocks).unwrap().branding, Branding::default());
}

#[test]
fn used_withdrawn_and_expired_invitations_say_so_used_first() {
    let mut used = record(Plan::Free);
    used.accepted_at = Some(now());
    used.revoked_at = Some(now());
    assert_eq!(used.state(now()), InvitationState::Accepted);
    let mut withdrawn = record(Plan::Free);
    withdrawn.revoked_at = Some(now());
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
    mocks.invitation_of_the_token(withdrawn);
    assert_eq!(link(mocks).unwrap().state, InvitationState::Revoked);
}

#[test]
fn a_token_that_names_no_invitation_finds_nothing_and_reads_nothing_else() {
    let mut mocks = Mocks::new();
    mocks
        .members
        .expect_invitation_record()
        .returning(|_| ready(Ok(None)));
    mocks.accounts.expect_credentials_by_id().never();
    mocks.accounts.expect_credentials_by_email().never();
    mocks.branding.expect_branding().never();

    assert_eq!(link(mocks), None);
}
