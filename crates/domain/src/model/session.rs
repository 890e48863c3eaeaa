use chrono::{DateTime, Utc};

use super::{SessionId, TokenHash, UserId};

/// A login session as created at login. The refresh token is known only by its hash.
#[derive(Clone, Debug, PartialEq)]
pub struct NewSession {
    pub id: SessionId,
    pub user_id: UserId,
    pub refresh_token_hash: TokenHash,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// A live session (not revoked, not expired) as the store returns it.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    pub id: SessionId,
    pub user_id: UserId,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub last_used_at: DateTime<Utc>,
}
