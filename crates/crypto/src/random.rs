use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use gatehouse_domain::model::{SecretToken, TokenKind};
use gatehouse_domain::ports::Random;
use rand::rngs::OsRng;
use rand::{Rng as _, RngCore as _};
use uuid::Uuid;

/// Ids and secrets from the operating system's CSPRNG.
#[derive(Clone, Copy, Debug, Default)]
pub struct OsRandom;

impl Random for OsRandom {
    fn uuid(&self) -> Uuid {
        Uuid::now_v7()
    }

    fn recovery_code(&self) -> SecretToken {
        const ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";
        let mut code = String::with_capacity(11);
        for i in 0..10 {
            if i == 5 {
                code.push('-');
            }
            let index = OsRng.gen_range(0..ALPHABET.len());
            code.push(char::from(ALPHABET[index]));
        }
        SecretToken::new(code)
    }

    fn secret(&self, kind: TokenKind) -> SecretToken {
        let mut bytes = [0u8; 32];
        OsRng.fill_bytes(&mut bytes);
        let mut value = String::with_capacity(kind.prefix().len() + 43);
        value.push_str(kind.prefix());
        URL_SAFE_NO_PAD.encode_string(bytes, &mut value);
        SecretToken::new(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_prefixed_256_bit_and_distinct() {
        let a = OsRandom.secret(TokenKind::ApiKey);
        let b = OsRandom.secret(TokenKind::ApiKey);
        assert_ne!(a, b);
        let body = a.expose().strip_prefix("ghk_").unwrap();
        assert_eq!(URL_SAFE_NO_PAD.decode(body).unwrap().len(), 32);
        assert!(OsRandom
            .secret(TokenKind::WebhookSecret)
            .expose()
            .starts_with("whsec_"));
    }

    #[test]
    fn recovery_codes_are_ten_unambiguous_characters() {
        let code = OsRandom.recovery_code();
        let code = code.expose();
        assert_eq!(code.len(), 11);
        assert_eq!(&code[5..6], "-");
        assert!(code
            .chars()
            .filter(|c| *c != '-')
            .all(|c| "abcdefghjkmnpqrstuvwxyz23456789".contains(c)));
        assert_ne!(OsRandom.recovery_code(), OsRandom.recovery_code());
    }

    #[test]
    fn uuids_are_v7() {
        assert_eq!(OsRandom.uuid().get_version_num(), 7);
        assert_ne!(OsRandom.uuid(), OsRandom.uuid());
    }
}
