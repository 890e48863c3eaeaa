//! `/api/v1/organizations/{id}/members`, invitations, and `/api/v1/iam/users`.

use actix_web::{web, HttpRequest, HttpResponse};
use gatehouse_domain::model::{
    Email, Invitation, InvitationId, Member, MemberFilter, RoleRef, UserId,
};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use utoipa::ToSchema;
use uuid::Uuid;

use super::organizations::PageResponse;
use crate::extract::RequestOrigin;
use crate::{
    error::{ApiError, ErrorBody, ValidationErrorBody},
    extract::{as_is, Authenticated, Fields, InOrganization, ValidJson},
    query::Query,
    state::AppState,
};

/// A member of the organization, or a pending invitation (`status` `pending`, no `user_id`
/// yet), as the member listing and the acceptance of an invitation return it.
#[derive(Serialize, ToSchema)]
pub struct MemberResponse {
    /// Null while the invitation is pending.
    user_id: Option<Uuid>,
    email: String,
    full_name: Option<String>,
    #[schema(example = "member")]
    role: String,
    #[schema(example = "active")]
    status: &'static str,
    invitation_id: Option<Uuid>,
    #[serde(with = "gatehouse_domain::model::timestamp::option")]
    invited_at: Option<OffsetDateTime>,
    invited_by: Option<Uuid>,
    #[serde(with = "gatehouse_domain::model::timestamp::option")]
    accepted_at: Option<OffsetDateTime>,
}

impl From<Member> for MemberResponse {
    fn from(member: Member) -> Self {
        Self {
            user_id: member.user_id.map(|id| id.as_uuid()),
            email: member.email.as_ref().to_owned(),
            full_name: member.full_name.map(|n| n.as_ref().to_owned()),
            role: member.role.to_string(),
            status: member.status.as_str(),
            invitation_id: member.invitation_id.map(|id| id.as_uuid()),
            invited_at: member.invited_at,
            invited_by: member.invited_by.map(|id| id.as_uuid()),
            accepted_at: member.accepted_at,
        }
    }
}

fn parse_user_id(raw: &str) -> Result<UserId, ApiError> {
    Uuid::parse_str(raw)
        .map(UserId::from_uuid)
        .map_err(|_| ApiError::NotFound("member not found".into()))
}

/// Members and pending invitations.
#[utoipa::path(
    get, path = "/api/v1/organizations/{id}/members", tag = "members",
    security(("bearer" = []), ("api_key" = [])),
    params(
        ("id" = Uuid, Path),
        ("page" = Option<u32>, Query), ("page_size" = Option<u32>, Query),
        ("role" = Option<String>, Query), ("search" = Option<String>, Query),
    ),
    responses(
        (status = 200, body = PageResponse<MemberResponse>),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn list(
    req: HttpRequest,
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
) -> Result<HttpResponse, ApiError> {
    let query = Query::of(&req)?;
    let page = query.page()?;
    let filter = MemberFilter {
        role: query.parse("role", |raw| raw.parse::<RoleRef>())?,
        search: query.search()?,
        active_only: false,
    };
    let members = state.members.list(&actor, filter, page).await?;
    Ok(HttpResponse::Ok().json(PageResponse::from_page(members, MemberResponse::from)))
}

/// The body of `POST /api/v1/organizations/{id}/members`: the invitee's `email` and the
/// `role` to give them.
#[derive(Deserialize, ToSchema)]
pub struct InviteRequest {
    #[schema(example = "grace@example.com")]
    email: Option<String>,
    /// The role to give; absent, the organization's `settings.default_role`.
    #[schema(example = "member")]
    role: Option<String>,
}

/// The `201` of an invitation: the pending membership, who invited and when.
#[derive(Serialize, ToSchema)]
pub struct InvitedResponse {
    email: String,
    role: String,
    #[schema(example = "pending")]
    status: &'static str,
    invitation_id: Option<Uuid>,
    #[serde(with = "gatehouse_domain::model::timestamp::option")]
    invited_at: Option<OffsetDateTime>,
    invited_by: Option<Uuid>,
}

/// Invites someone by email; the invitation is mailed with a one-time link. Without `role`, the
/// invitee gets the organization's `settings.default_role`.
#[utoipa::path(
    post, path = "/api/v1/organizations/{id}/members", tag = "members",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path)),
    request_body = InviteRequest,
    responses(
        (status = 201, body = InvitedResponse),
        (status = 403, body = ErrorBody, description = "Missing organization.members.create"),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Already a member or already invited"),
        (status = 422, body = ValidationErrorBody, description = "Bad field, owner role, or a personal workspace"),
    )
)]
pub async fn invite(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    ValidJson(body): ValidJson<InviteRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let email = fields.required("email", body.email, |s| Email::parse(&s));
    let role = fields.optional("role", body.role, |s| s.parse::<RoleRef>());
    let (email, role) = fields.finish(|| Some((email?, role?)))?;
    let member = state.members.invite(&actor, email, role, &origin).await?;
    Ok(HttpResponse::Created().json(InvitedResponse {
        email: member.email.as_ref().to_owned(),
        role: member.role.to_string(),
        status: member.status.as_str(),
        invitation_id: member.invitation_id.map(|id| id.as_uuid()),
        invited_at: member.invited_at,
        invited_by: member.invited_by.map(|id| id.as_uuid()),
    }))
}

/// The body of `PATCH /api/v1/organizations/{id}/members/{user_id}`: the member's new
/// `role` (required).
#[derive(Deserialize, ToSchema)]
pub struct ChangeRoleRequest {
    #[schema(example = "admin")]
    role: Option<String>,
}

/// The `200` of a role change: the member, their new role, and when it changed.
#[derive(Serialize, ToSchema)]
pub struct RoleChangedResponse {
    user_id: Uuid,
    email: String,
    role: String,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    updated_at: OffsetDateTime,
}

/// Changes a member's role (not to or from owner).
#[utoipa::path(
    patch, path = "/api/v1/organizations/{id}/members/{user_id}", tag = "members",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path), ("user_id" = Uuid, Path)),
    request_body = ChangeRoleRequest,
    responses(
        (status = 200, body = RoleChangedResponse),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn change_role(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
    ValidJson(body): ValidJson<ChangeRoleRequest>,
) -> Result<HttpResponse, ApiError> {
    let user_id = parse_user_id(&path.1)?;
    let mut fields = Fields::new();
    let role = fields.required("role", body.role, |s| s.parse::<RoleRef>());
    let role = fields.finish(|| role)?;
    let changed = state
        .members
        .change_role(&actor, user_id, role, &origin)
        .await?;
    Ok(HttpResponse::Ok().json(RoleChangedResponse {
        user_id: user_id.as_uuid(),
        email: changed.member.email.as_ref().to_owned(),
        role: changed.member.role.to_string(),
        updated_at: changed.updated_at,
    }))
}

/// The `200` of removing a member: who was removed, and when.
#[derive(Serialize, ToSchema)]
pub struct RemovedResponse {
    user_id: Uuid,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    removed_at: OffsetDateTime,
}

/// Removes a member, or leaves when it is the caller. The owner cannot be removed.
#[utoipa::path(
    delete, path = "/api/v1/organizations/{id}/members/{user_id}", tag = "members",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path), ("user_id" = Uuid, Path)),
    responses(
        (status = 200, body = RemovedResponse),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "The owner"),
    )
)]
pub async fn remove(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let user_id = parse_user_id(&path.1)?;
    let removed = state.members.remove(&actor, user_id, &origin).await?;
    Ok(HttpResponse::Ok().json(RemovedResponse {
        user_id: removed.user_id.as_uuid(),
        removed_at: removed.removed_at,
    }))
}

/// Revokes a pending invitation.
#[utoipa::path(
    delete, path = "/api/v1/organizations/{id}/invitations/{invitation_id}", tag = "members",
    security(("bearer" = []), ("api_key" = [])),
    params(("id" = Uuid, Path), ("invitation_id" = Uuid, Path)),
    responses(
        (status = 204, description = "Revoked"),
        (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn revoke_invitation(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let id = Uuid::parse_str(&path.1)
        .map(InvitationId::from_uuid)
        .map_err(|_| ApiError::NotFound("invitation not found".into()))?;
    state.members.revoke_invitation(&actor, id, &origin).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// The organization an invitation is to: its id, name and slug.
#[derive(Serialize, ToSchema)]
pub struct InvitationOrganization {
    id: Uuid,
    name: String,
    slug: String,
}

/// An open invitation addressed to the caller's email (`GET /api/v1/invitations`): the
/// organization, the role it gives, who sent it and when it expires.
#[derive(Serialize, ToSchema)]
pub struct InvitationResponse {
    id: Uuid,
    organization: InvitationOrganization,
    email: String,
    role: String,
    invited_by: Uuid,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    invited_at: OffsetDateTime,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    expires_at: OffsetDateTime,
}

impl From<Invitation> for InvitationResponse {
    fn from(invitation: Invitation) -> Self {
        Self {
            id: invitation.id.as_uuid(),
            organization: InvitationOrganization {
                id: invitation.organization_id.as_uuid(),
                name: invitation.organization_name.as_ref().to_owned(),
                slug: invitation.organization_slug.as_ref().to_owned(),
            },
            email: invitation.email.as_ref().to_owned(),
            role: invitation.role.to_string(),
            invited_by: invitation.invited_by.as_uuid(),
            invited_at: invitation.invited_at,
            expires_at: invitation.expires_at,
        }
    }
}

/// The open invitations addressed to the caller's email.
#[utoipa::path(
    get, path = "/api/v1/invitations", tag = "invitations",
    security(("bearer" = [])),
    params(("page" = Option<u32>, Query), ("page_size" = Option<u32>, Query)),
    responses(
        (status = 200, body = PageResponse<InvitationResponse>),
        (status = 401, body = ErrorBody),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn my_invitations(
    req: HttpRequest,
    state: web::Data<AppState>,
    Authenticated(principal): Authenticated,
) -> Result<HttpResponse, ApiError> {
    let page = Query::of(&req)?.page()?;
    let invitations = state.members.my_invitations(&principal, page).await?;
    Ok(HttpResponse::Ok().json(PageResponse::from_page(
        invitations,
        InvitationResponse::from,
    )))
}

/// Accepts an invitation addressed to the caller's email.
#[utoipa::path(
    post, path = "/api/v1/invitations/{invitation_id}/accept", tag = "invitations",
    security(("bearer" = [])),
    params(("invitation_id" = Uuid, Path)),
    responses(
        (status = 200, body = MemberResponse),
        (status = 403, body = ErrorBody, description = "Sent to another email"),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Already a member"),
        (status = 422, body = ErrorBody, description = "Expired"),
    )
)]
pub async fn accept_by_id(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    Authenticated(principal): Authenticated,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let id = Uuid::parse_str(&path)
        .map(InvitationId::from_uuid)
        .map_err(|_| ApiError::NotFound("invitation not found".into()))?;
    let member = state.members.accept_by_id(&principal, id, &origin).await?;
    Ok(HttpResponse::Ok().json(MemberResponse::from(member)))
}

/// The body of `POST /api/v1/invitations/accept`: the invitation link's `token` (required).
#[derive(Deserialize, ToSchema)]
pub struct AcceptByTokenRequest {
    /// The token of the invitation link.
    token: Option<String>,
}

/// Accepts an invitation by the token of its link.
#[utoipa::path(
    post, path = "/api/v1/invitations/accept", tag = "invitations",
    security(("bearer" = [])),
    request_body = AcceptByTokenRequest,
    responses(
        (status = 200, body = MemberResponse),
        (status = 403, body = ErrorBody, description = "Sent to another email"),
        (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "Already a member"),
        (status = 422, body = ValidationErrorBody),
    )
)]
pub async fn accept_by_token(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    Authenticated(principal): Authenticated,
    ValidJson(body): ValidJson<AcceptByTokenRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let token = fields.required("token", body.token, as_is);
    let token = fields.finish(|| token)?;
    let member = state
        .members
        .accept_by_token(&principal, &token, &origin)
        .await?;
    Ok(HttpResponse::Ok().json(MemberResponse::from(member)))
}

/// A user of the organization as `GET /api/v1/iam/users` lists it: an active member, their
/// role, and when they joined.
#[derive(Serialize, ToSchema)]
pub struct IamUserResponse {
    id: Uuid,
    email: String,
    full_name: Option<String>,
    role: String,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    joined_at: OffsetDateTime,
}

/// The organization's users (`X-Organization-ID`).
#[utoipa::path(
    get, path = "/api/v1/iam/users", tag = "members",
    security(("bearer" = [], "organization" = []), ("api_key" = [], "organization" = [])),
    params(("page" = Option<u32>, Query), ("page_size" = Option<u32>, Query)),
    responses(
        (status = 200, body = PageResponse<IamUserResponse>),
        (status = 401, body = ErrorBody),
        (status = 404, body = ErrorBody),
    )
)]
pub async fn iam_users(
    req: HttpRequest,
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
) -> Result<HttpResponse, ApiError> {
    let page = Query::of(&req)?.page()?;
    let users = state.members.users(&actor, page).await?;
    Ok(
        HttpResponse::Ok().json(PageResponse::from_page(users, |member| IamUserResponse {
            id: member.user_id.map(|id| id.as_uuid()).unwrap_or_default(),
            email: member.email.as_ref().to_owned(),
            full_name: member.full_name.map(|n| n.as_ref().to_owned()),
            role: member.role.to_string(),
            joined_at: member.joined_at,
        })),
    )
}

/// The body of `POST /api/v1/organizations/{id}/transfer-ownership`: the new owner's
/// `user_id` and the current owner's `password`, both required.
#[derive(Deserialize, ToSchema)]
pub struct TransferOwnershipRequest {
    /// The active member who becomes the owner.
    user_id: Option<String>,
    /// The owner's password.
    password: Option<String>,
}

/// The `200` of an ownership transfer: the new owner, the previous one, and when.
#[derive(Serialize, ToSchema)]
pub struct OwnershipTransferredResponse {
    /// The new owner (`role` is `owner`).
    owner: MemberResponse,
    /// The previous owner (`role` is `admin` now).
    previous_owner: MemberResponse,
    #[serde(with = "gatehouse_domain::model::timestamp")]
    transferred_at: OffsetDateTime,
}

/// Hands a team organization to another active member: the owner only, signed in, with their
/// password. The new owner is `owner`, the caller `admin` (two `member.role_changed` events).
#[utoipa::path(
    post, path = "/api/v1/organizations/{id}/transfer-ownership", tag = "members",
    security(("bearer" = [])),
    params(("id" = Uuid, Path)),
    request_body = TransferOwnershipRequest,
    responses(
        (status = 200, body = OwnershipTransferredResponse),
        (status = 403, body = ErrorBody, description = "Not the owner, or the owner's API key"),
        (status = 404, body = ErrorBody, description = "No such active member"),
        (status = 409, body = ErrorBody, description = "The members changed meanwhile"),
        (status = 422, body = ValidationErrorBody, description = "Wrong password, oneself, or a personal workspace"),
        (status = 429, body = ErrorBody, description = "Locked out after wrong passwords"),
    )
)]
pub async fn transfer_ownership(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    ValidJson(body): ValidJson<TransferOwnershipRequest>,
) -> Result<HttpResponse, ApiError> {
    let mut fields = Fields::new();
    let user_id = fields.required("user_id", body.user_id, |s| {
        Uuid::parse_str(&s)
            .map(UserId::from_uuid)
            .map_err(|_| "must be a UUID")
    });
    let password = fields.required("password", body.password, as_is);
    let (user_id, password) = fields.finish(|| Some((user_id?, password?)))?;
    let transferred = state
        .ownership
        .transfer(&actor, user_id, password, &origin)
        .await?;
    Ok(HttpResponse::Ok().json(OwnershipTransferredResponse {
        owner: transferred.owner.into(),
        previous_owner: transferred.previous_owner.into(),
        transferred_at: transferred.transferred_at,
    }))
}
