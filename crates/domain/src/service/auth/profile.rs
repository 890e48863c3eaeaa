//! The caller's profile: reading it, and changing it (`PATCH /users/me`).

use super::AuthService;
use crate::{
    model::{AuditAction, FullName, Origin, TargetKind, User},
    ports::StoreError,
    service::{audit, payloads, user_event, Principal},
};

/// Why a profile change failed.
#[derive(Debug, thiserror::Error)]
pub enum UpdateProfileError {
    /// The account was deleted meanwhile.
    #[error("the user no longer exists")]
    UserGone,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The fields of `PATCH /users/me`; `None` leaves a field as it is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProfileChange {
    /// A new full name; `None` keeps it.
    pub full_name: Option<FullName>,
}

impl AuthService {
    /// The caller's profile.
    pub async fn me(&self, principal: &Principal) -> Result<Option<User>, StoreError> {
        Ok(self
            .ports
            .accounts
            .credentials_by_id(principal.user_id())
            .await?
            .map(|c| c.user))
    }

    /// Changes the caller's profile and records `user.updated` (only when something changed).
    pub async fn update_me(
        &self,
        principal: &Principal,
        change: ProfileChange,
        origin: &Origin,
    ) -> Result<User, UpdateProfileError> {
        let mut user = self
            .me(principal)
            .await?
            .ok_or(UpdateProfileError::UserGone)?;
        let mut changed = Vec::new();
        if let Some(full_name) = change.full_name {
            if full_name != user.full_name {
                user.full_name = full_name;
                changed.push("full_name");
            }
        }
        if changed.is_empty() {
            return Ok(user);
        }
        let now = self.ports.clock.now();
        user.updated_at = now;
        let updated = user_event(
            self.ports.random.as_ref(),
            now,
            user.id,
            payloads::UserUpdated {
                user: payloads::user(&user),
                changed: &changed,
            },
        );
        if !self
            .ports
            .accounts
            .update_user(
                user.clone(),
                updated,
                audit(
                    self.ports.random.as_ref(),
                    now,
                    principal.audit_actor(),
                    AuditAction::ProfileUpdated,
                    origin,
                )
                .on(TargetKind::User, user.id),
            )
            .await?
        {
            return Err(UpdateProfileError::UserGone);
        }
        Ok(user)
    }
}
