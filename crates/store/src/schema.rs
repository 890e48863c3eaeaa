//! The schema, one description for both backends, as the migrations in `migrations/postgres`
//! and `migrations/sqlite` leave it. It is compiled twice, like the queries: each backend names
//! the SQL types its columns have where the two differ (`Id`, `Moment`, `Json`, `Strings`), in
//! its own `column_types` module; everything else is the same SQL type on both.
//!
//! | here | PostgreSQL | SQLite |
//! |---|---|---|
//! | `Id` | `uuid` | `text` (hyphenated) |
//! | `Moment` | `timestamptz` | `text` (RFC 3339) |
//! | `Json` | `jsonb` | `text` |
//! | `Strings` | `text[]` | `text` (a JSON array) |

use super::column_types::{Id, Json, Moment, Strings};

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    users (id) {
        id -> Id,
        email -> Text,
        full_name -> Text,
        password_hash -> Text,
        password_changed_at -> Moment,
        created_at -> Moment,
        updated_at -> Moment,
        email_verified -> Bool,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    organizations (id) {
        id -> Id,
        name -> Text,
        slug -> Text,
        kind -> Text,
        plan -> Text,
        default_role -> Text,
        allow_member_invite -> Bool,
        is_active -> Bool,
        created_at -> Moment,
        updated_at -> Moment,
        deleted_at -> Nullable<Moment>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    memberships (organization_id, user_id) {
        organization_id -> Id,
        user_id -> Id,
        role -> Text,
        created_at -> Moment,
        updated_at -> Moment,
        invited_by -> Nullable<Id>,
        invited_at -> Nullable<Moment>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    sessions (id) {
        id -> Id,
        user_id -> Id,
        refresh_token_hash -> Text,
        created_at -> Moment,
        expires_at -> Moment,
        last_used_at -> Moment,
        revoked_at -> Nullable<Moment>,
        application_id -> Nullable<Id>,
        client_id -> Nullable<Text>,
        scope -> Nullable<Text>,
        amr -> Text,
        sso_organization_id -> Nullable<Id>,
        organization_id -> Nullable<Id>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    oauth_consents (user_id, application_id) {
        user_id -> Id,
        application_id -> Id,
        scope -> Text,
        granted_at -> Moment,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    oauth_authorization_codes (code_hash) {
        code_hash -> Text,
        application_id -> Id,
        user_id -> Id,
        redirect_uri -> Text,
        code_challenge -> Text,
        scope -> Text,
        created_at -> Moment,
        expires_at -> Moment,
        used_at -> Nullable<Moment>,
        session_id -> Nullable<Id>,
        amr -> Text,
        nonce -> Nullable<Text>,
        authenticated_at -> Nullable<Moment>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    api_keys (id) {
        id -> Id,
        name -> Text,
        prefix -> Text,
        key_hash -> Text,
        organization_id -> Id,
        user_id -> Nullable<Id>,
        created_at -> Moment,
        last_used_at -> Nullable<Moment>,
        service_account_id -> Nullable<Id>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Strings, Moment};

    organization_roles (organization_id, key) {
        organization_id -> Id,
        key -> Text,
        name -> Text,
        description -> Text,
        permissions -> Strings,
        created_at -> Moment,
        updated_at -> Moment,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Moment};

    service_accounts (id) {
        id -> Id,
        organization_id -> Id,
        name -> Text,
        role -> Text,
        created_by -> Id,
        created_at -> Moment,
        updated_at -> Moment,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    signing_keys (kid) {
        kid -> Text,
        private_key_sealed -> Binary,
        public_key_der -> Binary,
        created_at -> Moment,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Moment};

    audit_log (id) {
        id -> Id,
        occurred_at -> Moment,
        actor_type -> Text,
        actor_id -> Nullable<Text>,
        organization_id -> Nullable<Id>,
        action -> Text,
        target_type -> Nullable<Text>,
        target_id -> Nullable<Text>,
        ip -> Nullable<Text>,
        user_agent -> Nullable<Text>,
        request_id -> Nullable<Text>,
        outcome -> Text,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    events (id) {
        id -> Id,
        event_type -> Text,
        organization_id -> Nullable<Id>,
        user_id -> Nullable<Id>,
        data -> Json,
        occurred_at -> Moment,
        dispatched_at -> Nullable<Moment>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    invitations (id) {
        id -> Id,
        organization_id -> Id,
        email -> Text,
        role -> Text,
        token_hash -> Text,
        invited_by -> Id,
        invited_at -> Moment,
        expires_at -> Moment,
        accepted_at -> Nullable<Moment>,
        revoked_at -> Nullable<Moment>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    applications (id) {
        id -> Id,
        organization_id -> Id,
        name -> Text,
        is_active -> Bool,
        created_at -> Moment,
        updated_at -> Moment,
        client_id -> Text,
        client_secret_hash -> Text,
        redirect_uris -> Strings,
        require_pkce -> Bool,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    webhook_endpoints (id) {
        id -> Id,
        organization_id -> Id,
        url -> Text,
        description -> Text,
        events -> Strings,
        secret_sealed -> Binary,
        is_active -> Bool,
        consecutive_failures -> Integer,
        last_delivery_at -> Nullable<Moment>,
        created_at -> Moment,
        updated_at -> Moment,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    webhook_deliveries (id) {
        id -> Id,
        endpoint_id -> Id,
        organization_id -> Id,
        event_id -> Id,
        event_type -> Text,
        payload -> Text,
        status -> Text,
        attempt -> Integer,
        next_attempt_at -> Nullable<Moment>,
        leased_until -> Nullable<Moment>,
        lease -> Nullable<Id>,
        http_status -> Nullable<Integer>,
        response_body -> Nullable<Text>,
        duration_ms -> Nullable<BigInt>,
        delivered_at -> Nullable<Moment>,
        created_at -> Moment,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    organization_policies (organization_id) {
        organization_id -> Id,
        document -> Json,
        updated_at -> Moment,
        mfa_required_since -> Nullable<Moment>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    organization_branding (organization_id) {
        organization_id -> Id,
        document -> Json,
        updated_at -> Moment,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    sso_configurations (organization_id) {
        organization_id -> Id,
        provider -> Text,
        idp_entity_id -> Text,
        idp_sso_url -> Text,
        idp_certificate -> Text,
        domain_whitelist -> Strings,
        auto_provision -> Bool,
        default_role -> Text,
        is_active -> Bool,
        created_at -> Moment,
        updated_at -> Moment,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    password_history (id) {
        id -> BigInt,
        user_id -> Id,
        password_hash -> Text,
        retired_at -> Moment,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    saml_requests (id) {
        id -> Text,
        organization_id -> Id,
        return_to -> Text,
        created_at -> Moment,
        expires_at -> Moment,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    saml_assertions (organization_id, assertion_id) {
        organization_id -> Id,
        assertion_id -> Text,
        expires_at -> Moment,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    sso_domains (organization_id, domain) {
        organization_id -> Id,
        domain -> Text,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    mfa_factors (id) {
        id -> Id,
        user_id -> Id,
        kind -> Text,
        totp_secret_sealed -> Nullable<Binary>,
        last_step -> Nullable<BigInt>,
        credential_id -> Nullable<Text>,
        passkey -> Nullable<Text>,
        created_at -> Moment,
        confirmed_at -> Nullable<Moment>,
        last_used_at -> Nullable<Moment>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    recovery_codes (user_id, code_hash) {
        user_id -> Id,
        code_hash -> Text,
        created_at -> Moment,
        used_at -> Nullable<Moment>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    mfa_logins (token_hash) {
        token_hash -> Text,
        user_id -> Id,
        created_at -> Moment,
        expires_at -> Moment,
        failures -> Integer,
        used_at -> Nullable<Moment>,
        webauthn_state -> Nullable<Text>,
        first_factor -> Text,
        password_checked -> Nullable<Text>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    webauthn_registrations (id) {
        id -> Id,
        user_id -> Id,
        state -> Text,
        created_at -> Moment,
        expires_at -> Moment,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    account_tokens (token_hash) {
        token_hash -> Text,
        purpose -> Text,
        user_id -> Id,
        email -> Text,
        created_at -> Moment,
        expires_at -> Moment,
        used_at -> Nullable<Moment>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Json, Strings, Moment};

    organization_domains (id) {
        id -> Id,
        organization_id -> Id,
        domain -> Text,
        verification_value -> Text,
        verified_at -> Nullable<Moment>,
        created_at -> Moment,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Moment};

    scim_tokens (id) {
        id -> Id,
        organization_id -> Id,
        name -> Text,
        prefix -> Text,
        token_hash -> Text,
        created_by -> Id,
        created_at -> Moment,
        last_used_at -> Nullable<Moment>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Moment};

    scim_users (id) {
        id -> Id,
        organization_id -> Id,
        user_name -> Text,
        user_name_key -> Text,
        external_id -> Nullable<Text>,
        display_name -> Nullable<Text>,
        name_formatted -> Nullable<Text>,
        given_name -> Nullable<Text>,
        family_name -> Nullable<Text>,
        emails -> Text,
        active -> Bool,
        created_at -> Moment,
        updated_at -> Moment,
        display_name_key -> Nullable<Text>,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Moment};

    scim_groups (id) {
        id -> Id,
        organization_id -> Id,
        display_name -> Text,
        external_id -> Nullable<Text>,
        created_at -> Moment,
        updated_at -> Moment,
        display_name_key -> Text,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::Id;

    /// A directory user's addresses, lowercase, one row each (for SCIM filters on `emails`).
    scim_user_emails (user_id, value_key) {
        organization_id -> Id,
        user_id -> Id,
        value_key -> Text,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::Id;

    scim_group_members (group_id, user_id) {
        organization_id -> Id,
        group_id -> Id,
        user_id -> Id,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::Id;

    scim_group_roles (organization_id, group_name) {
        organization_id -> Id,
        group_name -> Text,
        role -> Text,
    }
}

diesel::table! {
    use diesel::sql_types::*;
    use super::Moment;

    /// Periodic work claimed once per cluster per interval (`OperationsStore::claim_periodic`).
    periodic_runs (task) {
        task -> Text,
        last_run_at -> Moment,
    }
}

diesel::joinable!(memberships -> organizations (organization_id));
diesel::joinable!(organization_domains -> organizations (organization_id));
diesel::joinable!(invitations -> organizations (organization_id));
diesel::joinable!(applications -> organizations (organization_id));
diesel::joinable!(memberships -> users (user_id));
diesel::joinable!(sessions -> users (user_id));
diesel::joinable!(oauth_authorization_codes -> applications (application_id));
diesel::joinable!(oauth_consents -> applications (application_id));
diesel::joinable!(api_keys -> organizations (organization_id));
diesel::joinable!(service_accounts -> organizations (organization_id));
diesel::joinable!(scim_tokens -> organizations (organization_id));
diesel::joinable!(scim_group_members -> scim_groups (group_id));
diesel::joinable!(scim_group_members -> scim_users (user_id));
diesel::joinable!(scim_user_emails -> scim_users (user_id));
diesel::joinable!(organization_roles -> organizations (organization_id));
diesel::joinable!(api_keys -> service_accounts (service_account_id));
diesel::joinable!(webhook_endpoints -> organizations (organization_id));
diesel::joinable!(webhook_deliveries -> webhook_endpoints (endpoint_id));
diesel::joinable!(organization_policies -> organizations (organization_id));
diesel::joinable!(organization_branding -> organizations (organization_id));
diesel::joinable!(sso_configurations -> organizations (organization_id));
diesel::joinable!(password_history -> users (user_id));
diesel::joinable!(sso_domains -> sso_configurations (organization_id));
diesel::table! {
    use diesel::sql_types::*;
    use super::{Id, Moment};

    mail_outbox (id) {
        id -> Id,
        sealed -> Binary,
        attempts -> Integer,
        next_attempt_at -> Moment,
        created_at -> Moment,
    }
}

diesel::allow_tables_to_appear_in_same_query!(
    users,
    scim_tokens,
    scim_users,
    scim_groups,
    scim_group_members,
    scim_group_roles,
    scim_user_emails,
    organizations,
    memberships,
    sessions,
    api_keys,
    signing_keys,
    events,
    invitations,
    applications,
    webhook_endpoints,
    webhook_deliveries,
    organization_policies,
    organization_branding,
    sso_configurations,
    password_history,
    oauth_authorization_codes,
    oauth_consents,
    saml_requests,
    saml_assertions,
    sso_domains,
    mfa_factors,
    recovery_codes,
    mfa_logins,
    webauthn_registrations,
    account_tokens,
    audit_log,
    organization_domains,
    service_accounts,
    organization_roles,
    mail_outbox
);
