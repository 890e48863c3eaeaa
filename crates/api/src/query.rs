//! Query strings: parsed into domain types, with `loc = ["query", name]` on errors.

use std::collections::HashMap;

use actix_web::HttpRequest;
use gatehouse_domain::model::{
    timestamp, OrganizationId, PageRequest, PageRequestError, SearchTerm,
};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::error::{ApiError, FieldError};

/// The query string's parameters (the last value of a repeated name wins).
pub struct Query(HashMap<String, String>);

impl Query {
    pub fn of(req: &HttpRequest) -> Result<Self, ApiError> {
        url::form_urlencoded::parse(req.query_string().as_bytes())
            .map(|(k, v)| Ok((k.into_owned(), v.into_owned())))
            .collect::<Result<HashMap<_, _>, ApiError>>()
            .map(Self)
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// A parameter parsed by `parse`, or a 422 naming it.
    pub fn parse<T, E: std::fmt::Display>(
        &self,
        name: &str,
        parse: impl FnOnce(&str) -> Result<T, E>,
    ) -> Result<Option<T>, ApiError> {
        self.get(name)
            .map(|raw| {
                parse(raw).map_err(|e| {
                    ApiError::field(FieldError::invalid("query", name, format!("{name} {e}")))
                })
            })
            .transpose()
    }

    /// `page` (>= 1, default 1) and `page_size` (1 to 100, default 20).
    pub fn page(&self) -> Result<PageRequest, ApiError> {
        let number = |name: &str| {
            self.parse(name, |raw| {
                raw.parse::<i64>().map_err(|_| "must be an integer")
            })
        };
        let (page, page_size) = (number("page")?, number("page_size")?);
        PageRequest::new(page, page_size).map_err(|e| {
            let name = match e {
                PageRequestError::Page => "page",
                PageRequestError::PageSize => "page_size",
            };
            ApiError::field(FieldError::invalid("query", name, e.to_string()))
        })
    }

    /// The free-text `search`: `None` when absent or blank, a 422 naming it when it holds a
    /// control character.
    pub fn search(&self) -> Result<Option<SearchTerm>, ApiError> {
        Ok(self.parse("search", SearchTerm::parse)?.flatten())
    }
}

/// An organization's id (a UUID), of a query or a body.
pub fn organization_id(raw: &str) -> Result<OrganizationId, &'static str> {
    Uuid::parse_str(raw)
        .map(OrganizationId::from_uuid)
        .map_err(|_| "must be an organization id (UUID)")
}

/// An RFC 3339 time of a query (`since`, `until`).
pub fn since(raw: &str) -> Result<OffsetDateTime, &'static str> {
    timestamp::parse(raw).map_err(|_| "must be an RFC 3339 timestamp")
}
