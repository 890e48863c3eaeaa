//! What the second step of a sign-in needs (a user's confirmed second factors, the
//! `mfa_token` it is named by) and who is signed in on the hosted pages (the browser's
//! session). The step itself starts in [`sign_in`](super::sign_in).

use time::OffsetDateTime;

use super::AuthService;
use crate::{
    model::{Amr, MfaFactor, MfaMethod, SecretToken, SessionId, TokenHash, UserId},
    ports::StoreError,
    service::Principal,
};

/// Who is signed in on the hosted pages, by their session cookie.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrowserSession {
    /// The signed-in user.
    pub user_id: UserId,
    /// The session the cookie holds the refresh token of.
    pub session_id: SessionId,
    /// How the user signed in; an application's code, and the session it opens, say the same.
    pub amr: Amr,
    /// When the user signed in (the session opened): an ID token's `auth_time`.
    pub authenticated_at: OffsetDateTime,
}

impl BrowserSession {
    /// The user as a caller of the use cases (signing out, for one).
    pub fn principal(&self) -> Principal {
        Principal::User {
            user_id: self.user_id,
            session_id: self.session_id,
            amr: self.amr.clone(),
            application: None,
        }
    }
}

/// The second step a sign-in waits for.
#[derive(Clone, PartialEq)]
pub struct SecondFactorNeeded {
    /// The token that names this sign-in at the second step (`ghm_…`): five minutes, five
    /// wrong factors, one use. Shown once, stored as its SHA-256.
    pub mfa_token: SecretToken,
    /// The kinds of the user's confirmed factors (recovery codes always work too).
    pub methods: Vec<MfaMethod>,
    /// The WebAuthn request options for the user's keys, when they have any.
    pub webauthn_options: Option<serde_json::Value>,
}

impl std::fmt::Debug for SecondFactorNeeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecondFactorNeeded")
            .field("methods", &self.methods)
            .finish_non_exhaustive()
    }
}

impl AuthService {
    /// The user's confirmed second factors.
    pub(crate) async fn confirmed_factors(
        &self,
        user_id: UserId,
    ) -> Result<Vec<MfaFactor>, StoreError> {
        let mut factors = self.ports.mfa.mfa_factors(user_id).await?;
        factors.retain(|factor| factor.confirmed_at.is_some());
        Ok(factors)
    }

    /// Who is signed in on the hosted pages: the user of the live session whose refresh token
    /// the browser's session cookie holds (a sign-in on the pages, not a session an
    /// application was granted).
    pub async fn signed_in(
        &self,
        session_token: &str,
    ) -> Result<Option<BrowserSession>, StoreError> {
        let now = self.ports.clock.now();
        Ok(self
            .ports
            .sessions
            .session_by_refresh_token(&TokenHash::of(session_token), now)
            .await?
            .filter(|session| session.grant.is_none())
            .map(|session| BrowserSession {
                user_id: session.user_id,
                session_id: session.id,
                amr: session.amr,
                authenticated_at: session.created_at,
            }))
    }
}
