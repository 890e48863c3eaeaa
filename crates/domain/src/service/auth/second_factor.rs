//! What the second step of a sign-in needs (a user's confirmed second factors, the
//! `mfa_token` it is named by) and who is signed in on the hosted pages (the browser's
//! session). The step itself starts in [`sign_in`](super::sign_in).

use super::AuthService;
use crate::{
    model::{MfaFactor, MfaMethod, SecretToken, TokenHash, UserId},
    ports::StoreError,
    service::BrowserSession,
};

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

debug_showing!(SecondFactorNeeded { methods });

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
