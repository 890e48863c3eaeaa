//! The hosted pages: the HTML a browser sees when it signs in, answers a second factor,
//! opens a mailed link or an invitation, consents to an application, or comes back from a SAML
//! identity provider.
//!
//! One file a page; each calls a use case of the domain and renders what it returns. No page
//! imports another: what several pages share is in the modules below, and nothing else.
//!
//! | shared part | what it holds |
//! |---|---|
//! | [`layout`] | the templates and the one function that escapes a value (maintained library) |
//! | [`response`] | the answers every page gives: the HTML response with its headers, a message page, redirects |
//! | [`errors`] | the one place where an outcome of the domain becomes a page's status and words: the "not possible right now" page, the lockout words, the expired form |
//! | [`session`] | the session cookie: opening, reading and ending the browser's session |
//! | [`csrf`] | the anti-forgery cookie and the check of a posted form |
//! | [`forms`] | the forms several pages answer with: the login form, the second step |
//! | [`branding`] | the look a page is shown in: the branding of the application a pending authorization names |
//!
//! | page | paths |
//! |---|---|
//! | [`login`] | `GET,POST /login`, `POST /login/sso`, `POST /logout`, `GET /login/done` |
//! | [`second_step`] | `POST /login/mfa` |
//! | [`saml`] | `GET /sso/saml/{id}/login`, `POST /sso/saml/{id}/acs` |
//! | [`consent`] | `GET /oauth/authorize`, `POST /oauth/consent` |
//! | [`invitation`] | `GET,POST /invitations/{token}` |
//! | [`mailed_link`] | `GET,POST /magic-link/{token}`, `/reset-password/{token}`, `/verify-email/{token}` |
//! | [`assets`] | `GET /assets/webauthn.js` |

pub mod branding;
pub mod csrf;
pub mod errors;
pub mod forms;
pub mod layout;
pub mod response;
pub mod session;

pub mod assets;
pub mod consent;
pub mod invitation;
pub mod login;
pub mod mailed_link;
pub mod saml;
pub mod second_step;
