use time::OffsetDateTime;

use super::{ApplicationId, ClientId, Scope, SessionId, TokenHash, UserId};

/// A login session as created at login. The refresh token is known only by its hash.
#[derive(Clone, Debug, PartialEq)]
pub struct NewSession {
    pub id: SessionId,
    pub user_id: UserId,
    pub refresh_token_hash: TokenHash,
    pub created_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
    /// Set when an OAuth token exchange opened the session for an application.
    pub grant: Option<ClientGrant>,
}

/// What an application was granted: its refresh token works only for it, and its access tokens
/// carry its `client_id` and the `scope`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientGrant {
    pub application_id: ApplicationId,
    pub client_id: ClientId,
    pub scope: Scope,
}

/// A live session (not revoked, not expired) as the store returns it.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    pub id: SessionId,
    pub user_id: UserId,
    pub created_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
    pub last_used_at: OffsetDateTime,
    pub grant: Option<ClientGrant>,
}
