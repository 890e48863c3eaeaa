//! Members and invitations, as the people involved would go through them.

use reqwest::Method;
use serde_json::json;

use crate::helpers::{detail_of, json_of, loc, locs_of, on_both_backends, TestApp, PASSWORD};

#[on_both_backends]
async fn a_colleague_is_invited_joins_changes_role_and_is_removed(app: TestApp) {
    let owner = app.logged_in("owen@example.com").await;
    let team = app.create_team(&owner.access_token, "Owen's Team").await;
    let org = team["id"].as_str().unwrap();

    // The invitation: a pending member, and a mail with a link.
    let invited = json_of(
        app.invite(&owner.access_token, org, "Carla@Example.com", "admin")
            .await,
        201,
    )
    .await;
    assert_eq!(invited["email"], "carla@example.com");
    assert_eq!(invited["role"], "admin");
    assert_eq!(invited["status"], "pending");
    assert!(invited["invited_at"].is_string());
    assert!(invited["invited_by"].is_string());
    let mail = app
        .mails()
        .await
        .into_iter()
        .find(|m| m.contains("carla@example.com"))
        .expect("an invitation mail");
    assert!(mail.contains("Owen's Team"), "{mail}");
    let token = app.invitation_token_for("carla@example.com").await;
    assert!(token.starts_with("ghi_"));

    let members = json_of(
        app.get_as(
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/members"),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(members["total"], 2);
    let pending = &members["items"][1];
    assert_eq!(pending["status"], "pending");
    assert_eq!(pending["user_id"], serde_json::Value::Null);
    assert_eq!(pending["full_name"], serde_json::Value::Null);

    // Inviting twice, or inviting a member, is a conflict.
    detail_of(
        app.invite(&owner.access_token, org, "carla@example.com", "member")
            .await,
        409,
    )
    .await;
    detail_of(
        app.invite(&owner.access_token, org, "owen@example.com", "member")
            .await,
        409,
    )
    .await;

    // The colleague signs up, finds the invitation and accepts it.
    let carla = app.logged_in("carla@example.com").await;
    let mine = json_of(
        app.get_as(&carla.access_token, "/api/v1/invitations").await,
        200,
    )
    .await;
    assert_eq!(mine["total"], 1, "{mine}");
    let mine = &mine["items"];
    assert_eq!(mine.as_array().unwrap().len(), 1);
    assert_eq!(mine[0]["organization"]["name"], "Owen's Team");
    assert_eq!(mine[0]["role"], "admin");
    let joined = json_of(
        app.send_as(
            Method::POST,
            &carla.access_token,
            "/api/v1/invitations/accept",
            Some(json!({ "token": token })),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(joined["status"], "active");
    assert_eq!(joined["user_id"], carla.user_id.as_str());
    assert!(joined["accepted_at"].is_string());
    json_of(
        app.get_as(&carla.access_token, &format!("/api/v1/organizations/{org}"))
            .await,
        200,
    )
    .await;
    assert_eq!(
        json_of(
            app.get_as(&carla.access_token, "/api/v1/invitations").await,
            200
        )
        .await["items"],
        json!([])
    );

    // The owner changes the role, then removes her.
    let member_path = format!("/api/v1/organizations/{org}/members/{}", carla.user_id);
    let changed = json_of(
        app.send_as(
            Method::PATCH,
            &owner.access_token,
            &member_path,
            Some(json!({ "role": "viewer" })),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(changed["role"], "viewer");
    assert_eq!(changed["email"], "carla@example.com");
    assert!(changed["updated_at"].is_string());
    let removed = json_of(
        app.send_as(Method::DELETE, &owner.access_token, &member_path, None)
            .await,
        200,
    )
    .await;
    assert_eq!(removed["user_id"], carla.user_id.as_str());
    assert!(removed["removed_at"].is_string());
    detail_of(
        app.get_as(&carla.access_token, &format!("/api/v1/organizations/{org}"))
            .await,
        404,
    )
    .await;
    // Her account remains.
    json_of(app.me(&carla.access_token).await, 200).await;
}

#[on_both_backends]
async fn the_owner_stays_the_owner(app: TestApp) {
    let owner = app.logged_in("uma@example.com").await;
    let team = app.create_team(&owner.access_token, "Uma Team").await;
    let org = team["id"].as_str().unwrap();
    let admin = app
        .member_of(&owner.access_token, org, "vic@example.com", "admin")
        .await;
    detail_of(
        app.invite(&owner.access_token, org, "new@example.com", "owner")
            .await,
        422,
    )
    .await;
    let owner_path = format!("/api/v1/organizations/{org}/members/{}", owner.user_id);
    detail_of(
        app.send_as(
            Method::PATCH,
            &admin.access_token,
            &owner_path,
            Some(json!({ "role": "viewer" })),
        )
        .await,
        422,
    )
    .await;
    detail_of(
        app.send_as(Method::DELETE, &admin.access_token, &owner_path, None)
            .await,
        422,
    )
    .await;
    detail_of(
        app.send_as(Method::DELETE, &owner.access_token, &owner_path, None)
            .await,
        422,
    )
    .await;
    let admin_path = format!("/api/v1/organizations/{org}/members/{}", admin.user_id);
    detail_of(
        app.send_as(
            Method::PATCH,
            &owner.access_token,
            &admin_path,
            Some(json!({ "role": "owner" })),
        )
        .await,
        422,
    )
    .await;
    let locs = locs_of(
        app.send_as(
            Method::PATCH,
            &owner.access_token,
            &admin_path,
            Some(json!({ "role": "boss" })),
        )
        .await,
    )
    .await;
    assert_eq!(locs, vec![loc(&["body", "role"])]);
}

#[on_both_backends]
async fn an_invitation_is_for_its_addressee_only(app: TestApp) {
    let owner = app.logged_in("wes@example.com").await;
    let team = app.create_team(&owner.access_token, "Wes Team").await;
    let org = team["id"].as_str().unwrap();
    let invited = json_of(
        app.invite(&owner.access_token, org, "xena@example.com", "member")
            .await,
        201,
    )
    .await;
    let token = app.invitation_token_for("xena@example.com").await;
    let intruder = app.logged_in("yuri@example.com").await;
    detail_of(
        app.send_as(
            Method::POST,
            &intruder.access_token,
            "/api/v1/invitations/accept",
            Some(json!({ "token": token })),
        )
        .await,
        403,
    )
    .await;
    detail_of(
        app.send_as(
            Method::POST,
            &intruder.access_token,
            "/api/v1/invitations/accept",
            Some(json!({ "token": "ghi_nope" })),
        )
        .await,
        404,
    )
    .await;
    // Revoked: the link stops working.
    let invitation_id = invited["invitation_id"].as_str().unwrap();
    let revoked = app
        .send_as(
            Method::DELETE,
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/invitations/{invitation_id}"),
            None,
        )
        .await;
    assert_eq!(revoked.status(), 204);
    let xena = app.logged_in("xena@example.com").await;
    detail_of(
        app.send_as(
            Method::POST,
            &xena.access_token,
            &format!("/api/v1/invitations/{invitation_id}/accept"),
            None,
        )
        .await,
        404,
    )
    .await;
    // Invited again, she accepts by id.
    let again = json_of(
        app.invite(&owner.access_token, org, "xena@example.com", "member")
            .await,
        201,
    )
    .await;
    let id = again["invitation_id"].as_str().unwrap();
    json_of(
        app.send_as(
            Method::POST,
            &xena.access_token,
            &format!("/api/v1/invitations/{id}/accept"),
            None,
        )
        .await,
        200,
    )
    .await;
}

#[on_both_backends]
async fn members_may_invite_when_the_organization_allows_it(app: TestApp) {
    let owner = app.logged_in("zoe@example.com").await;
    let team = app.create_team(&owner.access_token, "Zoe Team").await;
    let org = team["id"].as_str().unwrap();
    let member = app
        .member_of(&owner.access_token, org, "abe@example.com", "member")
        .await;
    let detail = detail_of(
        app.invite(&member.access_token, org, "b1@example.com", "viewer")
            .await,
        403,
    )
    .await;
    assert!(detail.contains("organization.members.create"), "{detail}");
    json_of(
        app.send_as(
            Method::PATCH,
            &owner.access_token,
            &format!("/api/v1/organizations/{org}"),
            Some(json!({ "settings": { "allow_member_invite": true } })),
        )
        .await,
        200,
    )
    .await;
    json_of(
        app.invite(&member.access_token, org, "b1@example.com", "viewer")
            .await,
        201,
    )
    .await;
    detail_of(
        app.invite(&member.access_token, org, "b2@example.com", "admin")
            .await,
        403,
    )
    .await;
}

#[on_both_backends]
async fn an_invitation_without_a_role_gives_the_organizations_default_role(app: TestApp) {
    let owner = app.logged_in("zoe@example.com").await;
    let team = app.create_team(&owner.access_token, "Zoe Team").await;
    let org = team["id"].as_str().unwrap();
    let members = format!("/api/v1/organizations/{org}/members");
    let without_role = |email: &str| json!({ "email": email });

    let invited = json_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            &members,
            Some(without_role("m1@example.com")),
        )
        .await,
        201,
    )
    .await;
    assert_eq!(invited["role"], "member", "the default default_role");

    json_of(
        app.send_as(
            Method::PATCH,
            &owner.access_token,
            &format!("/api/v1/organizations/{org}"),
            Some(json!({ "settings": { "default_role": "viewer", "allow_member_invite": true } })),
        )
        .await,
        200,
    )
    .await;
    let invited = json_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            &members,
            Some(without_role("v1@example.com")),
        )
        .await,
        201,
    )
    .await;
    assert_eq!(invited["role"], "viewer");
    // A role named still wins, and a member inviting under allow_member_invite gets the
    // default too.
    let invited = json_of(
        app.invite(&owner.access_token, org, "a1@example.com", "admin")
            .await,
        201,
    )
    .await;
    assert_eq!(invited["role"], "admin");
    let member = app
        .member_of(&owner.access_token, org, "abe@example.com", "member")
        .await;
    let invited = json_of(
        app.send_as(
            Method::POST,
            &member.access_token,
            &members,
            Some(without_role("v2@example.com")),
        )
        .await,
        201,
    )
    .await;
    assert_eq!(invited["role"], "viewer");
    // The pending member, as listed, has it.
    let pending = json_of(
        app.get_as(&owner.access_token, &format!("{members}?search=v2@"))
            .await,
        200,
    )
    .await;
    assert_eq!(pending["items"][0]["role"], "viewer", "{pending}");
}

#[on_both_backends]
async fn a_member_can_leave(app: TestApp) {
    let owner = app.logged_in("cy@example.com").await;
    let team = app.create_team(&owner.access_token, "Cy Team").await;
    let org = team["id"].as_str().unwrap();
    let viewer = app
        .member_of(&owner.access_token, org, "di@example.com", "viewer")
        .await;
    let left = app
        .send_as(
            Method::DELETE,
            &viewer.access_token,
            &format!("/api/v1/organizations/{org}/members/{}", viewer.user_id),
            None,
        )
        .await;
    json_of(left, 200).await;
    detail_of(
        app.get_as(
            &viewer.access_token,
            &format!("/api/v1/organizations/{org}"),
        )
        .await,
        404,
    )
    .await;
}

#[on_both_backends]
async fn the_member_list_filters_and_the_iam_list_shows_users(app: TestApp) {
    let owner = app.logged_in("ed@example.com").await;
    let team = app.create_team(&owner.access_token, "Ed Team").await;
    let org = team["id"].as_str().unwrap();
    app.member_of(&owner.access_token, org, "fay@example.com", "viewer")
        .await;
    json_of(
        app.invite(&owner.access_token, org, "gus@example.com", "viewer")
            .await,
        201,
    )
    .await;
    let viewers = json_of(
        app.get_as(
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/members?role=viewer"),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(viewers["total"], 2);
    let found = json_of(
        app.get_as(
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/members?search=FAY"),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(found["total"], 1);
    assert_eq!(found["items"][0]["email"], "fay@example.com");
    let users = json_of(
        app.client
            .get(app.url("/api/v1/iam/users"))
            .bearer_auth(&owner.access_token)
            .header("X-Organization-ID", org)
            .send()
            .await
            .unwrap(),
        200,
    )
    .await;
    assert_eq!(users["total"], 2, "active members only: {users}");
}

#[on_both_backends]
async fn an_account_is_deleted_unless_it_owns_a_team_with_people(app: TestApp) {
    let owner = app.logged_in("hal@example.com").await;
    let team = app.create_team(&owner.access_token, "Hal Team").await;
    let org = team["id"].as_str().unwrap();
    let ivy = app
        .member_of(&owner.access_token, org, "ivy@example.com", "member")
        .await;
    detail_of(
        app.send_as(
            Method::DELETE,
            &owner.access_token,
            "/api/v1/users/me",
            None,
        )
        .await,
        409,
    )
    .await;
    // Ivy can delete hers: she owns only her personal workspace.
    let gone = app
        .send_as(Method::DELETE, &ivy.access_token, "/api/v1/users/me", None)
        .await;
    assert_eq!(gone.status(), 204);
    detail_of(app.login("ivy@example.com", PASSWORD).await, 401).await;
    let members = json_of(
        app.get_as(
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/members"),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(members["total"], 1);
    // Now the owner's team has only the owner.
    let gone = app
        .send_as(
            Method::DELETE,
            &owner.access_token,
            "/api/v1/users/me",
            None,
        )
        .await;
    assert_eq!(gone.status(), 204);
}
