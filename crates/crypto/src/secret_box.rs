use std::fmt;

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom as _, SystemRandom};

const VERSION: u8 = 1;
const TAG_LEN: usize = 16;

#[derive(Debug, thiserror::Error)]
pub enum SecretBoxError {
    /// Too short, or of a format version this build does not know.
    #[error("the sealed data is malformed")]
    Malformed,
    /// Tampered with, sealed under another key, or with other associated data.
    #[error("the sealed data could not be opened")]
    Open,
    #[error("sealing failed")]
    Seal,
    #[error("the system random number generator failed")]
    Random,
}

/// Authenticated encryption of small secrets at rest (AES-256-GCM under the server's secret
/// key). Sealed data is `version (1) || nonce (12) || ciphertext || tag (16)`, with a random
/// nonce per seal; the associated data binds it to its context (a row's id, say).
#[derive(Clone)]
pub struct SecretBox {
    key: [u8; 32],
    random: SystemRandom,
}

impl SecretBox {
    /// A new random key, from the operating system's CSPRNG.
    pub fn generate_key() -> Result<[u8; 32], SecretBoxError> {
        let mut key = [0u8; 32];
        SystemRandom::new()
            .fill(&mut key)
            .map_err(|_| SecretBoxError::Random)?;
        Ok(key)
    }

    /// A box sealing under `key`.
    pub fn new(key: [u8; 32]) -> Self {
        Self {
            key,
            random: SystemRandom::new(),
        }
    }

    fn cipher(&self) -> Result<LessSafeKey, ()> {
        UnboundKey::new(&AES_256_GCM, &self.key)
            .map(LessSafeKey::new)
            .map_err(|_| ())
    }

    pub fn seal(&self, plaintext: &[u8], aad: &[u8]) -> Result<Vec<u8>, SecretBoxError> {
        let cipher = self.cipher().map_err(|()| SecretBoxError::Seal)?;
        let mut nonce = [0u8; NONCE_LEN];
        self.random
            .fill(&mut nonce)
            .map_err(|_| SecretBoxError::Random)?;
        let mut sealed = Vec::with_capacity(1 + NONCE_LEN + plaintext.len() + TAG_LEN);
        sealed.push(VERSION);
        sealed.extend_from_slice(&nonce);
        let mut in_out = plaintext.to_vec();
        cipher
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut in_out,
            )
            .map_err(|_| SecretBoxError::Seal)?;
        sealed.extend_from_slice(&in_out);
        Ok(sealed)
    }

    pub fn open(&self, sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>, SecretBoxError> {
        let Some((&VERSION, rest)) = sealed.split_first() else {
            return Err(SecretBoxError::Malformed);
        };
        if rest.len() < NONCE_LEN + TAG_LEN {
            return Err(SecretBoxError::Malformed);
        }
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        let nonce =
            Nonce::try_assume_unique_for_key(nonce).map_err(|_| SecretBoxError::Malformed)?;
        let cipher = self.cipher().map_err(|()| SecretBoxError::Open)?;
        let mut in_out = ciphertext.to_vec();
        let plaintext = cipher
            .open_in_place(nonce, Aad::from(aad), &mut in_out)
            .map_err(|_| SecretBoxError::Open)?;
        Ok(plaintext.to_vec())
    }
}

impl fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretBox(<redacted>)")
    }
}

impl gatehouse_domain::ports::SecretCipher for SecretBox {
    fn seal(
        &self,
        plaintext: &[u8],
        context: &[u8],
    ) -> Result<Vec<u8>, gatehouse_domain::ports::CipherError> {
        SecretBox::seal(self, plaintext, context)
            .map_err(|e| gatehouse_domain::ports::CipherError(Box::new(e)))
    }

    fn open(
        &self,
        sealed: &[u8],
        context: &[u8],
    ) -> Result<Vec<u8>, gatehouse_domain::ports::CipherError> {
        SecretBox::open(self, sealed, context)
            .map_err(|e| gatehouse_domain::ports::CipherError(Box::new(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealer() -> SecretBox {
        SecretBox::new([7u8; 32])
    }

    #[test]
    fn seal_then_open() {
        let b = sealer();
        let sealed = b.seal(b"attack at dawn", b"row-1").unwrap();
        assert_eq!(sealed[0], 1);
        assert_eq!(sealed.len(), 1 + 12 + 14 + 16);
        assert_eq!(b.open(&sealed, b"row-1").unwrap(), b"attack at dawn");
        // A fresh nonce every time.
        assert_ne!(sealed, b.seal(b"attack at dawn", b"row-1").unwrap());
        // Empty plaintexts work too.
        let empty = b.seal(b"", b"").unwrap();
        assert!(b.open(&empty, b"").unwrap().is_empty());
    }

    #[test]
    fn tampering_is_detected() {
        let b = sealer();
        let sealed = b.seal(b"attack at dawn", b"row-1").unwrap();
        for i in 1..sealed.len() {
            let mut tampered = sealed.clone();
            tampered[i] ^= 0x01;
            assert!(matches!(
                b.open(&tampered, b"row-1"),
                Err(SecretBoxError::Open)
            ));
        }
        let mut other_version = sealed.clone();
        other_version[0] = 2;
        assert!(matches!(
            b.open(&other_version, b"row-1"),
            Err(SecretBoxError::Malformed)
        ));
        assert!(matches!(
            b.open(&sealed[..20], b"row-1"),
            Err(SecretBoxError::Malformed)
        ));
        assert!(matches!(
            b.open(&[], b"row-1"),
            Err(SecretBoxError::Malformed)
        ));
    }

    #[test]
    fn wrong_aad_or_key_fails() {
        let b = sealer();
        let sealed = b.seal(b"attack at dawn", b"row-1").unwrap();
        assert!(matches!(
            b.open(&sealed, b"row-2"),
            Err(SecretBoxError::Open)
        ));
        assert!(matches!(
            SecretBox::new([8u8; 32]).open(&sealed, b"row-1"),
            Err(SecretBoxError::Open)
        ));
    }

    #[test]
    fn debug_hides_the_key() {
        let b = SecretBox::new([0xAB; 32]);
        let debug = format!("{b:?}");
        assert!(!debug.contains("171") && !debug.to_lowercase().contains("ab, "));
    }
}
