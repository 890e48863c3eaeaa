//! Passwords: a new one judged against the policies, changing one (signed in, or renewing an
//! expired one by email and password), and storing it with its history.

use crate::service::payloads;

use super::{AuthService, CheckError, LockedOut};
use crate::{
    model::{
        password_user_inputs, AccountKey, AuditAction, AuditActor, Email, NewPassword, Origin,
        PasswordCandidate, PasswordError, PasswordPolicy, SessionId, TargetKind, UserCredentials,
        UserId,
    },
    ports::{BoxError, JudgeError, StoreError},
    service::{audit, user_event, Principal},
};

/// Who changes a password, for its audit record, and the session that stays open.
pub(crate) struct Changer<'a> {
    /// The actor of the record.
    pub actor: AuditActor,
    /// Where the request came from.
    pub origin: &'a Origin,
    /// The session that stays open (the caller's own), if any.
    pub keep: Option<SessionId>,
}

/// Why a typed password did not become a [`NewPassword`]: it breaks a rule, or the judge
/// failed. Each use case turns it into its own error.
#[derive(Debug)]
pub(crate) enum PasswordRefused {
    /// A rule of the policy, or too easy to guess.
    Weak(PasswordError),
    /// The judge could not say.
    Failed(JudgeError),
}

/// Why a password change failed.
#[derive(Debug, thiserror::Error)]
pub enum ChangePasswordError {
    /// The current password given is wrong.
    #[error("current password is incorrect")]
    WrongPassword,
    /// Renewing by email and password: the pair does not match.
    #[error("invalid email or password")]
    InvalidCredentials,
    /// Too many failed sign-ins: the account is locked for a while.
    #[error(transparent)]
    LockedOut(LockedOut),
    /// The new password breaks a rule of the policies that apply, or is a common one.
    #[error("new password {0}")]
    WeakPassword(#[source] PasswordError),
    /// The new password is the current one.
    #[error("new password must differ from the current one")]
    Unchanged,
    /// The new password is one of the last `n` the policies ask to remember.
    #[error("new password must differ from your last {0} passwords")]
    Reused(u32),
    /// The account was deleted meanwhile.
    #[error("the user no longer exists")]
    UserGone,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Hashing failed.
    #[error("password change failed")]
    Internal(#[source] BoxError),
}

from_refusals!(ChangePasswordError: PasswordRefused, CheckError);

impl AuthService {
    /// `raw` as a new password: `policy`'s length and composition rules first (cheap), then
    /// the judge's score with `user_inputs` (what the person is known by).
    pub(crate) async fn new_password(
        &self,
        raw: &str,
        policy: &PasswordPolicy,
        user_inputs: &[String],
    ) -> Result<NewPassword, PasswordRefused> {
        let candidate = PasswordCandidate::parse(raw, policy).map_err(PasswordRefused::Weak)?;
        let strength = self
            .ports
            .judge
            .strength(&candidate, user_inputs)
            .await
            .map_err(PasswordRefused::Failed)?;
        candidate.judged(strength).map_err(PasswordRefused::Weak)
    }

    /// Changes the caller's password after checking the current one; every other session of
    /// the user ends.
    pub async fn change_password(
        &self,
        principal: &Principal,
        current_password: String,
        new_password: &str,
        origin: &Origin,
    ) -> Result<(), ChangePasswordError> {
        let credentials = self
            .ports
            .accounts
            .credentials_by_id(principal.user_id())
            .await?
            .ok_or(ChangePasswordError::UserGone)?;
        // Through an API key no session is current: every session ends.
        let changed_by = Changer {
            actor: principal.audit_actor(),
            origin,
            keep: principal.session_id(),
        };
        self.set_password(credentials, current_password, new_password, changed_by)
            .await
    }

    /// Sets a new password for someone who cannot get a token because theirs has expired:
    /// authenticated by email and current password, it ends every session of the user.
    pub async fn renew_password(
        &self,
        email: &str,
        current_password: String,
        new_password: &str,
        origin: &Origin,
    ) -> Result<(), ChangePasswordError> {
        let credentials = match Email::parse(email) {
            Ok(email) => self.ports.accounts.credentials_by_email(&email).await?,
            Err(_) => None,
        };
        let Some(credentials) = credentials else {
            // The same work and counting as a wrong password: nothing reveals the account.
            self.check_password(&AccountKey::for_email(email), current_password, None, true)
                .await?;
            return Err(ChangePasswordError::InvalidCredentials);
        };
        let changed_by = Changer {
            actor: AuditActor::User(credentials.user.id),
            origin,
            keep: None,
        };
        match self
            .set_password(credentials, current_password, new_password, changed_by)
            .await
        {
            Err(ChangePasswordError::WrongPassword) => Err(ChangePasswordError::InvalidCredentials),
            other => other,
        }
    }

    /// Checks the current password and the policies of every organization the user belongs to
    /// (the strictest of them), then stores the new hash, ending every session but `keep`.
    async fn set_password(
        &self,
        credentials: UserCredentials,
        current_password: String,
        new_password: &str,
        changed_by: Changer<'_>,
    ) -> Result<(), ChangePasswordError> {
        let user_id = credentials.user.id;
        let policy = self.policies_of(user_id).await?.password;
        let user_inputs = password_user_inputs(
            credentials.user.email.as_ref(),
            credentials.user.full_name.as_ref(),
        );
        let new_password = self
            .new_password(new_password, &policy, &user_inputs)
            .await?;
        let unchanged = new_password.expose() == current_password;
        let account = AccountKey::for_email(credentials.user.email.as_ref());
        let matches = self
            .check_password(&account, current_password, credentials.password_hash, true)
            .await?;
        if !matches {
            return Err(ChangePasswordError::WrongPassword);
        }
        if unchanged {
            return Err(ChangePasswordError::Unchanged);
        }
        self.store_new_password(user_id, new_password, &policy, changed_by)
            .await
    }

    /// Stores a new password the policy admitted, unless it is one of the last ones the policy
    /// remembers: the old hash joins the history, every session but the changer's `keep` ends,
    /// and `auth.password_changed` is recorded and audited as the changer's.
    pub(crate) async fn store_new_password(
        &self,
        user_id: UserId,
        new_password: NewPassword,
        policy: &PasswordPolicy,
        changed_by: Changer<'_>,
    ) -> Result<(), ChangePasswordError> {
        let keep = changed_by.keep;
        let internal = |e| ChangePasswordError::Internal(Box::new(e));
        let remembered = policy.prevent_reuse_count.get();
        if remembered > 0 {
            let previous = self
                .ports
                .accounts
                .previous_password_hashes(user_id, remembered)
                .await?;
            for hash in previous {
                let reused = self
                    .ports
                    .hasher
                    .verify(new_password.expose().to_owned(), Some(hash))
                    .await
                    .map_err(internal)?;
                if reused {
                    return Err(ChangePasswordError::Reused(remembered));
                }
            }
        }
        let hash = self
            .ports
            .hasher
            .hash(new_password)
            .await
            .map_err(internal)?;
        let now = self.ports.clock.now();
        let changed = user_event(
            self.ports.random.as_ref(),
            now,
            user_id,
            payloads::AuthPasswordChanged {
                user_id,
                session_id: keep,
            },
        );
        let record = audit(
            self.ports.random.as_ref(),
            now,
            changed_by.actor,
            AuditAction::PasswordChanged,
            changed_by.origin,
        )
        .on(TargetKind::User, user_id);
        self.ports
            .accounts
            .change_password(user_id, hash, keep, now, changed, record)
            .await?;
        Ok(())
    }
}
