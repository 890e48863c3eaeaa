//! Time-based one-time passwords (RFC 6238) over the `totp-rs` crate: SHA-1, six digits,
//! 30-second steps, as every authenticator app computes them.

use gatehouse_domain::{
    model::{TotpCode, TotpSecret},
    ports::Totp,
};
use rand::{rngs::OsRng, RngCore};
use time::OffsetDateTime;
use totp_rs::{Algorithm, Secret, TOTP};

/// The length of a step, in seconds.
const STEP: u64 = 30;
/// The secret's length: 160 bits, RFC 4226's recommendation.
const SECRET_BYTES: usize = 20;

/// The [`Totp`] port over `totp-rs`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RfcTotp;

impl RfcTotp {
    fn totp(secret: &TotpSecret, issuer: Option<&str>, account: &str) -> TOTP {
        // `new_unchecked`: the issuer and account only name the entry in the app; a `:` in
        // them (which `new` refuses) is percent-encoded in the URI.
        TOTP::new_unchecked(
            Algorithm::SHA1,
            6,
            0,
            STEP,
            secret.expose().to_vec(),
            issuer.map(str::to_owned),
            account.to_owned(),
        )
    }
}

impl Totp for RfcTotp {
    fn generate(&self) -> TotpSecret {
        let mut bytes = vec![0u8; SECRET_BYTES];
        OsRng.fill_bytes(&mut bytes);
        TotpSecret::from_bytes(bytes)
    }

    fn base32(&self, secret: &TotpSecret) -> String {
        match Secret::Raw(secret.expose().to_vec()).to_encoded() {
            Secret::Encoded(encoded) => encoded,
            Secret::Raw(_) => String::new(),
        }
    }

    fn provisioning_uri(&self, secret: &TotpSecret, issuer: &str, account: &str) -> String {
        Self::totp(secret, Some(issuer), account).get_url()
    }

    fn matching_step(
        &self,
        secret: &TotpSecret,
        code: &TotpCode,
        at: OffsetDateTime,
    ) -> Option<u64> {
        let now = u64::try_from(at.unix_timestamp()).ok()?;
        let current = now / STEP;
        let totp = Self::totp(secret, None, "");
        // One step of skew each way; `check` with no skew compares in constant time.
        [
            current.checked_sub(1),
            Some(current),
            current.checked_add(1),
        ]
        .into_iter()
        .flatten()
        .find(|step| totp.check(code.as_str(), step * STEP))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// RFC 6238 Appendix B's SHA-1 key, "12345678901234567890".
    fn rfc_secret() -> TotpSecret {
        TotpSecret::from_bytes(b"12345678901234567890".to_vec())
    }

    fn at(unix: i64) -> OffsetDateTime {
        OffsetDateTime::from_unix_timestamp(unix).unwrap()
    }

    #[test]
    fn the_rfc_6238_test_vectors_match_their_step() {
        // Appendix B, SHA-1, the last six digits of each eight-digit value.
        for (time, code) in [
            (59, "287082"),
            (1_111_111_109, "081804"),
            (2_000_000_000, "279037"),
        ] {
            let code = TotpCode::parse(code).unwrap();
            let step = RfcTotp.matching_step(&rfc_secret(), &code, at(time));
            assert_eq!(step, Some(time as u64 / 30), "{time}");
        }
    }

    #[test]
    fn one_step_of_skew_each_way_and_no_more() {
        let code = TotpCode::parse("081804").unwrap(); // step 37037036
        let secret = rfc_secret();
        assert_eq!(
            RfcTotp.matching_step(&secret, &code, at(1_111_111_109 + 30)),
            Some(37_037_036)
        );
        assert_eq!(
            RfcTotp.matching_step(&secret, &code, at(1_111_111_109 - 30)),
            Some(37_037_036)
        );
        assert_eq!(
            RfcTotp.matching_step(&secret, &code, at(1_111_111_109 + 60)),
            None
        );
        assert_eq!(
            RfcTotp.matching_step(&secret, &code, at(1_111_111_109 - 60)),
            None
        );
    }

    #[test]
    fn secrets_are_random_160_bit_and_shown_as_base32_in_the_uri() {
        let secret = RfcTotp.generate();
        assert_eq!(secret.expose().len(), 20);
        assert_ne!(secret, RfcTotp.generate());
        let base32 = RfcTotp.base32(&secret);
        assert_eq!(base32.len(), 32);
        let uri = RfcTotp.provisioning_uri(&secret, "Gatehouse", "ada@example.com");
        assert!(
            uri.starts_with("otpauth://totp/Gatehouse:ada%40example.com?"),
            "{uri}"
        );
        assert!(uri.contains(&format!("secret={base32}")) && uri.contains("issuer=Gatehouse"));
        assert!(!format!("{secret:?}").contains(&base32));
    }
}
