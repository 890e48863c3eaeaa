//! Extractors: the JSON body, the credentials, and the organization context.

use std::{future::Future, pin::Pin};

use actix_web::{dev::Payload, web, FromRequest, HttpMessage, HttpRequest};
use futures::channel::oneshot;
use gatehouse_domain::{
    model::{ClientAddress, Operator, OrganizationId, Origin},
    service::{Actor, Agent, OrgAccessError, Principal},
};
use serde::de::DeserializeOwned;
use uuid::Uuid;

use crate::{
    error::{ApiError, FieldError, LocPart},
    state::AppState,
};

/// The header that carries a request's id, in and out.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// The request's id, as the `request_id` middleware chose it, in the request's extensions.
#[derive(Clone, Debug)]
pub struct RequestId(pub String);

/// Largest JSON body accepted.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Deepest nesting of arrays and objects a JSON body may have: no request of the API needs
/// more than a few levels.
pub const MAX_JSON_DEPTH: usize = 32;

/// A JSON object body deserialised into `T`.
///
/// Credentials first: when the handler also authenticates the caller, the body waits for that
/// check (see [`gated`]), so that bad credentials are `401` whatever the body. Then a
/// `Content-Type` other than JSON (`application/json`, or a `+json` type), or none on a body
/// that is not empty: `415`. Not JSON, or JSON that is not an object: `400`. A field of the
/// wrong type: `422` with `loc = ["body", <path>...]`. Request types make their fields `Option`
/// so that a missing field is reported by the handler's parse step, with its name, rather than
/// by serde.
pub struct ValidJson<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for ValidJson<T> {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let bytes = web::Bytes::from_request(req, payload);
        let req = req.clone();
        Box::pin(async move {
            // Taken when first polled: by then every extractor of the handler has started.
            let pending = req.extensions_mut().remove::<PendingCredentialChecks>();
            for check in pending.into_iter().flat_map(|pending| pending.0) {
                // Done, failed or abandoned: either way the body's turn has come.
                let _ = check.await;
            }
            let declared = declared_json(&req)?;
            let bytes = bytes
                .await
                .map_err(|_| ApiError::PayloadTooLarge(MAX_BODY_BYTES))?;
            if declared.is_none() && !bytes.is_empty() {
                return Err(not_json());
            }
            parse_body(&bytes).map(ValidJson)
        })
    }
}

fn not_json() -> ApiError {
    ApiError::UnsupportedMediaType(
        "the request body must be JSON: send it with 'Content-Type: application/json'".into(),
    )
}

/// Whether the request declares a JSON body: `Some(())` for `application/json` (any
/// parameters) or an `application/...+json` type, `None` when it declares nothing, and `415`
/// for anything else (`text/plain`, a form, ...).
fn declared_json(req: &HttpRequest) -> Result<Option<()>, ApiError> {
    use actix_web::mime;
    if !req
        .headers()
        .contains_key(actix_web::http::header::CONTENT_TYPE)
    {
        return Ok(None);
    }
    match req.mime_type() {
        Ok(Some(kind))
            if kind.type_() == mime::APPLICATION
                && (kind.subtype() == mime::JSON || kind.suffix() == Some(mime::JSON)) =>
        {
            Ok(Some(()))
        }
        _ => Err(not_json()),
    }
}

/// The credential checks of a request's extractors that have not finished yet: a JSON body
/// ([`ValidJson`]) waits for them. actix-web polls a handler's extractors together and answers
/// with the first error, so without this a body that fails to parse at once would be answered
/// (`400`, `415`, `422`) before credentials that take a store round trip to refuse (`401`).
#[derive(Default)]
struct PendingCredentialChecks(Vec<oneshot::Receiver<()>>);

/// Runs a credential extractor's `check`, registered for the request's JSON body to wait on:
/// the body goes on once the check has finished, whatever came of it (when it failed, the
/// extractor's error is the answer).
pub(crate) fn gated<T: 'static>(
    req: &HttpRequest,
    check: impl Future<Output = Result<T, ApiError>> + 'static,
) -> Pin<Box<dyn Future<Output = Result<T, ApiError>>>> {
    let (finished, waited) = oneshot::channel::<()>();
    {
        let mut extensions = req.extensions_mut();
        match extensions.get_mut::<PendingCredentialChecks>() {
            Some(pending) => pending.0.push(waited),
            None => {
                extensions.insert(PendingCredentialChecks(vec![waited]));
            }
        }
    }
    Box::pin(async move {
        let outcome = check.await;
        // Dropping the sender is the signal: the body's wait ends.
        drop(finished);
        outcome
    })
}

pub(crate) fn parse_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if nests_deeper_than(bytes, MAX_JSON_DEPTH) {
        return Err(ApiError::BadRequest(format!(
            "request body nests arrays and objects deeper than {MAX_JSON_DEPTH} levels"
        )));
    }
    let value: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::BadRequest(format!("request body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::BadRequest(
            "request body must be a JSON object".into(),
        ));
    }
    serde_path_to_error::deserialize(value).map_err(|error| {
        let mut loc: Vec<LocPart> = vec!["body".into()];
        for segment in error.path().iter() {
            match segment {
                serde_path_to_error::Segment::Seq { index } => loc.push((*index).into()),
                serde_path_to_error::Segment::Map { key } => loc.push(key.as_str().into()),
                serde_path_to_error::Segment::Enum { variant } => {
                    loc.push(variant.as_str().into());
                }
                serde_path_to_error::Segment::Unknown => {}
            }
        }
        ApiError::Validation(vec![FieldError {
            loc,
            msg: error.inner().to_string(),
            kind: "type_error",
        }])
    })
}

/// The parse step of a field taken as it came (a string kept as it is, a section parsed later).
pub fn as_is<T>(value: T) -> Result<T, std::convert::Infallible> {
    Ok(value)
}

/// Collects field errors while a request is parsed into domain types, so that one response
/// reports every bad field.
#[derive(Default)]
pub struct Fields {
    errors: Vec<FieldError>,
}

impl Fields {
    /// A collector with no errors yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// A required body field, parsed.
    pub fn required<R, T, E: std::fmt::Display>(
        &mut self,
        name: &str,
        raw: Option<R>,
        parse: impl FnOnce(R) -> Result<T, E>,
    ) -> Option<T> {
        match raw {
            None => {
                self.errors.push(FieldError::missing("body", name));
                None
            }
            Some(raw) => self.optional(name, Some(raw), parse).flatten(),
        }
    }

    /// An optional body field, parsed when present: `Some(None)` when absent.
    pub fn optional<R, T, E: std::fmt::Display>(
        &mut self,
        name: &str,
        raw: Option<R>,
        parse: impl FnOnce(R) -> Result<T, E>,
    ) -> Option<Option<T>> {
        match raw.map(parse) {
            None => Some(None),
            Some(Ok(value)) => Some(Some(value)),
            Some(Err(e)) => {
                self.errors
                    .push(FieldError::invalid("body", name, format!("{name} {e}")));
                None
            }
        }
    }

    /// A list field of at most `max` items, each item parsed: a bad item is reported at
    /// `name.<index>`. `None` (with the error recorded) when the list is missing, too long (its
    /// items then go unparsed) or any item is bad.
    pub fn each<R, T, E: std::fmt::Display>(
        &mut self,
        name: &str,
        raw: Option<Vec<R>>,
        max: usize,
        mut parse: impl FnMut(R) -> Result<T, E>,
    ) -> Option<Vec<T>> {
        let Some(raw) = raw else {
            self.errors.push(FieldError::missing("body", name));
            return None;
        };
        if raw.len() > max {
            self.errors.push(FieldError::too_many_items(name, max));
            return None;
        }
        let before = self.errors.len();
        let mut items = Vec::with_capacity(raw.len());
        for (index, item) in raw.into_iter().enumerate() {
            match parse(item) {
                Ok(item) => items.push(item),
                Err(e) => self.errors.push(FieldError::invalid(
                    "body",
                    &format!("{name}.{index}"),
                    format!("{name}[{index}] {e}"),
                )),
            }
        }
        (self.errors.len() == before).then_some(items)
    }

    /// Records an error found after the fields parsed (a rule across fields).
    pub fn invalid(&mut self, name: &str, msg: impl Into<String>) {
        self.errors.push(FieldError::invalid("body", name, msg));
    }

    /// `Ok(value)` when no field failed, else the list-shaped `422`.
    pub fn finish<T>(self, value: impl FnOnce() -> Option<T>) -> Result<T, ApiError> {
        if !self.errors.is_empty() {
            return Err(ApiError::Validation(self.errors));
        }
        value().ok_or_else(|| ApiError::Validation(Vec::new()))
    }
}

/// Whether the JSON text nests arrays and objects deeper than `max`: one pass over the bytes,
/// skipping strings, before any parser recurses into it.
fn nests_deeper_than(bytes: &[u8], max: usize) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0_usize, false, false);
    for &byte in bytes {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// An authenticated person, for a route outside any one organization: `Authorization: Bearer
/// <access token>`, or `X-API-Key` with `X-Organization-ID`. An application's machine token is
/// `403` here (it acts only inside its organization), and so is a token of the OAuth flow
/// (outside organizations it reads `/oauth/userinfo` only: [`Principal::outside_organizations`]).
pub struct Authenticated(pub Principal);

/// Any valid credentials, a machine token's included, for a route that then acts inside the
/// organization the request names.
pub struct AuthenticatedAgent(pub Agent);

/// The header that carries an API key; the key acts only in the organization named by
/// [`ORGANIZATION_HEADER`], which must come with it (without it: `401`).
pub const API_KEY_HEADER: &str = "X-API-Key";
/// The header that names the organization, as a UUID, for an API key and for routes that act
/// inside an organization not named in their path. A value that is not a UUID is a `422`.
pub const ORGANIZATION_HEADER: &str = "X-Organization-ID";

pub(crate) fn state(req: &HttpRequest) -> Result<web::Data<AppState>, ApiError> {
    req.app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| ApiError::Internal("application state is not configured".into()))
}

/// The organization named by `X-Organization-ID`, if the header is present.
fn organization_header(req: &HttpRequest) -> Result<Option<OrganizationId>, ApiError> {
    let Some(value) = req.headers().get(ORGANIZATION_HEADER) else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| Uuid::parse_str(v.trim()).ok())
        .map(|id| Some(OrganizationId::from_uuid(id)))
        .ok_or_else(|| {
            ApiError::field(FieldError::invalid(
                "header",
                ORGANIZATION_HEADER,
                "X-Organization-ID must be an organization id (UUID)",
            ))
        })
}

fn missing_organization_header() -> ApiError {
    ApiError::field(FieldError::missing("header", ORGANIZATION_HEADER))
}

/// The agent the rate-limit middleware already authenticated, or a fresh check.
pub(crate) async fn authenticate(req: &HttpRequest) -> Result<Agent, ApiError> {
    if let Some(agent) = req.extensions().get::<Agent>() {
        return Ok(agent.clone());
    }
    authenticate_credentials(req).await
}

/// The credentials a request sends, not yet checked.
enum Credentials {
    /// `Authorization: Bearer <access token>`.
    Bearer(String),
    /// `X-API-Key` with the organization of `X-Organization-ID`.
    ApiKey(String, OrganizationId),
}

fn credentials(req: &HttpRequest) -> Result<Credentials, ApiError> {
    if let Some(authorization) = req.headers().get(actix_web::http::header::AUTHORIZATION) {
        let token = authorization
            .to_str()
            .ok()
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
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

/// Checks the request's credentials: a Bearer token (a user's or a machine token), or an API
/// key with its organization.
pub(crate) async fn authenticate_credentials(req: &HttpRequest) -> Result<Agent, ApiError> {
    let authenticator = &state(req)?.authenticator;
    Ok(match credentials(req)? {
        Credentials::Bearer(token) => authenticator.authenticate_bearer(&token).await?,
        Credentials::ApiKey(key, organization) => {
            authenticator
                .authenticate_api_key(&key, organization)
                .await?
        }
    })
}

/// Checks the request's credentials and whether the caller may act in `organization`: for a
/// user's Bearer token, in one store round trip (the session, the membership and the policies
/// read together). The agent comes back whether or not it may.
pub(crate) async fn authenticate_in(
    req: &HttpRequest,
    organization: OrganizationId,
) -> Result<(Agent, Result<Actor, OrgAccessError>), ApiError> {
    let authenticator = &state(req)?.authenticator;
    let client = client_address(req);
    Ok(match credentials(req)? {
        // At an organization's SCIM endpoints, the bearer is one of its SCIM tokens.
        Credentials::Bearer(token) if scim_organization(req.path()).is_some() => {
            let agent = authenticator
                .authenticate_scim_token(&token, organization)
                .await?;
            let actor = authenticator
                .actor_of(agent.clone(), organization, client)
                .await;
            (agent, actor)
        }
        Credentials::Bearer(token) => {
            authenticator
                .authenticate_bearer_in(&token, organization, client)
                .await?
        }
        Credentials::ApiKey(key, own) => {
            let agent = authenticator.authenticate_api_key(&key, own).await?;
            let actor = authenticator
                .actor_of(agent.clone(), organization, client)
                .await;
            (agent, actor)
        }
    })
}

impl FromRequest for Authenticated {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let request = req.clone();
        gated(req, async move {
            let agent = authenticate(&request).await?;
            Ok(Authenticated(agent.person()?))
        })
    }
}

impl FromRequest for AuthenticatedAgent {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let request = req.clone();
        gated(req, async move {
            authenticate(&request).await.map(AuthenticatedAgent)
        })
    }
}

/// The operator: `Authorization: Bearer {GATEHOUSE_CONTROL_TOKEN}`. With no token configured
/// the control plane does not exist: `404`, as for any unknown path.
pub struct OperatorAuth(pub Operator);

impl FromRequest for OperatorAuth {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        gated(req, std::future::ready(operator(req).map(OperatorAuth)))
    }
}

fn operator(req: &HttpRequest) -> Result<Operator, ApiError> {
    let state = state(req)?;
    let Some(token) = &state.control_token else {
        return Err(ApiError::NotFound("no such route".into()));
    };
    req.headers()
        .get(actix_web::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .and_then(|presented| token.admit(presented.trim()))
        .ok_or_else(|| {
            ApiError::Unauthorized(
                "the control plane needs 'Authorization: Bearer <GATEHOUSE_CONTROL_TOKEN>'".into(),
            )
        })
}

/// Where the request came from, for the audit log: the client's address through the trusted
/// proxies, the user agent, the request id.
pub struct RequestOrigin(pub Origin);

impl FromRequest for RequestOrigin {
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Self, Self::Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        std::future::ready(Ok(Self(origin_of(req))))
    }
}

/// The request's [`Origin`].
pub fn origin_of(req: &HttpRequest) -> Origin {
    let request_id = req.extensions().get::<RequestId>().map(|id| id.0.clone());
    Origin::new(
        client_address(req).0,
        req.headers()
            .get(actix_web::http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok()),
        request_id.as_deref(),
    )
}

/// An authenticated caller inside the organization named by `X-Organization-ID`. Someone who is
/// not a member gets `404`: the organization's existence is not revealed.
pub struct HeaderOrganization(pub Actor);

impl FromRequest for HeaderOrganization {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let request = req.clone();
        gated(req, async move {
            // Credentials first: a caller without them gets 401 whatever the headers say.
            let agent = authenticate(&request).await?;
            let organization =
                organization_header(&request)?.ok_or_else(missing_organization_header)?;
            actor_in(&request, agent, organization).await.map(Self)
        })
    }
}

/// An authenticated caller inside the organization of the path
/// (`/api/v1/organizations/{id}/...`). Not a member, not a UUID, or no such live organization:
/// `404`.
pub struct PathOrganization(pub Actor);

impl FromRequest for PathOrganization {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let request = req.clone();
        gated(req, async move {
            let agent = authenticate(&request).await?;
            let organization = request
                .match_info()
                .get("id")
                .and_then(|id| Uuid::parse_str(id).ok())
                .map(OrganizationId::from_uuid)
                .ok_or_else(|| ApiError::NotFound("organization not found".into()))?;
            actor_in(&request, agent, organization).await.map(Self)
        })
    }
}

/// Where the request comes from: the socket's peer, or what `X-Forwarded-For` says when the peer
/// is one of `GATEHOUSE_TRUSTED_PROXIES` (see [`ClientAddress::resolve`]).
pub fn client_address(req: &HttpRequest) -> ClientAddress {
    let peer = req
        .peer_addr()
        .map_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), |a| {
            a.ip()
        });
    let Some(trusted) = req
        .app_data::<web::Data<AppState>>()
        .map(|state| state.trusted_proxies.clone())
        .filter(|trusted| !trusted.is_empty())
    else {
        return ClientAddress(peer.to_canonical());
    };
    let header_lines: Vec<&str> = req
        .headers()
        .get_all("x-forwarded-for")
        .filter_map(|value| value.to_str().ok())
        .collect();
    let hops: Vec<&str> = header_lines
        .iter()
        .flat_map(|line| line.split(','))
        .collect();
    ClientAddress::resolve(peer, &hops, &trusted)
}

/// The agent inside the organization: the actor the rate-limit middleware already resolved,
/// or a fresh membership check.
pub(crate) async fn actor_in(
    req: &HttpRequest,
    agent: Agent,
    organization: OrganizationId,
) -> Result<Actor, ApiError> {
    let cached = req
        .extensions()
        .get::<Actor>()
        .filter(|actor| actor.organization_id() == organization && actor.is_of(&agent))
        .cloned();
    match cached {
        Some(actor) => Ok(actor),
        None => Ok(state(req)?
            .authenticator
            .actor_of(agent, organization, client_address(req))
            .await?),
    }
}

/// The organization a request is about, read from its path or `X-Organization-ID` before
/// routing (for the rate limit's plan). `None` when it names none or not a valid one.
pub(crate) fn organization_in_context(req: &HttpRequest) -> Option<OrganizationId> {
    let from_path = req
        .path()
        .strip_prefix("/api/v1/organizations/")
        .and_then(|rest| rest.split('/').next())
        .and_then(|id| Uuid::parse_str(id).ok())
        .map(OrganizationId::from_uuid);
    from_path
        .or_else(|| scim_organization(req.path()))
        .or_else(|| organization_header(req).ok().flatten())
}

/// The organization of a SCIM path, `/scim/v2/{organization_id}/...`.
pub(crate) fn scim_organization(path: &str) -> Option<OrganizationId> {
    path.strip_prefix("/scim/v2/")
        .and_then(|rest| rest.split('/').next())
        .and_then(|id| Uuid::parse_str(id).ok())
        .map(OrganizationId::from_uuid)
}

/// For `#[serde(default, deserialize_with = "nullable")]` on an `Option<Option<T>>` field:
/// absent is `None` (the default), `null` is `Some(None)`, a value `Some(Some(value))`.
pub(crate) fn nullable<'de, D: serde::Deserializer<'de>, T: serde::Deserialize<'de>>(
    d: D,
) -> Result<Option<Option<T>>, D::Error> {
    <Option<T> as serde::Deserialize>::deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::nests_deeper_than;

    #[test]
    fn nesting_is_counted_outside_strings_only() {
        assert!(!nests_deeper_than(br#"{"a": [1, {"b": []}]}"#, 4));
        assert!(nests_deeper_than(br#"{"a": [1, {"b": []}]}"#, 3));
        // Brackets in strings, escaped quotes included, are text.
        assert!(!nests_deeper_than(
            br#"{"a": "[[[[{{{{", "b": "\"[[[["}"#,
            1
        ));
        assert!(!nests_deeper_than(br#"["\\", "]]]]"]"#, 1));
        // Unbalanced closing brackets do not underflow.
        assert!(!nests_deeper_than(b"]]]]}}}}[", 1));
    }
}
