//! Who may call a route, declared where the route is declared.
//!
//! The route table (`lib.rs`, `routes/scim.rs`) builds every resource as an [`Endpoint`] with
//! an [`Access`]: a way in anyone may call, a person, any valid credentials, a member of the
//! organization the route names, the organization's directory, the operator. The [`Gate`]
//! wrapped around each of its routes (and around what answers a method it does not serve)
//! admits the caller once, counts the request against the caller's budget, and names the route
//! for the metrics and the log. Routing has happened by then: the organization a route is about
//! is its matched `{id}` (or `X-Organization-ID`, where the route says so), never a path read
//! before routing. A handler's extractors ([`crate::extract`]) only take what the gate admitted,
//! so a refused credential is answered before the body is read, whatever the body.

use std::{
    future::{ready, Future, Ready},
    pin::Pin,
    rc::Rc,
};

use actix_web::{
    dev::{AppService, HttpServiceFactory, Service, ServiceRequest, ServiceResponse, Transform},
    http::{
        header::{self, HeaderMap, HeaderName, HeaderValue},
        StatusCode,
    },
    web, Error, HttpMessage, HttpRequest, HttpResponse, ResponseError,
};
use gatehouse_domain::{
    model::{Operator, OrganizationId},
    ports::{RateDecision, RateLimitedSpender},
    service::{Actor, Agent, OrgAccessError, Spender},
};
use uuid::Uuid;

use crate::{
    error::{ApiError, ErrorBody, ScimFailure},
    extract::{client_address, organization_header, state, API_KEY_HEADER, ORGANIZATION_HEADER},
};

/// What a route needs of its caller, and whom its requests count against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// The health probes: never counted and nothing asked, so that an orchestrator always
    /// reaches them.
    Probe,
    /// A way in that anyone may call to get in (register, sign in, the second factor, mailed
    /// links, password reset, the SAML ACS, OAuth's authorize, consent and token, the hosted
    /// pages), and an answer of no route (an unknown path, an unsupported method): counted
    /// against the client's address, whatever credentials ride along, so that a key riding
    /// along buys no extra password guesses.
    Public,
    /// Anyone, where credentials are the handler's to judge (a refresh token, OAuth's client
    /// and access tokens, the public documents): counted against the caller when the request
    /// carries valid credentials, else against the client's address.
    Open,
    /// A person's credentials (a sign-in's access token, or an API key with its organization),
    /// for a route outside any one organization: `401` without them, `403` for a machine's.
    Person,
    /// Any valid credentials, a machine token's included, for a route that then acts inside
    /// the organization the request names in its body (or nowhere).
    Agent,
    /// A member of the organization the route names, through the one admission (membership,
    /// the organization's policies): `401` without credentials, `404` for anyone else.
    Member(Named),
    /// The directory of the organization in the path: one of its SCIM tokens. Refusals are in
    /// SCIM's error schema.
    Directory,
    /// The operator: `Authorization: Bearer {GATEHOUSE_CONTROL_TOKEN}` (`404` while no token is
    /// configured, as for any unknown path). Counted against the client's address.
    Operator,
}

/// Where a member's route names its organization.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Named {
    /// The path's `{id}` (`/api/v1/organizations/{id}/...`).
    Path,
    /// The `X-Organization-ID` header (a missing or malformed one is `422`).
    Header,
}

/// A resource of the route table: the template it is reached by, the access its routes need,
/// and what it answers a method it does not serve. Every route added to it passes its [`Gate`].
pub(crate) struct Endpoint {
    resource: actix_web::Resource,
    gate: Gate,
}

impl Endpoint {
    /// The resource at `path` inside the scope `scope` (its template is `{scope}{path}`),
    /// answering a method it does not serve with `unsupported`, counted as that answer's
    /// `unsupported_access` says.
    pub(crate) fn new(
        scope: &str,
        path: &str,
        access: Access,
        unsupported: (Access, actix_web::Route),
    ) -> Self {
        let template: Rc<str> = Rc::from(format!("{scope}{path}"));
        let (unsupported_access, unsupported) = unsupported;
        let resource = web::resource(path).default_service(unsupported.wrap(Gate {
            access: unsupported_access,
            template: Some(template.clone()),
        }));
        Self {
            resource,
            gate: Gate {
                access,
                template: Some(template),
            },
        }
    }

    /// Adds a route (a method and its handler), behind the resource's gate.
    pub(crate) fn route(self, route: actix_web::Route) -> Self {
        let Self { resource, gate } = self;
        Self {
            resource: resource.route(route.wrap(gate.clone())),
            gate,
        }
    }

    /// Data for this resource's handlers (a larger body limit, say).
    pub(crate) fn app_data<U: 'static>(self, data: U) -> Self {
        Self {
            resource: self.resource.app_data(data),
            gate: self.gate,
        }
    }
}

impl HttpServiceFactory for Endpoint {
    fn register(self, config: &mut AppService) {
        self.resource.register(config);
    }
}

/// The answer of no route (a scope's or the application's default service), counted as
/// `access` says and labelled `unmatched`.
pub(crate) fn unrouted(access: Access, answer: actix_web::Route) -> actix_web::Route {
    answer.wrap(Gate {
        access,
        template: None,
    })
}

/// The route a request reached, left in its extensions by the gate: the template its metrics
/// are labelled with (`None`: no route, labelled `unmatched`). A request without one never
/// reached the route table (refused before routing).
#[derive(Clone, Debug)]
pub(crate) struct Routed(pub(crate) Option<Rc<str>>);

/// The middleware of a route: admits the caller as the route's [`Access`] says, counts the
/// request, and answers `429` (the budget spent) or the refusal before the handler runs.
#[derive(Clone, Debug)]
pub(crate) struct Gate {
    access: Access,
    template: Option<Rc<str>>,
}

impl<S> Transform<S, ServiceRequest> for Gate
where
    S: Service<ServiceRequest, Response = ServiceResponse, Error = Error> + 'static,
{
    type Response = ServiceResponse;
    type Error = Error;
    type Transform = GateService<S>;
    type InitError = ();
    type Future = Ready<Result<GateService<S>, ()>>;

    fn new_transform(&self, service: S) -> Self::Future {
        ready(Ok(GateService {
            service: Rc::new(service),
            gate: self.clone(),
        }))
    }
}

/// A route's service behind its [`Gate`].
pub(crate) struct GateService<S> {
    service: Rc<S>,
    gate: Gate,
}

impl<S> Service<ServiceRequest> for GateService<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse, Error = Error> + 'static,
{
    type Response = ServiceResponse;
    type Error = Error;
    type Future = Pin<Box<dyn Future<Output = Result<ServiceResponse, Error>>>>;

    actix_web::dev::forward_ready!(service);

    fn call(&self, req: ServiceRequest) -> Self::Future {
        let service = self.service.clone();
        let gate = self.gate.clone();
        Box::pin(async move { gate.pass(req, service.as_ref()).await })
    }
}

impl Gate {
    async fn pass<S>(&self, req: ServiceRequest, next: &S) -> Result<ServiceResponse, Error>
    where
        S: Service<ServiceRequest, Response = ServiceResponse, Error = Error>,
    {
        if let Some(span) = req.extensions().get::<RequestSpan>() {
            span.0.record(
                "path",
                logged_target(req.request(), self.template.as_deref()).as_str(),
            );
        }
        req.extensions_mut().insert(Routed(self.template.clone()));
        let app = match state(req.request()) {
            Ok(app) if self.access != Access::Probe => app,
            _ => return next.call(req).await,
        };
        let admission = self.access.admit(req.request()).await;
        let decision = match app.rate_limits.check(&admission.spender).await {
            Ok(decision) => Some(decision),
            Err(error) => {
                // Fail open: a limiter that fails must not take the service down. (The Redis
                // one never does: it counts in process while Redis is unreachable.)
                tracing::warn!(%error, "rate limit not checked");
                None
            }
        };
        if let Some(decision) = decision.as_ref().filter(|d| !d.allowed) {
            app.metrics.rate_limited(match admission.spender {
                Spender::Anonymous(_) => RateLimitedSpender::Anonymous,
                Spender::Authenticated { .. } => RateLimitedSpender::Authenticated,
            });
            return Ok(req.into_response(too_many_requests(&app, decision)));
        }
        let mut response = match admission.refusal {
            None => next.call(req).await?,
            Some(error) if self.access == Access::Directory => {
                req.into_response(ScimFailure::from(error).error_response())
            }
            Some(error) => req.into_response(error.error_response()),
        };
        if let Some(decision) = decision {
            set_headers(response.headers_mut(), &decision);
        }
        Ok(response)
    }
}

/// What the gate made of a request: whom it counts against, and why it may not go on, if not.
/// What it admitted (the agent, the person, the member, the operator) is in the request's
/// extensions for the extractors.
struct Admission {
    spender: Spender,
    refusal: Option<ApiError>,
}

impl Admission {
    fn admitted(spender: Spender) -> Self {
        Self {
            spender,
            refusal: None,
        }
    }

    fn refused(spender: Spender, error: impl Into<ApiError>) -> Self {
        Self {
            spender,
            refusal: Some(error.into()),
        }
    }

    /// Counted as `spender`, refused with the error of `outcome` if it failed.
    fn of(spender: Spender, outcome: Result<(), ApiError>) -> Self {
        Self {
            spender,
            refusal: outcome.err(),
        }
    }
}

/// How a Bearer token is read: a sign-in's or a machine's token, or (at an organization's SCIM
/// endpoints) one of the organization's SCIM tokens.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Bearer {
    Token,
    Scim,
}

/// Whom valid credentials speak for, and whether they may act in the organization the request
/// names (when it names one).
struct Identified {
    agent: Agent,
    actor: Option<Result<Actor, OrgAccessError>>,
}

impl Identified {
    /// Counted against the agent, on the plan of the organization named when it may act there.
    fn spender(&self) -> Spender {
        Spender::Authenticated {
            agent: self.agent.clone(),
            organization_plan: self
                .actor
                .as_ref()
                .and_then(|actor| actor.as_ref().ok())
                .map(Actor::plan),
        }
    }
}

impl Access {
    async fn admit(self, req: &HttpRequest) -> Admission {
        let address = Spender::Anonymous(client_address(req).0);
        // The organization a request outside any one organization names for its plan.
        let named_for_plan = || organization_header(req).ok().flatten();
        match self {
            Access::Probe | Access::Public => Admission::admitted(address),
            Access::Operator => Admission::of(
                address,
                operator(req).map(|operator| {
                    req.extensions_mut().insert(operator);
                }),
            ),
            Access::Open if !sends_credentials(req) => Admission::admitted(address),
            // The handler judges the credentials: refused ones count against the address.
            Access::Open => match identify(req, named_for_plan(), Bearer::Token).await {
                Ok(identified) => {
                    let spender = identified.spender();
                    req.extensions_mut().insert(identified.agent);
                    Admission::admitted(spender)
                }
                Err(_) => Admission::admitted(address),
            },
            Access::Person | Access::Agent => {
                match identify(req, named_for_plan(), Bearer::Token).await {
                    Err(error) => Admission::refused(address, error),
                    Ok(identified) => {
                        let spender = identified.spender();
                        let agent = identified.agent;
                        let admitted = match self {
                            Access::Person => agent.clone().person().map(|person| {
                                req.extensions_mut().insert(person);
                            }),
                            _ => Ok(()),
                        };
                        req.extensions_mut().insert(agent);
                        Admission::of(spender, admitted.map_err(ApiError::from))
                    }
                }
            }
            Access::Member(named) => {
                let organization = named.organization(req);
                let identified =
                    identify(req, organization.as_ref().ok().copied(), Bearer::Token).await;
                match identified {
                    Err(error) => Admission::refused(address, error),
                    Ok(identified) => {
                        let spender = identified.spender();
                        let actor = organization.and_then(|_| {
                            identified
                                .actor
                                .ok_or_else(|| ApiError::NotFound("organization not found".into()))?
                                .map_err(ApiError::from)
                        });
                        Admission::of(
                            spender,
                            actor.map(|actor| {
                                req.extensions_mut().insert(actor);
                            }),
                        )
                    }
                }
            }
            Access::Directory => {
                let Some(organization) = path_organization(req) else {
                    return Admission::refused(
                        address,
                        ApiError::NotFound("no such organization".into()),
                    );
                };
                match identify(req, Some(organization), Bearer::Scim).await {
                    Err(error) => Admission::refused(address, error),
                    Ok(identified) => {
                        let spender = identified.spender();
                        match identified.actor {
                            Some(Ok(actor @ Actor::Directory(_))) => {
                                req.extensions_mut().insert(actor);
                                Admission::admitted(spender)
                            }
                            Some(Err(error)) => Admission::refused(spender, error),
                            _ => Admission::refused(
                                spender,
                                ApiError::Unauthorized(
                                    "SCIM requests carry one of the organization's SCIM tokens"
                                        .into(),
                                ),
                            ),
                        }
                    }
                }
            }
        }
    }
}

impl Named {
    /// The organization the route names: `404` for a path's id that is not one, `422` for a
    /// missing or malformed header.
    fn organization(self, req: &HttpRequest) -> Result<OrganizationId, ApiError> {
        match self {
            Named::Path => path_organization(req)
                .ok_or_else(|| ApiError::NotFound("organization not found".into())),
            Named::Header => organization_header(req)?.ok_or_else(|| {
                ApiError::field(crate::error::FieldError::missing(
                    "header",
                    ORGANIZATION_HEADER,
                ))
            }),
        }
    }
}

/// The organization of the matched path's `{id}`, when it is a UUID.
fn path_organization(req: &HttpRequest) -> Option<OrganizationId> {
    req.match_info()
        .get("id")
        .and_then(|id| Uuid::parse_str(id).ok())
        .map(OrganizationId::from_uuid)
}

fn sends_credentials(req: &HttpRequest) -> bool {
    req.headers().contains_key(header::AUTHORIZATION) || req.headers().contains_key(API_KEY_HEADER)
}

/// The credentials a request sends, not yet checked.
enum Credentials {
    /// `Authorization: Bearer <token>`.
    Bearer(String),
    /// `X-API-Key` with the organization of `X-Organization-ID`.
    ApiKey(String, OrganizationId),
}

/// The token of `Authorization: Bearer <token>`, trimmed; `None` without one.
fn bearer(req: &HttpRequest) -> Option<&str> {
    req.headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|token| !token.is_empty())
}

fn credentials(req: &HttpRequest) -> Result<Credentials, ApiError> {
    if req.headers().contains_key(header::AUTHORIZATION) {
        let token = bearer(req).ok_or_else(|| {
            ApiError::Unauthorized("Authorization must be 'Bearer <access token>'".into())
        })?;
        return Ok(Credentials::Bearer(token.to_owned()));
    }
    if let Some(key) = req.headers().get(API_KEY_HEADER) {
        let key = key
            .to_str()
            .map_err(|_| ApiError::Unauthorized("invalid API key".into()))?;
        // A key without its organization is not a credential at all (the spec's `401`); an
        // organization that is not a UUID is a malformed header (`422`), as everywhere.
        let organization = organization_header(req)?.ok_or_else(|| {
            ApiError::Unauthorized(
                "an API key must be sent with X-Organization-ID, the organization it belongs to"
                    .into(),
            )
        })?;
        return Ok(Credentials::ApiKey(key.trim().to_owned(), organization));
    }
    Err(ApiError::Unauthorized(
        "missing credentials: send 'Authorization: Bearer <token>' or X-API-Key with X-Organization-ID"
            .into(),
    ))
}

/// Checks the request's credentials and, when the request names an organization, whether they
/// may act there: for a sign-in's Bearer token in one store round trip (the session, the
/// membership and the policies read together).
async fn identify(
    req: &HttpRequest,
    organization: Option<OrganizationId>,
    bearer: Bearer,
) -> Result<Identified, ApiError> {
    let authenticator = &state(req)?.authenticator;
    let client = client_address(req);
    let agent = match (credentials(req)?, organization) {
        (Credentials::Bearer(token), Some(organization)) if bearer == Bearer::Token => {
            let (agent, actor) = authenticator
                .authenticate_bearer_in(&token, organization, client)
                .await?;
            return Ok(Identified {
                agent,
                actor: Some(actor),
            });
        }
        (Credentials::Bearer(token), Some(organization)) => {
            authenticator
                .authenticate_scim_token(&token, organization)
                .await?
        }
        (Credentials::Bearer(token), None) => authenticator.authenticate_bearer(&token).await?,
        (Credentials::ApiKey(key, own), _) => authenticator.authenticate_api_key(&key, own).await?,
    };
    let actor = match organization {
        Some(organization) => Some(
            authenticator
                .actor_of(agent.clone(), organization, client)
                .await,
        ),
        None => None,
    };
    Ok(Identified { agent, actor })
}

/// The agent the gate admitted, or a fresh check of the request's credentials (for a handler
/// that answers refused credentials in its own protocol's shape, as OAuth's userinfo does).
pub(crate) async fn authenticate(req: &HttpRequest) -> Result<Agent, ApiError> {
    if let Some(agent) = req.extensions().get::<Agent>() {
        return Ok(agent.clone());
    }
    Ok(identify(req, None, Bearer::Token).await?.agent)
}

fn operator(req: &HttpRequest) -> Result<Operator, ApiError> {
    let state = state(req)?;
    let Some(token) = &state.control_token else {
        return Err(ApiError::NotFound("no such route".into()));
    };
    bearer(req)
        .and_then(|presented| token.admit(presented))
        .ok_or_else(|| {
            ApiError::Unauthorized(
                "the control plane needs 'Authorization: Bearer <GATEHOUSE_CONTROL_TOKEN>'".into(),
            )
        })
}

fn set_headers(headers: &mut HeaderMap, decision: &RateDecision) {
    for (name, value) in [
        ("x-ratelimit-limit", decision.limit.to_string()),
        ("x-ratelimit-remaining", decision.remaining.to_string()),
        (
            "x-ratelimit-reset",
            decision.reset_at.unix_timestamp().to_string(),
        ),
    ] {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
}

/// `429 {detail}` with `Retry-After` and the `X-RateLimit-*` headers: the budget is spent.
pub(crate) fn too_many_requests(app: &crate::AppState, decision: &RateDecision) -> HttpResponse {
    let now = app.clock.now();
    // Whole seconds, rounded up: a client that waits this long is admitted.
    let wait = (decision.reset_at - now).whole_milliseconds();
    let retry_after = i64::try_from((wait + 999).div_euclid(1000).max(1)).unwrap_or(i64::MAX);
    let mut response = HttpResponse::build(StatusCode::TOO_MANY_REQUESTS)
        .insert_header((header::RETRY_AFTER, retry_after.to_string()))
        .json(ErrorBody {
            detail: format!(
                "rate limit exceeded: {} requests per minute; retry in {retry_after} s",
                decision.limit
            ),
        });
    set_headers(response.headers_mut(), decision);
    response
}

/// The request's tracing span, in its extensions: the route's gate records the logged path in it.
#[derive(Clone, Debug)]
pub(crate) struct RequestSpan(pub(crate) tracing::Span);

/// The most characters of a request's path and query string that its log lines hold.
pub(crate) const MAX_LOGGED_TARGET_CHARS: usize = 256;

/// The request's path and query as its log lines show them, at most
/// [`MAX_LOGGED_TARGET_CHARS`] characters, so that a client cannot fill the disk with long paths
/// or read a secret out of the log. A route whose template has a `{token}` (a mailed link's
/// one-time secret) is logged by its template; a request that reached no route yet (refused
/// before routing) by its path's first segment only.
fn logged_target(req: &HttpRequest, template: Option<&str>) -> String {
    let uri = req.uri();
    let query = uri
        .query()
        .map_or(String::new(), |query| format!("?{query}"));
    let target = match template {
        Some(template) if template.contains("{token}") => format!("{template}{query}"),
        _ => uri
            .path_and_query()
            .map_or(uri.path(), |pq| pq.as_str())
            .to_owned(),
    };
    match target.char_indices().nth(MAX_LOGGED_TARGET_CHARS) {
        Some((cut, _)) => format!("{}…", &target[..cut]),
        None => target,
    }
}
