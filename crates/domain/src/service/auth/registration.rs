//! Registration: a new user, their personal workspace and its owner membership.

use serde::Serialize;
use time::OffsetDateTime;

use super::{fold, AuthService, PasswordRefused};
use crate::{
    model::{
        password_user_inputs, AuditAction, Email, FullName, NewOrganization, NewUser,
        OrganizationId, OrganizationName, OrganizationType, Origin, PasswordError, PasswordHash,
        PasswordPolicy, Plan, Slug, User, UserId,
    },
    ports::{BoxError, NewAccount, StoreError},
    service::{event, organizations::founded, payloads, user_event},
};

/// What registration returns.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Registered {
    /// The new user.
    pub user_id: UserId,
    /// Their email, as registered (trimmed, lowercased).
    pub email: Email,
    /// Their personal workspace, created with them.
    pub organization_id: OrganizationId,
}

/// Why registration failed.
#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    /// An account has the email.
    #[error("an account with this email already exists")]
    EmailTaken,
    /// The address is of a domain whose organization signs its people in with single sign-on:
    /// they get their account from its identity provider (at this URL), so that nobody can
    /// hold a password for it in advance.
    #[error("{}", super::SSO_REQUIRED)]
    SsoRequired(String),
    /// The password breaks a rule of the policies that apply, or is a common one.
    #[error("password {0}")]
    WeakPassword(#[source] PasswordError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Hashing the password or signing the token failed.
    #[error("registration failed")]
    Internal(#[source] BoxError),
}

from_refusals!(RegisterError: PasswordRefused);

impl AuthService {
    /// Creates the user, their personal workspace and the owner membership, and records
    /// `user.created` and `organization.created`.
    pub async fn register(
        &self,
        email: Email,
        password: &str,
        full_name: FullName,
        origin: &Origin,
    ) -> Result<Registered, RegisterError> {
        // An address that must use single sign-on gets its account from the identity provider:
        // a password held in advance would outlive the link (pre-account takeover). The answer
        // is the same whether an account exists or not.
        if let Some(sso_url) = self.sso_realm_barring(&email, None).await? {
            return Err(RegisterError::SsoRequired(sso_url));
        }
        // Every policy is at least as strict as the default: refuse what fails it first, judged
        // with what the person is known by.
        let user_inputs = password_user_inputs(email.as_ref(), full_name.as_ref());
        let password = self
            .new_password(password, &PasswordPolicy::default(), &user_inputs)
            .await?;
        // Refuse a taken email before paying for a hash; the unique index settles races.
        if self
            .ports
            .accounts
            .credentials_by_email(&email)
            .await?
            .is_some()
        {
            return Err(RegisterError::EmailTaken);
        }
        // Someone invited into organizations with policies meets them from the start.
        let now = self.ports.clock.now();
        let invited_by = self.ports.policies.policies_of_invitee(&email, now).await?;
        let policy = fold(&invited_by).password;
        password
            .meets(&policy)
            .map_err(RegisterError::WeakPassword)?;
        let password_hash = self
            .ports
            .hasher
            .hash(password)
            .await
            .map_err(|e| RegisterError::Internal(Box::new(e)))?;
        let account = self.new_account(email, full_name, Some(password_hash), false, now);
        let registered = Registered {
            user_id: account.user.id,
            email: account.user.email.clone(),
            organization_id: account.workspace.id,
        };
        let record =
            self.sign_in_record(registered.user_id, AuditAction::UserRegistered, origin, now);
        match self.ports.accounts.create_account(account, record).await {
            Ok(()) => Ok(registered),
            Err(StoreError::Conflict) => Err(RegisterError::EmailTaken),
            Err(e) => Err(e.into()),
        }
    }

    /// A new user with their personal workspace, and the `user.created` and
    /// `organization.created` events that announce them: what registration (and single
    /// sign-on's provisioning, without a password) hands the store.
    pub(crate) fn new_account(
        &self,
        email: Email,
        full_name: FullName,
        password_hash: Option<PasswordHash>,
        email_verified: bool,
        now: OffsetDateTime,
    ) -> NewAccount {
        let random = self.ports.random.as_ref();
        let user = NewUser {
            id: random.uuid().into(),
            email,
            full_name,
            password_hash,
            email_verified,
            created_at: now,
        };
        let name = OrganizationName::personal_workspace_of(user.full_name.as_ref());
        let workspace = NewOrganization {
            id: random.uuid().into(),
            slug: Slug::generate_from(name.as_ref()),
            slug_generated: true,
            name,
            kind: OrganizationType::Personal,
            plan: Plan::Free,
            created_at: now,
        };
        let created = User {
            id: user.id,
            email: user.email.clone(),
            full_name: user.full_name.clone(),
            created_at: now,
            updated_at: now,
            email_verified,
        };
        let founded = founded(&workspace);
        let events = vec![
            user_event(
                random,
                now,
                user.id,
                payloads::UserCreated(payloads::user(&created)),
            ),
            event(
                random,
                now,
                Some(workspace.id),
                Some(user.id),
                payloads::OrganizationCreated(payloads::organization(&founded)),
            ),
        ];
        NewAccount {
            user,
            workspace,
            events,
        }
    }
}
