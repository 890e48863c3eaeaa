//! Mailer adapters: SMTP ([`SmtpMailer`]), a directory of `.eml` files ([`MailDirMailer`]) and
//! the log ([`LogMailer`]), picked at start by [`mailer_from_settings`].
//!
//! Every mail is the same RFC 5322 message whichever adapter takes it: a `text/plain; UTF-8`
//! body, a `From` taken from the settings (`GATEHOUSE_MAIL_FROM`, e.g.
//! `Gatehouse <no-reply@example.com>`), a `Date` and a `Message-ID` in the sender's domain.

use std::fmt;
use std::fs;
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use gatehouse_domain::ports::{Mail, MailError, Mailer};
use lettre::message::header::{ContentTransferEncoding, ContentType, MIME_VERSION_1_0};
use lettre::message::{Body, Mailbox};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use time::macros::format_description;
use time::OffsetDateTime;
use uuid::Uuid;

/// Picks the mailer the settings ask for: SMTP when `smtp_url` is set, else a mail directory
/// when `mail_dir` is set, else the log ([`LogMailer`], for development only: the caller warns
/// at start when it gets that one). Empty settings count as unset.
///
/// # Errors
/// When `from` is not a mailbox (`Name <address>` or a bare address) or `smtp_url` is not a
/// usable SMTP URL.
pub fn mailer_from_settings(
    smtp_url: Option<&str>,
    mail_dir: Option<&Path>,
    from: &str,
) -> Result<Arc<dyn Mailer>, MailError> {
    let smtp_url = smtp_url.filter(|url| !url.trim().is_empty());
    let mail_dir = mail_dir.filter(|dir| !dir.as_os_str().is_empty());
    Ok(match (smtp_url, mail_dir) {
        (Some(url), _) => Arc::new(SmtpMailer::from_url(url, from)?),
        (None, Some(dir)) => Arc::new(MailDirMailer::new(dir.to_path_buf(), from)?),
        (None, None) => Arc::new(LogMailer::new(from)?),
    })
}

/// Parses the `From` setting.
fn parse_from(from: &str) -> Result<Mailbox, MailError> {
    from.trim().parse::<Mailbox>().map_err(|error| {
        MailError(format!("the mail sender {from:?} is not a valid mailbox: {error}").into())
    })
}

/// How a message's body is put into the message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BodyForm {
    /// Whatever transfer encoding lettre finds best for the wire: `7bit` for ASCII with short
    /// lines, else `quoted-printable` or `base64`, which every mail client decodes.
    Transfer,
    /// As it is (`7bit` or `8bit`) whenever the text allows it, so that a `.eml` file can be
    /// read and searched as it stands: a link in it stays whole, not broken by soft line
    /// breaks and `=3D`. Falls back to [`BodyForm::Transfer`] when a line is longer than
    /// RFC 5322's 998 bytes.
    Verbatim,
}

/// The text with LF line ends only (CRLF and bare CR become LF) and without NUL, neither of
/// which an unencoded body may hold, nor lettre's `7bit` check looks for.
fn normalized_text(text: &str) -> String {
    text.replace("\r\n", "\n")
        .replace('\r', "\n")
        .replace('\0', "")
}

/// The (normalized) text as an unencoded body with CRLF line ends and its encoding; `None`
/// when a line is too long to go unencoded.
fn verbatim_body(text: &str) -> Option<Body> {
    /// RFC 5322, 2.1.1: at most 998 characters a line, CRLF excluded.
    const MAX_LINE: usize = 998;
    if text.split('\n').any(|line| line.len() > MAX_LINE) {
        return None;
    }
    let encoding = if text.is_ascii() {
        ContentTransferEncoding::SevenBit
    } else {
        ContentTransferEncoding::EightBit
    };
    Some(Body::dangerous_pre_encoded(
        text.replace('\n', "\r\n").into_bytes(),
        encoding,
    ))
}

/// The RFC 5322 message for a mail: MIME 1.0, `text/plain; charset=utf-8`, with `Date` and a
/// `Message-ID` of the form `<uuid@sender-domain>`. The body's line ends become CRLF.
fn build_message(from: &Mailbox, mail: &Mail, form: BodyForm) -> Result<Message, MailError> {
    let to = mail
        .to
        .as_ref()
        .parse::<Mailbox>()
        .map_err(|error| MailError(Box::new(error)))?;
    let message_id = format!("<{}@{}>", Uuid::new_v4(), from.email.domain());
    // A branded sender keeps the configured address: only the display name changes.
    let from = match &mail.sender_name {
        Some(name) => Mailbox::new(Some(name.clone()), from.email.clone()),
        None => from.clone(),
    };
    let mut builder = Message::builder();
    if let Some(reply_to) = &mail.reply_to {
        let reply_to = reply_to
            .as_ref()
            .parse::<Mailbox>()
            .map_err(|error| MailError(Box::new(error)))?;
        builder = builder.reply_to(reply_to);
    }
    let builder = builder
        .from(from)
        .to(to)
        .subject(mail.subject.as_str())
        .date_now()
        .message_id(Some(message_id))
        .header(MIME_VERSION_1_0)
        .header(ContentType::TEXT_PLAIN);
    let text = normalized_text(&mail.text);
    let verbatim = match form {
        BodyForm::Verbatim => verbatim_body(&text),
        BodyForm::Transfer => None,
    };
    match verbatim {
        Some(body) => builder.body(body),
        None => builder.body(text),
    }
    .map_err(|error| MailError(Box::new(error)))
}

/// Sends mail through an SMTP server (a relay such as Postfix, or a provider's submission
/// endpoint).
///
/// The server is given as a URL, `scheme://user:password@host:port/ehlo-name?tls=MODE`:
///
/// | URL | transport | default port |
/// | --- | --- | --- |
/// | `smtps://user:pass@host` | implicit TLS | 465 |
/// | `smtp://user:pass@host?tls=required` | STARTTLS, required | 587 |
/// | `smtp://host:25` | plain text, no TLS: only for a relay on the same host or in tests | 25 |
///
/// User name and password are percent-decoded. Certificates are checked against the Mozilla
/// root store (webpki roots), with rustls. Each mail opens its own connection (Gatehouse sends
/// few mails; nothing is kept open, and nothing needs a runtime until the first send).
#[derive(Clone)]
pub struct SmtpMailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    /// The URL with its password replaced, for `Debug` and logs.
    shown_url: String,
}

impl SmtpMailer {
    /// # Errors
    /// When the URL cannot be parsed, names no host, has an unknown scheme or `tls` mode, or
    /// when `from` is not a mailbox. Nothing is connected yet: the first send connects.
    pub fn from_url(url: &str, from: &str) -> Result<Self, MailError> {
        let from = parse_from(from)?;
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
            .map_err(|error| MailError(Box::new(error)))?
            .build();
        Ok(Self {
            transport,
            from,
            shown_url: without_password(url),
        })
    }
}

/// The URL with any password replaced by `REDACTED`.
fn without_password(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                // Only fails for URLs that cannot have credentials, which this one has.
                let _ = parsed.set_password(Some("REDACTED"));
            }
            parsed.into()
        }
        Err(_) => "(an invalid URL)".to_owned(),
    }
}

impl fmt::Debug for SmtpMailer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SmtpMailer")
            .field("url", &self.shown_url)
            .field("from", &self.from.to_string())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Mailer for SmtpMailer {
    async fn send(&self, mail: Mail) -> Result<(), MailError> {
        let message = build_message(&self.from, &mail, BodyForm::Transfer)?;
        self.transport
            .send(message)
            .await
            .map_err(|error| MailError(Box::new(error)))?;
        tracing::debug!(to_domain = mail.to.domain(), "mail sent over SMTP");
        Ok(())
    }
}

/// Writes each mail as one RFC 5322 `.eml` file into a directory (created when missing): for
/// development and tests, or for a local delivery agent that picks the files up.
///
/// The body is stored as it is (`7bit`, or `8bit` UTF-8, with CRLF line ends) unless a line is
/// longer than RFC 5322's 998 bytes, so that a file can be read and searched as it stands, its
/// links whole; a longer line makes it quoted-printable or base64, as over SMTP.
///
/// Files are named `<UTC timestamp>-<uuid>.eml`, so that they sort by time. Each is written
/// under a hidden temporary name (`.<name>.tmp`) and renamed once complete, so that a reader
/// that lists `*.eml` never sees half a message. On Unix the files are readable by their owner
/// only: they hold one-time links.
#[derive(Clone)]
pub struct MailDirMailer {
    dir: PathBuf,
    from: Mailbox,
}

impl MailDirMailer {
    /// # Errors
    /// When `from` is not a mailbox. The directory is created on the first send.
    pub fn new(dir: PathBuf, from: &str) -> Result<Self, MailError> {
        Ok(Self {
            dir,
            from: parse_from(from)?,
        })
    }

    /// The directory the mails go to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl fmt::Debug for MailDirMailer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MailDirMailer")
            .field("dir", &self.dir)
            .field("from", &self.from.to_string())
            .finish()
    }
}

/// Writes `bytes` to `dir/name` through a temporary file in the same directory.
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<PathBuf> {
    fs::create_dir_all(dir)?;
    let temp = dir.join(format!(".{name}.tmp"));
    let target = dir.join(name);
    let written = (|| {
        let mut options = fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temp, &target)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written.map(|()| target)
}

#[async_trait]
impl Mailer for MailDirMailer {
    async fn send(&self, mail: Mail) -> Result<(), MailError> {
        let bytes = build_message(&self.from, &mail, BodyForm::Verbatim)?.formatted();
        let stamp = OffsetDateTime::now_utc()
            .format(format_description!(
                "[year][month][day]T[hour][minute][second][subsecond digits:6]Z"
            ))
            .map_err(|error| MailError(Box::new(error)))?;
        let name = format!("{stamp}-{}.eml", Uuid::new_v4());
        let dir = self.dir.clone();
        let path = tokio::task::spawn_blocking(move || write_atomically(&dir, &name, &bytes))
            .await
            .map_err(|error| MailError(Box::new(error)))?
            .map_err(|error| {
                MailError(
                    format!("cannot write a mail into {}: {error}", self.dir.display()).into(),
                )
            })?;
        tracing::debug!(path = %path.display(), "mail written");
        Ok(())
    }
}

/// Writes each mail to the log (`tracing`, level INFO): recipient, subject and the whole body.
///
/// **For development only**, when neither SMTP nor a mail directory is configured. Invitation
/// mails carry one-time links, so anyone who can read the log can use them: that is intended
/// here, so that a developer can follow a link without a mail server, and it is why the
/// server warns at start when it falls back to this mailer.
#[derive(Clone)]
pub struct LogMailer {
    from: Mailbox,
}

impl LogMailer {
    /// # Errors
    /// When `from` is not a mailbox (checked here too, so that a bad setting shows in
    /// development rather than first in production).
    pub fn new(from: &str) -> Result<Self, MailError> {
        Ok(Self {
            from: parse_from(from)?,
        })
    }
}

impl fmt::Debug for LogMailer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogMailer")
            .field("from", &self.from.to_string())
            .finish()
    }
}

#[async_trait]
impl Mailer for LogMailer {
    async fn send(&self, mail: Mail) -> Result<(), MailError> {
        tracing::info!(
            from = %self.from,
            to = %mail.to,
            subject = %mail.subject,
            body = %mail.text,
            "mail not sent (no SMTP server or mail directory configured); logged instead"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use base64::Engine as _;
    use gatehouse_domain::model::Email;

    use super::*;

    const FROM: &str = "Gatehouse <no-reply@gatehouse.test>";

    fn mail(subject: &str, text: &str) -> Mail {
        Mail::new(
            Email::parse("zoe@example.com").unwrap(),
            subject.to_owned(),
            text.to_owned(),
        )
    }

    /// The error of a mailer that could not be made (one that was made has no `Debug`, so no
    /// `unwrap_err`).
    fn refused<T>(made: Result<T, MailError>) -> MailError {
        made.err().expect("the mailer was made")
    }

    /// How the error of a sender that is no mailbox begins (the parser's reason follows).
    fn not_a_mailbox(from: &str) -> String {
        format!("the mail sender {from:?} is not a valid mailbox: ")
    }

    /// The error lettre gave for an SMTP URL it cannot use (a connection error, in its
    /// words), as it reads.
    fn lettre_url_error(error: &MailError) -> String {
        let cause = error
            .0
            .downcast_ref::<lettre::transport::smtp::Error>()
            .expect("lettre refused the URL");
        let text = cause.to_string();
        assert!(text.starts_with("Connection error: "), "{text}");
        text
    }

    /// The `.eml` files in a directory, oldest first.
    fn eml_files(dir: &Path) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "eml"))
            .collect();
        files.sort();
        files
    }

    /// Splits a raw message into its unfolded header lines and its body.
    fn split(raw: &str) -> (Vec<String>, String) {
        let (head, body) = raw
            .split_once("\r\n\r\n")
            .expect("no blank line after the headers");
        let mut headers: Vec<String> = Vec::new();
        for line in head.split("\r\n") {
            match headers.last_mut() {
                Some(last) if line.starts_with([' ', '\t']) => last.push_str(line),
                _ => headers.push(line.to_owned()),
            }
        }
        (headers, body.to_owned())
    }

    fn header<'a>(headers: &'a [String], name: &str) -> Option<&'a str> {
        headers.iter().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }

    /// Loosely decodes RFC 2047 encoded words (`=?charset?B|Q?...?=`, UTF-8 only).
    fn decode_words(value: &str) -> String {
        let mut bytes = Vec::new();
        let mut rest = value;
        let mut after_word = false;
        while let Some(start) = rest.find("=?") {
            // White space between two encoded words is not part of the text.
            let before = &rest[..start];
            if !after_word || !before.trim().is_empty() {
                bytes.extend_from_slice(before.as_bytes());
            }
            after_word = true;
            let word = &rest[start + 2..];
            let end = word.find("?=").expect("an unterminated encoded word");
            let mut parts = word[..end].splitn(3, '?');
            let (charset, encoding, text) = (
                parts.next().unwrap(),
                parts.next().unwrap(),
                parts.next().unwrap(),
            );
            assert!(charset.eq_ignore_ascii_case("utf-8"), "{charset}");
            if encoding.eq_ignore_ascii_case("b") {
                bytes.extend(
                    base64::engine::general_purpose::STANDARD
                        .decode(text)
                        .unwrap(),
                );
            } else {
                bytes.extend(decode_quoted_printable(&text.replace('_', " ")));
            }
            rest = &word[end + 2..];
        }
        bytes.extend_from_slice(rest.as_bytes());
        String::from_utf8(bytes).unwrap()
    }

    fn decode_quoted_printable(text: &str) -> Vec<u8> {
        let text = text.replace("=\r\n", "");
        let mut out = Vec::new();
        let mut bytes = text.bytes();
        while let Some(byte) = bytes.next() {
            if byte == b'=' {
                let hex = [bytes.next().unwrap(), bytes.next().unwrap()];
                out.push(u8::from_str_radix(std::str::from_utf8(&hex).unwrap(), 16).unwrap());
            } else {
                out.push(byte);
            }
        }
        out
    }

    /// The body, decoded by its `Content-Transfer-Encoding`.
    fn decode_body(headers: &[String], body: &str) -> String {
        let encoding = header(headers, "Content-Transfer-Encoding").unwrap_or("7bit");
        match encoding.to_ascii_lowercase().as_str() {
            "quoted-printable" => String::from_utf8(decode_quoted_printable(body)).unwrap(),
            "base64" => String::from_utf8(
                base64::engine::general_purpose::STANDARD
                    .decode(body.replace("\r\n", ""))
                    .unwrap(),
            )
            .unwrap(),
            _ => body.to_owned(),
        }
    }

    #[tokio::test]
    async fn the_mail_dir_gets_one_complete_message_per_mail() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("not").join("there").join("yet");
        let mailer = MailDirMailer::new(dir.clone(), FROM).unwrap();
        // Longer than a 76-character line: it must still be whole in the file.
        let link = "https://gatehouse.test/invitations/accept?token=ghi_0123456789abcdef0123456789abcdef0123456789abcdef";
        let text = format!("Hello,\n\nfollow {link}\n");

        mailer.send(mail("Your invitation", &text)).await.unwrap();

        let files = eml_files(&dir);
        assert_eq!(files.len(), 1, "{files:?}");
        let name = files[0].file_name().unwrap().to_str().unwrap();
        let (stamp, uuid) = name.trim_end_matches(".eml").split_once('-').unwrap();
        assert_eq!(stamp.len(), "20250101T000000000000Z".len(), "{name}");
        Uuid::parse_str(uuid).unwrap();
        // Nothing but the message is left behind.
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 1);

        let raw = fs::read_to_string(&files[0]).unwrap();
        let (headers, body) = split(&raw);
        assert_eq!(header(&headers, "To"), Some("zoe@example.com"));
        assert_eq!(
            header(&headers, "From"),
            Some("Gatehouse <no-reply@gatehouse.test>")
        );
        assert_eq!(header(&headers, "Subject"), Some("Your invitation"));
        assert_eq!(header(&headers, "MIME-Version"), Some("1.0"));
        assert_eq!(
            header(&headers, "Content-Type").map(str::to_ascii_lowercase),
            Some("text/plain; charset=utf-8".to_owned())
        );
        assert_eq!(header(&headers, "Content-Transfer-Encoding"), Some("7bit"));
        assert!(header(&headers, "Date").is_some(), "{raw}");
        let message_id = header(&headers, "Message-ID").unwrap();
        assert!(
            message_id.starts_with('<') && message_id.ends_with("@gatehouse.test>"),
            "{message_id}"
        );
        assert!(raw.contains(&format!("\r\nfollow {link}\r\n")), "{raw}");
        assert_eq!(body, text.replace('\n', "\r\n"));
    }

    #[tokio::test]
    async fn utf8_subjects_and_bodies_round_trip() {
        let temp = tempfile::tempdir().unwrap();
        let mailer = MailDirMailer::new(temp.path().to_path_buf(), FROM).unwrap();
        let text = "Hallo Zoë,\n\ndu wurdest zu „Straße & Söhne“ eingeladen. 🎉\n";

        mailer.send(mail("Einladung für Zoë", text)).await.unwrap();

        let files = eml_files(temp.path());
        let raw = fs::read_to_string(&files[0]).unwrap();
        let (headers, body) = split(&raw);
        assert!(
            headers.iter().all(|line| line.is_ascii()),
            "headers are encoded words: {raw}"
        );
        assert_eq!(
            decode_words(header(&headers, "Subject").unwrap()),
            "Einladung für Zoë"
        );
        assert_eq!(header(&headers, "Content-Transfer-Encoding"), Some("8bit"));
        assert_eq!(body, text.replace('\n', "\r\n"));
    }

    #[tokio::test]
    async fn overlong_lines_are_encoded() {
        let temp = tempfile::tempdir().unwrap();
        let mailer = MailDirMailer::new(temp.path().to_path_buf(), FROM).unwrap();
        let text = format!("Zoë {}\nshort\n", "x".repeat(1200));

        mailer.send(mail("encoded", &text)).await.unwrap();

        let raw = fs::read_to_string(&eml_files(temp.path())[0]).unwrap();
        assert!(raw.is_ascii(), "{raw}");
        assert!(raw.split("\r\n").all(|line| line.len() <= 998), "{raw}");
        let (headers, body) = split(&raw);
        let encoding = header(&headers, "Content-Transfer-Encoding").unwrap();
        assert!(
            ["quoted-printable", "base64"].contains(&encoding),
            "{encoding}"
        );
        assert_eq!(decode_body(&headers, &body), text.replace('\n', "\r\n"));
    }

    #[tokio::test]
    async fn line_ends_become_crlf_and_nul_goes() {
        let temp = tempfile::tempdir().unwrap();
        let mailer = MailDirMailer::new(temp.path().to_path_buf(), FROM).unwrap();
        mailer
            .send(mail("line ends", "a\r\nb\rc\nd\0e\n"))
            .await
            .unwrap();
        let raw = fs::read_to_string(&eml_files(temp.path())[0]).unwrap();
        assert!(raw.ends_with("\r\n\r\na\r\nb\r\nc\r\nde\r\n"), "{raw:?}");
    }

    #[tokio::test]
    async fn each_mail_is_its_own_file() {
        let temp = tempfile::tempdir().unwrap();
        let mailer = MailDirMailer::new(temp.path().to_path_buf(), FROM).unwrap();
        for n in 0..3 {
            mailer
                .send(mail(&format!("mail {n}"), "text"))
                .await
                .unwrap();
        }
        let subjects: Vec<String> = eml_files(temp.path())
            .iter()
            .map(|path| {
                let (headers, _) = split(&fs::read_to_string(path).unwrap());
                header(&headers, "Subject").unwrap().to_owned()
            })
            .collect();
        assert_eq!(subjects, ["mail 0", "mail 1", "mail 2"]);
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn mail_files_are_private_to_their_owner() {
        use std::os::unix::fs::PermissionsExt as _;

        let temp = tempfile::tempdir().unwrap();
        let mailer = MailDirMailer::new(temp.path().to_path_buf(), FROM).unwrap();
        mailer.send(mail("secret link", "text")).await.unwrap();
        let mode = fs::metadata(&eml_files(temp.path())[0])
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[tokio::test]
    async fn an_unwritable_mail_dir_fails_the_send() {
        let temp = tempfile::tempdir().unwrap();
        let file = temp.path().join("a-file");
        fs::write(&file, "not a directory").unwrap();
        let mailer = MailDirMailer::new(file, FROM).unwrap();
        let error = mailer.send(mail("lost", "text")).await.unwrap_err();
        let cause = std::error::Error::source(&error).unwrap().to_string();
        assert!(cause.contains("cannot write a mail"), "{cause}");
    }

    #[test]
    fn the_default_sender_and_bare_addresses_are_mailboxes() {
        for from in [
            "Gatehouse <no-reply@localhost>",
            "no-reply@example.com",
            "\"Gatehouse, Inc.\" <no-reply@example.com>",
        ] {
            LogMailer::new(from).unwrap();
        }
        for from in ["", "Gatehouse", "Gatehouse <>", "a@b@c"] {
            let why = refused(LogMailer::new(from)).0.to_string();
            assert!(why.starts_with(&not_a_mailbox(from)), "{from:?}: {why}");
        }
    }

    #[test]
    fn smtp_urls_are_checked_up_front() {
        SmtpMailer::from_url("smtp://127.0.0.1:2525", FROM).unwrap();
        SmtpMailer::from_url("smtps://user:pass@smtp.example.com", FROM).unwrap();
        SmtpMailer::from_url("smtp://user:pass@smtp.example.com:587?tls=required", FROM).unwrap();
        for (url, why) in [
            ("not a url", "relative URL without a base"),
            ("http://smtp.example.com", "Unknown scheme 'http'"),
            (
                "smtp://smtp.example.com?tls=sometimes",
                "tls parameter 'Some(\"sometimes\")'",
            ),
        ] {
            let error = SmtpMailer::from_url(url, FROM).unwrap_err();
            let refused = lettre_url_error(&error);
            assert!(refused.contains(why), "{url}: {refused}");
        }
    }

    #[test]
    fn debug_never_shows_the_smtp_password() {
        let url = "smtp://mailer%40example.com:hunter2@smtp.example.com:587?tls=required";
        let mailer = SmtpMailer::from_url(url, FROM).unwrap();
        let shown = format!("{mailer:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("smtp.example.com:587"), "{shown}");
        assert!(shown.contains("REDACTED"), "{shown}");

        let picked = mailer_from_settings(Some(url), None, FROM).unwrap();
        // The trait object has no Debug, but the error path must not leak either.
        drop(picked);
        let error = SmtpMailer::from_url("smtp://user:hunter2@", FROM).unwrap_err();
        let mut chain = error.to_string();
        let mut source = std::error::Error::source(&error);
        while let Some(cause) = source {
            chain.push_str(&cause.to_string());
            source = cause.source();
        }
        assert!(!chain.contains("hunter2"), "{chain}");
    }

    #[tokio::test]
    async fn settings_pick_smtp_then_the_mail_dir_then_the_log() {
        let temp = tempfile::tempdir().unwrap();

        // A mail directory alone: mails land there.
        let mailer = mailer_from_settings(None, Some(temp.path()), FROM).unwrap();
        mailer.send(mail("to the dir", "text")).await.unwrap();
        assert_eq!(eml_files(temp.path()).len(), 1);

        // SMTP wins over the directory (a bad URL proves it was the one used).
        let error = refused(mailer_from_settings(Some("bogus"), Some(temp.path()), FROM));
        assert!(lettre_url_error(&error).contains("relative URL without a base"));

        // Empty settings are unset: the log mailer, which accepts anything.
        let mailer = mailer_from_settings(Some(" "), Some(Path::new("")), FROM).unwrap();
        mailer.send(mail("to the log", "text")).await.unwrap();
        assert_eq!(eml_files(temp.path()).len(), 1);

        // A bad sender is refused whichever mailer is picked.
        for dir in [None, Some(temp.path())] {
            let why = refused(mailer_from_settings(None, dir, "nobody"))
                .0
                .to_string();
            assert!(why.starts_with(&not_a_mailbox("nobody")), "{dir:?}: {why}");
        }
    }
}
