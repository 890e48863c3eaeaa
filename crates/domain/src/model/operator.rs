//! The operator: whoever holds `GATEHOUSE_CONTROL_TOKEN`, and nobody else.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The control plane's token, as configured. Only its SHA-256 is kept, and a presented token is
/// compared with it in constant time: neither the comparison's time nor its length says how
/// much of a guess was right.
#[derive(Clone)]
pub struct OperatorToken {
    digest: [u8; 32],
}

/// The configured token is empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("GATEHOUSE_CONTROL_TOKEN must not be empty (unset it to turn the control plane off)")]
pub struct EmptyOperatorToken;

impl OperatorToken {
    /// The token operators present; refused when empty (or only spaces).
    pub fn new(raw: &str) -> Result<Self, EmptyOperatorToken> {
        if raw.trim().is_empty() {
            return Err(EmptyOperatorToken);
        }
        Ok(Self {
            digest: Sha256::digest(raw.as_bytes()).into(),
        })
    }

    /// The operator, if `presented` is the token.
    pub fn admit(&self, presented: &str) -> Option<Operator> {
        let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
        bool::from(self.digest.ct_eq(&digest)).then_some(Operator { _proof: () })
    }
}

impl std::fmt::Debug for OperatorToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OperatorToken(<redacted>)")
    }
}

/// Proof that the caller presented the operator token: only [`OperatorToken::admit`] makes one,
/// and every control-plane use case asks for it.
#[derive(Debug)]
pub struct Operator {
    _proof: (),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_token_itself_admits() {
        let token = OperatorToken::new("s3cret-operator-token").unwrap();
        assert!(token.admit("s3cret-operator-token").is_some());
        for wrong in [
            "",
            "s3cret-operator-toke",
            "s3cret-operator-token ",
            "S3CRET-OPERATOR-TOKEN",
        ] {
            assert!(token.admit(wrong).is_none(), "{wrong:?}");
        }
    }

    #[test]
    fn an_empty_token_is_refused_and_a_token_never_prints() {
        assert_eq!(OperatorToken::new("  ").unwrap_err(), EmptyOperatorToken);
        let token = OperatorToken::new("s3cret-operator-token").unwrap();
        assert!(!format!("{token:?}").contains("s3cret"));
    }
}
