use time::{Duration, OffsetDateTime};

use super::{
    ApplicationId, AssignedRole, ClientId, Membership, OrganizationId, Scope, SessionId, TokenHash,
    UserId,
};

/// How stale a session's `last_used_at` may get: a refresh writes it only when it is at least
/// this old, so a client that refreshes often costs a write every half minute, not one per
/// refresh. An idle timeout (five minutes at least) is honoured to within this: a session may
/// be found idle up to this much early, never late.
pub const SESSION_TOUCH_INTERVAL: Duration = Duration::seconds(30);

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
    /// How the user signed in: what its access tokens say in `amr`.
    pub amr: Amr,
    /// For a SAML sign-in, the organization whose identity provider signed the user in: the
    /// only organization for which the session's `ext` method counts as a second factor.
    pub sso_organization_id: Option<OrganizationId>,
    /// The organization its access tokens speak for (`org_id`, `org_role`,
    /// `org_permissions`), chosen at sign-in and admitted then; `None` for tokens of no one
    /// organization.
    pub organization_id: Option<OrganizationId>,
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
    /// How the user signed in.
    pub amr: Amr,
    /// For a SAML sign-in, the organization whose identity provider signed the user in.
    pub sso_organization_id: Option<OrganizationId>,
    /// The organization its access tokens speak for, until a refresh names another or none.
    pub organization_id: Option<OrganizationId>,
}

/// The organization an access token speaks for, after the one admission: its id, the member's
/// role there and what that role may do (the `org_id`, `org_role` and `org_permissions`
/// claims), so that the product behind Gatehouse decides without calling back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenOrganization {
    /// The organization (`org_id`).
    pub organization_id: OrganizationId,
    /// The member's role in it when the token was issued (`org_role`: a built-in role's name
    /// or a custom role's key).
    pub role: AssignedRole,
}

impl TokenOrganization {
    /// What an admitted membership puts in a token.
    pub fn of(membership: &Membership) -> Self {
        Self {
            organization_id: membership.organization_id,
            role: membership.role.clone(),
        }
    }

    /// The dotted names of the role's permissions, in the table's order (`org_permissions`).
    pub fn permissions(&self) -> Vec<String> {
        self.role
            .permissions()
            .iter()
            .map(|permission| permission.as_str().to_owned())
            .collect()
    }
}

/// Which organization a refresh's token speaks for (`organization_id` of `POST
/// /auth/refresh`): the session's as it stands, another one (admitted, and kept for the
/// refreshes after), or none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OrganizationChoice {
    /// `organization_id` absent: the session's organization, if it has one.
    #[default]
    Keep,
    /// `organization_id` given: this one from now on.
    Switch(OrganizationId),
    /// `organization_id: null`: none from now on.
    Clear,
}

impl OrganizationChoice {
    /// The organization chosen, given the session's current one.
    pub fn applied_to(self, current: Option<OrganizationId>) -> Option<OrganizationId> {
        match self {
            Self::Keep => current,
            Self::Switch(organization) => Some(organization),
            Self::Clear => None,
        }
    }
}

/// One way of proving who one is, as RFC 8176 names it for the `amr` claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AuthMethod {
    /// `pwd`: a password Gatehouse checked.
    Password,
    /// `ext`: an external identity provider vouched for the user (SAML single sign-on); the
    /// organization that configured it trusts its checks.
    External,
    /// `otp`: a one-time code, from an authenticator app (TOTP) or a recovery code.
    Otp,
    /// `hwk`: a proof of possession of a hardware-secured key (WebAuthn).
    HardwareKey,
    /// `email`: a sign-in link mailed to the user's address (not an RFC 8176 value; that
    /// registry has none for it, and other values are allowed).
    Email,
}

impl AuthMethod {
    /// The RFC 8176 value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Password => "pwd",
            Self::External => "ext",
            Self::Otp => "otp",
            Self::HardwareKey => "hwk",
            Self::Email => "email",
        }
    }

    /// The method an RFC 8176 value names, among those Gatehouse uses.
    pub fn parse(raw: &str) -> Option<Self> {
        match raw {
            "pwd" => Some(Self::Password),
            "ext" => Some(Self::External),
            "otp" => Some(Self::Otp),
            "hwk" => Some(Self::HardwareKey),
            "email" => Some(Self::Email),
            _ => None,
        }
    }
}

/// The methods a sign-in used (the `amr` claim): never empty, each at most once, in the order
/// they were used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Amr(Vec<AuthMethod>);

impl Amr {
    /// A password sign-in: `["pwd"]`.
    pub fn password() -> Self {
        Self(vec![AuthMethod::Password])
    }

    /// A sign-in by a mailed link: `["email"]`.
    pub fn email_link() -> Self {
        Self(vec![AuthMethod::Email])
    }

    /// A sign-in through an external identity provider (SAML): `["ext"]`.
    pub fn external() -> Self {
        Self(vec![AuthMethod::External])
    }

    /// The same sign-in, completed by `method` as well (nothing changes if it was used).
    pub fn and(mut self, method: AuthMethod) -> Self {
        if !self.0.contains(&method) {
            self.0.push(method);
        }
        self
    }

    /// Whether the sign-in used a second factor: a one-time code or a hardware key.
    pub fn has_second_factor(&self) -> bool {
        self.includes(AuthMethod::Otp) || self.includes(AuthMethod::HardwareKey)
    }

    /// The methods, in the order they were used.
    pub fn methods(&self) -> &[AuthMethod] {
        &self.0
    }

    /// Whether the sign-in used `method`.
    pub fn includes(&self, method: AuthMethod) -> bool {
        self.0.contains(&method)
    }

    /// The claim's values (`["pwd"]`).
    pub fn claim(&self) -> Vec<String> {
        self.0.iter().map(|m| m.as_str().to_owned()).collect()
    }

    /// How the store keeps it: the values separated by single spaces (`"pwd"`).
    pub fn stored(&self) -> String {
        self.claim().join(" ")
    }

    /// Reads what [`Amr::stored`] wrote; `None` for an empty list, an unknown value or a
    /// repeated one.
    pub fn from_stored(raw: &str) -> Option<Self> {
        let mut methods = Vec::new();
        for value in raw.split(' ') {
            let method = AuthMethod::parse(value)?;
            if methods.contains(&method) {
                return None;
            }
            methods.push(method);
        }
        (!methods.is_empty()).then_some(Self(methods))
    }

    /// What `auth.login` events say in `method`: `password`, or `saml` for an external
    /// identity provider.
    pub fn event_method(&self) -> &'static str {
        if self.includes(AuthMethod::External) {
            "saml"
        } else if self.includes(AuthMethod::Email) {
            "magic_link"
        } else {
            "password"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amr_is_kept_and_read_back_as_rfc_8176_values() {
        let otp = Amr::password().and(AuthMethod::Otp);
        assert_eq!(otp.claim(), ["pwd", "otp"]);
        assert_eq!(otp.clone().and(AuthMethod::Otp), otp, "each method once");
        assert!(otp.has_second_factor() && !Amr::password().has_second_factor());
        let key = Amr::password().and(AuthMethod::HardwareKey);
        for amr in [Amr::password(), Amr::external(), otp, key] {
            assert_eq!(Amr::from_stored(&amr.stored()), Some(amr.clone()));
        }
        assert_eq!(Amr::password().claim(), ["pwd"]);
        assert_eq!(Amr::external().claim(), ["ext"]);
        for bad in ["", "pwd pwd", "sms", "pwd ", "PWD"] {
            assert_eq!(Amr::from_stored(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_login_event_names_the_method() {
        assert_eq!(Amr::password().event_method(), "password");
        assert_eq!(Amr::external().event_method(), "saml");
    }
}
