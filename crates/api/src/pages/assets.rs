//! `GET /assets/webauthn.js`: the one script of the hosted pages (the security-key step).

use actix_web::HttpResponse;

const WEBAUTHN_JS: &str = include_str!("../../assets/webauthn.js");

/// `GET /assets/webauthn.js`.
pub async fn webauthn_script() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/javascript; charset=utf-8")
        .insert_header(("Cache-Control", "public, max-age=3600"))
        .insert_header(("X-Content-Type-Options", "nosniff"))
        .body(WEBAUTHN_JS)
}
