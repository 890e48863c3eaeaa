//! Organization admission: whether an organization lets a token speak for the user (member,
//! IP allowlist, MFA policy, single sign-on), and where an organization's single sign-on bars
//! a sign-in by password or link.

use time::OffsetDateTime;

use super::{AuthService, Opening};
use crate::{
    model::{
        Amr, ClientAddress, Email, Feature, Membership, OrganizationId, SessionId,
        TokenOrganization, User, UserId,
    },
    ports::{MemberAccess, StoreError},
    service::{
        authenticator::{admit, OrgAccessError},
        sso_realm::{Realms, SessionSignIn},
        Principal,
    },
};

/// Why an organization named at a sign-in or a refresh (`organization_id`) does not let the
/// user's tokens speak for it: the one admission's answer, at this way in.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OrganizationRefused {
    /// Not an active member of a live organization (or no such organization): one answer.
    #[error("you are not a member of this organization")]
    NotMember,
    /// The organization's IP allowlist does not hold the request's address.
    #[error("requests from {0} are not allowed by the organization's IP allowlist")]
    AddressNotAllowed(ClientAddress),
    /// The organization requires a second factor this sign-in did not use, and the member's
    /// grace period is over.
    #[error("organization requires multi-factor authentication")]
    MfaRequired,
    /// The address is of a domain whose organization signs its members in with single
    /// sign-on, and this sign-in was not through its identity provider: at this URL.
    #[error("organization requires single sign-on")]
    SsoRequired(String),
}

/// Why a token could not be made to speak for an organization.
#[derive(Debug)]
pub(crate) enum Admitting {
    Refused(OrganizationRefused),
    Store(StoreError),
}

impl From<StoreError> for Admitting {
    fn from(error: StoreError) -> Self {
        Self::Store(error)
    }
}

impl AuthService {
    /// Where the address must sign in instead, when an organization's single sign-on bars it
    /// from a password, a sign-in link or a password reset (its owner excepted): the IdP's
    /// sign-in URL.
    pub(crate) async fn sso_realm_barring(
        &self,
        email: &Email,
        user: Option<UserId>,
    ) -> Result<Option<String>, StoreError> {
        Ok(self
            .realms()
            .enforced(email, user, &self.settings.issuer)
            .await?
            .map(|realm| realm.login_url))
    }

    /// The opening, its tokens speaking for `organization` when one is named and it admits
    /// the user (from `client`: see [`Self::admit_token`]).
    pub(crate) async fn admitted_opening(
        &self,
        opening: Opening,
        organization: Option<OrganizationId>,
        client: Option<ClientAddress>,
    ) -> Result<Opening, Admitting> {
        let Some(organization) = organization else {
            return Ok(opening);
        };
        let admitted = self
            .admit_token(
                &opening.user,
                opening.session.id,
                &opening.session.amr,
                opening.session.sso_organization_id,
                organization,
                client,
                opening.session.created_at,
            )
            .await?;
        Ok(opening.for_organization(Some(admitted)))
    }

    /// The one admission, for a token that is to speak for an organization: the user is an
    /// active member of it, from an address its IP allowlist holds (`client`; `None` where the
    /// request is an application's server's, whose user was admitted at `/oauth/authorize`),
    /// with the second factor its MFA policy requires after the member's grace (its single
    /// sign-on is [`Self::sso_admits`]'s). What the token then says: the organization and the
    /// member's role.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn admit_token(
        &self,
        user: &User,
        session_id: SessionId,
        amr: &Amr,
        sso_organization: Option<OrganizationId>,
        organization_id: OrganizationId,
        client: Option<ClientAddress>,
        now: OffsetDateTime,
    ) -> Result<TokenOrganization, Admitting> {
        let Some(membership) = self
            .ports
            .memberships
            .membership(user.id, organization_id)
            .await?
        else {
            return Err(Admitting::Refused(OrganizationRefused::NotMember));
        };
        let policies = match membership.plan.includes(Feature::Policies) {
            true => self.ports.policies.policies(organization_id).await?,
            false => None,
        };
        let admitted = admit_member(
            user,
            session_id,
            amr,
            sso_organization,
            Some(MemberAccess {
                membership: membership.clone(),
                policies,
            }),
            client,
            now,
        )?;
        self.sso_admits(user, amr, sso_organization, &membership)
            .await?;
        Ok(admitted)
    }

    /// The organization's single sign-on, for a session that is to speak for the member's
    /// organization: [`Realms::bars`], the rule every way in applies. A password or link
    /// sign-in met it at its first step already ([`Self::sso_realm_barring`]); a sign-in
    /// through another organization's identity provider, and a refresh of a session opened
    /// before the organization turned single sign-on on, meet it here.
    pub(super) async fn sso_admits(
        &self,
        user: &User,
        amr: &Amr,
        sso_organization: Option<OrganizationId>,
        membership: &Membership,
    ) -> Result<(), Admitting> {
        let session = SessionSignIn {
            amr,
            sso_organization,
        };
        match self
            .realms()
            .bars(session, membership, &user.email, &self.settings.issuer)
            .await?
        {
            Some(realm) => Err(Admitting::Refused(OrganizationRefused::SsoRequired(
                realm.login_url,
            ))),
            None => Ok(()),
        }
    }

    /// The stores single sign-on realms are read from.
    fn realms(&self) -> Realms<'_> {
        Realms {
            sso: self.ports.sso.as_ref(),
            domains: self.ports.domains.as_ref(),
            organizations: self.ports.organizations.as_ref(),
            memberships: self.ports.memberships.as_ref(),
        }
    }
}

/// The one admission's decision, for a token that is to speak for the organization of
/// `access` (`None`: the user is no member of a live organization), from what was read: see
/// [`AuthService::admit_token`]. A refresh hands it the membership and the policies its own
/// read of the session brought.
#[allow(clippy::too_many_arguments)]
pub(super) fn admit_member(
    user: &User,
    session_id: SessionId,
    amr: &Amr,
    sso_organization: Option<OrganizationId>,
    access: Option<MemberAccess>,
    client: Option<ClientAddress>,
    now: OffsetDateTime,
) -> Result<TokenOrganization, Admitting> {
    let refused = |why| Err(Admitting::Refused(why));
    let Some(MemberAccess {
        membership,
        policies,
    }) = access
    else {
        return refused(OrganizationRefused::NotMember);
    };
    // Saved policies bind only where the plan includes them.
    let policies = policies.filter(|_| membership.plan.includes(Feature::Policies));
    let principal = Principal::User {
        user_id: user.id,
        session_id,
        amr: amr.clone(),
        application: None,
    };
    match admit(
        principal,
        membership.clone(),
        policies,
        sso_organization,
        client,
        now,
    ) {
        Ok(_) => Ok(TokenOrganization::of(&membership)),
        Err(OrgAccessError::AddressNotAllowed(address)) => {
            refused(OrganizationRefused::AddressNotAllowed(address))
        }
        Err(OrgAccessError::MfaRequired) => refused(OrganizationRefused::MfaRequired),
        // `admit` decides no single sign-on: `sso_admits` does, beside it.
        Err(OrgAccessError::SsoRequired(login_url)) => {
            refused(OrganizationRefused::SsoRequired(login_url))
        }
        Err(OrgAccessError::NotFound | OrgAccessError::NoApiScope) => {
            refused(OrganizationRefused::NotMember)
        }
        Err(OrgAccessError::Store(error)) => Err(error.into()),
    }
}
