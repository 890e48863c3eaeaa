//! The SQLite schema, as the migrations in `migrations/sqlite` leave it.
//! Ids are text UUIDs, timestamps text, JSON text: the shared queries see the same Rust types.

diesel::table! {
    users (id) {
        id -> Text,
        email -> Text,
        full_name -> Text,
        password_hash -> Text,
        password_changed_at -> TimestamptzSqlite,
        created_at -> TimestamptzSqlite,
        updated_at -> TimestamptzSqlite,
    }
}

diesel::table! {
    organizations (id) {
        id -> Text,
        name -> Text,
        slug -> Text,
        kind -> Text,
        plan -> Text,
        default_role -> Text,
        allow_member_invite -> Bool,
        is_active -> Bool,
        created_at -> TimestamptzSqlite,
        updated_at -> TimestamptzSqlite,
        deleted_at -> Nullable<TimestamptzSqlite>,
    }
}

diesel::table! {
    memberships (organization_id, user_id) {
        organization_id -> Text,
        user_id -> Text,
        role -> Text,
        created_at -> TimestamptzSqlite,
        updated_at -> TimestamptzSqlite,
        invited_by -> Nullable<Text>,
        invited_at -> Nullable<TimestamptzSqlite>,
    }
}

diesel::table! {
    sessions (id) {
        id -> Text,
        user_id -> Text,
        refresh_token_hash -> Text,
        created_at -> TimestamptzSqlite,
        expires_at -> TimestamptzSqlite,
        last_used_at -> TimestamptzSqlite,
        revoked_at -> Nullable<TimestamptzSqlite>,
        application_id -> Nullable<Text>,
        client_id -> Nullable<Text>,
        scope -> Nullable<Text>,
    }
}

diesel::table! {
    oauth_authorization_codes (code_hash) {
        code_hash -> Text,
        application_id -> Text,
        user_id -> Text,
        redirect_uri -> Text,
        code_challenge -> Text,
        scope -> Text,
        created_at -> TimestamptzSqlite,
        expires_at -> TimestamptzSqlite,
        used_at -> Nullable<TimestamptzSqlite>,
        session_id -> Nullable<Text>,
    }
}

diesel::table! {
    api_keys (id) {
        id -> Text,
        name -> Text,
        prefix -> Text,
        key_hash -> Text,
        organization_id -> Text,
        user_id -> Text,
        created_at -> TimestamptzSqlite,
        last_used_at -> Nullable<TimestamptzSqlite>,
    }
}

diesel::table! {
    signing_keys (kid) {
        kid -> Text,
        private_key_sealed -> Binary,
        public_key_der -> Binary,
        created_at -> TimestamptzSqlite,
    }
}

diesel::table! {
    events (id) {
        id -> Text,
        event_type -> Text,
        organization_id -> Nullable<Text>,
        user_id -> Nullable<Text>,
        data -> Json,
        occurred_at -> TimestamptzSqlite,
        dispatched_at -> Nullable<TimestamptzSqlite>,
    }
}

diesel::table! {
    invitations (id) {
        id -> Text,
        organization_id -> Text,
        email -> Text,
        role -> Text,
        token_hash -> Text,
        invited_by -> Text,
        invited_at -> TimestamptzSqlite,
        expires_at -> TimestamptzSqlite,
        accepted_at -> Nullable<TimestamptzSqlite>,
        revoked_at -> Nullable<TimestamptzSqlite>,
    }
}

diesel::table! {
    applications (id) {
        id -> Text,
        organization_id -> Text,
        name -> Text,
        is_active -> Bool,
        created_at -> TimestamptzSqlite,
        updated_at -> TimestamptzSqlite,
        client_id -> Text,
        client_secret_hash -> Text,
        redirect_uris -> Text,
    }
}

diesel::table! {
    webhook_endpoints (id) {
        id -> Text,
        organization_id -> Text,
        url -> Text,
        description -> Text,
        // A JSON array of event types.
        events -> Text,
        secret_sealed -> Binary,
        is_active -> Bool,
        consecutive_failures -> Integer,
        last_delivery_at -> Nullable<TimestamptzSqlite>,
        created_at -> TimestamptzSqlite,
        updated_at -> TimestamptzSqlite,
    }
}

diesel::table! {
    webhook_deliveries (id) {
        id -> Text,
        endpoint_id -> Text,
        organization_id -> Text,
        event_id -> Text,
        event_type -> Text,
        payload -> Text,
        status -> Text,
        attempt -> Integer,
        next_attempt_at -> Nullable<TimestamptzSqlite>,
        leased_until -> Nullable<TimestamptzSqlite>,
        lease -> Nullable<Text>,
        http_status -> Nullable<Integer>,
        response_body -> Nullable<Text>,
        duration_ms -> Nullable<BigInt>,
        delivered_at -> Nullable<TimestamptzSqlite>,
        created_at -> TimestamptzSqlite,
    }
}

diesel::table! {
    organization_policies (organization_id) {
        organization_id -> Text,
        document -> Json,
        updated_at -> TimestamptzSqlite,
    }
}

diesel::table! {
    organization_branding (organization_id) {
        organization_id -> Text,
        document -> Json,
        updated_at -> TimestamptzSqlite,
    }
}

diesel::table! {
    sso_configurations (organization_id) {
        organization_id -> Text,
        provider -> Text,
        idp_entity_id -> Text,
        idp_sso_url -> Text,
        idp_certificate -> Text,
        domain_whitelist -> Text,
        auto_provision -> Bool,
        default_role -> Text,
        is_active -> Bool,
        created_at -> TimestamptzSqlite,
        updated_at -> TimestamptzSqlite,
    }
}

diesel::table! {
    password_history (id) {
        id -> BigInt,
        user_id -> Text,
        password_hash -> Text,
        retired_at -> TimestamptzSqlite,
    }
}

diesel::joinable!(memberships -> organizations (organization_id));
diesel::joinable!(invitations -> organizations (organization_id));
diesel::joinable!(applications -> organizations (organization_id));
diesel::joinable!(memberships -> users (user_id));
diesel::joinable!(sessions -> users (user_id));
diesel::joinable!(oauth_authorization_codes -> applications (application_id));
diesel::joinable!(api_keys -> organizations (organization_id));
diesel::joinable!(webhook_endpoints -> organizations (organization_id));
diesel::joinable!(webhook_deliveries -> webhook_endpoints (endpoint_id));
diesel::joinable!(organization_policies -> organizations (organization_id));
diesel::joinable!(organization_branding -> organizations (organization_id));
diesel::joinable!(sso_configurations -> organizations (organization_id));
diesel::joinable!(password_history -> users (user_id));
diesel::allow_tables_to_appear_in_same_query!(
    users,
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
    oauth_authorization_codes
);
