//! Mail goes out through an outbox, never on a request's time.
//!
//! A use case that mails (an invitation, a sign-in link, a password reset, an address to
//! verify) seals the mail with [`seal`] and hands it to the store with the change that made it:
//! the store writes the mail in that change's transaction, so a mail is queued exactly when its
//! change commits, and neither is lost without the other on a crash. The worker's
//! [`MailCourier`] leases due mails, opens them and hands them to the [`Mailer`] (SMTP, a mail
//! directory or the log); a mail that fails is tried again with a growing delay, and given up
//! after [`MAIL_ATTEMPTS`] attempts.
//!
//! A mail's body holds a one-time link, and tokens are stored only as hashes: the outbox keeps
//! each mail sealed (AES-256-GCM under the server's secret key, bound to the mail's id), and
//! forgets it once sent.
//!
//! [`Mailer`]: crate::ports::Mailer

use std::time::Duration;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::{
    model::Email,
    ports::{
        service_ports, CipherError, Mail, QueuedMail, Random, SealedMail, SecretCipher, StoreError,
    },
};

/// Attempts made to send one mail before it is given up (about three hours of trying).
pub const MAIL_ATTEMPTS: u32 = 10;

/// How long a worker holds the mails it leased: the SMTP exchange's time and a margin. A
/// worker that dies leaves them to be taken again then.
pub const MAIL_LEASE: Duration = Duration::from_secs(300);

/// The delay before the next attempt after `attempts` failed ones: 10 s, doubling, at most an
/// hour.
pub fn mail_backoff(attempts: u32) -> Duration {
    let doublings = attempts.saturating_sub(1).min(12);
    Duration::from_secs(10 << doublings).min(Duration::from_secs(3600))
}

/// What the seal is bound to: a sealed mail opens only as the mail of its own id.
fn context(id: Uuid) -> Vec<u8> {
    [b"gatehouse mail ".as_slice(), id.as_bytes()].concat()
}

/// The sealed form's plaintext.
#[derive(Serialize, Deserialize)]
struct Sealed {
    to: String,
    subject: String,
    text: String,
    sender_name: Option<String>,
    reply_to: Option<String>,
}

impl Sealed {
    fn of(mail: &Mail) -> Self {
        Self {
            to: mail.to.as_ref().to_owned(),
            subject: mail.subject.clone(),
            text: mail.text.clone(),
            sender_name: mail.sender_name.clone(),
            reply_to: mail.reply_to.as_ref().map(|a| a.as_ref().to_owned()),
        }
    }

    /// The mail, when its addresses are still addresses.
    fn into_mail(self) -> Option<Mail> {
        Some(Mail {
            to: Email::parse(&self.to).ok()?,
            subject: self.subject,
            text: self.text,
            sender_name: self.sender_name,
            reply_to: match self.reply_to {
                Some(address) => Some(Email::parse(&address).ok()?),
                None => None,
            },
        })
    }
}

/// Seals `mail` for the outbox under a fresh id.
///
/// # Errors
/// [`CipherError`] when the cipher fails.
pub fn seal(
    cipher: &dyn SecretCipher,
    random: &dyn Random,
    mail: &Mail,
) -> Result<SealedMail, CipherError> {
    let id = random.uuid();
    let plaintext = serde_json::to_vec(&Sealed::of(mail)).map_err(|e| CipherError(Box::new(e)))?;
    Ok(SealedMail {
        id,
        sealed: cipher.seal(&plaintext, &context(id))?,
    })
}

/// The mail [`seal`] sealed, or `None` when it cannot be opened (sealed under another key,
/// tampered with, or not a mail).
pub fn open(cipher: &dyn SecretCipher, mail: &SealedMail) -> Option<Mail> {
    let plaintext = cipher.open(&mail.sealed, &context(mail.id)).ok()?;
    serde_json::from_slice::<Sealed>(&plaintext)
        .ok()?
        .into_mail()
}

/// The mail a test's pass-through cipher "sealed": its plaintext read as the mail.
#[cfg(test)]
pub(crate) fn in_the_clear(mail: &SealedMail) -> Mail {
    serde_json::from_slice::<Sealed>(&mail.sealed)
        .ok()
        .and_then(Sealed::into_mail)
        .expect("a mail sealed by a pass-through cipher")
}

service_ports! {
    /// The ports [`MailCourier`] uses.
    pub struct MailPorts { mail_queue: MailQueue, cipher: SecretCipher, mailer: Mailer, clock: Clock }
}

/// What became of one leased mail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MailOutcome {
    /// Handed over to the mailer, and forgotten.
    Sent,
    /// Not handed over; tried again at this time.
    Retrying(OffsetDateTime),
    /// Not handed over at its last attempt, and forgotten.
    GivenUp,
    /// It could not be opened (the secret key changed since it was sealed), and is forgotten.
    Unreadable,
}

/// Sends the outbox's mails: the worker's side of mail.
#[derive(Clone)]
pub struct MailCourier {
    ports: MailPorts,
}

impl MailCourier {
    /// A courier on these ports.
    pub fn new(ports: MailPorts) -> Self {
        Self { ports }
    }

    /// Leases up to `limit` due mails for [`MAIL_LEASE`].
    ///
    /// # Errors
    /// The store's.
    pub async fn lease(&self, limit: u32) -> Result<Vec<QueuedMail>, StoreError> {
        let now = self.ports.clock.now();
        self.ports
            .mail_queue
            .lease_mail(now, now + MAIL_LEASE, limit)
            .await
    }

    /// Opens and sends one leased mail, and records what became of it.
    ///
    /// # Errors
    /// The store's, when recording the outcome fails: the mail is then taken again when its
    /// lease ends (sent twice, should it have been sent: at least once, as webhooks).
    pub async fn deliver(&self, queued: QueuedMail) -> Result<MailOutcome, StoreError> {
        let id = queued.mail.id;
        let Some(mail) = open(self.ports.cipher.as_ref(), &queued.mail) else {
            tracing::error!(mail.id = %id, "a queued mail cannot be opened (was the secret key changed?); it is dropped");
            self.ports.mail_queue.forget_mail(id).await?;
            return Ok(MailOutcome::Unreadable);
        };
        let Err(error) = self.ports.mailer.send(mail).await else {
            self.ports.mail_queue.forget_mail(id).await?;
            return Ok(MailOutcome::Sent);
        };
        let attempts = queued.attempts.saturating_add(1);
        // The relay's own words (a refused login, a full mailbox, no connection), which the
        // operator needs to mend it: the error's source.
        let cause = &error.0;
        if attempts >= MAIL_ATTEMPTS {
            tracing::error!(%error, %cause, mail.id = %id, attempts, "a mail could not be sent; it is given up");
            self.ports.mail_queue.forget_mail(id).await?;
            return Ok(MailOutcome::GivenUp);
        }
        let at = self.ports.clock.now() + mail_backoff(attempts);
        tracing::warn!(%error, %cause, mail.id = %id, attempts, retry_at = %at, "a mail could not be sent; it is tried again later");
        self.ports.mail_queue.retry_mail(id, attempts, at).await?;
        Ok(MailOutcome::Retrying(at))
    }
}
