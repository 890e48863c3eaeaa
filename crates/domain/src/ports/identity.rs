//! Accounts, sessions, API keys, signing keys, password hashing, token signing and failed sign-ins.

use async_trait::async_trait;
use serde::Serialize;
use time::OffsetDateTime;

use super::{
    organizations::MemberAccess,
    platform::{RateLimitError, SealedMail},
    BoxError, StoreError,
};
use crate::model::{
    AccountKey, AccountToken, AccountTokenPurpose, ApiKey, ApiKeyId, ApiScopes, AuditRecord,
    ClientGrant, Email, FailedSignIns, LockoutRule, NewApiKey, NewEvent, NewOrganization,
    NewPassword, NewSession, NewUser, OrganizationId, Page, PageRequest, PasswordCandidate,
    PasswordHash, PasswordStrength, Session, SessionId, TokenHash, User, UserCredentials, UserId,
};
// The tokens' claims are what the products read too: `gatehouse-types`, re-exported beside the
// signer that writes them.
pub use gatehouse_types::{
    AccessClaims, Audience, BearerClaims, IdTokenClaims, MachineClaims, GATEHOUSE_AUDIENCE,
};

/// A user's account as registration creates it: the user, their personal workspace and the
/// owner membership, with the events that announce them.
#[derive(Clone, Debug, PartialEq)]
pub struct NewAccount {
    /// The user, with their password hash.
    pub user: NewUser,
    /// Their personal workspace, owned by them; its slug is the first of its candidates that
    /// is free when the account is stored.
    pub workspace: NewOrganization,
    /// The events announcing the user and the workspace, recorded with them.
    pub events: Vec<NewEvent>,
}

/// An account reclaimed for the owner of its address: an identity provider (or a directory)
/// that speaks for the address links an account whose address was never verified, so whoever
/// registered it may not be its owner (pre-account takeover). In the transaction of the link,
/// and only while the address is still unverified then: the password is removed; sessions
/// (refresh tokens included), API keys, pending mailed links, second factors and consents end;
/// the address becomes verified; `audit` (`user.reclaimed`) is recorded. An account whose address
/// was verified in the meantime is linked as it is, and `audit` is not recorded.
#[derive(Clone, Debug, PartialEq)]
pub struct Reclaim {
    /// The account.
    pub user_id: UserId,
    /// Its `user.reclaimed` record.
    pub audit: AuditRecord,
}

/// What a refresh needs, read together: the session, its user's credentials, and the user's
/// membership and the saved policies of each active organization the user belongs to (the
/// policies fold into the user's session and password policy; the membership of the
/// organization the refresh speaks for is what admits the user to it again).
#[derive(Clone, Debug)]
pub struct RefreshContext {
    /// The live session the refresh token opens, as it stands (`last_used_at` unchanged).
    pub session: Session,
    /// Its user.
    pub credentials: UserCredentials,
    /// One entry per active organization the user is a member of (none for a user without
    /// one), in no particular order.
    pub memberships: Vec<MemberAccess>,
}

/// Users and their credentials.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait AccountStore: Send + Sync + 'static {
    /// Creates the user, the personal workspace (taking the first free slug candidate), the
    /// owner membership and the events, in one transaction.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the email belongs to another user.
    async fn create_account(
        &self,
        account: NewAccount,
        audit: AuditRecord,
    ) -> Result<(), StoreError>;

    /// The user with this (normalised) email and their password hash.
    async fn credentials_by_email(
        &self,
        email: &Email,
    ) -> Result<Option<UserCredentials>, StoreError>;

    /// The user with this id and their password hash.
    async fn credentials_by_id(&self, id: UserId) -> Result<Option<UserCredentials>, StoreError>;

    /// Saves a changed profile (name) with its event. Returns false when the user is gone.
    async fn update_user(
        &self,
        user: User,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// The hashes of the user's previous passwords (not the current one), newest first, at most
    /// `limit`.
    async fn previous_password_hashes(
        &self,
        user_id: UserId,
        limit: u32,
    ) -> Result<Vec<PasswordHash>, StoreError>;

    /// Marks the user's address verified, if it is still `email`, with the audit record when
    /// one is given. Returns false, writing nothing, otherwise (the user is gone or changed
    /// address).
    async fn set_email_verified(
        &self,
        user_id: UserId,
        email: &Email,
        at: OffsetDateTime,
        audit: Option<AuditRecord>,
    ) -> Result<bool, StoreError>;

    /// Replaces the password hash (the old one joins the user's password history, which keeps
    /// the 24 newest), ends every session of the user but `keep`, and records the event, in one
    /// transaction.
    async fn change_password(
        &self,
        user_id: UserId,
        hash: PasswordHash,
        keep: Option<SessionId>,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<(), StoreError>;
}

/// The tokens mailed for account flows (sign-in links, password resets, email verification).
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait AccountTokenStore: Send + Sync + 'static {
    /// Stores a mailed token by its hash with the audit record of its mailing and the mail
    /// itself (queued in the mail outbox), and forgets tokens that expired before it was made.
    async fn save_account_token(
        &self,
        hash: TokenHash,
        token: AccountToken,
        audit: AuditRecord,
        mail: SealedMail,
    ) -> Result<(), StoreError>;

    /// The token, when it is of `purpose`, unused and unexpired at `now`, without taking it:
    /// what a use case reads to decide before it spends the token.
    async fn account_token(
        &self,
        hash: &TokenHash,
        purpose: AccountTokenPurpose,
        now: OffsetDateTime,
    ) -> Result<Option<AccountToken>, StoreError>;

    /// Takes the token (it works once): marks it used and returns it, when it is of `purpose`,
    /// unused and unexpired at `now`.
    async fn take_account_token(
        &self,
        hash: &TokenHash,
        purpose: AccountTokenPurpose,
        now: OffsetDateTime,
    ) -> Result<Option<AccountToken>, StoreError>;
}

/// Login sessions.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait SessionStore: Send + Sync + 'static {
    /// Stores a new session, its `auth.login` event and its audit record. With `keep_at_most`,
    /// the user's oldest live sessions are revoked in the same transaction until at most that
    /// many remain live, the new one included. Sessions of one user open one after the other
    /// (the user's row is locked), so concurrent sign-ins cannot exceed the limit together.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the session names the password its sign-in checked
    /// ([`NewSession::password_checked`]) and that is no longer the account's: nothing is
    /// written.
    async fn create_session(
        &self,
        session: NewSession,
        event: NewEvent,
        keep_at_most: Option<u32>,
        audit: AuditRecord,
    ) -> Result<(), StoreError>;

    /// The session whose refresh token has this hash, if it is neither revoked nor expired at
    /// `now`, as it stands (its `last_used_at` unchanged).
    async fn session_by_refresh_token(
        &self,
        hash: &TokenHash,
        now: OffsetDateTime,
    ) -> Result<Option<Session>, StoreError>;

    /// [`Self::session_by_refresh_token`], the user's credentials and
    /// [`PolicyStore::policies_of_member`](super::organizations::PolicyStore::policies_of_member)
    /// in one read (one statement): what a refresh needs. `None` when the token opens no live
    /// session at `now`, or its user is gone.
    async fn refresh_context(
        &self,
        hash: &TokenHash,
        now: OffsetDateTime,
    ) -> Result<Option<RefreshContext>, StoreError>;

    /// Marks a live session used at `now`. Returns false when it is no longer live.
    async fn touch_session(&self, id: SessionId, now: OffsetDateTime) -> Result<bool, StoreError>;

    /// Makes `organization` the organization the live session's access tokens speak for from
    /// now on (`None`: none). Returns false when the session is no longer live at `now`.
    async fn scope_session(
        &self,
        id: SessionId,
        organization: Option<OrganizationId>,
        now: OffsetDateTime,
    ) -> Result<bool, StoreError>;

    /// Whether the session is neither revoked nor expired at `now`: one indexed read, done on
    /// every authenticated request so that a logout takes effect at once on every replica.
    async fn is_live(&self, id: SessionId, now: OffsetDateTime) -> Result<bool, StoreError>;

    /// Revokes the session and records the event. Returns false when it was not live.
    async fn end_session(
        &self,
        id: SessionId,
        at: OffsetDateTime,
        event: NewEvent,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;
}

/// API keys.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait ApiKeyStore: Send + Sync + 'static {
    /// Stores the key and returns it as listed (never used yet); `None`, writing nothing, when
    /// its user already holds [`MAX_API_KEYS_PER_ORGANIZATION`] keys in its organization
    /// (counted in the same transaction, so concurrent creations cannot pass the bound).
    ///
    /// [`MAX_API_KEYS_PER_ORGANIZATION`]: crate::model::MAX_API_KEYS_PER_ORGANIZATION
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when the id or the secret's hash is taken (a collision of
    /// random values); [`StoreError::Gone`] when its user left the organization, or its
    /// service account was deleted, meanwhile.
    async fn create_api_key(
        &self,
        key: NewApiKey,
        audit: AuditRecord,
    ) -> Result<Option<ApiKey>, StoreError>;

    /// A page of the keys a user created, newest first.
    async fn api_keys_of(
        &self,
        user_id: UserId,
        page: PageRequest,
    ) -> Result<Page<ApiKey>, StoreError>;

    /// One key the user created.
    async fn api_key_of(&self, user_id: UserId, id: ApiKeyId)
        -> Result<Option<ApiKey>, StoreError>;

    /// Deletes one of the user's keys, with the audit record. Returns false, writing nothing,
    /// when the user has no such key.
    async fn delete_api_key(
        &self,
        user_id: UserId,
        id: ApiKeyId,
        audit: AuditRecord,
    ) -> Result<bool, StoreError>;

    /// The key with this hash, when its organization is live; marks it used at `now`.
    async fn use_api_key(
        &self,
        hash: &TokenHash,
        now: OffsetDateTime,
    ) -> Result<Option<ApiKey>, StoreError>;
}

/// A token-signing key pair at rest: the private key encrypted by the server's secret key.
#[derive(Clone, PartialEq, Eq)]
pub struct StoredSigningKey {
    /// The key id, which the header of every token it signs names (the public key's digest).
    pub kid: String,
    /// The encrypted private key; only the signer adapter can open it.
    pub private_key_sealed: Vec<u8>,
    /// The public key, DER (PKCS#1), for the key set.
    pub public_key_der: Vec<u8>,
    /// When the key was added: the newest key signs, older ones only verify.
    pub created_at: OffsetDateTime,
}

impl std::fmt::Debug for StoredSigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredSigningKey")
            .field("kid", &self.kid)
            .field("created_at", &self.created_at)
            .finish_non_exhaustive()
    }
}

/// Token-signing keys, shared by every replica through the store.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait SigningKeyStore: Send + Sync + 'static {
    /// Every stored key, newest first.
    async fn signing_keys(&self) -> Result<Vec<StoredSigningKey>, StoreError>;

    /// Stores a new key (a rotation); replicas start signing with it on their next reload.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] when a key with the same `kid` is stored already.
    async fn add_signing_key(&self, key: StoredSigningKey) -> Result<(), StoreError>;
}

/// Hashing or verifying a password failed (not a wrong password: that is `Ok(false)`); the
/// source says why, for the log.
#[derive(Debug, thiserror::Error)]
#[error("password hashing failed")]
pub struct HashError(#[source] pub BoxError);

/// Password hashing (argon2id). Implementations do the work off the async workers.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait PasswordHasher: Send + Sync + 'static {
    /// Hashes a password that met its policy, with a fresh random salt.
    async fn hash(&self, password: NewPassword) -> Result<PasswordHash, HashError>;

    /// Whether `presented` matches `hash`. With no hash (unknown user) it still does the work of
    /// one verification and answers false, so that timing does not tell whether an account
    /// exists.
    async fn verify(
        &self,
        presented: String,
        hash: Option<PasswordHash>,
    ) -> Result<bool, HashError>;
}

/// Judging a password failed (not a weak password: that is a low score); the source says why,
/// for the log.
#[derive(Debug, thiserror::Error)]
#[error("judging a password's strength failed")]
pub struct JudgeError(#[source] pub BoxError);

/// How easy a new password is to guess (zxcvbn). CPU work of a few milliseconds, more for a
/// long password: implementations do it off the async workers, a bounded number at a time.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait PasswordJudge: Send + Sync + 'static {
    /// Scores `password`, counting `user_inputs` (what its owner is known by: see
    /// [`password_user_inputs`](crate::model::password_user_inputs)) as the words an attacker
    /// tries first. [`PasswordCandidate::judged`] turns the score into a
    /// [`NewPassword`] or a refusal.
    async fn strength(
        &self,
        password: &PasswordCandidate,
        user_inputs: &[String],
    ) -> Result<PasswordStrength, JudgeError>;
}

/// The audience of a user's access token: `"gatehouse"` for a sign-in's own (`grant` is
/// `None`); for one issued to an application, `["gatehouse", client id]` when the user granted
/// it one of Gatehouse's API scopes (it is meant for Gatehouse's API too), else `[client id]`
/// alone, so that no verifier expecting `gatehouse` (Gatehouse's API, a first-party product)
/// takes an `openid` token for one of its own.
pub fn audience_of_grant(grant: Option<&ClientGrant>) -> Audience {
    match grant {
        None => Audience::gatehouse(),
        Some(grant) if ApiScopes::of(&grant.scope).is_empty() => {
            Audience::Many(vec![grant.client_id.as_str().to_owned()])
        }
        Some(grant) => Audience::gatehouse_and(grant.client_id.as_str()),
    }
}

/// Why a token could not be signed or checked.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// Malformed, badly signed, expired, not yet valid, or for another issuer or audience.
    #[error("the token is not valid")]
    Invalid,
    /// The signer itself failed (its keys could not be loaded or used): not the token's fault.
    #[error("token signing failed")]
    Failed(#[source] BoxError),
}

/// One public key of the JSON Web Key Set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PublicJwk {
    /// The key type: `RSA`.
    pub kty: &'static str,
    /// What the key is for, serialised as `use`: `sig` (signatures).
    #[serde(rename = "use")]
    pub use_: &'static str,
    /// The algorithm: `RS256`.
    pub alg: &'static str,
    /// The key id that tokens it verifies name in their header.
    pub kid: String,
    /// The RSA modulus, big-endian, unpadded base64url.
    pub n: String,
    /// The RSA public exponent, big-endian, unpadded base64url.
    pub e: String,
}

/// Issues and checks access tokens, machine tokens and ID tokens (RS256 JWTs).
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait TokenSigner: Send + Sync + 'static {
    /// Signs the claims with the newest key, naming its `kid` in the header.
    async fn sign(&self, claims: &AccessClaims) -> Result<String, TokenError>;
    /// Signs a machine token's claims, as [`Self::sign`] does.
    async fn sign_machine(&self, claims: &MachineClaims) -> Result<String, TokenError>;
    /// Signs an ID token's claims, as [`Self::sign`] does. [`Self::verify`] never accepts the
    /// result: its audience is a client, not Gatehouse.
    async fn sign_id_token(&self, claims: &IdTokenClaims) -> Result<String, TokenError>;
    /// Checks a Bearer token's signature, `iss`, `aud` ([`BearerClaims::is_for_gatehouse`]),
    /// `exp` and `nbf`, and returns its claims: a user's or an application's.
    async fn verify(&self, token: &str) -> Result<BearerClaims, TokenError>;
    /// The public keys that verify tokens still in circulation.
    async fn public_keys(&self) -> Result<Vec<PublicJwk>, TokenError>;
}

/// Failed sign-ins per account, for brute-force protection (see [`LockoutRule`]): in-process
/// for a single replica, shared by every replica through Redis.
///
/// A sign-in takes a check slot ([`Self::begin_check`]) before it checks a password, and
/// ends it with [`Self::record_failure`] (the slot is kept, as a failure), [`Self::clear`] (a
/// right password: the run ends) or [`Self::release`] (no verdict), so that the lockout holds
/// under concurrency.
#[async_trait]
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
pub trait SignInAttempts: Send + Sync + 'static {
    /// The account's run of failures as it stands at `now`; no run is the default (zero
    /// failures, not locked).
    ///
    /// # Errors
    /// [`RateLimitError`] when the counters cannot be reached; callers let the attempt through.
    async fn failed_sign_ins(
        &self,
        account: &AccountKey,
        now: OffsetDateTime,
    ) -> Result<FailedSignIns, RateLimitError>;

    /// Takes one of the account's check slots at `now` if `rule` admits it
    /// ([`LockoutRule::admit`], with the checks under way: slots taken less than
    /// [`LockoutRule::CHECK_SLOT_TTL`] after the latest one and not given back), in one atomic
    /// step, so that concurrent sign-ins, on any replica, never take more than it allows.
    ///
    /// # Errors
    /// [`RateLimitError`] when the counters cannot be reached; callers let the attempt through.
    async fn begin_check(
        &self,
        account: &AccountKey,
        now: OffsetDateTime,
        rule: &LockoutRule,
    ) -> Result<crate::model::CheckAdmission, RateLimitError>;

    /// Gives back a check slot without a verdict (the check failed, or a right password still
    /// has a second step to come).
    ///
    /// # Errors
    /// [`RateLimitError`] when the counters cannot be reached.
    async fn release(&self, account: &AccountKey) -> Result<(), RateLimitError>;

    /// Counts one failure in the account's run (a new run when none is going at `now`) in place
    /// of its check slot, locks the account for what `rule` says the new count earns, and
    /// returns the run as it now stands, all in one atomic step. Concurrent failures each count.
    /// A failure that took no slot (a wrong second factor) gives back none when none is taken,
    /// and otherwise one of the checks under way: it only ever lets one more check start.
    ///
    /// # Errors
    /// [`RateLimitError`] when the counters cannot be reached.
    async fn record_failure(
        &self,
        account: &AccountKey,
        now: OffsetDateTime,
        rule: &LockoutRule,
    ) -> Result<FailedSignIns, RateLimitError>;

    /// Forgets the account's run, its check slots with it: its password was right.
    ///
    /// # Errors
    /// [`RateLimitError`] when the counters cannot be reached.
    async fn clear(&self, account: &AccountKey) -> Result<(), RateLimitError>;
}

#[cfg(test)]
mod tests {
    use uuid::Uuid;

    use super::*;
    use crate::model::{ApplicationId, ClientId, Scope};

    const CLIENT: &str = "ghc_00000000000000000000000000000abc";

    fn grant(scope: &str) -> ClientGrant {
        ClientGrant {
            application_id: ApplicationId::from_uuid(Uuid::from_u128(1)),
            client_id: ClientId::parse(CLIENT).unwrap(),
            scope: Scope::parse(scope).unwrap(),
        }
    }

    #[test]
    fn gatehouse_is_the_audience_of_an_application_token_only_with_an_api_scope() {
        assert_eq!(audience_of_grant(None), Audience::gatehouse());
        assert_eq!(
            audience_of_grant(Some(&grant("openid email"))),
            Audience::Many(vec![CLIENT.to_owned()])
        );
        assert_eq!(
            audience_of_grant(Some(&grant("openid org:read"))),
            Audience::gatehouse_and(CLIENT)
        );
    }
}
