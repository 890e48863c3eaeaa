use std::fmt;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

macro_rules! uuid_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            #[doc = concat!(
                "The `", stringify!($name), "` with this UUID (as stored, or freshly made)."
            )]
            pub const fn from_uuid(id: Uuid) -> Self {
                Self(id)
            }

            #[doc = concat!(
                "The UUID this `", stringify!($name), "` wraps, as the store keeps it."
            )]
            pub const fn as_uuid(&self) -> Uuid {
                self.0
            }
        }

        impl From<Uuid> for $name {
            fn from(id: Uuid) -> Self {
                Self(id)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

uuid_id!(
    /// A user account.
    UserId
);
uuid_id!(
    /// An organization (personal workspace or team).
    OrganizationId
);
uuid_id!(
    /// A login session: the thing a refresh token and its access tokens belong to.
    SessionId
);
uuid_id!(
    /// An API key (the id, not the secret).
    ApiKeyId
);
uuid_id!(
    /// A service account: an organization's non-human member, acting through its API keys.
    ServiceAccountId
);
uuid_id!(
    /// An event in the outbox.
    EventId
);
uuid_id!(
    /// An invitation to join an organization.
    InvitationId
);
uuid_id!(
    /// An application (an OAuth client) of an organization.
    ApplicationId
);
uuid_id!(
    /// A user's second factor (an authenticator app's TOTP secret, or a WebAuthn credential).
    MfaFactorId
);
uuid_id!(
    /// A domain an organization claimed (`/organizations/{id}/domains/{domain_id}`).
    DomainId
);
uuid_id!(
    /// A SCIM bearer token of an organization (the id, not the secret).
    ScimTokenId
);
uuid_id!(
    /// A user an organization's directory provisioned over SCIM (`/scim/v2/{org}/Users/{id}`).
    DirectoryUserId
);
uuid_id!(
    /// A group an organization's directory provisioned over SCIM (`/scim/v2/{org}/Groups/{id}`).
    DirectoryGroupId
);
