//! The outbox's fan-out rule: where a recorded event goes.

use sha2::{Digest, Sha256};
use uuid::{Builder, Uuid, Variant, Version};

use super::{EventId, NewEvent, OrganizationId};

impl NewEvent {
    /// The outbox rows of this event, given the live organizations its user belongs to at the
    /// moment of the write (`member_of`, oldest membership first; the store reads it in the
    /// same transaction).
    ///
    /// An organization's event is one row. A user's event (no organization) goes to each of
    /// the user's organizations, one row each, so that it still reaches them after the user has
    /// left or been deleted; the first row keeps the event's id and the others get ids derived
    /// from it and the organization (the same inputs give the same ids, and they sort with the
    /// event's own, by time). A user who belongs to no organization gets one row without an
    /// organization, kept and delivered nowhere.
    pub fn fan_out(self, member_of: &[OrganizationId]) -> Vec<NewEvent> {
        if self.organization_id.is_some() || self.user_id.is_none() || member_of.is_empty() {
            return vec![self];
        }
        member_of
            .iter()
            .enumerate()
            .map(|(i, organization)| NewEvent {
                id: if i == 0 {
                    self.id
                } else {
                    derived_id(self.id, *organization)
                },
                organization_id: Some(*organization),
                ..self.clone()
            })
            .collect()
    }
}

/// A v7 id with `event`'s timestamp and version bits, the rest from SHA-256 of the two ids.
fn derived_id(event: EventId, organization: OrganizationId) -> EventId {
    let mut bytes = *event.as_uuid().as_bytes();
    let digest = Sha256::new()
        .chain_update(bytes)
        .chain_update(organization.as_uuid().as_bytes())
        .finalize();
    bytes[6..].copy_from_slice(&digest[..10]);
    let id: Uuid = Builder::from_bytes(bytes)
        .with_version(Version::SortRand)
        .with_variant(Variant::RFC4122)
        .into_uuid();
    EventId::from_uuid(id)
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use time::macros::datetime;

    use super::*;
    use crate::model::{EventType, UserId};

    fn event(organization: Option<OrganizationId>, user: Option<UserId>) -> NewEvent {
        NewEvent {
            id: EventId::from_uuid(
                Uuid::parse_str("019ab000-0000-7000-8000-000000000001").unwrap(),
            ),
            event_type: EventType::UserUpdated,
            organization_id: organization,
            user_id: user,
            data: json!({"id": "u"}),
            occurred_at: datetime!(2026-11-25 10:00 UTC),
        }
    }

    fn org(n: u128) -> OrganizationId {
        OrganizationId::from_uuid(Uuid::from_u128(n))
    }

    #[test]
    fn an_organizations_event_is_one_row_whatever_its_user_belongs_to() {
        let user = Some(UserId::from_uuid(Uuid::from_u128(7)));
        let mine = event(Some(org(1)), user);
        assert_eq!(mine.clone().fan_out(&[org(2), org(3)]), vec![mine]);
    }

    #[test]
    fn a_users_event_goes_to_each_of_their_organizations_once() {
        let user = Some(UserId::from_uuid(Uuid::from_u128(7)));
        let original = event(None, user);
        let rows = original.clone().fan_out(&[org(1), org(2), org(3)]);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].id, original.id, "the first keeps the event's id");
        let orgs: Vec<_> = rows.iter().map(|r| r.organization_id).collect();
        assert_eq!(orgs, [Some(org(1)), Some(org(2)), Some(org(3))]);
        let mut ids: Vec<_> = rows.iter().map(|r| r.id).collect();
        ids.dedup();
        assert_eq!(ids.len(), 3, "every row its own id");
        for row in &rows[1..] {
            let id = row.id.as_uuid();
            assert_eq!(id.get_version(), Some(Version::SortRand));
            assert_eq!(id.as_bytes()[..6], original.id.as_uuid().as_bytes()[..6]);
            assert_eq!(
                (&row.data, row.occurred_at),
                (&original.data, original.occurred_at)
            );
        }
        assert_eq!(
            original.fan_out(&[org(1), org(2), org(3)]),
            rows,
            "deterministic"
        );
    }

    #[test]
    fn a_user_in_no_organization_gets_one_row_delivered_nowhere() {
        let user = Some(UserId::from_uuid(Uuid::from_u128(7)));
        let lonely = event(None, user);
        assert_eq!(lonely.clone().fan_out(&[]), vec![lonely]);
    }
}
