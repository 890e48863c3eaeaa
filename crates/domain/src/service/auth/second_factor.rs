//! The second step of a sign-in (a user with a confirmed second factor), and who is signed in
//! on the hosted pages (the browser's session).

use time::OffsetDateTime;

use super::{AuthService, LoginError};
use crate::{
    model::{
        Amr, AuditAction, MfaFactor, MfaLogin, MfaMethod, Origin, SecretToken, SessionId,
        TokenHash, TokenKind, UserId, MFA_TOKEN_TTL,
    },
    ports::{StoreError, WebauthnError},
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

    /// Starts the second step of a sign-in: a fresh `mfa_token`, and, when the user has
    /// security keys, the WebAuthn ceremony for them.
    pub(crate) async fn second_step(
        &self,
        user_id: UserId,
        factors: &[MfaFactor],
        first_factor: Amr,
        now: OffsetDateTime,
        origin: &Origin,
    ) -> Result<SecondFactorNeeded, LoginError> {
        let mut methods: Vec<MfaMethod> = Vec::new();
        for factor in factors {
            if !methods.contains(&factor.kind) {
                methods.push(factor.kind);
            }
        }
        let ceremony = if methods.contains(&MfaMethod::Webauthn) {
            let keys: Vec<_> = self
                .ports
                .mfa
                .webauthn_factors(user_id)
                .await?
                .into_iter()
                .filter(|key| key.factor.confirmed_at.is_some())
                .map(|key| key.passkey)
                .collect();
            match self.ports.webauthn.start_authentication(&keys) {
                Ok(ceremony) => Some(ceremony),
                // Keys registered before the public URL changed: codes still work.
                Err(error @ WebauthnError::Unavailable(_)) => {
                    tracing::warn!(%error, "a user's security keys cannot be offered");
                    None
                }
                Err(error) => return Err(LoginError::Internal(Box::new(error))),
            }
        } else {
            None
        };
        let token = self.ports.random.secret(TokenKind::MfaToken);
        let (options, state) = match ceremony {
            Some(ceremony) => (Some(ceremony.options), Some(ceremony.state)),
            None => (None, None),
        };
        self.ports
            .mfa
            .create_mfa_login(
                token.hash(),
                MfaLogin {
                    user_id,
                    first_factor,
                    created_at: now,
                    expires_at: now + MFA_TOKEN_TTL,
                    failures: 0,
                    webauthn_state: state,
                },
                self.sign_in_record(user_id, AuditAction::MfaRequired, origin, now),
            )
            .await?;
        Ok(SecondFactorNeeded {
            mfa_token: token,
            methods,
            webauthn_options: options,
        })
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
