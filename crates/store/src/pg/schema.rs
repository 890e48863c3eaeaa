//! The PostgreSQL schema, as the migrations in `migrations/postgres` leave it.

diesel::table! {
    users (id) {
        id -> Uuid,
        email -> Text,
        full_name -> Text,
        password_hash -> Text,
        password_changed_at -> Timestamptz,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    organizations (id) {
        id -> Uuid,
        name -> Text,
        slug -> Text,
        kind -> Text,
        plan -> Text,
        default_role -> Text,
        allow_member_invite -> Bool,
        is_active -> Bool,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        deleted_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    memberships (organization_id, user_id) {
        organization_id -> Uuid,
        user_id -> Uuid,
        role -> Text,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        invited_by -> Nullable<Uuid>,
        invited_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    sessions (id) {
        id -> Uuid,
        user_id -> Uuid,
        refresh_token_hash -> Text,
        created_at -> Timestamptz,
        expires_at -> Timestamptz,
        last_used_at -> Timestamptz,
        revoked_at -> Nullable<Timestamptz>,
        application_id -> Nullable<Uuid>,
        client_id -> Nullable<Text>,
        scope -> Nullable<Text>,
    }
}

diesel::table! {
    oauth_authorization_codes (code_hash) {
        code_hash -> Text,
        application_id -> Uuid,
        user_id -> Uuid,
        redirect_uri -> Text,
        code_challenge -> Text,
        scope -> Text,
        created_at -> Timestamptz,
        expires_at -> Timestamptz,
        used_at -> Nullable<Timestamptz>,
        session_id -> Nullable<Uuid>,
    }
}

diesel::table! {
    api_keys (id) {
        id -> Uuid,
        name -> Text,
        prefix -> Text,
        key_hash -> Text,
        organization_id -> Uuid,
        user_id -> Uuid,
        created_at -> Timestamptz,
        last_used_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    signing_keys (kid) {
        kid -> Text,
        private_key_sealed -> Binary,
        public_key_der -> Binary,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    events (id) {
        id -> Uuid,
        event_type -> Text,
        organization_id -> Nullable<Uuid>,
        user_id -> Nullable<Uuid>,
        data -> Jsonb,
        occurred_at -> Timestamptz,
        dispatched_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    invitations (id) {
        id -> Uuid,
        organization_id -> Uuid,
        email -> Text,
        role -> Text,
        token_hash -> Text,
        invited_by -> Uuid,
        invited_at -> Timestamptz,
        expires_at -> Timestamptz,
        accepted_at -> Nullable<Timestamptz>,
        revoked_at -> Nullable<Timestamptz>,
    }
}

diesel::table! {
    applications (id) {
        id -> Uuid,
        organization_id -> Uuid,
        name -> Text,
        is_active -> Bool,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
        client_id -> Text,
        client_secret_hash -> Text,
        redirect_uris -> Array<Text>,
    }
}

diesel::table! {
    webhook_endpoints (id) {
        id -> Uuid,
        organization_id -> Uuid,
        url -> Text,
        description -> Text,
        events -> Array<Text>,
        secret_sealed -> Binary,
        is_active -> Bool,
        consecutive_failures -> Integer,
        last_delivery_at -> Nullable<Timestamptz>,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    webhook_deliveries (id) {
        id -> Uuid,
        endpoint_id -> Uuid,
        organization_id -> Uuid,
        event_id -> Uuid,
        event_type -> Text,
        payload -> Text,
        status -> Text,
        attempt -> Integer,
        next_attempt_at -> Nullable<Timestamptz>,
        leased_until -> Nullable<Timestamptz>,
        lease -> Nullable<Uuid>,
        http_status -> Nullable<Integer>,
        response_body -> Nullable<Text>,
        duration_ms -> Nullable<BigInt>,
        delivered_at -> Nullable<Timestamptz>,
        created_at -> Timestamptz,
    }
}

diesel::table! {
    organization_policies (organization_id) {
        organization_id -> Uuid,
        document -> Jsonb,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    organization_branding (organization_id) {
        organization_id -> Uuid,
        document -> Jsonb,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    sso_configurations (organization_id) {
        organization_id -> Uuid,
        provider -> Text,
        idp_entity_id -> Text,
        idp_sso_url -> Text,
        idp_certificate -> Text,
        domain_whitelist -> Array<Text>,
        auto_provision -> Bool,
        default_role -> Text,
        is_active -> Bool,
        created_at -> Timestamptz,
        updated_at -> Timestamptz,
    }
}

diesel::table! {
    password_history (id) {
        id -> BigInt,
        user_id -> Uuid,
        password_hash -> Text,
        retired_at -> Timestamptz,
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
