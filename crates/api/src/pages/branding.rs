//! The look a page is shown in: the branding of the application a pending authorization
//! names, else the default.

use gatehouse_domain::model::Branding;

use crate::state::AppState;

/// The branding of the application that the pending authorization in `return_to` names, if
/// any; else the default look.
pub async fn branding_for(state: &AppState, return_to: &str) -> Branding {
    let client_id = return_to
        .strip_prefix("/oauth/authorize?")
        .and_then(|query| {
            url::form_urlencoded::parse(query.as_bytes())
                .find(|(name, _)| name == "client_id")
                .map(|(_, value)| value.into_owned())
        });
    match client_id {
        Some(client_id) => match state.oauth.branding_for(&client_id).await {
            Ok(Some(branding)) => branding,
            Ok(None) => Branding::default(),
            Err(error) => {
                tracing::warn!(%error, "the login page's branding could not be read");
                Branding::default()
            }
        },
        None => Branding::default(),
    }
}
