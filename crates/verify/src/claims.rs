//! The claims of a verified Gatehouse access token, typed with Gatehouse's own types
//! (`gatehouse-types`).

use std::collections::HashSet;

use gatehouse_types::{
    ApiScopes, Audience, OrganizationId, Permission, Role, Scope, SessionId, UserId,
};
use serde::Deserialize;
use time::OffsetDateTime;
use uuid::Uuid;

use gatehouse_types::GATEHOUSE_AUDIENCE as DEFAULT_AUDIENCE;

use crate::VerifyError;

/// Who a token acts for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    /// A signed-in user (a sign-in's token, or one issued to an OAuth application for its user).
    User(UserId),
    /// An application acting for itself (a `client_credentials` machine token): its client id.
    Application(String),
}

/// The organization an organization-scoped token was issued for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Organization {
    /// The organization (`org_id`).
    pub id: OrganizationId,
    /// The user's role in it (`org_role`) when the token was issued; `None` in a machine token,
    /// which acts with its scopes, and for a role name this version does not know.
    pub role: Option<Role>,
}

/// The verified claims of a Gatehouse access token: a sign-in's (organization-scoped or not),
/// an OAuth application's, or a machine token. Holds no part of the token itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claims {
    issuer: String,
    subject: Subject,
    audience: Vec<String>,
    issued_at: Option<OffsetDateTime>,
    expires_at: OffsetDateTime,
    token_id: Option<Uuid>,
    session: Option<SessionId>,
    email: Option<String>,
    amr: Vec<String>,
    client_id: Option<String>,
    scope: Option<String>,
    organization: Option<Organization>,
    permissions: HashSet<Permission>,
    /// The audience of the verifier that read the token.
    verified_for: String,
}

impl Claims {
    /// The issuer (`iss`): Gatehouse's public URL.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// Who the token acts for (`sub`).
    pub fn subject(&self) -> &Subject {
        &self.subject
    }

    /// The user the token acts for; `None` for a machine token.
    pub fn user_id(&self) -> Option<UserId> {
        match self.subject {
            Subject::User(user) => Some(user),
            Subject::Application(_) => None,
        }
    }

    /// The audiences (`aud`, one or several): `gatehouse` in a first-party token; in a token
    /// issued to an application, its client id, beside `gatehouse` when the user granted it
    /// one of Gatehouse's API scopes.
    pub fn audience(&self) -> &[String] {
        &self.audience
    }

    /// Whether the token was issued for the audience this verifier was built with: a token
    /// issued to an application (`client_id`) is for that application's client id, any other
    /// for `gatehouse`. A verifier of first-party tokens (audience `gatehouse`) also verifies an
    /// application's token that names `gatehouse` for Gatehouse's own API, but that token is
    /// not for it: [`Self::can`] grants it nothing.
    pub fn is_for_this_audience(&self) -> bool {
        let intended = match (&self.subject, self.client_id.as_deref()) {
            (Subject::User(_), Some(client_id)) => client_id,
            _ => DEFAULT_AUDIENCE,
        };
        // The verifier checked that `aud` names its audience.
        intended == self.verified_for
    }

    /// When the token was issued (`iat`), when it says.
    pub fn issued_at(&self) -> Option<OffsetDateTime> {
        self.issued_at
    }

    /// When the token expires (`exp`).
    pub fn expires_at(&self) -> OffsetDateTime {
        self.expires_at
    }

    /// The token's own id (`jti`), when it has one.
    pub fn token_id(&self) -> Option<Uuid> {
        self.token_id
    }

    /// The sign-in session the token belongs to (`sid`); `None` for a machine token.
    pub fn session(&self) -> Option<SessionId> {
        self.session
    }

    /// The user's email when the token was issued (`email`).
    pub fn email(&self) -> Option<&str> {
        self.email.as_deref()
    }

    /// How the user signed in (`amr`, RFC 8176): `pwd`, `ext`, `mfa`, ...
    pub fn amr(&self) -> &[String] {
        &self.amr
    }

    /// The application the token was issued to (`client_id`), if any.
    pub fn client_id(&self) -> Option<&str> {
        self.client_id.as_deref()
    }

    /// The scope granted to that application (`scope`, space-separated), if any.
    pub fn scope(&self) -> Option<&str> {
        self.scope.as_deref()
    }

    /// The organization and role the token is scoped to (`org_id`, `org_role`); `None` when the
    /// token is not organization-scoped.
    pub fn organization(&self) -> Option<Organization> {
        self.organization
    }

    /// Whether the token grants the permission in its organization: it was issued for this
    /// verifier's audience ([`Self::is_for_this_audience`]) and lists the permission in
    /// `org_permissions` (in a token issued to an application, only among those its API scopes
    /// cover, `org:read` covering `organization.read`, ...: docs/oidc.md). Always `false` for a token that lists none (not
    /// organization-scoped, a machine token, or an application's token without an API scope
    /// that covers any of the role), and for a token issued for another audience.
    pub fn can(&self, permission: Permission) -> bool {
        self.is_for_this_audience() && self.permissions.contains(&permission)
    }

    /// The permissions this version knows among `org_permissions` (names it does not know are
    /// ignored), as [`Self::can`] grants them: none for a token issued for another audience.
    pub fn permissions(&self) -> impl Iterator<Item = Permission> + '_ {
        Permission::ALL
            .into_iter()
            .filter(|permission| self.can(*permission))
    }
}

/// The claims as Gatehouse writes them; what is not Gatehouse's is ignored.
#[derive(Deserialize)]
pub(crate) struct RawClaims {
    iss: String,
    sub: String,
    aud: Audience,
    exp: i64,
    #[serde(default)]
    iat: Option<i64>,
    #[serde(default)]
    jti: Option<Uuid>,
    #[serde(default)]
    sid: Option<SessionId>,
    #[serde(default)]
    email: Option<String>,
    #[serde(default)]
    amr: Vec<String>,
    #[serde(default)]
    client_id: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    org_id: Option<OrganizationId>,
    #[serde(default)]
    org_role: Option<String>,
    #[serde(default)]
    org_permissions: Vec<String>,
}

impl Claims {
    /// The claims of a token a verifier of `audience` verified.
    pub(crate) fn read(raw: RawClaims, audience: &str) -> Result<Self, VerifyError> {
        let subject = if raw.client_id.as_deref() == Some(raw.sub.as_str()) {
            Subject::Application(raw.sub)
        } else {
            let user = Uuid::parse_str(&raw.sub).map_err(|_| VerifyError::Subject)?;
            Subject::User(UserId::from_uuid(user))
        };
        let time =
            |seconds| OffsetDateTime::from_unix_timestamp(seconds).map_err(|_| VerifyError::Claims);
        // A user's token issued to an application grants at most what its API scopes cover,
        // by Gatehouse's own rule, whatever `org_permissions` says (as Gatehouse wrote them
        // before it narrowed them itself); a scope Gatehouse could not have written covers none.
        let granted = match (&subject, &raw.client_id) {
            (Subject::User(_), Some(_)) => Some(
                Scope::parse(raw.scope.as_deref().unwrap_or_default())
                    .map(|scope| ApiScopes::of(&scope))
                    .unwrap_or_default(),
            ),
            _ => None,
        };
        Ok(Self {
            issuer: raw.iss,
            subject,
            audience: raw.aud.into_vec(),
            issued_at: raw.iat.map(time).transpose()?,
            expires_at: time(raw.exp)?,
            token_id: raw.jti,
            session: raw.sid,
            email: raw.email,
            amr: raw.amr,
            client_id: raw.client_id,
            scope: raw.scope,
            organization: raw.org_id.map(|id| Organization {
                id,
                role: raw.org_role.and_then(|role| role.parse().ok()),
            }),
            permissions: raw
                .org_permissions
                .iter()
                .filter_map(|name| Permission::parse(name))
                .filter(|permission| granted.as_ref().is_none_or(|api| api.grant(*permission)))
                .collect(),
            verified_for: audience.to_owned(),
        })
    }
}
