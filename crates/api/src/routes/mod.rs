pub mod api_keys;
pub mod auth;
pub mod health;
pub mod members;
pub mod organizations;
pub mod users;
pub mod webhooks;
