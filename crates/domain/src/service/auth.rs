//! Accounts and tokens: register, log in, refresh, log out, change password, profile.

use chrono::{DateTime, Duration, Utc};
use serde::Serialize;
use serde_json::json;

use super::{event, payloads, Principal};
use crate::{
    model::{
        Email, EventType, FullName, NewOrganization, NewPassword, NewSession, NewUser,
        Organization, OrganizationId, OrganizationName, OrganizationSettings, OrganizationType,
        PasswordError, PasswordPolicy, Plan, SecretToken, Slug, TokenHash, TokenKind, User, UserId,
    },
    ports::{AccessClaims, BoxError, NewAccount, Ports, StoreError, TokenError},
};

/// Lifetimes and names that go into tokens.
#[derive(Clone, Debug)]
pub struct AuthSettings {
    /// `iss` of access tokens: the public URL.
    pub issuer: String,
    pub access_token_ttl: Duration,
    pub refresh_token_ttl: Duration,
}

impl AuthSettings {
    pub const AUDIENCE: &'static str = "gatehouse";

    pub fn new(issuer: String) -> Self {
        Self {
            issuer,
            access_token_ttl: Duration::seconds(3600),
            refresh_token_ttl: Duration::days(30),
        }
    }
}

/// What registration returns.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Registered {
    pub user_id: UserId,
    pub email: Email,
    pub organization_id: OrganizationId,
}

/// An access token and its lifetime (the refresh response).
#[derive(Clone, PartialEq, Serialize)]
pub struct AccessToken {
    pub access_token: String,
    pub token_type: &'static str,
    pub expires_in: i64,
}

/// The login response.
#[derive(Clone, PartialEq, Serialize)]
pub struct TokenPair {
    #[serde(flatten)]
    pub access: AccessToken,
    #[serde(serialize_with = "expose_secret")]
    pub refresh_token: SecretToken,
}

fn expose_secret<S: serde::Serializer>(secret: &SecretToken, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(secret.expose())
}

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessToken")
            .field("expires_in", &self.expires_in)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for TokenPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenPair").finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RegisterError {
    #[error("an account with this email already exists")]
    EmailTaken,
    #[error("password {0}")]
    WeakPassword(#[source] PasswordError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("registration failed")]
    Internal(#[source] BoxError),
}

#[derive(Debug, thiserror::Error)]
pub enum LoginError {
    /// Unknown email or wrong password: deliberately the same error.
    #[error("invalid email or password")]
    InvalidCredentials,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("login failed")]
    Internal(#[source] BoxError),
}

#[derive(Debug, thiserror::Error)]
pub enum RefreshError {
    #[error("the refresh token is invalid, expired or revoked")]
    InvalidToken,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("refresh failed")]
    Internal(#[source] BoxError),
}

#[derive(Debug, thiserror::Error)]
pub enum ChangePasswordError {
    #[error("current password is incorrect")]
    WrongPassword,
    #[error("new password {0}")]
    WeakPassword(#[source] PasswordError),
    #[error("new password must differ from the current one")]
    Unchanged,
    #[error("the user no longer exists")]
    UserGone,
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("password change failed")]
    Internal(#[source] BoxError),
}

#[derive(Debug, thiserror::Error)]
pub enum UpdateProfileError {
    #[error("the user no longer exists")]
    UserGone,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The fields of `PATCH /users/me`; `None` leaves a field as it is.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProfileChange {
    pub full_name: Option<FullName>,
}

impl From<TokenError> for LoginError {
    fn from(e: TokenError) -> Self {
        Self::Internal(Box::new(e))
    }
}

impl From<TokenError> for RefreshError {
    fn from(e: TokenError) -> Self {
        Self::Internal(Box::new(e))
    }
}

/// The account use cases.
#[derive(Clone)]
pub struct AuthService {
    ports: Ports,
    settings: AuthSettings,
}

impl AuthService {
    pub fn new(ports: Ports, settings: AuthSettings) -> Self {
        Self { ports, settings }
    }

    pub fn settings(&self) -> &AuthSettings {
        &self.settings
    }

    /// Creates the user, their personal workspace and the owner membership, and records
    /// `user.created` and `organization.created`.
    pub async fn register(
        &self,
        email: Email,
        password: &str,
        full_name: FullName,
    ) -> Result<Registered, RegisterError> {
        let password = NewPassword::parse(password, &PasswordPolicy::default())
            .map_err(RegisterError::WeakPassword)?;
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
        let password_hash = self
            .ports
            .hasher
            .hash(password)
            .await
            .map_err(|e| RegisterError::Internal(Box::new(e)))?;
        let now = self.ports.clock.now();
        let user = NewUser {
            id: self.ports.random.uuid().into(),
            email,
            full_name,
            password_hash,
            created_at: now,
        };
        let name = OrganizationName::personal_workspace_of(user.full_name.as_ref());
        let workspace = NewOrganization {
            id: self.ports.random.uuid().into(),
            slug: Slug::generate_from(name.as_ref()),
            slug_generated: true,
            name,
            kind: OrganizationType::Personal,
            plan: Plan::Free,
            created_at: now,
        };
        let user_data = payloads::user(&User {
            id: user.id,
            email: user.email.clone(),
            full_name: user.full_name.clone(),
            created_at: now,
            updated_at: now,
        });
        let org_data = payloads::organization(&Organization {
            id: workspace.id,
            name: workspace.name.clone(),
            slug: workspace.slug.clone(),
            kind: workspace.kind,
            plan: workspace.plan,
            is_active: true,
            settings: OrganizationSettings::default(),
            member_count: 1,
            application_count: 0,
            created_at: now,
            updated_at: now,
        });
        let events = vec![
            event(
                &self.ports,
                now,
                EventType::UserCreated,
                None,
                Some(user.id),
                user_data,
            ),
            event(
                &self.ports,
                now,
                EventType::OrganizationCreated,
                Some(workspace.id),
                Some(user.id),
                org_data,
            ),
        ];
        let registered = Registered {
            user_id: user.id,
            email: user.email.clone(),
            organization_id: workspace.id,
        };
        match self
            .ports
            .accounts
            .create_account(NewAccount {
                user,
                workspace,
                events,
            })
            .await
        {
            Ok(()) => Ok(registered),
            Err(StoreError::Conflict) => Err(RegisterError::EmailTaken),
            Err(e) => Err(e.into()),
        }
    }

    /// Checks the password and opens a session: an access token and a refresh token.
    pub async fn login(&self, email: &str, password: String) -> Result<TokenPair, LoginError> {
        // An email that does not parse cannot have an account; it still costs a verification.
        let credentials = match Email::parse(email) {
            Ok(email) => self.ports.accounts.credentials_by_email(&email).await?,
            Err(_) => None,
        };
        let hash = credentials.as_ref().map(|c| c.password_hash.clone());
        let matches = self
            .ports
            .hasher
            .verify(password, hash)
            .await
            .map_err(|e| LoginError::Internal(Box::new(e)))?;
        let user = match credentials {
            Some(credentials) if matches => credentials.user,
            _ => return Err(LoginError::InvalidCredentials),
        };

        let now = self.ports.clock.now();
        let refresh_token = self.ports.random.secret(TokenKind::Refresh);
        let session = NewSession {
            id: self.ports.random.uuid().into(),
            user_id: user.id,
            refresh_token_hash: refresh_token.hash(),
            created_at: now,
            expires_at: now + self.settings.refresh_token_ttl,
        };
        let login_event = event(
            &self.ports,
            now,
            EventType::AuthLogin,
            None,
            Some(user.id),
            json!({ "user_id": user.id, "session_id": session.id }),
        );
        let session_id = session.id;
        self.ports
            .sessions
            .create_session(session, login_event)
            .await?;
        let access = self.issue_access_token(&user, session_id, now).await?;
        Ok(TokenPair {
            access,
            refresh_token,
        })
    }

    /// A new access token for a live session. The refresh token itself is not rotated (spec).
    pub async fn refresh(&self, refresh_token: &str) -> Result<AccessToken, RefreshError> {
        let now = self.ports.clock.now();
        let hash = TokenHash::of(refresh_token);
        let session = self
            .ports
            .sessions
            .use_refresh_token(&hash, now)
            .await?
            .ok_or(RefreshError::InvalidToken)?;
        let user = self
            .ports
            .accounts
            .credentials_by_id(session.user_id)
            .await?
            .ok_or(RefreshError::InvalidToken)?
            .user;
        Ok(self.issue_access_token(&user, session.id, now).await?)
    }

    /// Ends the caller's session: its refresh token and every access token it issued stop
    /// working at once.
    pub async fn logout(&self, principal: &Principal) -> Result<(), StoreError> {
        let Principal::User {
            user_id,
            session_id,
            ..
        } = principal
        else {
            // An API key has no session to end.
            return Ok(());
        };
        let now = self.ports.clock.now();
        let logout_event = event(
            &self.ports,
            now,
            EventType::AuthLogout,
            None,
            Some(*user_id),
            json!({ "user_id": user_id, "session_id": session_id }),
        );
        self.ports
            .sessions
            .end_session(*session_id, now, logout_event)
            .await?;
        Ok(())
    }

    /// Changes the caller's password after checking the current one; every other session of
    /// the user ends.
    pub async fn change_password(
        &self,
        principal: &Principal,
        current_password: String,
        new_password: &str,
    ) -> Result<(), ChangePasswordError> {
        let user_id = principal.user_id();
        let credentials = self
            .ports
            .accounts
            .credentials_by_id(user_id)
            .await?
            .ok_or(ChangePasswordError::UserGone)?;
        let new_password = NewPassword::parse(new_password, &PasswordPolicy::default())
            .map_err(ChangePasswordError::WeakPassword)?;
        let internal = |e| ChangePasswordError::Internal(Box::new(e));
        let unchanged = new_password.expose() == current_password;
        let matches = self
            .ports
            .hasher
            .verify(current_password, Some(credentials.password_hash))
            .await
            .map_err(internal)?;
        if !matches {
            return Err(ChangePasswordError::WrongPassword);
        }
        if unchanged {
            return Err(ChangePasswordError::Unchanged);
        }
        let hash = self
            .ports
            .hasher
            .hash(new_password)
            .await
            .map_err(internal)?;
        let now = self.ports.clock.now();
        // Through an API key no session is current: every session ends.
        let keep = principal.session_id();
        let changed = event(
            &self.ports,
            now,
            EventType::AuthPasswordChanged,
            None,
            Some(user_id),
            json!({ "user_id": user_id, "session_id": principal.session_id() }),
        );
        self.ports
            .accounts
            .change_password(user_id, hash, keep, now, changed)
            .await?;
        Ok(())
    }

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
        let mut data = payloads::user(&user);
        data["changed"] = json!(changed);
        let updated = event(
            &self.ports,
            now,
            EventType::UserUpdated,
            None,
            Some(user.id),
            data,
        );
        if !self
            .ports
            .accounts
            .update_user(user.clone(), updated)
            .await?
        {
            return Err(UpdateProfileError::UserGone);
        }
        Ok(user)
    }

    async fn issue_access_token(
        &self,
        user: &User,
        session_id: crate::model::SessionId,
        now: DateTime<Utc>,
    ) -> Result<AccessToken, TokenError> {
        let ttl = self.settings.access_token_ttl;
        let claims = AccessClaims {
            iss: self.settings.issuer.clone(),
            sub: user.id,
            aud: AuthSettings::AUDIENCE.to_owned(),
            iat: now.timestamp(),
            nbf: now.timestamp(),
            exp: (now + ttl).timestamp(),
            jti: self.ports.random.uuid(),
            sid: session_id,
            email: user.email.as_ref().to_owned(),
        };
        Ok(AccessToken {
            access_token: self.ports.signer.sign(&claims).await?,
            token_type: "Bearer",
            expires_in: ttl.num_seconds(),
        })
    }
}
