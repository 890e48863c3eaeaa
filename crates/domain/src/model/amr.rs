//! How a user signed in: the methods of a sign-in, as the `amr` claim (RFC 8176) names them.

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
