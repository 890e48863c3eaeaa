use time::OffsetDateTime;

use super::{ApplicationId, ClientId, Scope, SessionId, TokenHash, UserId};

/// A login session as created at login. The refresh token is known only by its hash.
#[derive(Clone, Debug, PartialEq)]
pub struct NewSession {
    /// The session's id, which its access tokens carry as `sid`.
    pub id: SessionId,
    /// The signed-in user.
    pub user_id: UserId,
    /// The hash of the refresh token handed to the client.
    pub refresh_token_hash: TokenHash,
    /// When the user signed in.
    pub created_at: OffsetDateTime,
    /// When the session ends by itself, unless revoked earlier.
    pub expires_at: OffsetDateTime,
    /// Set when an OAuth token exchange opened the session for an application.
    pub grant: Option<ClientGrant>,
}

/// What an application was granted: its refresh token works only for it, and its access tokens
/// carry its `client_id` and the `scope`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientGrant {
    /// The application the session was opened for.
    pub application_id: ApplicationId,
    /// That application's client id.
    pub client_id: ClientId,
    /// The scope the user granted it.
    pub scope: Scope,
}

/// A live session (not revoked, not expired) as the store returns it.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    /// The session's id.
    pub id: SessionId,
    /// The signed-in user.
    pub user_id: UserId,
    /// When the user signed in.
    pub created_at: OffsetDateTime,
    /// When the session ends by itself, unless revoked earlier.
    pub expires_at: OffsetDateTime,
    /// When its refresh token was last used (until then, when it was created): what an idle
    /// timeout counts from.
    pub last_used_at: OffsetDateTime,
    /// The application the session belongs to; `None` for a sign-in to Gatehouse itself.
    pub grant: Option<ClientGrant>,
}
