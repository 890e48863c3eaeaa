use std::str::FromStr;

use serde::Serialize;
use time::OffsetDateTime;

use super::{text::display_as_str, EventId, OrganizationId, UserId};

macro_rules! event_types {
    ($($variant:ident => $name:literal, $category:ident, $source:ident, $description:literal;)*) => {
        /// Every event type Gatehouse knows: the sixteen of the spec's catalog, the five more
        /// it names as emitted, the two of verified domains, the three of service accounts,
        /// the three of custom roles, and the test ping.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum EventType {
            $(
                #[doc = concat!("`", $name, "`: ", $description)]
                $variant,
            )*
        }

        impl EventType {
            /// Every event type, in catalog order.
            pub const ALL: &'static [EventType] = &[$(Self::$variant,)*];

            /// The dotted name, as payloads, headers and subscriptions carry it
            /// (`member.joined`).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }

            /// The catalog group it belongs to: its name's first part.
            pub const fn category(self) -> EventCategory {
                match self {
                    $(Self::$variant => EventCategory::$category,)*
                }
            }

            /// Who emits it: Gatehouse itself, or the billing system through
            /// `POST /control/events`.
            pub const fn source(self) -> EventSource {
                match self {
                    $(Self::$variant => EventSource::$source,)*
                }
            }

            /// One sentence saying what happened, for the event catalog.
            pub const fn description(self) -> &'static str {
                match self {
                    $(Self::$variant => $description,)*
                }
            }
        }
    };
}

event_types! {
    UserCreated => "user.created", User, Gatehouse, "A user account was registered.";
    UserUpdated => "user.updated", User, Gatehouse, "A user changed their profile.";
    UserDeleted => "user.deleted", User, Gatehouse, "A user deleted their account.";
    OrganizationCreated => "organization.created", Organization, Gatehouse, "An organization was created.";
    OrganizationUpdated => "organization.updated", Organization, Gatehouse, "An organization's name, slug, settings, policies, branding or SSO changed.";
    MemberInvited => "member.invited", Member, Gatehouse, "Someone was invited to join the organization.";
    MemberJoined => "member.joined", Member, Gatehouse, "An invitation was accepted.";
    MemberRemoved => "member.removed", Member, Gatehouse, "A member was removed or left.";
    ApplicationCreated => "application.created", Application, Gatehouse, "An application was registered.";
    ApplicationUpdated => "application.updated", Application, Gatehouse, "An application was changed.";
    ApplicationDeleted => "application.deleted", Application, Gatehouse, "An application was deleted.";
    AuthLogin => "auth.login", Auth, Gatehouse, "A user logged in.";
    AuthLogout => "auth.logout", Auth, Gatehouse, "A user logged out.";
    AuthPasswordChanged => "auth.password_changed", Auth, Gatehouse, "A user changed their password.";
    BillingSubscriptionCreated => "billing.subscription.created", Billing, Billing, "A subscription was created.";
    BillingInvoicePaid => "billing.invoice.paid", Billing, Billing, "An invoice was paid.";
    AuthMfaEnabled => "auth.mfa_enabled", Auth, Gatehouse, "A user enabled multi-factor authentication.";
    MemberRoleChanged => "member.role_changed", Member, Gatehouse, "A member's role changed.";
    BillingSubscriptionUpdated => "billing.subscription.updated", Billing, Billing, "The organization's plan changed.";
    BillingSubscriptionCancelled => "billing.subscription.cancelled", Billing, Billing, "A subscription was cancelled.";
    BillingInvoiceOverdue => "billing.invoice.overdue", Billing, Billing, "An invoice is overdue.";
    OrganizationDomainVerified => "organization.domain_verified", Organization, Gatehouse, "An organization proved it holds an email domain (its DNS TXT record was found).";
    OrganizationDomainRemoved => "organization.domain_removed", Organization, Gatehouse, "An organization removed one of its email domains.";
    ServiceAccountCreated => "service_account.created", ServiceAccount, Gatehouse, "A service account was created in the organization.";
    ServiceAccountUpdated => "service_account.updated", ServiceAccount, Gatehouse, "A service account's name or role changed.";
    ServiceAccountDeleted => "service_account.deleted", ServiceAccount, Gatehouse, "A service account was deleted; its API keys stopped.";
    RoleCreated => "role.created", Role, Gatehouse, "A custom role was defined in the organization.";
    RoleUpdated => "role.updated", Role, Gatehouse, "A custom role's name, description or permissions changed.";
    RoleDeleted => "role.deleted", Role, Gatehouse, "A custom role was deleted.";
    WebhookTest => "webhook.test", Webhook, Gatehouse, "A test ping sent to one endpoint on request; never subscribed to.";
}

/// Who emits an event type, as the catalog's `source` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EventSource {
    /// Gatehouse emits it, in the transaction of the change it reports.
    Gatehouse,
    /// The billing system emits it: it posts it to `POST /control/events` (and
    /// `gatehouse orgs set-plan`, the operator's stand-in for billing, emits
    /// `billing.subscription.updated`). Gatehouse keeps, signs and retries it like its own.
    Billing,
}

impl EventSource {
    /// `gatehouse` or `billing`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Gatehouse => "gatehouse",
            Self::Billing => "billing",
        }
    }
}

/// The groups of the event catalog.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EventCategory {
    /// `user.*`: accounts and profiles.
    User,
    /// `organization.*`: organizations and their settings.
    Organization,
    /// `member.*`: invitations and memberships.
    Member,
    /// `application.*`: OAuth applications.
    Application,
    /// `auth.*`: sign-ins, sign-outs and credentials.
    Auth,
    /// `billing.*`: subscriptions and invoices.
    Billing,
    /// `webhook.*`: the webhook system's own messages (the test ping).
    Webhook,
    /// `service_account.*`: an organization's service accounts.
    ServiceAccount,
    /// `role.*`: an organization's custom roles.
    Role,
}

impl EventCategory {
    /// The group's name, the first part of its event types' names (`member`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Organization => "organization",
            Self::Member => "member",
            Self::Application => "application",
            Self::Auth => "auth",
            Self::Billing => "billing",
            Self::Webhook => "webhook",
            Self::ServiceAccount => "service_account",
            Self::Role => "role",
        }
    }
}

impl EventType {
    /// Whether an endpoint may subscribe to it. `webhook.test` is sent only by the test
    /// operation, to the one endpoint tested, and is never retried automatically.
    pub const fn subscribable(self) -> bool {
        !matches!(self, Self::WebhookTest)
    }

    /// Whether its deliveries are ever sent again, automatically or on request. A test ping
    /// is sent once: another test is another ping.
    pub const fn retryable(self) -> bool {
        !matches!(self, Self::WebhookTest)
    }
}

impl FromStr for EventType {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .copied()
            .find(|event| event.as_str() == s)
            .ok_or(())
    }
}

display_as_str!(EventType);

impl Serialize for EventType {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// An event recorded in the outbox in the same transaction as the change that caused it.
///
/// An event concerns an organization (`organization.*`, `member.*`, ...) or a user (`user.*`,
/// `auth.*`: delivered to every organization the user belongs to).
#[derive(Clone, Debug, PartialEq)]
pub struct NewEvent {
    /// The event's id in the outbox.
    pub id: EventId,
    /// What happened.
    pub event_type: EventType,
    /// The organization the event concerns; `None` for a user's event, which goes to every
    /// organization the user belongs to.
    pub organization_id: Option<OrganizationId>,
    /// The user who made the change or whom it is about; `None` when no user did (a plan
    /// change from billing, say).
    pub user_id: Option<UserId>,
    /// The payload, delivered as the webhook body's `data`.
    pub data: serde_json::Value,
    /// When the change happened.
    pub occurred_at: OffsetDateTime,
}

/// The data of an event posted from outside (the billing system's, `POST /control/events`): a
/// JSON object every store can hold, so no NUL character in a key or a string (PostgreSQL's
/// `jsonb` refuses `\u0000`).
#[derive(Clone, Debug, PartialEq)]
pub struct PostedEventData(serde_json::Map<String, serde_json::Value>);

/// Why posted event data was refused; the message completes "data ...".
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PostedEventDataError {
    /// Not a JSON object.
    #[error("must be an object")]
    NotAnObject,
    /// A key or a string holds a NUL character.
    #[error("must not contain the NUL character (\\u0000)")]
    Nul,
}

impl PostedEventData {
    /// The object in `value`, when no key or string in it holds a NUL.
    pub fn parse(value: serde_json::Value) -> Result<Self, PostedEventDataError> {
        type Map = serde_json::Map<String, serde_json::Value>;
        fn storable_map(map: &Map) -> bool {
            map.iter()
                .all(|(key, value)| !key.contains('\0') && storable(value))
        }
        fn storable(value: &serde_json::Value) -> bool {
            match value {
                serde_json::Value::String(text) => !text.contains('\0'),
                serde_json::Value::Array(items) => items.iter().all(storable),
                serde_json::Value::Object(map) => storable_map(map),
                _ => true,
            }
        }
        match value {
            serde_json::Value::Object(map) if storable_map(&map) => Ok(Self(map)),
            serde_json::Value::Object(_) => Err(PostedEventDataError::Nul),
            _ => Err(PostedEventDataError::NotAnObject),
        }
    }

    /// The object.
    pub fn into_map(self) -> serde_json::Map<String, serde_json::Value> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn posted_data_is_an_object_without_a_nul() {
        use serde_json::json;
        let ok = json!({ "plan": "business", "seats": [1, 2], "note": "a\tb" });
        assert_eq!(
            PostedEventData::parse(ok.clone()).map(|d| d.into_map().len()),
            Ok(3)
        );
        assert_eq!(
            PostedEventData::parse(json!([1])),
            Err(PostedEventDataError::NotAnObject)
        );
        for bad in [json!({ "a\u{0}": 1 }), json!({ "a": { "b": ["\u{0}"] } })] {
            assert_eq!(PostedEventData::parse(bad), Err(PostedEventDataError::Nul));
        }
    }

    #[test]
    fn catalog_has_the_sixteen_spec_types_thirteen_more_and_the_test_ping() {
        assert_eq!(EventType::ALL.len(), 30);
        let not_subscribable: Vec<_> = EventType::ALL
            .iter()
            .filter(|e| !e.subscribable())
            .collect();
        assert_eq!(not_subscribable, [&EventType::WebhookTest]);
    }

    #[test]
    fn billing_events_come_from_billing_and_every_other_from_gatehouse() {
        for event in EventType::ALL {
            let expected = if event.category() == EventCategory::Billing {
                EventSource::Billing
            } else {
                EventSource::Gatehouse
            };
            assert_eq!(event.source(), expected, "{event}");
        }
        let billing: Vec<_> = EventType::ALL
            .iter()
            .filter(|e| e.source() == EventSource::Billing)
            .map(|e| e.as_str())
            .collect();
        assert_eq!(
            billing,
            [
                "billing.subscription.created",
                "billing.invoice.paid",
                "billing.subscription.updated",
                "billing.subscription.cancelled",
                "billing.invoice.overdue"
            ]
        );
    }

    #[test]
    fn names_round_trip_and_categories_match_their_prefix() {
        for event in EventType::ALL {
            assert_eq!(event.as_str().parse::<EventType>(), Ok(*event));
            assert!(event.as_str().starts_with(event.category().as_str()));
        }
        assert_eq!("user.exploded".parse::<EventType>(), Err(()));
    }
}
