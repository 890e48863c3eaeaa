//! Single sign-on realms: which organization's identity provider an email address belongs to
//! (home realm discovery), and whether that bars the address from signing in any other way.

use crate::{
    model::{Email, EmailDomain, Feature, OrganizationId, Role, UserId},
    ports::{DomainStore, MembershipStore, OrganizationStore, SsoStore, StoreError},
};

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

    async fn has_sso(&self, organization_id: OrganizationId) -> Result<bool, StoreError> {
        Ok(self
            .organizations
            .organization(organization_id)
            .await?
            .is_some_and(|org| org.plan.includes(Feature::Sso)))
    }
}
