use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use gatehouse_domain::model::{SecretToken, TokenKind};
use gatehouse_domain::ports::Random;
use rand::rngs::OsRng;
use rand::RngCore as _;
use uuid::Uuid;

/// Ids and secrets from the operating system's CSPRNG.
#[derive(Clone, Copy, Debug, Default)]
pub struct OsRandom;

impl Random for OsRandom {
    fn uuid(&self) -> Uuid {
        Uuid::now_v7()
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
    fn uuids_are_v7() {
        assert_eq!(OsRandom.uuid().get_version_num(), 7);
        assert_ne!(OsRandom.uuid(), OsRandom.uuid());
    }
}
