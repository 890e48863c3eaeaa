//! Event payloads: the resource as it stands after the change, in its API shape, no secrets.

use serde_json::{json, Value};

use crate::model::{timestamp, Application, Member, Organization, User};

pub(crate) fn organization(org: &Organization) -> Value {
    json!({
        "id": org.id,
        "name": org.name,
        "slug": org.slug,
        "type": org.kind,
        "plan": org.plan,
        "is_active": org.is_active,
        "settings": {
            "default_role": org.settings.default_role.role(),
            "allow_member_invite": org.settings.allow_member_invite,
        },
        "created_at": timestamp::format(org.created_at),
        "updated_at": timestamp::format(org.updated_at),
    })
}

pub(crate) fn member(member: &Member) -> Value {
    json!({
        "organization_id": member.organization_id,
        "user_id": member.user_id,
        "email": member.email,
        "full_name": member.full_name,
        "role": member.role,
        "status": member.status.as_str(),
        "invited_at": member.invited_at.map(timestamp::format),
        "invited_by": member.invited_by,
        "accepted_at": member.accepted_at.map(timestamp::format),
    })
}

pub(crate) fn user(user: &User) -> Value {
    json!({
        "id": user.id,
        "email": user.email,
        "full_name": user.full_name,
        "created_at": timestamp::format(user.created_at),
    })
}

pub(crate) fn application(app: &Application) -> Value {
    json!({
        "id": app.id,
        "organization_id": app.organization_id,
        "name": app.name,
        "client_id": app.client_id,
        "redirect_uris": app.redirect_uris,
        "is_active": app.is_active,
        "require_pkce": app.require_pkce,
        "created_at": timestamp::format(app.created_at),
        "updated_at": timestamp::format(app.updated_at),
    })
}
