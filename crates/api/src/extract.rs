//! Extractors: the JSON body, and what the route's gate admitted (the person, the agent, the
//! member, the operator).

use std::{future::Future, pin::Pin};

use actix_web::{dev::Payload, web, FromRequest, HttpMessage, HttpRequest};
use gatehouse_domain::{
    model::{ClientAddress, Operator, OrganizationId, Origin},
    service::{Actor, Agent, Principal},
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
/// The route's gate ([`crate::access`]) has admitted the caller before the body is read, so
/// bad credentials are `401` whatever the body. Then a `Content-Type` other than JSON
/// (`application/json`, or a `+json` type), or none on a body that is not empty: `415`. Not
/// JSON, or JSON that is not an object: `400`. A field of the wrong type: `422` with
/// `loc = ["body", <path>...]`. Request types make their fields `Option` so that a missing field
/// is reported by the handler's parse step, with its name, rather than by serde.
pub struct ValidJson<T>(pub T);

impl<T: DeserializeOwned + 'static> FromRequest for ValidJson<T> {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Self, ApiError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let bytes = web::Bytes::from_request(req, payload);
        let declared = declared_json(req);
        Box::pin(async move {
            let declared = declared?;
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

/// A person, for a route outside any one organization, as its gate admitted them
/// ([`Access::Person`](crate::access::Access)): `Authorization: Bearer <access token>`, or
/// `X-API-Key` with `X-Organization-ID`. An application's machine token is `403` there (it acts
/// only inside its organization), and so is a token of the OAuth flow (outside organizations it
/// reads `/oauth/userinfo` only: [`Principal::outside_organizations`]).
pub struct Authenticated(pub Principal);

/// Any valid credentials, a machine token's included, as the route's gate admitted them
/// ([`Access::Agent`](crate::access::Access)), for a route that then acts inside the
/// organization the request names.
pub struct AuthenticatedAgent(pub Agent);

/// A member of the organization the route names (its path's `{id}`, or `X-Organization-ID`),
/// or the organization's directory at its SCIM endpoints, as the route's gate admitted them
/// ([`Access::Member`](crate::access::Access), [`Access::Directory`](crate::access::Access)).
/// Someone who is not a member got `404` there: the organization's existence is not revealed.
pub struct InOrganization(pub Actor);

/// The operator, as the control plane's gate admitted them
/// ([`Access::Operator`](crate::access::Access)): `Authorization: Bearer
/// {GATEHOUSE_CONTROL_TOKEN}`.
pub struct OperatorAuth(pub Operator);

/// What the route's gate admitted, taken from the request's extensions. Missing only where the
/// route table declares a route with less access than its handler asks for: a `500`, which
/// every route's API test would meet.
fn admitted<T: 'static>(req: &HttpRequest) -> Result<T, ApiError> {
    req.extensions_mut().remove::<T>().ok_or_else(|| {
        ApiError::Internal(
            format!(
                "the route table does not admit a {} for {}",
                std::any::type_name::<T>(),
                req.path()
            )
            .into(),
        )
    })
}

macro_rules! admitted_extractor {
    ($($extractor:ident($admitted:ty)),* $(,)?) => {$(
        impl FromRequest for $extractor {
            type Error = ApiError;
            type Future = std::future::Ready<Result<Self, ApiError>>;

            fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
                std::future::ready(admitted::<$admitted>(req).map(Self))
            }
        }
    )*};
}

admitted_extractor!(
    Authenticated(Principal),
    AuthenticatedAgent(Agent),
    InOrganization(Actor),
    OperatorAuth(Operator),
);

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
pub(crate) fn organization_header(req: &HttpRequest) -> Result<Option<OrganizationId>, ApiError> {
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

/// Whether `agent` may act in `organization`, through the one admission: for a route that learns
/// the organization from its body.
pub(crate) async fn actor_in(
    req: &HttpRequest,
    agent: Agent,
    organization: OrganizationId,
) -> Result<Actor, ApiError> {
    Ok(state(req)?
        .authenticator
        .actor_of(agent, organization, client_address(req))
        .await?)
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
