//! The mail-based account flows: sign-in links ("magic links"), password resets and email
//! verification. Each mails a random token (stored as its SHA-256) that works once and
//! expires; asking for one is rate limited per address and per client, and answers the same
//! whether an account exists or not.

use time::OffsetDateTime;

use super::{
    audit,
    auth::{ChangePasswordError, Changer, OrganizationRefused, PasswordRefused, SignIn},
    mail::seal,
    user_audit, AuthService, LockedOut, LoginError, Principal,
};
use crate::{
    model::{
        password_user_inputs, AccountKey, AccountToken, AccountTokenPurpose, Amr, AuditAction,
        AuditActor, ClientAddress, Email, OrganizationId, Origin, PasswordError, PasswordPolicy,
        Quota, TargetKind, TokenHash, UserCredentials,
    },
    ports::{service_ports, BoxError, Mail, StoreError},
};

service_ports! {
    /// The ports [`EmailLinkService`] uses.
    pub struct EmailLinkPorts { accounts: AccountStore, account_tokens: AccountTokenStore, cipher: SecretCipher, rate_limiter: RateLimiter, sign_in_attempts: SignInAttempts, clock: Clock, random: Random }
}

/// How many links one address may ask for a minute (all of them at once, if it likes).
pub const LINKS_PER_EMAIL: u32 = 3;
/// How many links one client may ask for a minute (all of them at once, if it likes).
pub const LINKS_PER_CLIENT: u32 = 10;

/// Why a mail flow was refused.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// Asked too often for this address or from this client.
    #[error("too many mails asked for; try again in {} seconds", .0.seconds())]
    RateLimited(LockedOut),
    /// The token is unknown, used, expired, or for something else.
    #[error("the link is invalid, expired or used already; ask for a new one")]
    InvalidToken,
    /// The new password breaks a rule of the policies that apply, or is a common one.
    #[error("new password {0}")]
    WeakPassword(#[source] PasswordError),
    /// The new password is one of the last ones the policies remember.
    #[error("new password must differ from your last {0} passwords")]
    Reused(u32),
    /// The account is locked after failed sign-ins.
    #[error(transparent)]
    LockedOut(LockedOut),
    /// The address belongs to an organization's single sign-on: no sign-in link or password
    /// reset for it; it signs in at this URL (the organization's IdP).
    #[error("{}", super::auth::SSO_REQUIRED)]
    SsoRequired(String),
    /// The sign-in named an organization that does not admit the user (the link is not
    /// spent: use it again, naming another organization or none).
    #[error(transparent)]
    NotAdmitted(OrganizationRefused),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Hashing, signing or mailing failed.
    #[error("the request failed")]
    Internal(#[source] BoxError),
}

impl From<LoginError> for LinkError {
    fn from(error: LoginError) -> Self {
        match error {
            LoginError::LockedOut(locked) => Self::LockedOut(locked),
            LoginError::SsoRequired(url) => Self::SsoRequired(url),
            LoginError::NotAdmitted(refused) => Self::NotAdmitted(refused),
            LoginError::Store(e) => Self::Store(e),
            other => Self::Internal(Box::new(other)),
        }
    }
}

from_refusals!(LinkError: PasswordRefused);

impl From<ChangePasswordError> for LinkError {
    fn from(error: ChangePasswordError) -> Self {
        match error {
            ChangePasswordError::WeakPassword(reason) => Self::WeakPassword(reason),
            ChangePasswordError::Reused(n) => Self::Reused(n),
            ChangePasswordError::Store(e) => Self::Store(e),
            other => Self::Internal(Box::new(other)),
        }
    }
}

/// Sign-in links, password resets and email verification, by mail.
#[derive(Clone)]
pub struct EmailLinkService {
    ports: EmailLinkPorts,
    /// Opens sessions and starts second steps the way a password login does.
    auth: AuthService,
    /// Where the mailed links point.
    public_url: String,
}

impl EmailLinkService {
    /// A service on these ports, mailing links to `public_url`.
    pub fn new(ports: EmailLinkPorts, auth: AuthService, public_url: String) -> Self {
        Self {
            ports,
            auth,
            public_url,
        }
    }

    /// Counts the request against the address and the client; refused past either limit.
    async fn counted(&self, email: &str, client: ClientAddress) -> Result<(), LinkError> {
        let now = self.ports.clock.now();
        let address = email.trim().to_lowercase();
        for (key, limit) in [
            (format!("links:email:{address}"), LINKS_PER_EMAIL),
            (format!("links:ip:{}", client.0), LINKS_PER_CLIENT),
        ] {
            match self
                .ports
                .rate_limiter
                .hit(&key, Quota::new(limit, limit), now)
                .await
            {
                Ok(decision) if !decision.allowed => {
                    return Err(LinkError::RateLimited(LockedOut {
                        retry_after: decision.reset_at - now,
                    }))
                }
                Ok(_) => {}
                // Fail open, as the request limits do: an unreachable counter locks nobody out.
                Err(error) => tracing::warn!(%error, "a mail request was not counted"),
            }
        }
        Ok(())
    }

    /// Mails a fresh token of `purpose` to the user, audited as `auth.link_mailed` by `actor`
    /// (the user, or nobody yet for a link asked for by address).
    async fn mail_token(
        &self,
        purpose: AccountTokenPurpose,
        credentials: &UserCredentials,
        actor: AuditActor,
        origin: &Origin,
    ) -> Result<(), LinkError> {
        let now = self.ports.clock.now();
        let token = self.ports.random.secret(purpose.kind());
        let user = &credentials.user;
        let record = audit(
            self.ports.random.as_ref(),
            now,
            actor,
            AuditAction::LinkMailed,
            origin,
        )
        .on(TargetKind::User, user.id);
        let link = format!("{}{}{}", self.public_url, purpose.page(), token.expose());
        let (subject, text) = match purpose {
            AccountTokenPurpose::MagicLink => (
                "Your sign-in link".to_owned(),
                format!(
                    "Hello {},\n\nOpen this link within 15 minutes to sign in:\n\n{link}\n\n\
                     It works once. If you did not ask for it, ignore this mail: nothing \
                     happens without the link.\n",
                    user.full_name.as_ref()
                ),
            ),
            AccountTokenPurpose::PasswordReset => (
                "Reset your password".to_owned(),
                format!(
                    "Hello {},\n\nOpen this link within 15 minutes to choose a new password:\n\n\
                     {link}\n\nIt works once, and signs you out everywhere. If you did not ask \
                     for it, ignore this mail: your password stays as it is.\n",
                    user.full_name.as_ref()
                ),
            ),
            AccountTokenPurpose::EmailVerification => (
                "Verify your email address".to_owned(),
                format!(
                    "Hello {},\n\nOpen this link within 24 hours to confirm that {} is your \
                     address:\n\n{link}\n",
                    user.full_name.as_ref(),
                    user.email.as_ref()
                ),
            ),
        };
        let mail = seal(
            self.ports.cipher.as_ref(),
            self.ports.random.as_ref(),
            &Mail::new(user.email.clone(), subject, text),
        )
        .map_err(|e| LinkError::Internal(Box::new(e)))?;
        // The mail is queued with the token, in its transaction: the worker sends it.
        self.ports
            .account_tokens
            .save_account_token(
                token.hash(),
                AccountToken {
                    purpose,
                    user_id: user.id,
                    email: user.email.clone(),
                    created_at: now,
                    expires_at: now + purpose.ttl(),
                },
                record,
                mail,
            )
            .await?;
        Ok(())
    }

    /// Asks for a mail of `purpose` to `email`: mailed when an account has the address,
    /// silently not otherwise (the answer is the same).
    async fn request(
        &self,
        purpose: AccountTokenPurpose,
        email: &str,
        client: ClientAddress,
        origin: &Origin,
    ) -> Result<(), LinkError> {
        self.counted(email, client).await?;
        let Ok(email) = Email::parse(email) else {
            return Ok(());
        };
        let credentials = self.ports.accounts.credentials_by_email(&email).await?;
        if let Some(login_url) = self
            .auth
            .sso_realm_barring(&email, credentials.as_ref().map(|c| c.user.id))
            .await?
        {
            return Err(LinkError::SsoRequired(login_url));
        }
        if let Some(credentials) = credentials {
            // Whoever asked has proved nothing yet: no actor.
            self.mail_token(purpose, &credentials, AuditActor::UnknownUser, origin)
                .await?;
        }
        Ok(())
    }

    /// `POST /auth/magic-link`: mails a sign-in link to the address, if it has an account.
    pub async fn request_magic_link(
        &self,
        email: &str,
        client: ClientAddress,
        origin: &Origin,
    ) -> Result<(), LinkError> {
        self.request(AccountTokenPurpose::MagicLink, email, client, origin)
            .await
    }

    /// `POST /auth/password/forgot`: mails a reset link to the address, if it has an account.
    pub async fn request_password_reset(
        &self,
        email: &str,
        client: ClientAddress,
        origin: &Origin,
    ) -> Result<(), LinkError> {
        self.request(AccountTokenPurpose::PasswordReset, email, client, origin)
            .await
    }

    /// `POST /auth/email/verify-request`: mails the caller a link that verifies their address.
    pub async fn request_verification(
        &self,
        principal: &Principal,
        client: ClientAddress,
        origin: &Origin,
    ) -> Result<(), LinkError> {
        let credentials = self
            .ports
            .accounts
            .credentials_by_id(principal.user_id())
            .await?
            .ok_or(LinkError::InvalidToken)?;
        self.counted(credentials.user.email.as_ref(), client)
            .await?;
        self.mail_token(
            AccountTokenPurpose::EmailVerification,
            &credentials,
            principal.audit_actor(),
            origin,
        )
        .await
    }

    /// Spends the link: taken once, it works no more.
    async fn taken(
        &self,
        token: &str,
        purpose: AccountTokenPurpose,
    ) -> Result<(AccountToken, UserCredentials), LinkError> {
        let now = self.ports.clock.now();
        let taken = self
            .ports
            .account_tokens
            .take_account_token(&TokenHash::of(token), purpose, now)
            .await?
            .ok_or(LinkError::InvalidToken)?;
        self.owner_of(taken).await
    }

    /// The link as it stands, not spent: what a sign-in decides on before it spends it.
    async fn unspent(
        &self,
        token: &str,
        purpose: AccountTokenPurpose,
    ) -> Result<(AccountToken, UserCredentials), LinkError> {
        let now = self.ports.clock.now();
        let found = self
            .ports
            .account_tokens
            .account_token(&TokenHash::of(token), purpose, now)
            .await?
            .ok_or(LinkError::InvalidToken)?;
        self.owner_of(found).await
    }

    /// The account a link acts on, while its address is still the one the link was mailed to.
    async fn owner_of(
        &self,
        taken: AccountToken,
    ) -> Result<(AccountToken, UserCredentials), LinkError> {
        let credentials = self
            .ports
            .accounts
            .credentials_by_id(taken.user_id)
            .await?
            // A link mailed to an address the user has left proves nothing now.
            .filter(|c| c.user.email == taken.email)
            .ok_or(LinkError::InvalidToken)?;
        Ok((taken, credentials))
    }

    /// Signs in with a mailed link: a session (`amr: ["email"]`), or, for a user with a second
    /// factor, the second step. The link proves the address too. Audited like a password
    /// sign-in: a refused link on its own, an accepted one with its session or second step.
    ///
    /// With `organization`, the tokens speak for it once it admits the user, as at a password
    /// login (a user with a second factor names it again at the second step). Every refusal
    /// is decided before the link is spent: a link refused for an organization that does not
    /// admit the user still works once, without it or naming another.
    pub async fn sign_in_with_link(
        &self,
        token: &str,
        organization: Option<OrganizationId>,
        origin: &Origin,
    ) -> Result<SignIn, LinkError> {
        let (_, credentials) = match self.unspent(token, AccountTokenPurpose::MagicLink).await {
            Err(LinkError::InvalidToken) => {
                self.auth.refused(AuditActor::UnknownUser, origin).await?;
                return Err(LinkError::InvalidToken);
            }
            taken => taken?,
        };
        if let Some(login_url) = self
            .auth
            .sso_realm_barring(&credentials.user.email, Some(credentials.user.id))
            .await?
        {
            self.auth
                .refused(AuditActor::User(credentials.user.id), origin)
                .await?;
            return Err(LinkError::SsoRequired(login_url));
        }
        let now = self.ports.clock.now();
        let account = AccountKey::for_email(credentials.user.email.as_ref());
        if let Ok(run) = self
            .ports
            .sign_in_attempts
            .failed_sign_ins(&account, now)
            .await
        {
            if let Some(retry_after) = run.retry_after(now) {
                self.auth
                    .refused(AuditActor::User(credentials.user.id), origin)
                    .await?;
                return Err(LinkError::LockedOut(LockedOut { retry_after }));
            }
        }
        let factors = self.auth.confirmed_factors(credentials.user.id).await?;
        if !factors.is_empty() {
            self.spend_sign_in_link(token, now).await?;
            let needed = self
                .auth
                .second_step(
                    credentials.user.id,
                    &factors,
                    Amr::email_link(),
                    None,
                    now,
                    origin,
                )
                .await?;
            return Ok(SignIn::SecondFactor(needed));
        }
        let policies = self.auth.policies_of(credentials.user.id).await?;
        let user_id = credentials.user.id;
        let admitted = self
            .auth
            .admitted_session(
                credentials.user,
                policies,
                Amr::email_link(),
                organization,
                now,
                origin,
            )
            .await;
        let admitted = match admitted {
            Err(LoginError::NotAdmitted(refused)) => {
                self.auth.refused(AuditActor::User(user_id), origin).await?;
                return Err(LinkError::NotAdmitted(refused));
            }
            admitted => admitted?,
        };
        self.spend_sign_in_link(token, now).await?;
        Ok(SignIn::Tokens(self.auth.open(admitted).await?))
    }

    /// Spends a sign-in link that was decided on: once (a link spent meanwhile is invalid),
    /// proving its address (the sign-in's own record says the link was used).
    async fn spend_sign_in_link(&self, token: &str, now: OffsetDateTime) -> Result<(), LinkError> {
        let (taken, credentials) = self.taken(token, AccountTokenPurpose::MagicLink).await?;
        self.ports
            .accounts
            .set_email_verified(credentials.user.id, &taken.email, now, None)
            .await?;
        Ok(())
    }

    /// Sets a new password with a mailed reset link: every session ends, the account's failed
    /// sign-ins are forgotten, `auth.password_changed` is recorded. The link proves the
    /// address too.
    pub async fn reset_password(
        &self,
        token: &str,
        new_password: &str,
        origin: &Origin,
    ) -> Result<(), LinkError> {
        // Every policy is at least as strict as the default: refuse what fails it before the
        // link is spent (judged without knowing whose link it is: that comes with spending it).
        self.auth
            .new_password(new_password, &PasswordPolicy::default(), &[])
            .await?;
        let (taken, credentials) = self
            .taken(token, AccountTokenPurpose::PasswordReset)
            .await?;
        let user_id = credentials.user.id;
        let policy = self.auth.policies_of(user_id).await?.password;
        // A stricter policy of the user's organizations, or a password made of what the user
        // is known by, met only now: the link is spent, and the answer says why a new one is
        // needed.
        let user_inputs = password_user_inputs(
            credentials.user.email.as_ref(),
            credentials.user.full_name.as_ref(),
        );
        let new_password = self
            .auth
            .new_password(new_password, &policy, &user_inputs)
            .await?;
        self.auth
            .store_new_password(
                user_id,
                new_password,
                &policy,
                Changer {
                    actor: AuditActor::User(user_id),
                    origin,
                    keep: None,
                },
            )
            .await?;
        let now = self.ports.clock.now();
        self.ports
            .accounts
            .set_email_verified(user_id, &taken.email, now, None)
            .await?;
        let account = AccountKey::for_email(credentials.user.email.as_ref());
        if let Err(error) = self.ports.sign_in_attempts.clear(&account).await {
            tracing::warn!(%error, "failed sign-ins not cleared after a reset");
        }
        Ok(())
    }

    /// Verifies the user's address with a mailed link. Audited: `user.email_verified`, by the
    /// user the link was mailed to.
    pub async fn verify_email(&self, token: &str, origin: &Origin) -> Result<(), LinkError> {
        let (taken, credentials) = self
            .taken(token, AccountTokenPurpose::EmailVerification)
            .await?;
        let now = self.ports.clock.now();
        if !self
            .ports
            .accounts
            .set_email_verified(
                credentials.user.id,
                &taken.email,
                now,
                Some(
                    user_audit(
                        self.ports.random.as_ref(),
                        now,
                        credentials.user.id,
                        AuditAction::EmailVerified,
                        origin,
                    )
                    .on(TargetKind::User, credentials.user.id),
                ),
            )
            .await?
        {
            return Err(LinkError::InvalidToken);
        }
        Ok(())
    }
}
