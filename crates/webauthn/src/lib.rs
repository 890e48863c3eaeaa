//! Gatehouse's WebAuthn adapter: the [`Webauthn`] port over
//! [webauthn-rs](https://docs.rs/webauthn-rs) 0.6 (kanidm's; RustCrypto underneath, no OpenSSL).
//!
//! [`WebauthnRs`] registers and checks **security keys and passkeys as a second factor**, with
//! webauthn-rs's `SecurityKey` ceremonies: user verification *preferred* (a PIN or a fingerprint
//! when the authenticator has one, not required), no attestation asked for or checked, no
//! discoverable (resident) credential asked for, ES256, ES384 and RS256 keys. webauthn-rs then
//! refuses, at sign-in, an assertion without user verification from a credential that was
//! registered *with* it. Two things differ from webauthn-rs's own options, in what the browser
//! is sent only (neither is part of what webauthn-rs checks):
//!
//! - no `hints: ["security-key"]`: with that hint Chromium offers security keys alone; without
//!   it the browser also offers the device's own passkeys (Touch ID, Windows Hello, a phone);
//! - no `credProtect` extension (`credentialProtectionPolicy: "userVerificationRequired"`):
//!   Chromium refuses it unless user verification is *required*, failing `create()` with
//!   `NotSupportedError: Requested protection policy is inconsistent or incongruent with other
//!   requested parameters` (webauthn-rs issue #490, open in 0.6.2).
//!
//! # The relying party
//!
//! [`WebauthnRs::for_public_url`] takes the service's public URL: its host is the relying-party
//! id (`rp.id`), `scheme://host[:port]` the one origin allowed (the port must match exactly),
//! "Gatehouse" the name shown. `https://` is required except on `localhost` (and `*.localhost`),
//! which browsers treat as a secure context over plain `http://`, on any port:
//! `http://localhost:8080` works as it is, since webauthn-rs compares the origin the browser
//! signed with the configured one and needs nothing else for `http` or a port. A host that is an
//! IP address (`http://127.0.0.1:8080`: browsers refuse an IP address as an RP id), plain
//! `http://` on another host (browsers offer WebAuthn to secure contexts only) or a URL that
//! does not parse leaves WebAuthn unavailable: the constructor still succeeds (the rest of the
//! service runs), every ceremony answers [`WebauthnError::Unavailable`] saying that WebAuthn
//! needs a public URL whose host is a domain name, and [`WebauthnRs::configuration_error`] says so at
//! start-up.
//!
//! # What is exchanged
//!
//! [`Ceremony::options`] is webauthn-rs's `CreationChallengeResponse` or
//! `RequestChallengeResponse` as JSON: `{"publicKey": {...}}` with every binary field
//! (`challenge`, `user.id`, `excludeCredentials[].id`, `allowCredentials[].id`) in unpadded
//! base64url: the WebAuthn Level 3 JSON form that `PublicKeyCredential.parseCreationOptionsFromJSON`
//! and `parseRequestOptionsFromJSON` read. Registration options look like
//!
//! ```json
//! {"publicKey": {
//!   "rp": {"name": "Gatehouse", "id": "example.com"},
//!   "user": {"id": "<base64url of the user's UUID>", "name": "ada@example.com", "displayName": "Ada Lovelace"},
//!   "challenge": "<base64url, 32 bytes>",
//!   "pubKeyCredParams": [{"type": "public-key", "alg": -7}, {"type": "public-key", "alg": -35},
//!                        {"type": "public-key", "alg": -257}],
//!   "timeout": 300000,
//!   "excludeCredentials": [{"type": "public-key", "id": "<base64url>"}],
//!   "authenticatorSelection": {"requireResidentKey": false, "residentKey": "discouraged", "userVerification": "preferred"},
//!   "attestation": "none",
//!   "extensions": {"credProps": true, "uvm": true}
//! }}
//! ```
//!
//! (`excludeCredentials` only when the user has credentials already; the keys come in
//! alphabetical order), and authentication options (an `allowCredentials` entry may carry the
//! `transports` the authenticator named when it registered)
//!
//! ```json
//! {"publicKey": {
//!   "challenge": "<base64url, 32 bytes>",
//!   "timeout": 300000,
//!   "rpId": "example.com",
//!   "allowCredentials": [{"type": "public-key", "id": "<base64url>"}],
//!   "userVerification": "preferred"
//! }}
//! ```
//!
//! What comes back is the browser's `credential.toJSON()`, as is (`RegistrationResponseJSON`
//! and `AuthenticationResponseJSON`). Chromium 156 writes, for a security key (members
//! webauthn-rs does not read, such as `authenticatorAttachment` or a registration's
//! `response.publicKey`, `publicKeyAlgorithm` and `authenticatorData`, are ignored; unknown
//! members are too):
//!
//! ```json
//! {"id": "<base64url>", "rawId": "<base64url>", "type": "public-key",
//!  "authenticatorAttachment": "cross-platform",
//!  "response": {"clientDataJSON": "<base64url>", "attestationObject": "<base64url>",
//!               "authenticatorData": "<base64url>", "publicKey": "<base64url SPKI>",
//!               "publicKeyAlgorithm": -7, "transports": ["usb"]},
//!  "clientExtensionResults": {"credProps": {"rk": false}}}
//!
//! {"id": "<base64url>", "rawId": "<base64url>", "type": "public-key",
//!  "authenticatorAttachment": "cross-platform",
//!  "response": {"clientDataJSON": "<base64url>", "authenticatorData": "<base64url>",
//!               "signature": "<base64url>"},
//!  "clientExtensionResults": {}}
//! ```
//!
//! (`response.userHandle`, base64url, when the authenticator returns one: a discoverable
//! credential.) Required: `rawId`, `type`, `response.clientDataJSON` and, for a registration,
//! `response.attestationObject`, for an authentication `response.authenticatorData` and
//! `response.signature`, all unpadded base64url; `id` must be a string. The credential id that
//! counts is `rawId` (and, for a registration, the one inside the attestation).
//! `tests/data/chromium_virtual_authenticator.json` holds one ceremony of each, recorded from
//! Chromium's virtual authenticator with the script below, and `tests/chromium_answers.rs`
//! replays them.
//!
//! # The hosted page's script
//!
//! Options in (the `options` of the ceremony, as the server sent them), JSON out (what to post
//! back as the `credential`):
//!
//! ```js
//! // Needs the WebAuthn Level 3 JSON methods (Chromium 129+, Firefox 119+); elsewhere, decode the
//! // base64url members into ArrayBuffers and encode the answer's by hand.
//!
//! // Registration
//! async function registerSecurityKey(options) {
//!   const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(options.publicKey);
//!   const credential = await navigator.credentials.create({ publicKey });
//!   return credential.toJSON();
//! }
//!
//! // Authentication (the second step of a sign-in)
//! async function useSecurityKey(options) {
//!   const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(options.publicKey);
//!   const credential = await navigator.credentials.get({ publicKey });
//!   return credential.toJSON();
//! }
//! ```
//!
//! `create` and `get` reject (with a `DOMException`: `NotAllowedError` when the user cancels or
//! the time runs out, `InvalidStateError` when the authenticator holds an excluded credential,
//! `SecurityError` when the page's host is not the RP id or the page is not a secure context);
//! the page shows that and posts nothing. (A page on the right host but another port or scheme
//! gets an answer, which the server refuses: the origin is checked there.)
//!
//! # Replays and counters
//!
//! The state a ceremony keeps is its challenge and expectations; webauthn-rs keeps no record of
//! its own, nor any time limit: **the caller must use a state once and drop it after the
//! `timeout` the options name** ([`CEREMONY_TIMEOUT`]). Besides what webauthn-rs checks against
//! the state (challenge, origin, RP id, signature, flags, and the counter the credential had when
//! the ceremony started), [`WebauthnRs::finish_authentication`] checks the assertion's signature
//! counter against the credential *as stored now* (the `passkeys` given): an answer replayed
//! after the counter moved is refused even with a state that was not dropped. A credential
//! whose authenticator keeps no counter (0, many synchronised passkeys) cannot be checked this
//! way; its replays are the challenge's to stop.
//!
//! # Failures
//!
//! An answer that does not verify, or that is not the JSON above, is [`WebauthnError::Refused`]
//! with webauthn-rs's or serde's reason; a state or stored credential this adapter cannot read
//! is [`WebauthnError::Failed`]. webauthn-rs runs inside `catch_unwind`: should it panic on
//! hostile input, the answer is [`WebauthnError::Failed`] and the worker serves on.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use gatehouse_domain::ports::{Ceremony, StoredPasskey, Webauthn, WebauthnError, WebauthnUser};
use serde_json::Value;
use url::{Host, Url};
use webauthn_rs::prelude::{
    Credential, CredentialID, PublicKeyCredential, RegisterPublicKeyCredential, SecurityKey,
    SecurityKeyAuthentication, SecurityKeyRegistration,
};
use webauthn_rs::{Webauthn as WebauthnCore, WebauthnBuilder, DEFAULT_AUTHENTICATOR_TIMEOUT};

/// The relying party's name when none is given: what an authenticator may show.
pub const DEFAULT_RP_NAME: &str = "Gatehouse";

/// How long the browser is given to answer a ceremony (the options' `timeout`, webauthn-rs's
/// default: five minutes). A kept state should be dropped once this has passed.
pub const CEREMONY_TIMEOUT: Duration = DEFAULT_AUTHENTICATOR_TIMEOUT;

/// The [`Webauthn`] port over webauthn-rs, for the relying party a public URL names.
pub struct WebauthnRs {
    relying_party: Result<RelyingParty, Unconfigured>,
}

struct RelyingParty {
    id: String,
    origin: Url,
    webauthn: WebauthnCore,
}

/// Why WebAuthn is unavailable: the public URL cannot be a relying party.
#[derive(Clone, Debug, thiserror::Error)]
#[error("WebAuthn needs a public URL whose host is a domain name (localhost included): {0}")]
struct Unconfigured(String);

/// Internal trouble, carried as [`WebauthnError::Failed`]'s source.
#[derive(Debug, thiserror::Error)]
enum Trouble {
    #[error("the ceremony's kept state cannot be read")]
    State(#[source] serde_json::Error),
    #[error("a stored credential cannot be read: {0}")]
    StoredPasskey(String),
    #[error("the ceremony's options or state cannot be written")]
    Options(#[source] serde_json::Error),
    #[error("webauthn-rs could not start the ceremony")]
    Start(#[source] webauthn_rs::prelude::WebauthnError),
    #[error("no credential to authenticate with")]
    NoPasskey,
    #[error("webauthn-rs panicked while checking an answer")]
    Panicked,
}

fn failed(trouble: impl std::error::Error + Send + Sync + 'static) -> WebauthnError {
    WebauthnError::Failed(Box::new(trouble))
}

impl WebauthnRs {
    /// The relying party of `public_url` (its host and origin), named [`DEFAULT_RP_NAME`].
    /// Never fails: see the crate docs for what happens when the URL cannot be one.
    pub fn for_public_url(public_url: &str) -> Self {
        Self::named(public_url, DEFAULT_RP_NAME)
    }

    /// The relying party of `public_url`, named `rp_name` (shown by some authenticators; it
    /// can change without harming registered credentials, unlike the host).
    pub fn named(public_url: &str, rp_name: &str) -> Self {
        Self {
            relying_party: RelyingParty::new(public_url, rp_name),
        }
    }

    /// Why WebAuthn is unavailable with this public URL, if it is: for a warning at start-up.
    pub fn configuration_error(&self) -> Option<String> {
        self.relying_party.as_ref().err().map(ToString::to_string)
    }

    /// The relying-party id (the public URL's host), when WebAuthn is available.
    pub fn rp_id(&self) -> Option<&str> {
        self.relying_party.as_ref().ok().map(|rp| rp.id.as_str())
    }

    fn relying_party(&self) -> Result<&RelyingParty, WebauthnError> {
        self.relying_party
            .as_ref()
            .map_err(|unconfigured| WebauthnError::Unavailable(unconfigured.to_string()))
    }
}

impl fmt::Debug for WebauthnRs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.relying_party {
            Ok(rp) => f
                .debug_struct("WebauthnRs")
                .field("rp_id", &rp.id)
                .field("origin", &rp.origin.as_str())
                .finish(),
            Err(unconfigured) => f
                .debug_struct("WebauthnRs")
                .field("unavailable", &unconfigured.0)
                .finish(),
        }
    }
}

impl RelyingParty {
    fn new(public_url: &str, rp_name: &str) -> Result<Self, Unconfigured> {
        let url = Url::parse(public_url)
            .map_err(|e| Unconfigured(format!("`{public_url}` is not a URL ({e})")))?;
        let id = match url.host() {
            Some(Host::Domain(domain)) => domain.trim_end_matches('.').to_owned(),
            Some(Host::Ipv4(_) | Host::Ipv6(_)) => {
                return Err(Unconfigured(format!(
                "`{public_url}` names an IP address, which browsers refuse as a relying-party id"
            )))
            }
            None => return Err(Unconfigured(format!("`{public_url}` has no host"))),
        };
        if id.is_empty() {
            return Err(Unconfigured(format!("`{public_url}` has no host")));
        }
        let local = id == "localhost" || id.ends_with(".localhost");
        match url.scheme() {
            "https" => {}
            "http" if local => {}
            scheme => {
                return Err(Unconfigured(format!(
                    "`{public_url}` is `{scheme}`: browsers offer WebAuthn to https:// pages \
                     only, and to http://localhost"
                )))
            }
        }
        // `scheme://host[:port]`: the origin a browser signs, without path or query.
        let origin = Url::parse(&url.origin().ascii_serialization())
            .map_err(|e| Unconfigured(format!("`{public_url}` has no origin ({e})")))?;
        let webauthn = WebauthnBuilder::new(&id, &origin)
            .and_then(|builder| builder.rp_name(rp_name).build())
            .map_err(|e| Unconfigured(format!("webauthn-rs refused `{public_url}` ({e})")))?;
        Ok(Self {
            id,
            origin,
            webauthn,
        })
    }
}

/// A stored credential, read back (webauthn-rs's own serialisation of a `SecurityKey`).
fn read_passkey(stored: &StoredPasskey) -> Result<SecurityKey, WebauthnError> {
    serde_json::from_str(&stored.passkey).map_err(|e| {
        failed(Trouble::StoredPasskey(format!(
            "credential {}: {e}",
            stored.credential_id
        )))
    })
}

fn store_passkey(key: &SecurityKey) -> Result<StoredPasskey, WebauthnError> {
    let passkey = serde_json::to_string(key)
        .map_err(|e| failed(Trouble::StoredPasskey(format!("cannot be written: {e}"))))?;
    Ok(StoredPasskey {
        credential_id: URL_SAFE_NO_PAD.encode(key.cred_id()),
        passkey,
    })
}

fn read_state<T: serde::de::DeserializeOwned>(state: &str) -> Result<T, WebauthnError> {
    serde_json::from_str(state).map_err(|e| failed(Trouble::State(e)))
}

fn write_ceremony<O: serde::Serialize, S: serde::Serialize>(
    options: &O,
    state: &S,
) -> Result<Ceremony, WebauthnError> {
    Ok(Ceremony {
        options: serde_json::to_value(options).map_err(|e| failed(Trouble::Options(e)))?,
        state: serde_json::to_string(state).map_err(|e| failed(Trouble::Options(e)))?,
    })
}

/// The browser's answer, as webauthn-rs reads it; anything else is refused.
fn read_answer<T: serde::de::DeserializeOwned>(credential: &Value) -> Result<T, WebauthnError> {
    T::deserialize(credential)
        .map_err(|e| WebauthnError::Refused(format!("not a WebAuthn credential as JSON: {e}")))
}

/// Runs a check of hostile input: a panic in it is [`Trouble::Panicked`], not a dead worker.
fn guarded<T>(check: impl FnOnce() -> Result<T, WebauthnError>) -> Result<T, WebauthnError> {
    catch_unwind(AssertUnwindSafe(check)).unwrap_or_else(|_| Err(failed(Trouble::Panicked)))
}

fn refused(e: webauthn_rs::prelude::WebauthnError) -> WebauthnError {
    WebauthnError::Refused(e.to_string())
}

impl Webauthn for WebauthnRs {
    fn start_registration(
        &self,
        user: &WebauthnUser,
        existing: &[StoredPasskey],
    ) -> Result<Ceremony, WebauthnError> {
        let rp = self.relying_party()?;
        let exclude = existing
            .iter()
            .map(|stored| {
                URL_SAFE_NO_PAD
                    .decode(stored.credential_id.trim_end_matches('='))
                    .map_err(|e| {
                        failed(Trouble::StoredPasskey(format!(
                            "credential id {:?} is not base64url: {e}",
                            stored.credential_id
                        )))
                    })
            })
            .collect::<Result<Vec<CredentialID>, _>>()?;
        let (mut options, state) = rp
            .webauthn
            .start_securitykey_registration(
                user.id.as_uuid(),
                &user.email,
                &user.display_name,
                (!exclude.is_empty()).then_some(exclude),
                None,
                None,
            )
            .map_err(|e| failed(Trouble::Start(e)))?;
        // Let the browser offer the device's own passkeys too, not security keys alone.
        options.public_key.hints = None;
        // Chromium refuses `credProtect: userVerificationRequired` unless user verification is
        // required (kanidm/webauthn-rs#490); it is webauthn-rs's request, not a check: drop it.
        if let Some(extensions) = options.public_key.extensions.as_mut() {
            extensions.cred_protect = None;
        }
        write_ceremony(&options, &state)
    }

    fn finish_registration(
        &self,
        credential: &Value,
        state: &str,
    ) -> Result<StoredPasskey, WebauthnError> {
        let rp = self.relying_party()?;
        let state: SecurityKeyRegistration = read_state(state)?;
        let answer: RegisterPublicKeyCredential = read_answer(credential)?;
        let key = guarded(|| {
            rp.webauthn
                .finish_securitykey_registration(&answer, &state)
                .map_err(refused)
        })?;
        store_passkey(&key)
    }

    fn start_authentication(&self, passkeys: &[StoredPasskey]) -> Result<Ceremony, WebauthnError> {
        let rp = self.relying_party()?;
        if passkeys.is_empty() {
            return Err(failed(Trouble::NoPasskey));
        }
        let keys = passkeys
            .iter()
            .map(read_passkey)
            .collect::<Result<Vec<_>, _>>()?;
        let (mut options, state) = rp
            .webauthn
            .start_securitykey_authentication(&keys)
            .map_err(|e| failed(Trouble::Start(e)))?;
        options.public_key.hints = None;
        write_ceremony(&options, &state)
    }

    fn finish_authentication(
        &self,
        credential: &Value,
        state: &str,
        passkeys: &[StoredPasskey],
    ) -> Result<StoredPasskey, WebauthnError> {
        let rp = self.relying_party()?;
        let state: SecurityKeyAuthentication = read_state(state)?;
        let keys = passkeys
            .iter()
            .map(read_passkey)
            .collect::<Result<Vec<_>, _>>()?;
        let answer: PublicKeyCredential = read_answer(credential)?;
        let Some(mut key) = keys
            .into_iter()
            .find(|key| key.cred_id().as_slice() == answer.raw_id.as_slice())
        else {
            return Err(WebauthnError::Refused(
                "the credential used is not one of the user's".to_owned(),
            ));
        };
        let result = guarded(|| {
            rp.webauthn
                .finish_securitykey_authentication(&answer, &state)
                .map_err(refused)
        })?;
        // webauthn-rs compared the counter with the credential as it was when the ceremony
        // started; compare it with the credential as stored now (WebAuthn §7.2, step 22).
        let stored_counter = Credential::from(key.clone()).counter;
        if (result.counter() > 0 || stored_counter > 0) && result.counter() <= stored_counter {
            return Err(WebauthnError::Refused(format!(
                "the signature counter did not move past the stored one ({} <= {stored_counter}): \
                 a replayed answer or a cloned authenticator",
                result.counter()
            )));
        }
        match key.update_credential(&result) {
            Some(_) => store_passkey(&key),
            None => Err(WebauthnError::Refused(
                "the credential used is not one of the user's".to_owned(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_relying_party_is_the_public_urls_host_and_origin() {
        let rp = WebauthnRs::for_public_url("https://id.example.com/gatehouse/?x=1");
        assert_eq!(rp.rp_id(), Some("id.example.com"));
        assert_eq!(
            format!("{rp:?}"),
            r#"WebauthnRs { rp_id: "id.example.com", origin: "https://id.example.com/" }"#
        );
        let local = WebauthnRs::for_public_url("http://localhost:34567");
        assert_eq!(local.rp_id(), Some("localhost"));
        assert!(local.configuration_error().is_none());
        let sub = WebauthnRs::for_public_url("http://gatehouse.localhost:8080");
        assert_eq!(sub.rp_id(), Some("gatehouse.localhost"));
    }

    #[test]
    fn urls_that_cannot_be_a_relying_party_leave_webauthn_unavailable() {
        for url in [
            "http://127.0.0.1:8080",
            "https://[::1]:8443",
            "https://10.0.0.1",
            "not a url",
            "",
            "http://example.com",
            "ftp://example.com",
            "mailto:ada@example.com",
        ] {
            let rp = WebauthnRs::for_public_url(url);
            let error = rp.configuration_error();
            assert!(
                error.as_deref().is_some_and(|e| e.starts_with(
                    "WebAuthn needs a public URL whose host is a domain name (localhost included)"
                )),
                "{url}: {error:?}"
            );
            assert_eq!(rp.rp_id(), None);
        }
    }
}
