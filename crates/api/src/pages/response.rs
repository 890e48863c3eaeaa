//! The answers every page gives: HTML with the pages' headers, a message page, redirects.

use actix_web::{
    http::{header, StatusCode},
    HttpResponse,
};
use gatehouse_domain::model::Branding;

use super::layout::message_page;

/// A page: HTML, never cached, never framed, no script but the pages' own. (No `form-action`:
/// browsers apply it to the redirects after a form too, and signing in ends on the client's
/// redirect URI.)
pub fn html(status: StatusCode, body: String) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header(("X-Frame-Options", "DENY"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((
            header::CONTENT_SECURITY_POLICY,
            "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; \
             img-src https: data:; frame-ancestors 'none'; base-uri 'none'",
        ))
        .body(body)
}

/// A page that says one thing: a heading and a sentence, in `look`.
pub fn message(look: &Branding, status: StatusCode, heading: &str, text: &str) -> HttpResponse {
    html(status, message_page(look, heading, text))
}

/// `303 See Other` to `location`, not cached: where a posted form goes next.
pub fn see_other(location: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .finish()
}

/// `302 Found` to `location`, not cached: where a link goes next.
pub fn found(location: &str) -> HttpResponse {
    HttpResponse::Found()
        .insert_header((header::LOCATION, location))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .finish()
}
