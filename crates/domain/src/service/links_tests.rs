//! The mail-based account flows' rules, with every port mocked: the same answer for unknown
//! addresses, the limits counted before anything is looked up, links bound to the address they
//! were mailed to, and a weak password refused before a reset link is spent.

use super::tests::origin;

use std::net::{IpAddr, Ipv4Addr};

use futures::executor::block_on;
use time::Duration;

use super::{
    mail::in_the_clear,
    tests::{now, ready, recording, secret_of, Mocks, Seen, ADA, ADA_EMAIL},
    EmailLinkService, LinkError, SignIn,
};
use crate::{
    model::{
        AccountToken, AccountTokenPurpose, Amr, AuditAction, AuditActor, AuditTarget,
        ClientAddress, Email, TargetKind, TokenHash, TokenKind,
    },
    ports::{MockRateLimiter, RateDecision},
};

const PUBLIC_URL: &str = "https://id.example.com";

fn client() -> ClientAddress {
    ClientAddress(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)))
}

impl Mocks {
    fn links(self) -> EmailLinkService {
        let (ports, auth) = self.ports_with_auth();
        EmailLinkService::new((&ports).into(), auth, PUBLIC_URL.to_owned())
    }

    /// The limiter allows everything but keys starting with `refused`, and keeps the keys.
    fn limits(&mut self, refused: Option<&'static str>) -> Seen<String> {
        let keys = Seen::new();
        let seen = keys.clone();
        let mut limiter = MockRateLimiter::new();
        limiter.expect_hit().returning(move |key, quota, at| {
            seen.record(key.to_owned());
            let allowed = !refused.is_some_and(|prefix| key.starts_with(prefix));
            ready(Ok(RateDecision {
                allowed,
                limit: quota.per_minute(),
                remaining: 0,
                reset_at: at + Duration::seconds(40),
            }))
        });
        self.rate_limiter = limiter;
        keys
    }

    /// The store hands over `link` for `token`, asked for with the link's purpose, now.
    fn link_is_taken(&mut self, token: &'static str, link: AccountToken) {
        let purpose = link.purpose;
        self.account_tokens
            .expect_take_account_token()
            .withf(move |hash, asked_for, at| {
                *hash == TokenHash::of(token) && *asked_for == purpose && *at == now()
            })
            .returning({
                let link = link.clone();
                move |_, _, _| ready(Ok(Some(link.clone())))
            });
        // A sign-in reads the link before it spends it.
        self.account_tokens
            .expect_account_token()
            .withf(move |hash, asked_for, at| {
                *hash == TokenHash::of(token) && *asked_for == purpose && *at == now()
            })
            .returning(move |_, _, _| ready(Ok(Some(link.clone()))));
    }
}

fn link_of(user_email: &str) -> AccountToken {
    AccountToken {
        purpose: AccountTokenPurpose::MagicLink,
        user_id: ADA,
        email: Email::parse(user_email).unwrap(),
        created_at: now() - Duration::minutes(1),
        expires_at: now() + Duration::minutes(14),
    }
}

#[test]
fn an_unknown_address_is_counted_and_answered_alike_but_mailed_nothing() {
    let mut mocks = Mocks::new();
    let keys = mocks.limits(None);
    mocks.email_is_free();
    mocks.account_tokens.expect_save_account_token().never();
    mocks.mailer.expect_send().never();

    block_on(
        mocks
            .links()
            .request_magic_link(" Nobody@Example.com ", client(), &origin()),
    )
    .unwrap();

    assert_eq!(
        keys.all(),
        ["links:email:nobody@example.com", "links:ip:192.0.2.7"]
    );
}

#[test]
fn past_a_limit_nothing_is_looked_up() {
    for refused in ["links:email:", "links:ip:"] {
        let mut mocks = Mocks::new();
        mocks.limits(Some(refused));
        mocks.accounts.expect_credentials_by_email().never();
        let result = block_on(
            mocks
                .links()
                .request_password_reset(ADA_EMAIL, client(), &origin()),
        );
        let Err(LinkError::RateLimited(wait)) = result else {
            panic!("{refused}: {result:?}")
        };
        assert_eq!(wait.seconds(), 40, "until the window ends");
    }
}

#[test]
fn a_known_address_gets_a_link_to_the_page_with_a_token_kept_hashed() {
    let mut mocks = Mocks::new();
    mocks.limits(None);
    mocks.ada_is_registered();
    mocks.mail_is_sealed_in_the_clear();
    let saved = recording!(
        mocks.account_tokens.expect_save_account_token().times(1),
        |hash, token, record, mail| (hash, token, record, in_the_clear(&mail)),
        Ok(())
    );
    // Nothing is sent on the request's time: the mail is queued with the token.
    mocks.mailer.expect_send().never();

    block_on(
        mocks
            .links()
            .request_password_reset(ADA_EMAIL, client(), &origin()),
    )
    .unwrap();

    let secret = secret_of(TokenKind::PasswordReset);
    let (hash, token, record, mail) = saved.only();
    // Whoever asked proved nothing: the record names the account, not an actor.
    assert_eq!(record.action, AuditAction::LinkMailed);
    assert_eq!(record.actor, AuditActor::UnknownUser);
    assert_eq!(record.target, Some(AuditTarget::new(TargetKind::User, ADA)));
    assert_eq!(record.origin, origin());
    assert_eq!(hash, TokenHash::of(&secret));
    assert_eq!(token.purpose, AccountTokenPurpose::PasswordReset);
    assert_eq!(token.expires_at - token.created_at, Duration::minutes(15));
    assert_eq!(mail.to.as_ref(), ADA_EMAIL);
    assert!(mail
        .text
        .contains(&format!("{PUBLIC_URL}/reset-password/{secret}")));
}

#[test]
fn a_link_mailed_to_an_address_the_user_has_left_signs_nobody_in() {
    let mut mocks = Mocks::new();
    mocks.link_is_taken("ghml_x", link_of("old@example.com"));
    mocks.ada_is_registered();
    mocks.sessions.expect_create_session().never();
    let result = block_on(mocks.links().sign_in_with_link("ghml_x", None, &origin()));
    assert!(matches!(result, Err(LinkError::InvalidToken)));
}

#[test]
fn a_sign_in_link_opens_an_email_session_and_proves_the_address() {
    let mut mocks = Mocks::new();
    mocks.link_is_taken("ghml_x", link_of(ADA_EMAIL));
    mocks.ada_is_registered();
    mocks
        .accounts
        .expect_set_email_verified()
        .withf(|user, email, _, record| {
            *user == ADA && email.as_ref() == ADA_EMAIL && record.is_none()
        })
        .times(1)
        .returning(|_, _, _, _| ready(Ok(true)));
    let opened = mocks.sessions_open();
    let signed = mocks.signer_signs();

    let signed_in = block_on(mocks.links().sign_in_with_link("ghml_x", None, &origin())).unwrap();

    assert!(matches!(signed_in, SignIn::Tokens(_)));
    assert_eq!(opened.only().session.amr, Amr::email_link());
    assert_eq!(signed.only().amr, ["email"]);
}

#[test]
fn a_weak_password_is_refused_before_the_reset_link_is_spent() {
    let mut mocks = Mocks::new();
    mocks.account_tokens.expect_take_account_token().never();
    let result = block_on(mocks.links().reset_password("ghpr_x", "short", &origin()));
    assert!(matches!(result, Err(LinkError::WeakPassword(_))));
}

#[test]
fn a_verification_link_verifies_the_address_with_the_users_record() {
    let mut mocks = Mocks::new();
    let mut link = link_of(ADA_EMAIL);
    link.purpose = AccountTokenPurpose::EmailVerification;
    mocks.link_is_taken("ghev_x", link);
    mocks.ada_is_registered();
    let verified = recording!(
        mocks.accounts.expect_set_email_verified().times(1),
        |user, email, _, record| (user, email.as_ref().to_owned(), record),
        Ok(true)
    );

    block_on(mocks.links().verify_email("ghev_x", &origin())).unwrap();

    let (user, email, record) = verified.only();
    assert_eq!((user, email.as_str()), (ADA, ADA_EMAIL));
    let record = record.expect("the verification is audited");
    assert_eq!(record.action, AuditAction::EmailVerified);
    assert_eq!(record.actor, AuditActor::User(ADA));
    assert_eq!(record.target, Some(AuditTarget::new(TargetKind::User, ADA)));
    assert_eq!(record.origin, origin());
}
