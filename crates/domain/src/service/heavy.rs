//! Heavy requests: the ones whose cost grows with an organization's data rather than with the
//! page they answer. Each takes one of its organization's [`HeavyLanes`] for as long as it
//! runs; one that finds none free within [`HEAVY_REQUEST_WAIT`] is refused with [`Busy`], which
//! the API answers `429` with `Retry-After`.
//!
//! The heavy requests, each decided where its use case reads: a member search
//! (`MemberService::list` with `search`), an audit log filtered by more than its organization
//! and time (`AuditLogService`), a SCIM list or filter (`DirectoryService`).
//!
//! [`HEAVY_REQUEST_WAIT`]: crate::ports::HEAVY_REQUEST_WAIT

use crate::{
    model::OrganizationId,
    ports::{HeavyLane, HeavyLanes},
};

/// The organization's heavy requests are all under way: this one was refused after waiting
/// for a lane. The client may try again shortly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "too many searches and filtered lists of this organization are under way; try again shortly"
)]
pub struct Busy;

/// A lane of the organization for one heavy request, held until dropped.
pub(crate) async fn lane(
    lanes: &dyn HeavyLanes,
    organization: OrganizationId,
) -> Result<HeavyLane, Busy> {
    lanes.enter(organization).await.ok_or(Busy)
}
