//! Gatehouse's webhook signatures, checked as a receiver must.

use std::{fmt, time::Duration};

use time::OffsetDateTime;

use crate::WebhookError;

/// The header that carries the delivery's Unix time in seconds.
pub const TIMESTAMP_HEADER: &str = "X-Service-Timestamp";

/// The header that carries the signature: `sha256=` and the hex HMAC-SHA256 of
/// `"{timestamp}.{body}"`, keyed with the endpoint's secret.
pub const SIGNATURE_HEADER: &str = "X-Service-Signature";

/// How far a delivery's timestamp may be from the receiver's clock, either way.
pub const TIMESTAMP_TOLERANCE: Duration = Duration::from_secs(300);

/// Checks the deliveries of one webhook endpoint: its signature (in constant time, with the
/// format of [`gatehouse_types::signature()`]) and a timestamp within five minutes, so
/// that a captured delivery cannot be replayed later. `Debug` does not print the secret.
#[derive(Clone)]
pub struct WebhookVerifier {
    secret: Vec<u8>,
    tolerance: Duration,
}

impl fmt::Debug for WebhookVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WebhookVerifier")
            .field("secret", &"<redacted>")
            .field("tolerance", &self.tolerance)
            .finish()
    }
}

impl WebhookVerifier {
    /// A verifier for the endpoint with this signing secret (`whsec_...`, shown when the
    /// endpoint was created).
    pub fn new(secret: impl Into<Vec<u8>>) -> Self {
        Self {
            secret: secret.into(),
            tolerance: TIMESTAMP_TOLERANCE,
        }
    }

    /// Verifies a delivery now: the two headers' values (`None` when absent) and the raw body,
    /// byte for byte as received.
    pub fn verify(
        &self,
        timestamp: Option<&str>,
        signature: Option<&str>,
        body: &[u8],
    ) -> Result<(), WebhookError> {
        self.verify_at(OffsetDateTime::now_utc(), timestamp, signature, body)
    }

    /// [`WebhookVerifier::verify`] as of `now`.
    pub fn verify_at(
        &self,
        now: OffsetDateTime,
        timestamp: Option<&str>,
        signature: Option<&str>,
        body: &[u8],
    ) -> Result<(), WebhookError> {
        let timestamp = timestamp.ok_or(WebhookError::Missing(TIMESTAMP_HEADER))?;
        let signature = signature.ok_or(WebhookError::Missing(SIGNATURE_HEADER))?;
        let seconds: i64 = timestamp
            .trim()
            .parse()
            .map_err(|_| WebhookError::Timestamp)?;
        let skew = now.unix_timestamp().abs_diff(seconds);
        if skew > self.tolerance.as_secs() {
            return Err(WebhookError::Stale);
        }
        if gatehouse_types::signature_matches(&self.secret, seconds, body, signature.trim()) {
            Ok(())
        } else {
            Err(WebhookError::Signature)
        }
    }

    /// Verifies an actix-web request's delivery, with its raw body.
    #[cfg(feature = "actix")]
    pub fn verify_request(
        &self,
        request: &actix_web::HttpRequest,
        body: &[u8],
    ) -> Result<(), WebhookError> {
        let header = |name| {
            request
                .headers()
                .get(name)
                .and_then(|value| value.to_str().ok())
        };
        self.verify(header(TIMESTAMP_HEADER), header(SIGNATURE_HEADER), body)
    }
}

#[cfg(test)]
mod tests {
    use gatehouse_types::signature;

    use super::*;

    const SECRET: &[u8] = b"whsec_test";
    const AT: i64 = 1_700_000_000;

    fn now(offset: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(AT + offset).unwrap()
    }

    fn check(at: OffsetDateTime, secret: &[u8], body: &[u8]) -> Result<(), WebhookError> {
        let signed = signature(SECRET, AT, b"{\"event\":1}");
        WebhookVerifier::new(secret).verify_at(at, Some(&AT.to_string()), Some(&signed), body)
    }

    #[test]
    fn a_signed_delivery_is_accepted_within_five_minutes_either_way() {
        for offset in [0, 300, -300] {
            assert_eq!(check(now(offset), SECRET, b"{\"event\":1}"), Ok(()));
        }
    }

    #[test]
    fn a_tampered_body_or_another_secret_is_refused() {
        assert_eq!(
            check(now(0), SECRET, b"{\"event\":2}"),
            Err(WebhookError::Signature)
        );
        assert_eq!(
            check(now(0), b"whsec_other", b"{\"event\":1}"),
            Err(WebhookError::Signature)
        );
    }

    #[test]
    fn a_stale_or_future_timestamp_is_refused() {
        for offset in [301, -301, 86_400] {
            assert_eq!(
                check(now(offset), SECRET, b"{\"event\":1}"),
                Err(WebhookError::Stale)
            );
        }
    }

    #[test]
    fn missing_or_garbled_headers_are_refused() {
        let verifier = WebhookVerifier::new(SECRET);
        let signed = signature(SECRET, AT, b"{}");
        assert_eq!(
            verifier.verify_at(now(0), None, Some(&signed), b"{}"),
            Err(WebhookError::Missing(TIMESTAMP_HEADER))
        );
        assert_eq!(
            verifier.verify_at(now(0), Some("1700000000"), None, b"{}"),
            Err(WebhookError::Missing(SIGNATURE_HEADER))
        );
        assert_eq!(
            verifier.verify_at(now(0), Some("yesterday"), Some(&signed), b"{}"),
            Err(WebhookError::Timestamp)
        );
        for garbled in ["", "sha256=", "sha256=xyz", "md5=00", &signed[7..]] {
            assert_eq!(
                verifier.verify_at(now(0), Some("1700000000"), Some(garbled), b"{}"),
                Err(WebhookError::Signature),
                "{garbled}"
            );
        }
    }

    #[test]
    fn debug_does_not_print_the_secret() {
        let printed = format!("{:?}", WebhookVerifier::new(SECRET));
        assert!(!printed.contains("whsec_test"), "{printed}");
    }
}
