//! The server's secret key (`GATEHOUSE_SECRET_KEY`): it seals private signing keys (and, later,
//! webhook signing secrets) at rest. Every replica on one PostgreSQL needs the same key, so
//! PostgreSQL requires it; the embedded SQLite default generates one on first start into a
//! `0600` file beside the database.

use std::{
    fs::OpenOptions,
    io::{ErrorKind, Write},
    os::unix::fs::OpenOptionsExt,
    path::PathBuf,
};

use base64::{
    engine::general_purpose::{STANDARD, URL_SAFE},
    Engine,
};
use gatehouse_crypto::{SecretBox, SecretBoxError};
use gatehouse_store::Backend;

use crate::config::{Config, SecretKeySetting};

/// 32 bytes of key material; never printed.
pub struct SecretKey([u8; 32]);

impl SecretKey {
    /// The AES-256-GCM box that seals secrets at rest under this key.
    pub fn secret_box(&self) -> SecretBox {
        SecretBox::new(self.0)
    }
}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SecretKeyError {
    #[error(
        "GATEHOUSE_SECRET_KEY is required with PostgreSQL (every replica needs the same one): \
         set it to 32 random bytes in base64, for example the output of `openssl rand -base64 32`"
    )]
    Required,
    #[error("GATEHOUSE_SECRET_KEY must be 32 bytes encoded in base64")]
    Malformed,
    #[error("the key file {path} must hold 32 bytes encoded in base64")]
    MalformedFile { path: PathBuf },
    #[error("cannot generate a secret key: {0}")]
    Random(#[source] SecretBoxError),
    #[error("cannot read or write the key file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

fn decode(text: &str) -> Option<[u8; 32]> {
    let text = text.trim();
    let bytes = STANDARD
        .decode(text)
        .or_else(|_| URL_SAFE.decode(text))
        .ok()?;
    bytes.try_into().ok()
}

/// The key file used with SQLite: `gatehouse.db` -> `gatehouse.db.key`.
pub fn key_file_for(database_url: &str) -> PathBuf {
    let path = database_url
        .strip_prefix("sqlite://")
        .unwrap_or(database_url);
    PathBuf::from(format!("{path}.key"))
}

/// The configured key, or with SQLite the key file's (created on first start).
pub fn resolve(config: &Config) -> Result<SecretKey, SecretKeyError> {
    if let Some(SecretKeySetting(text)) = &config.secret_key {
        return decode(text).map(SecretKey).ok_or(SecretKeyError::Malformed);
    }
    if gatehouse_store::backend_of(&config.database_url).ok() != Some(Backend::Sqlite) {
        return Err(SecretKeyError::Required);
    }
    let path = key_file_for(&config.database_url);
    let io = |source| SecretKeyError::Io {
        path: path.clone(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io)?;
    }
    let key = SecretBox::generate_key().map_err(SecretKeyError::Random)?;
    match OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
    {
        Ok(mut file) => {
            file.write_all(STANDARD.encode(key).as_bytes())
                .and_then(|()| file.sync_all())
                .map_err(io)?;
            tracing::info!(path = %path.display(), "generated a new secret key");
            Ok(SecretKey(key))
        }
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            let text = std::fs::read_to_string(&path).map_err(io)?;
            decode(&text)
                .map(SecretKey)
                .ok_or(SecretKeyError::MalformedFile { path })
        }
        Err(e) => Err(io(e)),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn config(database_url: String, secret: Option<&str>) -> Config {
        Config::load_from(None, |name| match name {
            "GATEHOUSE_DATABASE_URL" => Some(database_url.clone()),
            "GATEHOUSE_SECRET_KEY" => secret.map(str::to_owned),
            _ => None,
        })
        .unwrap()
    }

    #[test]
    fn sqlite_generates_a_private_key_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}/g.db", dir.path().display());
        let first = resolve(&config(url.clone(), None)).unwrap();
        let second = resolve(&config(url.clone(), None)).unwrap();
        assert_eq!(first.0, second.0);
        let mode = std::fs::metadata(key_file_for(&url))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn postgres_requires_a_configured_key() {
        let url = "postgres://localhost/gatehouse".to_owned();
        assert!(matches!(
            resolve(&config(url.clone(), None)),
            Err(SecretKeyError::Required)
        ));
        assert!(matches!(
            resolve(&config(url.clone(), Some("dG9vIHNob3J0"))),
            Err(SecretKeyError::Malformed)
        ));
        let key = STANDARD.encode([7u8; 32]);
        assert_eq!(resolve(&config(url, Some(&key))).unwrap().0, [7u8; 32]);
    }
}
