//! `/scim/v2/{organization_id}/...`: the SCIM 2.0 service provider of each organization, for
//! its identity provider (with one of the organization's SCIM tokens as its bearer). The
//! protocol (JSON, filters, `PATCH`) is the `gatehouse-scim` crate's; what provisioning means
//! for the organization is [`DirectoryService`](gatehouse_domain::service::DirectoryService)'s.
//! Every answer, errors included, is `application/scim+json` in SCIM's own schemas.

use std::{future::Future, pin::Pin};

use actix_web::{dev::Payload, http::StatusCode, web, FromRequest, HttpRequest, HttpResponse};
use gatehouse_domain::{
    model::{DirectoryGroupId, DirectoryUserId, OrganizationId},
    service::{Actor, PatchError},
};
use gatehouse_scim::{
    list_page, parse_group, parse_user, project, ListQuery, Patch, Resources, ScimError,
    SCIM_CONTENT_TYPE,
};
use serde_json::Value;
use uuid::Uuid;

use crate::{
    access::{unrouted, Access, Endpoint},
    error::ScimFailure,
    extract::{InOrganization, RequestOrigin, ValidJson},
    state::AppState,
};

type ScimAnswer = Result<HttpResponse, ScimFailure>;

/// A JSON body (`application/scim+json` or `application/json`), or SCIM's `400`.
pub struct ScimBody(pub Value);

impl FromRequest for ScimBody {
    type Error = ScimFailure;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ScimFailure>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let body = ValidJson::<Value>::from_request(req, payload);
        Box::pin(async move {
            match body.await {
                Ok(ValidJson(value)) => Ok(Self(value)),
                Err(error) => Err(error.into()),
            }
        })
    }
}

fn scim_json(status: StatusCode, body: &Value) -> HttpResponse {
    HttpResponse::build(status)
        .content_type(SCIM_CONTENT_TYPE)
        .json(body)
}

fn resources(state: &AppState, organization: OrganizationId) -> Resources {
    Resources::new(format!("{}/scim/v2/{organization}", state.public_url))
}

fn query_pairs(req: &HttpRequest) -> Vec<(String, String)> {
    url::form_urlencoded::parse(req.query_string().as_bytes())
        .into_owned()
        .collect()
}

fn user_id(raw: &str) -> Result<DirectoryUserId, ScimFailure> {
    Uuid::parse_str(raw)
        .map(DirectoryUserId::from_uuid)
        .map_err(|_| ScimError::not_found("user not found").into())
}

fn group_id(raw: &str) -> Result<DirectoryGroupId, ScimFailure> {
    Uuid::parse_str(raw)
        .map(DirectoryGroupId::from_uuid)
        .map_err(|_| ScimError::not_found("group not found").into())
}

/// One resource, with `attributes` / `excludedAttributes` applied.
fn single(req: &HttpRequest, status: StatusCode, resource: Value, location: &str) -> ScimAnswer {
    let query = ListQuery::parse(&query_pairs(req))?;
    let body = project(resource, &query.attributes, &query.excluded_attributes);
    Ok(HttpResponse::build(status)
        .content_type(SCIM_CONTENT_TYPE)
        .insert_header(("Location", location.to_owned()))
        .json(body))
}

fn patch_failure(error: PatchError<ScimError>) -> ScimFailure {
    match error {
        PatchError::Patch(error) => error.into(),
        PatchError::Directory(error) => error.into(),
    }
}

// --- Discovery. ---

/// `GET /ServiceProviderConfig`.
pub async fn service_provider_config(
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
) -> ScimAnswer {
    let body = resources(&state, actor.organization_id()).service_provider_config();
    Ok(scim_json(StatusCode::OK, &body))
}

/// `GET /ResourceTypes`.
pub async fn resource_types(
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
) -> ScimAnswer {
    let body = resources(&state, actor.organization_id()).resource_types();
    Ok(scim_json(StatusCode::OK, &body))
}

/// `GET /ResourceTypes/{id}`.
pub async fn resource_type(
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
) -> ScimAnswer {
    let body = resources(&state, actor.organization_id())
        .resource_type(&path.1)
        .ok_or_else(|| ScimError::not_found("no such resource type"))?;
    Ok(scim_json(StatusCode::OK, &body))
}

/// `GET /Schemas`.
pub async fn schemas(
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
) -> ScimAnswer {
    let body = resources(&state, actor.organization_id()).schemas();
    Ok(scim_json(StatusCode::OK, &body))
}

/// `GET /Schemas/{id}`.
pub async fn schema(
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
) -> ScimAnswer {
    let body = resources(&state, actor.organization_id())
        .schema(&path.1)
        .ok_or_else(|| ScimError::not_found("no such schema"))?;
    Ok(scim_json(StatusCode::OK, &body))
}

/// A method the endpoint does not take: `405` in SCIM's error schema.
pub async fn method_not_allowed(_: InOrganization) -> ScimAnswer {
    Err(ScimError::new(405, None, "this endpoint does not take this method").into())
}

/// The list parameters of a `POST …/.search` body (RFC 7644 §3.4.3), as a query's.
fn search_query(body: &Value) -> Result<ListQuery, ScimFailure> {
    let Value::Object(fields) = body else {
        return Err(ScimError::invalid_syntax("a search request is a JSON object").into());
    };
    let mut pairs = Vec::new();
    for (name, value) in fields {
        let text = match value {
            Value::String(text) => text.clone(),
            Value::Number(number) => number.to_string(),
            Value::Array(items) => items
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(","),
            _ => continue,
        };
        pairs.push((name.clone(), text));
    }
    Ok(ListQuery::parse(&pairs)?)
}

/// What a search lists: users, groups, or both (the root's `/.search`).
#[derive(Clone, Copy)]
enum Searched {
    Users,
    Groups,
    Everything,
}

async fn search(state: &AppState, actor: &Actor, body: &Value, searched: Searched) -> ScimAnswer {
    let query = search_query(body)?;
    match searched {
        Searched::Users => list_users_of(state, actor, &query).await,
        Searched::Groups => list_groups_of(state, actor, &query).await,
        Searched::Everything => {
            let render = resources(state, actor.organization_id());
            let (users, groups) = state
                .directory
                .list_everything(
                    actor,
                    query.users(&render),
                    query.groups(&render),
                    query.window(),
                    query.group_members(),
                )
                .await?;
            let found = users
                .resources
                .iter()
                .map(|user| render.user(user))
                .chain(groups.resources.iter().map(|group| render.group(group)))
                .collect();
            let body = list_page(found, users.total + groups.total, &query);
            Ok(scim_json(StatusCode::OK, &body))
        }
    }
}

/// The page of users the query asks for, filtered and paged by the store.
async fn list_users_of(state: &AppState, actor: &Actor, query: &ListQuery) -> ScimAnswer {
    let render = resources(state, actor.organization_id());
    let page = state
        .directory
        .list_users(actor, query.users(&render), query.window())
        .await?;
    let found = page
        .resources
        .iter()
        .map(|user| render.user(user))
        .collect();
    Ok(scim_json(
        StatusCode::OK,
        &list_page(found, page.total, query),
    ))
}

/// The page of groups the query asks for, filtered and paged by the store; their members only
/// when the page shows them.
async fn list_groups_of(state: &AppState, actor: &Actor, query: &ListQuery) -> ScimAnswer {
    let render = resources(state, actor.organization_id());
    let page = state
        .directory
        .list_groups(
            actor,
            query.groups(&render),
            query.window(),
            query.group_members(),
        )
        .await?;
    let found = page
        .resources
        .iter()
        .map(|group| render.group(group))
        .collect();
    Ok(scim_json(
        StatusCode::OK,
        &list_page(found, page.total, query),
    ))
}

/// `POST /.search`: users and groups, as a `GET` list with the body's parameters.
pub async fn search_all(
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
    ScimBody(body): ScimBody,
) -> ScimAnswer {
    search(&state, &actor, &body, Searched::Everything).await
}

/// `POST /Users/.search`.
pub async fn search_users(
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
    ScimBody(body): ScimBody,
) -> ScimAnswer {
    search(&state, &actor, &body, Searched::Users).await
}

/// `POST /Groups/.search`.
pub async fn search_groups(
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
    ScimBody(body): ScimBody,
) -> ScimAnswer {
    search(&state, &actor, &body, Searched::Groups).await
}

/// Any other path under an organization's SCIM base.
pub async fn not_found(_: InOrganization) -> ScimAnswer {
    Err(ScimError::not_found("no such SCIM endpoint").into())
}

// --- Users. ---

/// `GET /Users`: filtered, paged, projected.
pub async fn list_users(
    req: HttpRequest,
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
) -> ScimAnswer {
    let query = ListQuery::parse(&query_pairs(&req))?;
    list_users_of(&state, &actor, &query).await
}

/// `POST /Users`: provisions a user (`201`).
pub async fn create_user(
    req: HttpRequest,
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    ScimBody(body): ScimBody,
) -> ScimAnswer {
    let attributes = parse_user(&body)?;
    let user = state
        .directory
        .create_user(&actor, attributes, &origin)
        .await?;
    let render = resources(&state, actor.organization_id());
    single(
        &req,
        StatusCode::CREATED,
        render.user(&user),
        &render.user_location(user.id),
    )
}

/// `GET /Users/{id}`.
pub async fn get_user(
    req: HttpRequest,
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
) -> ScimAnswer {
    let id = user_id(&path.1)?;
    let user = state.directory.user(&actor, id).await?;
    let render = resources(&state, actor.organization_id());
    single(
        &req,
        StatusCode::OK,
        render.user(&user),
        &render.user_location(id),
    )
}

/// `PUT /Users/{id}`: replaces the user's attributes.
pub async fn replace_user(
    req: HttpRequest,
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
    ScimBody(body): ScimBody,
) -> ScimAnswer {
    let id = user_id(&path.1)?;
    let attributes = parse_user(&body)?;
    let user = state
        .directory
        .replace_user(&actor, id, attributes, &origin)
        .await?;
    let render = resources(&state, actor.organization_id());
    single(
        &req,
        StatusCode::OK,
        render.user(&user),
        &render.user_location(id),
    )
}

/// `PATCH /Users/{id}`: RFC 7644 §3.5.2.
pub async fn patch_user(
    req: HttpRequest,
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
    ScimBody(body): ScimBody,
) -> ScimAnswer {
    let id = user_id(&path.1)?;
    let patch = Patch::parse(&body)?;
    let user = state
        .directory
        .patch_user(&actor, id, |current| patch.apply_to_user(current), &origin)
        .await
        .map_err(patch_failure)?;
    let render = resources(&state, actor.organization_id());
    single(
        &req,
        StatusCode::OK,
        render.user(&user),
        &render.user_location(id),
    )
}

/// `DELETE /Users/{id}`: deprovisions (`204`).
pub async fn delete_user(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
) -> ScimAnswer {
    let id = user_id(&path.1)?;
    state.directory.delete_user(&actor, id, &origin).await?;
    Ok(HttpResponse::NoContent().finish())
}

// --- Groups. ---

/// `GET /Groups`: filtered, paged, projected.
pub async fn list_groups(
    req: HttpRequest,
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
) -> ScimAnswer {
    let query = ListQuery::parse(&query_pairs(&req))?;
    list_groups_of(&state, &actor, &query).await
}

/// `POST /Groups` (`201`).
pub async fn create_group(
    req: HttpRequest,
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    ScimBody(body): ScimBody,
) -> ScimAnswer {
    let attributes = parse_group(&body)?;
    let group = state
        .directory
        .create_group(&actor, attributes, &origin)
        .await?;
    let render = resources(&state, actor.organization_id());
    single(
        &req,
        StatusCode::CREATED,
        render.group(&group),
        &render.group_location(group.id),
    )
}

/// `GET /Groups/{id}`.
pub async fn get_group(
    req: HttpRequest,
    state: web::Data<AppState>,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
) -> ScimAnswer {
    let id = group_id(&path.1)?;
    let group = state.directory.group(&actor, id).await?;
    let render = resources(&state, actor.organization_id());
    single(
        &req,
        StatusCode::OK,
        render.group(&group),
        &render.group_location(id),
    )
}

/// `PUT /Groups/{id}`.
pub async fn replace_group(
    req: HttpRequest,
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
    ScimBody(body): ScimBody,
) -> ScimAnswer {
    let id = group_id(&path.1)?;
    let attributes = parse_group(&body)?;
    let group = state
        .directory
        .replace_group(&actor, id, attributes, &origin)
        .await?;
    let render = resources(&state, actor.organization_id());
    single(
        &req,
        StatusCode::OK,
        render.group(&group),
        &render.group_location(id),
    )
}

/// `PATCH /Groups/{id}`: members added or removed, renamed.
pub async fn patch_group(
    req: HttpRequest,
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
    ScimBody(body): ScimBody,
) -> ScimAnswer {
    let id = group_id(&path.1)?;
    let patch = Patch::parse(&body)?;
    let group = state
        .directory
        .patch_group(&actor, id, |current| patch.apply_to_group(current), &origin)
        .await
        .map_err(patch_failure)?;
    let render = resources(&state, actor.organization_id());
    single(
        &req,
        StatusCode::OK,
        render.group(&group),
        &render.group_location(id),
    )
}

/// `DELETE /Groups/{id}` (`204`).
pub async fn delete_group(
    state: web::Data<AppState>,
    RequestOrigin(origin): RequestOrigin,
    InOrganization(actor): InOrganization,
    path: web::Path<(String, String)>,
) -> ScimAnswer {
    let id = group_id(&path.1)?;
    state.directory.delete_group(&actor, id, &origin).await?;
    Ok(HttpResponse::NoContent().finish())
}

/// The SCIM endpoints of every organization, under `/scim/v2/{id}`.
pub fn configure(config: &mut web::ServiceConfig) {
    // Every SCIM answer needs one of the organization's SCIM tokens, an unsupported method's
    // and an unknown path's included.
    let endpoint = |path: &str| {
        Endpoint::new(
            "/scim/v2/{id}",
            path,
            Access::Directory,
            (Access::Directory, web::to(method_not_allowed)),
        )
    };
    // `/scim/v2` first, alone: a path outside it meets no pattern of SCIM's.
    config.service(
        web::scope("/scim/v2").service(
            web::scope("/{id}")
                .service(
                    endpoint("/ServiceProviderConfig")
                        .route(web::get().to(service_provider_config)),
                )
                .service(endpoint("/ResourceTypes").route(web::get().to(resource_types)))
                .service(endpoint("/ResourceTypes/{rt}").route(web::get().to(resource_type)))
                .service(endpoint("/Schemas").route(web::get().to(schemas)))
                .service(endpoint("/Schemas/{schema}").route(web::get().to(schema)))
                .service(endpoint("/.search").route(web::post().to(search_all)))
                .service(endpoint("/Users/.search").route(web::post().to(search_users)))
                .service(endpoint("/Groups/.search").route(web::post().to(search_groups)))
                .service(
                    endpoint("/Users")
                        .route(web::get().to(list_users))
                        .route(web::post().to(create_user)),
                )
                .service(
                    endpoint("/Users/{user_id}")
                        .route(web::get().to(get_user))
                        .route(web::put().to(replace_user))
                        .route(web::patch().to(patch_user))
                        .route(web::delete().to(delete_user)),
                )
                .service(
                    endpoint("/Groups")
                        .route(web::get().to(list_groups))
                        .route(web::post().to(create_group)),
                )
                .service(
                    endpoint("/Groups/{group_id}")
                        .route(web::get().to(get_group))
                        .route(web::put().to(replace_group))
                        .route(web::patch().to(patch_group))
                        .route(web::delete().to(delete_group)),
                )
                .default_service(unrouted(Access::Directory, web::to(not_found))),
        ),
    );
}
