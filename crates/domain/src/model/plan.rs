//! Plans: the one an organization is on, and the paid features each includes.

use std::str::FromStr;

use serde::Serialize;

use super::text::display_as_str;

/// The plan an organization is on; sold elsewhere, set by an operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Plan {
    /// The lowest plan.
    Free,
    /// Above Free.
    Starter,
    /// Above Starter.
    Pro,
    /// Adds policies, branding and SSO.
    Business,
    /// Adds OAuth authorization; the highest plan.
    Enterprise,
}

impl Plan {
    /// Every plan, from the lowest to the highest.
    pub const ALL: [Plan; 5] = [
        Self::Free,
        Self::Starter,
        Self::Pro,
        Self::Business,
        Self::Enterprise,
    ];

    /// The plan's lowercase name, as the API and the store write it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Free => "free",
            Self::Starter => "starter",
            Self::Pro => "pro",
            Self::Business => "business",
            Self::Enterprise => "enterprise",
        }
    }

    /// The most webhook endpoints an organization on the plan may have: 5, 10, 20, 50, 200
    /// from Free to Enterprise.
    pub const fn max_webhook_endpoints(self) -> usize {
        match self {
            Self::Free => 5,
            Self::Starter => 10,
            Self::Pro => 20,
            Self::Business => 50,
            Self::Enterprise => 200,
        }
    }
}

impl FromStr for Plan {
    type Err = &'static str;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|plan| plan.as_str() == s)
            .ok_or("must be one of: free, starter, pro, business, enterprise")
    }
}

display_as_str!(Plan);

/// A paid capability and the least plan that includes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Feature {
    /// Password, MFA, session and network policies; from the Business plan.
    Policies,
    /// White-label branding of the login page and emails; from the Business plan.
    Branding,
    /// SAML single sign-on; from the Business plan.
    Sso,
    /// Custom roles over the permission catalogue; from the Business plan.
    CustomRoles,
    /// Directory sync: an identity provider provisions members over SCIM; from the Business
    /// plan.
    DirectorySync,
    /// OAuth authorization for the organization's applications; Enterprise plan only.
    OAuth,
}

impl Feature {
    /// The least plan that includes the feature; every plan above it does too.
    pub const fn minimum_plan(self) -> Plan {
        match self {
            Self::Policies
            | Self::Branding
            | Self::Sso
            | Self::CustomRoles
            | Self::DirectorySync => Plan::Business,
            Self::OAuth => Plan::Enterprise,
        }
    }

    /// The feature's name as error messages write it: `policies`, `SSO`, ...
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Policies => "policies",
            Self::Branding => "branding",
            Self::Sso => "SSO",
            Self::CustomRoles => "custom roles",
            Self::DirectorySync => "directory sync (SCIM)",
            Self::OAuth => "OAuth authorization",
        }
    }
}

impl Plan {
    /// Whether an organization on this plan has the feature.
    pub fn includes(self, feature: Feature) -> bool {
        self >= feature.minimum_plan()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_round_trip() {
        for plan in Plan::ALL {
            assert_eq!(plan.as_str().parse::<Plan>(), Ok(plan));
        }
        assert!(Plan::Business > Plan::Pro);
    }

    #[test]
    fn only_plans_from_business_up_have_policies() {
        assert!(!Plan::Pro.includes(Feature::Policies));
        assert!(Plan::Business.includes(Feature::Sso));
        assert!(!Plan::Business.includes(Feature::OAuth));
        assert!(Plan::Enterprise.includes(Feature::OAuth));
    }
}
