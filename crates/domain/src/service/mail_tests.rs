//! The outbox's courier: a mail is forgotten once sent, tried again with a growing delay when
//! the mailer fails, given up after its last attempt, and dropped when it cannot be opened;
//! and a sealed mail opens only as the mail of its own id.

use futures::executor::block_on;
use uuid::Uuid;

use super::{
    mail::{in_the_clear, mail_backoff, open, seal},
    tests::{now, ready, recording, Mocks, Seen},
    MailCourier, MailOutcome, MAIL_ATTEMPTS, MAIL_LEASE,
};
use crate::{
    model::Email,
    ports::{Mail, MailError, QueuedMail, SealedMail},
};

fn invitation() -> Mail {
    let mut mail = Mail::new(
        Email::parse("grace@example.com").unwrap(),
        "Ada invited you to Acme on Gatehouse".to_owned(),
        "Accept the invitation: https://id.example.com/invitations/inv_secret\n".to_owned(),
    );
    mail.sender_name = Some("Acme".to_owned());
    mail.reply_to = Some(Email::parse("it@acme.example").unwrap());
    mail
}

/// A mail sealed by the tests' pass-through cipher, after `attempts` attempts.
fn queued(attempts: u32) -> QueuedMail {
    let mut mocks = Mocks::new();
    mocks.mail_is_sealed_in_the_clear();
    let ports = mocks.ports();
    let mail = seal(ports.cipher.as_ref(), ports.random.as_ref(), &invitation()).unwrap();
    QueuedMail { mail, attempts }
}

impl Mocks {
    /// The queue forgets one mail: sent, given up or unreadable.
    fn mail_is_forgotten_once(&mut self) {
        self.mail_queue
            .expect_forget_mail()
            .times(1)
            .returning(|_| ready(Ok(())));
    }

    fn courier(mut self) -> MailCourier {
        self.cipher
            .expect_open()
            .returning(|sealed, _| Ok(sealed.to_vec()));
        MailCourier::new((&self.ports()).into())
    }
}

#[test]
fn a_sealed_mail_opens_as_the_mail_and_only_under_its_own_id() {
    let mut mocks = Mocks::new();
    mocks.mail_is_sealed_in_the_clear();
    let contexts = Seen::new();
    let kept = contexts.clone();
    mocks.cipher.expect_open().returning(move |_, context| {
        kept.record(context.to_vec());
        Ok(b"{}".to_vec())
    });
    let ports = mocks.ports();
    let sealed = seal(ports.cipher.as_ref(), ports.random.as_ref(), &invitation()).unwrap();
    assert_eq!(in_the_clear(&sealed), invitation());
    // The seal is bound to the id; what opens under it must still be a mail.
    assert_eq!(open(ports.cipher.as_ref(), &sealed), None);
    let context = contexts.only();
    assert!(context.ends_with(sealed.id.as_bytes()), "bound to the id");
}

#[test]
fn a_mail_s_debug_shows_neither_its_body_nor_its_sealed_bytes() {
    let shown = format!("{:?}", invitation());
    assert!(
        shown.contains("invited you") && !shown.contains("inv_secret"),
        "{shown}"
    );
    let sealed = queued(0);
    let shown = format!("{sealed:?}");
    assert!(!shown.contains("inv_secret"), "{shown}");
}

#[test]
fn a_sent_mail_is_forgotten() {
    let mut mocks = Mocks::new();
    let sent = recording!(mocks.mailer.expect_send().times(1), |mail| mail, Ok(()));
    let mail = queued(0);
    let id = mail.mail.id;
    mocks
        .mail_queue
        .expect_forget_mail()
        .withf(move |forgotten| *forgotten == id)
        .times(1)
        .returning(|_| ready(Ok(())));
    let outcome = block_on(mocks.courier().deliver(mail)).unwrap();
    assert_eq!(outcome, MailOutcome::Sent);
    assert_eq!(sent.only(), invitation());
}

#[test]
fn a_failed_mail_is_tried_again_later_and_later() {
    for (before, delay) in [(0, 10), (1, 20), (2, 40), (5, 320), (8, 2560)] {
        let mut mocks = Mocks::new();
        mocks
            .mailer
            .expect_send()
            .returning(|_| ready(Err(MailError("connection refused".into()))));
        let retried = recording!(
            mocks.mail_queue.expect_retry_mail().times(1),
            |id, attempts, at| (id, attempts, at),
            Ok(())
        );
        mocks.mail_queue.expect_forget_mail().never();
        let mail = queued(before);
        let id = mail.mail.id;
        let outcome = block_on(mocks.courier().deliver(mail)).unwrap();
        let at = now() + std::time::Duration::from_secs(delay);
        assert_eq!(outcome, MailOutcome::Retrying(at));
        assert_eq!(retried.only(), (id, before + 1, at));
    }
    assert_eq!(
        mail_backoff(30),
        std::time::Duration::from_secs(3600),
        "at most an hour"
    );
}

#[test]
fn a_mail_failing_its_last_attempt_is_given_up() {
    let mut mocks = Mocks::new();
    mocks
        .mailer
        .expect_send()
        .times(1)
        .returning(|_| ready(Err(MailError("mailbox unavailable".into()))));
    mocks.mail_queue.expect_retry_mail().never();
    mocks.mail_is_forgotten_once();
    let outcome = block_on(mocks.courier().deliver(queued(MAIL_ATTEMPTS - 1))).unwrap();
    assert_eq!(outcome, MailOutcome::GivenUp);
}

#[test]
fn a_mail_that_cannot_be_opened_is_dropped_unsent() {
    let mut mocks = Mocks::new();
    mocks.mailer.expect_send().never();
    mocks.mail_is_forgotten_once();
    let tampered = QueuedMail {
        mail: SealedMail {
            id: Uuid::from_u128(7),
            sealed: b"not a mail".to_vec(),
        },
        attempts: 0,
    };
    let outcome = block_on(mocks.courier().deliver(tampered)).unwrap();
    assert_eq!(outcome, MailOutcome::Unreadable);
}

#[test]
fn the_courier_leases_due_mail_for_the_lease_s_time() {
    let mut mocks = Mocks::new();
    let leased = recording!(
        mocks.mail_queue.expect_lease_mail().times(1),
        |at, until, limit| (at, until, limit),
        Ok(Vec::new())
    );
    block_on(mocks.courier().lease(16)).unwrap();
    assert_eq!(leased.only(), (now(), now() + MAIL_LEASE, 16));
}
