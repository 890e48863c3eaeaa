//! Single sign-on realms: which organization's identity provider an email address belongs to
//! (home realm discovery), and whether that bars the address from signing in any other way.

use crate::{
    model::{
        Amr, AuthMethod, Email, EmailDomain, Feature, Membership, OrganizationId, Role, UserId,
    },
    ports::{DomainStore, MembershipStore, OrganizationStore, SsoStore, StoreError},
};

/// A signed-in session about to speak for an organization, as single sign-on looks at it: how
/// it was signed in and, for a sign-in through an identity provider, whose.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SessionSignIn<'a> {
    /// The session's sign-in methods (`ext`: through an identity provider).
    pub(crate) amr: &'a Amr,
    /// The organization whose identity provider signed the session in, if one did.
    pub(crate) sso_organization: Option<OrganizationId>,
}

impl SessionSignIn<'_> {
    /// Whether single sign-on may bar this session from the member's organization: it was
    /// not signed in through that organization's own identity provider, the organization's
    /// plan includes single sign-on, and the member is not its owner (who keeps a password
    /// for when the identity provider cannot sign anyone in: break-glass). What is left to
    /// ask is whether the organization's active configuration claims the member's address
    /// ([`Realms::bars`]); where this is `false`, nothing need be read.
    pub(crate) fn may_be_barred(&self, membership: &Membership) -> bool {
        let own_idp = self.amr.includes(AuthMethod::External)
            && self.sso_organization == Some(membership.organization_id);
        !own_idp && membership.plan.includes(Feature::Sso) && !membership.role.is(Role::Owner)
    }
}

/// Where an email signs in through single sign-on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SsoLookup {
    /// The organization whose identity provider the email's domain belongs to.
    pub organization_id: OrganizationId,
    /// Where its sign-in starts: `{public_url}/sso/saml/{organization_id}/login`.
    pub login_url: String,
}

/// The stores a realm is read from.
#[derive(Clone, Copy)]
pub(crate) struct Realms<'a> {
    pub(crate) sso: &'a dyn SsoStore,
    pub(crate) domains: &'a dyn DomainStore,
    pub(crate) organizations: &'a dyn OrganizationStore,
    pub(crate) memberships: &'a dyn MembershipStore,
}

impl Realms<'_> {
    /// Home realm discovery: the organization that verified the email's domain, when its
    /// active configuration whitelists that domain and its plan includes single sign-on.
    pub(crate) async fn of(
        &self,
        email: &Email,
        public_url: &str,
    ) -> Result<Option<SsoLookup>, StoreError> {
        let Ok(domain) = EmailDomain::parse(email.domain()) else {
            return Ok(None);
        };
        let Some(verified_by) = self.domains.verifying_organization(&domain).await? else {
            return Ok(None);
        };
        for configuration in self.sso.sso_configurations_for_domain(&domain).await? {
            let id = configuration.organization_id;
            if id == verified_by && self.has_sso(id).await? {
                return Ok(Some(SsoLookup {
                    organization_id: id,
                    login_url: format!("{public_url}/sso/saml/{id}/login"),
                }));
            }
        }
        Ok(None)
    }

    /// The realm that bars this address from a password, a sign-in link or a password reset
    /// (it signs in with single sign-on): any address of an enforced domain, known or not
    /// (the answer reveals no account), except the organization's owner, who keeps a password
    /// to get in when the identity provider cannot (break-glass).
    pub(crate) async fn enforced(
        &self,
        email: &Email,
        user: Option<UserId>,
        public_url: &str,
    ) -> Result<Option<SsoLookup>, StoreError> {
        let Some(realm) = self.of(email, public_url).await? else {
            return Ok(None);
        };
        if let Some(user) = user {
            let membership = self
                .memberships
                .membership(user, realm.organization_id)
                .await?;
            if membership.is_some_and(|m| m.role.is(Role::Owner)) {
                return Ok(None);
            }
        }
        Ok(Some(realm))
    }

    /// Single sign-on's word on a signed-in session speaking for the member's organization,
    /// at every way in (its routes, a key for it, a token naming it, `/oauth/authorize` for
    /// its applications): where the organization signs the member's address in through its
    /// identity provider, only a session that provider signed in will do, the owner excepted
    /// (see [`SessionSignIn::may_be_barred`]). So a session opened by password before the
    /// organization turned single sign-on on stops reaching it once it does. `Some`: the
    /// realm whose sign-in the member must use instead. `email` is the member's address.
    pub(crate) async fn bars(
        &self,
        session: SessionSignIn<'_>,
        membership: &Membership,
        email: &Email,
        public_url: &str,
    ) -> Result<Option<SsoLookup>, StoreError> {
        if !session.may_be_barred(membership) {
            return Ok(None);
        }
        Ok(self
            .of(email, public_url)
            .await?
            .filter(|realm| realm.organization_id == membership.organization_id))
    }

    async fn has_sso(&self, organization_id: OrganizationId) -> Result<bool, StoreError> {
        Ok(self
            .organizations
            .organization(organization_id)
            .await?
            .is_some_and(|org| org.plan.includes(Feature::Sso)))
    }
}
