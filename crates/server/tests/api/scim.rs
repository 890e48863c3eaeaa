//! Directory sync (SCIM 2.0) as an identity provider drives it: the request shapes Okta and
//! Microsoft Entra ID document for provisioning, replayed over HTTP; a provisioned person who
//! signs in and works, and who loses access within the request that deprovisions them; groups
//! that give roles; and the attacks a tenant's neighbour would try. The conformance checker
//! scim2-tester runs against the whole protocol (`scim2_tester_reports_no_failure`).

use reqwest::{Method, Response};
use serde_json::{json, Value};

use crate::helpers::{detail_of, json_of, on_both_backends, python, TestApp};

/// An organization on the business plan with a verified domain and a SCIM token.
struct Directory {
    owner: crate::helpers::LoggedIn,
    org: String,
    token: String,
    base: String,
}

async fn directory(app: &TestApp, owner_email: &str, domain: &str) -> Directory {
    let owner = app.logged_in(owner_email).await;
    let team = app.create_team(&owner.access_token, "Acme").await;
    let org = team["id"].as_str().unwrap().to_owned();
    app.set_plan(&org, "business").await;
    app.verified_domain(&owner.access_token, &org, domain).await;
    let created = json_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/scim-tokens"),
            Some(json!({ "name": "Okta" })),
        )
        .await,
        201,
    )
    .await;
    let token = created["token_secret"].as_str().unwrap().to_owned();
    assert!(token.starts_with("ghsc_"), "{created}");
    assert!(token.starts_with(created["prefix"].as_str().unwrap()));
    let base = created["scim_base_url"].as_str().unwrap().to_owned();
    assert_eq!(base, format!("{}/scim/v2/{org}", app.public_url));
    Directory {
        owner,
        org,
        token,
        base,
    }
}

/// A SCIM request with the directory's token, as an IdP sends it (`application/scim+json`).
async fn scim(
    app: &TestApp,
    token: &str,
    method: Method,
    url: &str,
    body: Option<Value>,
) -> Response {
    let mut request = app
        .client
        .request(method, url)
        .bearer_auth(token)
        .header("Accept", "application/scim+json");
    if let Some(body) = body {
        request = request
            .header("Content-Type", "application/scim+json")
            .body(body.to_string());
    }
    request.send().await.unwrap()
}

/// Signs `email` in to the organization with a mailed sign-in link; the access token.
async fn by_mailed_link(app: &TestApp, email: &str, organization: &str) -> String {
    let asked = app
        .post_json("/api/v1/auth/magic-link", &json!({ "email": email }))
        .await;
    assert_eq!(asked.status(), 202);
    let token = app.mailed_token(email, "/magic-link/").await;
    let tokens = json_of(
        app.post_json(
            "/api/v1/auth/magic-link/verify",
            &json!({ "token": token, "organization_id": organization }),
        )
        .await,
        200,
    )
    .await;
    tokens["access_token"].as_str().unwrap().to_owned()
}

/// Asserts a SCIM answer: the status, SCIM's content type, and the JSON body.
async fn scim_json(response: Response, status: u16) -> Value {
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    let body = json_of(response, status).await;
    assert_eq!(
        content_type.as_deref(),
        Some("application/scim+json"),
        "{body}"
    );
    body
}

/// Asserts a SCIM error: the status, the error schema, and its `scimType`.
async fn scim_error(response: Response, status: u16, scim_type: Option<&str>) -> Value {
    let body = scim_json(response, status).await;
    assert_eq!(
        body["schemas"],
        json!(["urn:ietf:params:scim:api:messages:2.0:Error"])
    );
    assert_eq!(body["status"], status.to_string());
    assert_eq!(body["scimType"].as_str(), scim_type, "{body}");
    body
}

/// The organization's members as its owner sees them.
async fn members(app: &TestApp, directory: &Directory) -> Vec<Value> {
    let page = json_of(
        app.get_as(
            &directory.owner.access_token,
            &format!("/api/v1/organizations/{}/members", directory.org),
        )
        .await,
        200,
    )
    .await;
    page["items"].as_array().unwrap().clone()
}

fn member<'a>(members: &'a [Value], email: &str) -> Option<&'a Value> {
    members.iter().find(|m| m["email"] == email)
}

/// What Okta sends to create a user (its SCIM 2.0 guide), for `email`.
fn okta_user(email: &str, external_id: &str) -> Value {
    json!({
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
        "userName": email,
        "name": { "givenName": "Isaac", "familyName": "Brock" },
        "emails": [{ "primary": true, "value": email, "type": "work" }],
        "displayName": "Isaac Brock",
        "locale": "en-US",
        "externalId": external_id,
        "groups": [],
        "password": "1mz050nq",
        "active": true
    })
}

#[on_both_backends]
async fn okta_provisions_a_member_who_signs_in_and_deprovisioning_ends_their_access_at_once(
    app: TestApp,
) {
    let dir = directory(&app, "scim-owner@acme-scim.test", "acme-scim.test").await;
    // Isaac has an account already (an address in the verified domain, which he proved he
    // reads): it is linked as it is.
    let isaac = app.logged_in("isaac@acme-scim.test").await;
    assert_eq!(
        app.send_as(
            Method::POST,
            &isaac.access_token,
            "/api/v1/auth/email/verify-request",
            None
        )
        .await
        .status(),
        202
    );
    let proof = app
        .mailed_token("isaac@acme-scim.test", "/verify-email/")
        .await;
    assert_eq!(
        app.post_json("/api/v1/auth/email/verify", &json!({ "token": proof }))
            .await
            .status(),
        204
    );
    let users = format!("{}/Users", dir.base);

    // Okta looks the user up before creating them.
    let lookup = format!(
        "{users}?filter=userName%20eq%20%22isaac%40acme-scim.test%22&startIndex=1&count=100"
    );
    let found = scim_json(
        scim(&app, &dir.token, Method::GET, &lookup, None).await,
        200,
    )
    .await;
    assert_eq!(found["totalResults"], 0);
    assert_eq!(
        found["schemas"],
        json!(["urn:ietf:params:scim:api:messages:2.0:ListResponse"])
    );

    let created = scim_json(
        scim(
            &app,
            &dir.token,
            Method::POST,
            &users,
            Some(okta_user("isaac@acme-scim.test", "00ujl29u0le5T6Aj10h7")),
        )
        .await,
        201,
    )
    .await;
    let id = created["id"].as_str().unwrap().to_owned();
    assert_eq!(created["userName"], "isaac@acme-scim.test");
    assert_eq!(created["active"], true);
    assert_eq!(created["externalId"], "00ujl29u0le5T6Aj10h7");
    assert_eq!(created["meta"]["resourceType"], "User");
    assert_eq!(created["meta"]["location"], format!("{users}/{id}"));
    assert!(created.get("password").is_none(), "{created}");

    // The lookup finds them now, whatever the case of the address.
    let lookup = format!("{users}?filter=userName%20eq%20%22Isaac%40ACME-scim.test%22");
    let found = scim_json(
        scim(&app, &dir.token, Method::GET, &lookup, None).await,
        200,
    )
    .await;
    assert_eq!(found["totalResults"], 1);
    assert_eq!(found["Resources"][0]["id"], id.as_str());

    // Isaac is an active member with the organization's default role, and works there.
    let all = members(&app, &dir).await;
    let isaac_member = member(&all, "isaac@acme-scim.test").expect("isaac is a member");
    assert_eq!(isaac_member["status"], "active");
    assert_eq!(isaac_member["role"], "member");
    assert_eq!(isaac_member["user_id"], json!(isaac.user_id));
    let org_path = format!("/api/v1/organizations/{}", dir.org);
    assert_eq!(
        app.get_as(&isaac.access_token, &org_path).await.status(),
        200
    );
    let key = json_of(
        app.create_api_key(&isaac.access_token, "laptop", &dir.org)
            .await,
        201,
    )
    .await;
    let key = key["key"].as_str().unwrap().to_owned();
    assert_eq!(app.health_with_key(&key, &dir.org).await.status(), 200);

    // Okta deactivates: one PATCH, and the member is gone within that request.
    let deactivate = json!({
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
        "Operations": [{ "op": "replace", "value": { "active": false } }]
    });
    let patched = scim_json(
        scim(
            &app,
            &dir.token,
            Method::PATCH,
            &format!("{users}/{id}"),
            Some(deactivate),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(patched["active"], false);
    assert!(member(&members(&app, &dir).await, "isaac@acme-scim.test").is_none());
    assert_eq!(
        app.get_as(&isaac.access_token, &org_path).await.status(),
        404
    );
    assert_eq!(app.health_with_key(&key, &dir.org).await.status(), 401);
    // The resource stays, inactive, as the directory left it.
    let kept = scim_json(
        scim(
            &app,
            &dir.token,
            Method::GET,
            &format!("{users}/{id}"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(kept["active"], false);

    // Reactivated, Isaac is back; deleted, gone again, and the resource with him.
    let reactivate = json!({
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
        "Operations": [{ "op": "replace", "path": "active", "value": true }]
    });
    scim_json(
        scim(
            &app,
            &dir.token,
            Method::PATCH,
            &format!("{users}/{id}"),
            Some(reactivate),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(
        app.get_as(&isaac.access_token, &org_path).await.status(),
        200
    );
    let deleted = scim(
        &app,
        &dir.token,
        Method::DELETE,
        &format!("{users}/{id}"),
        None,
    )
    .await;
    assert_eq!(deleted.status(), 204);
    assert_eq!(
        app.get_as(&isaac.access_token, &org_path).await.status(),
        404
    );
    scim_error(
        scim(
            &app,
            &dir.token,
            Method::GET,
            &format!("{users}/{id}"),
            None,
        )
        .await,
        404,
        None,
    )
    .await;

    // Every change is audited as the directory's, and announced as any member change.
    let audit = app
        .audit_records(&format!(
            "?organization_id={}&action=member.removed",
            dir.org
        ))
        .await;
    assert!(!audit.is_empty());
    assert!(
        audit.iter().all(|r| r["actor"]["type"] == "scim"),
        "{audit:?}"
    );
    let joined = app
        .audit_records(&format!(
            "?organization_id={}&action=member.joined",
            dir.org
        ))
        .await;
    assert_eq!(joined.len(), 2, "{joined:?}");
}

#[on_both_backends]
async fn a_new_address_in_the_verified_domain_gets_an_account_that_signs_in_by_mailed_link(
    app: TestApp,
) {
    let dir = directory(&app, "scim-owner2@acme-scim2.test", "acme-scim2.test").await;
    let users = format!("{}/Users", dir.base);
    let created = scim_json(
        scim(
            &app,
            &dir.token,
            Method::POST,
            &users,
            Some(okta_user("newbie@acme-scim2.test", "ext-1")),
        )
        .await,
        201,
    )
    .await;
    assert_eq!(created["name"]["givenName"], "Isaac");
    let all = members(&app, &dir).await;
    let newbie = member(&all, "newbie@acme-scim2.test").expect("an active member");
    assert_eq!(newbie["status"], "active");
    assert_eq!(newbie["full_name"], "Isaac Brock");

    // The account has no password: a mailed sign-in link opens a session in the organization.
    let access = by_mailed_link(&app, "newbie@acme-scim2.test", &dir.org).await;
    let access = access.as_str();
    assert_eq!(
        app.get_as(access, &format!("/api/v1/organizations/{}", dir.org))
            .await
            .status(),
        200
    );

    // Deprovisioned, the same token is refused at once.
    let id = created["id"].as_str().unwrap();
    assert_eq!(
        scim(
            &app,
            &dir.token,
            Method::DELETE,
            &format!("{users}/{id}"),
            None
        )
        .await
        .status(),
        204
    );
    assert_eq!(
        app.get_as(access, &format!("/api/v1/organizations/{}", dir.org))
            .await
            .status(),
        404
    );
}

#[on_both_backends]
async fn a_directory_reclaims_an_account_registered_in_advance_for_its_address(app: TestApp) {
    // Mallory registered a colleague-to-be's address before Acme verified its domain.
    let mallory = app.logged_in("newhire@acme-scim5.test").await;
    let dir = directory(&app, "scim-owner5@acme-scim5.test", "acme-scim5.test").await;
    let users = format!("{}/Users", dir.base);
    scim_json(
        scim(
            &app,
            &dir.token,
            Method::POST,
            &users,
            Some(okta_user("newhire@acme-scim5.test", "ext-5")),
        )
        .await,
        201,
    )
    .await;
    // The directory linked the address's account: whatever Mallory held of it ended.
    assert_eq!(
        app.refresh(&mallory.refresh_token).await.status(),
        401,
        "her refresh token"
    );
    assert_eq!(
        app.get_as(
            &mallory.access_token,
            &format!("/api/v1/organizations/{}", dir.org)
        )
        .await
        .status(),
        401
    );
    assert_eq!(
        app.login("newhire@acme-scim5.test", crate::helpers::PASSWORD)
            .await
            .status(),
        401,
        "her password is gone"
    );
    let reclaimed = app
        .audit_records(&format!(
            "?organization_id={}&action=user.reclaimed",
            dir.org
        ))
        .await;
    assert_eq!(reclaimed.len(), 1, "{reclaimed:?}");
    assert_eq!(reclaimed[0]["actor"]["type"], "scim");
    // The member is the address's: a mailed link (to the real mailbox) signs them in.
    let access = by_mailed_link(&app, "newhire@acme-scim5.test", &dir.org).await;
    assert_eq!(
        app.get_as(&access, &format!("/api/v1/organizations/{}", dir.org))
            .await
            .status(),
        200
    );
}

#[on_both_backends]
async fn a_scim_token_ends_with_its_makers_right_to_manage_sso(app: TestApp) {
    let dir = directory(&app, "scim-owner6@acme-scim6.test", "acme-scim6.test").await;
    let members_path = format!("/api/v1/organizations/{}/members", dir.org);
    let users = format!("{}/Users", dir.base);
    // Two admins each make a token for the IdP.
    let mut tokens = Vec::new();
    for email in ["admin-a@elsewhere6.test", "admin-b@elsewhere6.test"] {
        let admin = app
            .member_of(&dir.owner.access_token, &dir.org, email, "admin")
            .await;
        let created = json_of(
            app.send_as(
                Method::POST,
                &admin.access_token,
                &format!("/api/v1/organizations/{}/scim-tokens", dir.org),
                Some(json!({ "name": "Okta" })),
            )
            .await,
            201,
        )
        .await;
        let token = created["token_secret"].as_str().unwrap().to_owned();
        assert_eq!(
            scim(&app, &token, Method::GET, &users, None).await.status(),
            200
        );
        tokens.push((admin, token));
    }
    // One is removed, the other made a member: neither token provisions anyone any more.
    let (removed, removed_token) = &tokens[0];
    json_of(
        app.send_as(
            Method::DELETE,
            &dir.owner.access_token,
            &format!("{members_path}/{}", removed.user_id),
            None,
        )
        .await,
        200,
    )
    .await;
    let (demoted, demoted_token) = &tokens[1];
    json_of(
        app.send_as(
            Method::PATCH,
            &dir.owner.access_token,
            &format!("{members_path}/{}", demoted.user_id),
            Some(json!({ "role": "member" })),
        )
        .await,
        200,
    )
    .await;
    for token in [removed_token, demoted_token] {
        let refused = scim(
            &app,
            token,
            Method::POST,
            &users,
            Some(okta_user("personal@elsewhere6.test", "ext-6")),
        )
        .await;
        assert_eq!(refused.status(), 401);
    }
    assert!(
        members(&app, &dir)
            .await
            .iter()
            .all(|m| m["email"] != "personal@elsewhere6.test"),
        "nobody was provisioned"
    );
    // The owner's own token still works.
    assert_eq!(
        scim(&app, &dir.token, Method::GET, &users, None)
            .await
            .status(),
        200
    );
    // Both tokens were revoked by the writes themselves (issue 49, point 4): the list keeps
    // only the owner's, and the log says the system revoked each one.
    let listed = json_of(
        app.get_as(
            &dir.owner.access_token,
            &format!("/api/v1/organizations/{}/scim-tokens", dir.org),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(listed["total"], 1, "{listed}");
    assert_eq!(
        listed["items"][0]["created_by"],
        json!(dir.owner.user_id),
        "{listed}"
    );
    let revoked = app
        .audit_records(&format!(
            "?organization_id={}&action=scim_token.revoked",
            dir.org
        ))
        .await;
    assert_eq!(revoked.len(), 2, "{revoked:?}");
    for record in &revoked {
        assert_eq!(record["actor"]["type"], "system", "{record}");
        assert_eq!(record["target"]["type"], "scim_token", "{record}");
    }
}

#[on_both_backends]
async fn a_scim_token_is_revoked_when_its_maker_leaves_or_their_custom_role_loses_sso_manage(
    app: TestApp,
) {
    let dir = directory(&app, "scim-owner7@acme-scim7.test", "acme-scim7.test").await;
    let org_path = format!("/api/v1/organizations/{}", dir.org);
    let sso_admin = [
        "organization.read",
        "organization.members.read",
        "sso.manage",
    ];
    json_of(
            app.send_as(Method::POST, &dir.owner.access_token, &format!("{org_path}/roles"), Some(json!({ "key": "sso-admin", "name": "SSO admin", "description": "runs the IdP", "permissions": sso_admin }))).await,
            201,
        )
        .await;
    let mut made = Vec::new();
    for (email, role) in [
        ("leaver@elsewhere7.test", "admin"),
        ("sso@elsewhere7.test", "sso-admin"),
    ] {
        let maker = app
            .member_of(&dir.owner.access_token, &dir.org, email, role)
            .await;
        let created = json_of(
            app.send_as(
                Method::POST,
                &maker.access_token,
                &format!("{org_path}/scim-tokens"),
                Some(json!({ "name": "Okta" })),
            )
            .await,
            201,
        )
        .await;
        made.push((maker, created["token_secret"].as_str().unwrap().to_owned()));
    }
    let users = format!("{}/Users", dir.base);
    // The admin leaves of their own accord.
    let (leaver, leaver_token) = &made[0];
    json_of(
        app.send_as(
            Method::DELETE,
            &leaver.access_token,
            &format!("{org_path}/members/{}", leaver.user_id),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(
        scim(&app, leaver_token, Method::GET, &users, None)
            .await
            .status(),
        401
    );
    // Renaming the custom role keeps its holder's token; narrowing it to lose `sso.manage`
    // revokes it.
    let (_, sso_token) = &made[1];
    json_of(
        app.send_as(
            Method::PATCH,
            &dir.owner.access_token,
            &format!("{org_path}/roles/sso-admin"),
            Some(json!({ "name": "IdP admin" })),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(
        scim(&app, sso_token, Method::GET, &users, None)
            .await
            .status(),
        200
    );
    json_of(
        app.send_as(
            Method::PATCH,
            &dir.owner.access_token,
            &format!("{org_path}/roles/sso-admin"),
            Some(json!({ "permissions": ["organization.read"] })),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(
        scim(&app, sso_token, Method::GET, &users, None)
            .await
            .status(),
        401
    );
    let listed = json_of(
        app.get_as(&dir.owner.access_token, &format!("{org_path}/scim-tokens"))
            .await,
        200,
    )
    .await;
    assert_eq!(listed["total"], 1, "only the owner's is left: {listed}");
    let revoked = app
        .audit_records(&format!(
            "?organization_id={}&action=scim_token.revoked",
            dir.org
        ))
        .await;
    assert_eq!(revoked.len(), 2, "{revoked:?}");
    assert!(
        revoked
            .iter()
            .all(|record| record["actor"]["type"] == "system"),
        "{revoked:?}"
    );
}

#[on_both_backends]
async fn an_address_outside_the_verified_domains_is_invited_never_linked(app: TestApp) {
    let dir = directory(&app, "scim-owner3@acme-scim3.test", "acme-scim3.test").await;
    // Mallory's account exists elsewhere; the directory names her address anyway.
    let mallory = app.logged_in("mallory@elsewhere-scim.test").await;
    let users = format!("{}/Users", dir.base);
    let created = scim_json(
        scim(
            &app,
            &dir.token,
            Method::POST,
            &users,
            Some(okta_user("mallory@elsewhere-scim.test", "ext-m")),
        )
        .await,
        201,
    )
    .await;
    // A pending invitation, mailed; she is not a member until she accepts it herself.
    let all = members(&app, &dir).await;
    let pending = member(&all, "mallory@elsewhere-scim.test").expect("a pending member");
    assert_eq!(pending["status"], "pending");
    assert_eq!(pending["user_id"], Value::Null);
    assert_eq!(
        app.get_as(
            &mallory.access_token,
            &format!("/api/v1/organizations/{}", dir.org)
        )
        .await
        .status(),
        404
    );
    let mail = app
        .mails()
        .await
        .into_iter()
        .find(|m| m.contains("mallory@elsewhere-scim.test"))
        .expect("an invitation mail");
    assert!(mail.contains("Acme"), "{mail}");

    // Deleted from the directory, the invitation goes too.
    let id = created["id"].as_str().unwrap();
    assert_eq!(
        scim(
            &app,
            &dir.token,
            Method::DELETE,
            &format!("{users}/{id}"),
            None
        )
        .await
        .status(),
        204
    );
    assert!(member(&members(&app, &dir).await, "mallory@elsewhere-scim.test").is_none());
}

#[on_both_backends]
async fn the_directorys_invitation_replaces_an_admins_and_the_old_link_stops_working(app: TestApp) {
    let dir = directory(&app, "scim-owner-r@acme-scimr.test", "acme-scimr.test").await;
    let owner = &dir.owner.access_token;
    let email = "nora@elsewhere-scimr.test";
    // An admin invites Nora as a member; a second invitation from a person is refused.
    let invited = app.invite(owner, &dir.org, email, "member").await;
    json_of(invited, 201).await;
    let admins_link = app.invitation_token_for(email).await;
    detail_of(app.invite(owner, &dir.org, email, "viewer").await, 409).await;

    // The directory, which speaks for the address, invites her too: its invitation holds.
    let users = format!("{}/Users", dir.base);
    let created = scim(
        &app,
        &dir.token,
        Method::POST,
        &users,
        Some(okta_user(email, "ext-n")),
    );
    scim_json(created.await, 201).await;
    let directorys_link = app.invitation_token_for(email).await;
    assert_ne!(directorys_link, admins_link);
    let pending: Vec<_> = members(&app, &dir)
        .await
        .into_iter()
        .filter(|m| m["email"] == email)
        .collect();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0]["status"], "pending");

    // The admin's mailed link no longer opens a way in; the directory's does.
    let nora = app.logged_in(email).await;
    let accept = |token: String| {
        app.send_as(
            Method::POST,
            &nora.access_token,
            "/api/v1/invitations/accept",
            Some(json!({ "token": token })),
        )
    };
    detail_of(accept(admins_link).await, 404).await;
    let joined = json_of(accept(directorys_link).await, 200).await;
    assert_eq!(joined["status"], "active");
    assert_eq!(joined["role"], "member", "{joined}");
}

#[on_both_backends]
async fn entra_id_provisions_and_its_groups_give_roles(app: TestApp) {
    let dir = directory(&app, "scim-owner4@contoso-scim.test", "contoso-scim.test").await;
    let users = format!("{}/Users", dir.base);
    let groups = format!("{}/Groups", dir.base);
    json_of(
        app.send_as(
            Method::PUT,
            &dir.owner.access_token,
            &format!("/api/v1/organizations/{}/scim/group-roles", dir.org),
            Some(json!({ "IT Admins": "admin", "Everyone": "viewer" })),
        )
        .await,
        200,
    )
    .await;

    // Entra's create: the enterprise extension, which Gatehouse does not keep.
    let entra_user = json!({
        "schemas": [
            "urn:ietf:params:scim:schemas:core:2.0:User",
            "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
        ],
        "externalId": "0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef",
        "userName": "Test_User_ab6490ee-1e48-479e-a20b-2d77186b5dd1@contoso-scim.test",
        "active": true,
        "emails": [{ "primary": true, "type": "work", "value": "Test_User_fd0ea19b-0777-472c-9f96-4f70d2226f2e@contoso-scim.test" }],
        "meta": { "resourceType": "User" },
        "name": { "formatted": "givenName familyName", "familyName": "familyName", "givenName": "givenName" },
        "roles": [],
        "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": { "department": "Sales" }
    });
    let created = scim_json(
        scim(&app, &dir.token, Method::POST, &users, Some(entra_user)).await,
        201,
    )
    .await;
    let user_id = created["id"].as_str().unwrap().to_owned();
    let email = "test_user_ab6490ee-1e48-479e-a20b-2d77186b5dd1@contoso-scim.test";
    let role_of =
        |all: Vec<Value>| member(&all, email).map(|m| m["role"].as_str().unwrap().to_owned());
    assert_eq!(
        role_of(members(&app, &dir).await).as_deref(),
        Some("member")
    );

    // Entra creates the group, then adds the member: the group's role.
    let group = scim_json(
        scim(
            &app,
            &dir.token,
            Method::POST,
            &groups,
            Some(json!({
                "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"],
                "externalId": "8aa1a0c0-c4c3-4bc0-b4a5-2ef676900159",
                "displayName": "IT Admins",
                "members": []
            })),
        )
        .await,
        201,
    )
    .await;
    let group_id = group["id"].as_str().unwrap().to_owned();
    let add = json!({
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
        "Operations": [{ "op": "Add", "path": "members", "value": [{ "value": user_id }] }]
    });
    let patched = scim_json(
        scim(
            &app,
            &dir.token,
            Method::PATCH,
            &format!("{groups}/{group_id}"),
            Some(add),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(patched["members"][0]["value"], user_id.as_str());
    assert_eq!(role_of(members(&app, &dir).await).as_deref(), Some("admin"));

    // Removed from it (Entra's shape), they fall back to the default role.
    let remove = json!({
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
        "Operations": [{ "op": "Remove", "path": "members", "value": [{ "value": user_id }] }]
    });
    scim_json(
        scim(
            &app,
            &dir.token,
            Method::PATCH,
            &format!("{groups}/{group_id}"),
            Some(remove),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(
        role_of(members(&app, &dir).await).as_deref(),
        Some("member")
    );

    // Okta's shape of the same, by filter; and the map changed: roles follow at once.
    let add = json!({
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
        "Operations": [{ "op": "add", "path": "members", "value": [{ "value": user_id, "display": email }] }]
    });
    scim_json(
        scim(
            &app,
            &dir.token,
            Method::PATCH,
            &format!("{groups}/{group_id}"),
            Some(add),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(role_of(members(&app, &dir).await).as_deref(), Some("admin"));
    json_of(
        app.send_as(
            Method::PUT,
            &dir.owner.access_token,
            &format!("/api/v1/organizations/{}/scim/group-roles", dir.org),
            Some(json!({ "IT Admins": "viewer" })),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(
        role_of(members(&app, &dir).await).as_deref(),
        Some("viewer")
    );
    let remove = json!({
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
        "Operations": [{ "op": "remove", "path": format!("members[value eq \"{user_id}\"]") }]
    });
    scim_json(
        scim(
            &app,
            &dir.token,
            Method::PATCH,
            &format!("{groups}/{group_id}"),
            Some(remove),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(
        role_of(members(&app, &dir).await).as_deref(),
        Some("member")
    );
    let changed = app
        .audit_records(&format!(
            "?organization_id={}&action=member.role_changed",
            dir.org
        ))
        .await;
    // Four by the directory, one by the owner who changed the map.
    assert_eq!(changed.len(), 5, "{changed:?}");
    assert_eq!(
        changed
            .iter()
            .filter(|r| r["actor"]["type"] == "scim")
            .count(),
        4,
        "{changed:?}"
    );

    // Entra deactivates with a string.
    let deactivate = json!({
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
        "Operations": [{ "op": "Replace", "path": "active", "value": "False" }]
    });
    let patched = scim_json(
        scim(
            &app,
            &dir.token,
            Method::PATCH,
            &format!("{users}/{user_id}"),
            Some(deactivate),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(patched["active"], false);
    assert!(member(&members(&app, &dir).await, email).is_none());
}

#[on_both_backends]
async fn a_neighbour_cannot_reach_another_directory_nor_skip_the_plan_or_the_owner(app: TestApp) {
    let dir = directory(&app, "scim-owner5@acme-scim5.test", "acme-scim5.test").await;
    let other = directory(&app, "scim-other@other-scim5.test", "other-scim5.test").await;
    let users = format!("{}/Users", dir.base);

    // Another organization's token, a user's own access token, no token, a revoked token.
    let refused = scim_error(
        scim(&app, &other.token, Method::GET, &users, None).await,
        401,
        None,
    )
    .await;
    assert_eq!(refused["detail"], "invalid SCIM token");
    // The credential is judged before the body: a bad token with a bad body is 401.
    let bad_body = app
        .client
        .post(&users)
        .bearer_auth(&other.token)
        .header("Content-Type", "application/scim+json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    scim_error(bad_body, 401, None).await;
    scim_error(
        scim(&app, &dir.owner.access_token, Method::GET, &users, None).await,
        401,
        None,
    )
    .await;
    let anonymous = app.client.get(&users).send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    // A SCIM token is no way into the rest of the API, nor into someone's account.
    for path in [
        format!("/api/v1/organizations/{}", dir.org),
        format!("/api/v1/organizations/{}/members", dir.org),
        "/api/v1/users/me".to_owned(),
    ] {
        assert_eq!(app.get_as(&dir.token, &path).await.status(), 401, "{path}");
    }
    let tokens = json_of(
        app.get_as(
            &other.owner.access_token,
            &format!("/api/v1/organizations/{}/scim-tokens", other.org),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(tokens["total"], 1, "{tokens}");
    let tokens = &tokens["items"];
    assert_eq!(tokens.as_array().unwrap().len(), 1);
    assert!(
        tokens[0].get("token_secret").is_none() && tokens[0].get("token_hash").is_none(),
        "{tokens}"
    );
    let token_id = tokens[0]["id"].as_str().unwrap();
    // Not from this organization's admins, nor from its members.
    let revoke_elsewhere = app
        .send_as(
            Method::DELETE,
            &dir.owner.access_token,
            &format!("/api/v1/organizations/{}/scim-tokens/{token_id}", dir.org),
            None,
        )
        .await;
    assert_eq!(revoke_elsewhere.status(), 404);
    let revoked = app
        .send_as(
            Method::DELETE,
            &other.owner.access_token,
            &format!("/api/v1/organizations/{}/scim-tokens/{token_id}", other.org),
            None,
        )
        .await;
    assert_eq!(revoked.status(), 204);
    scim_error(
        scim(
            &app,
            &other.token,
            Method::GET,
            &format!("{}/Users", other.base),
            None,
        )
        .await,
        401,
        None,
    )
    .await;

    // A group naming a user of another directory.
    let foreign = scim_json(
        scim(
            &app,
            &dir.token,
            Method::POST,
            &users,
            Some(okta_user("x@acme-scim5.test", "x")),
        )
        .await,
        201,
    )
    .await;
    let third = directory(&app, "scim-third@third-scim5.test", "third-scim5.test").await;
    let group = json!({
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"],
        "displayName": "Thieves",
        "members": [{ "value": foreign["id"] }]
    });
    scim_error(
        scim(
            &app,
            &third.token,
            Method::POST,
            &format!("{}/Groups", third.base),
            Some(group),
        )
        .await,
        400,
        Some("invalidValue"),
    )
    .await;
    // Nor another directory's user by id.
    let id = foreign["id"].as_str().unwrap();
    scim_error(
        scim(
            &app,
            &third.token,
            Method::GET,
            &format!("{}/Users/{id}", third.base),
            None,
        )
        .await,
        404,
        None,
    )
    .await;
    scim_error(
        scim(
            &app,
            &third.token,
            Method::DELETE,
            &format!("{}/Users/{id}", third.base),
            None,
        )
        .await,
        404,
        None,
    )
    .await;

    // The owner is never removed or demoted by the directory.
    let owner = scim_json(
        scim(
            &app,
            &dir.token,
            Method::POST,
            &users,
            Some(okta_user("scim-owner5@acme-scim5.test", "o")),
        )
        .await,
        201,
    )
    .await;
    let owner_id = owner["id"].as_str().unwrap();
    let deactivate = json!({
        "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
        "Operations": [{ "op": "replace", "path": "active", "value": false }]
    });
    scim_error(
        scim(
            &app,
            &dir.token,
            Method::PATCH,
            &format!("{users}/{owner_id}"),
            Some(deactivate),
        )
        .await,
        400,
        Some("mutability"),
    )
    .await;
    let owner_member = members(&app, &dir)
        .await
        .into_iter()
        .find(|m| m["email"] == "scim-owner5@acme-scim5.test")
        .unwrap();
    assert_eq!(owner_member["role"], "owner");
    let mapped = app
        .send_as(
            Method::PUT,
            &dir.owner.access_token,
            &format!("/api/v1/organizations/{}/scim/group-roles", dir.org),
            Some(json!({ "Founders": "owner" })),
        )
        .await;
    assert_eq!(mapped.status(), 422);

    // On the free plan there is no directory sync: no new token, and the old one stops.
    app.set_plan(&dir.org, "free").await;
    scim_error(
        scim(&app, &dir.token, Method::GET, &users, None).await,
        403,
        None,
    )
    .await;
    let refused = app
        .send_as(
            Method::POST,
            &dir.owner.access_token,
            &format!("/api/v1/organizations/{}/scim-tokens", dir.org),
            Some(json!({ "name": "again" })),
        )
        .await;
    assert_eq!(refused.status(), 403);
}

#[on_both_backends]
async fn the_protocol_answers_in_its_own_schema(app: TestApp) {
    let dir = directory(&app, "scim-owner6@acme-scim6.test", "acme-scim6.test").await;
    let users = format!("{}/Users", dir.base);
    let config = scim_json(
        scim(
            &app,
            &dir.token,
            Method::GET,
            &format!("{}/ServiceProviderConfig", dir.base),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(config["patch"]["supported"], true);
    assert_eq!(config["bulk"]["supported"], false);
    assert_eq!(config["filter"]["supported"], true);
    scim_error(
        scim(
            &app,
            &dir.token,
            Method::POST,
            &format!("{}/ServiceProviderConfig", dir.base),
            Some(json!({})),
        )
        .await,
        405,
        None,
    )
    .await;
    let types = scim_json(
        scim(
            &app,
            &dir.token,
            Method::GET,
            &format!("{}/ResourceTypes", dir.base),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(types["totalResults"], 2);
    scim_json(
        scim(
            &app,
            &dir.token,
            Method::GET,
            &format!(
                "{}/Schemas/urn:ietf:params:scim:schemas:core:2.0:User",
                dir.base
            ),
            None,
        )
        .await,
        200,
    )
    .await;

    scim_error(
        scim(
            &app,
            &dir.token,
            Method::GET,
            &format!("{users}?filter=userName%20zz%20%22x%22"),
            None,
        )
        .await,
        400,
        Some("invalidFilter"),
    )
    .await;
    scim_error(
        scim(
            &app,
            &dir.token,
            Method::POST,
            &users,
            Some(json!({ "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"] })),
        )
        .await,
        400,
        Some("invalidValue"),
    )
    .await;
    scim_json(
        scim(
            &app,
            &dir.token,
            Method::POST,
            &users,
            Some(okta_user("dup@acme-scim6.test", "d")),
        )
        .await,
        201,
    )
    .await;
    scim_error(
        scim(
            &app,
            &dir.token,
            Method::POST,
            &users,
            Some(okta_user("DUP@acme-scim6.test", "d2")),
        )
        .await,
        409,
        Some("uniqueness"),
    )
    .await;
    scim_error(
        scim(
            &app,
            &dir.token,
            Method::GET,
            &format!("{users}/not-a-uuid"),
            None,
        )
        .await,
        404,
        None,
    )
    .await;
    let bad_patch = json!({ "schemas": ["urn:ietf:params:scim:api:messages:2.0:PatchOp"], "Operations": [{ "op": "explode" }] });
    let listed = scim_json(scim(&app, &dir.token, Method::GET, &users, None).await, 200).await;
    let id = listed["Resources"][0]["id"].as_str().unwrap();
    scim_error(
        scim(
            &app,
            &dir.token,
            Method::PATCH,
            &format!("{users}/{id}"),
            Some(bad_patch),
        )
        .await,
        400,
        Some("invalidSyntax"),
    )
    .await;

    // Paging and projection.
    scim_json(
        scim(
            &app,
            &dir.token,
            Method::POST,
            &users,
            Some(okta_user("two@acme-scim6.test", "t")),
        )
        .await,
        201,
    )
    .await;
    let page = scim_json(
        scim(
            &app,
            &dir.token,
            Method::GET,
            &format!("{users}?startIndex=2&count=1&attributes=userName"),
            None,
        )
        .await,
        200,
    )
    .await;
    assert_eq!(page["totalResults"], 2);
    assert_eq!(page["itemsPerPage"], 1);
    assert_eq!(page["startIndex"], 2);
    assert_eq!(page["Resources"][0]["userName"], "two@acme-scim6.test");
    assert!(page["Resources"][0].get("emails").is_none(), "{page}");
}

#[on_both_backends]
async fn scim2_tester_reports_no_failure(app: TestApp) {
    let dir = directory(
        &app,
        "conformance@conformance-scim.test",
        "conformance-scim.test",
    )
    .await;
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scim_conformance/run.py");
    let output = tokio::process::Command::new(python())
        .arg(&script)
        .arg(&dir.base)
        .arg(&dir.token)
        .output()
        .await
        .expect("run scim2-tester (pip install -r scripts/test-requirements.txt)");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let summary: Value = stdout
        .lines()
        .last()
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| {
            panic!("no summary from scim2-tester\nstdout: {stdout}\nstderr: {stderr}")
        });
    eprintln!("scim2-tester: {summary}");
    assert_eq!(summary["failed"], 0, "{summary:#}\n{stderr}");
    assert!(
        summary["total"].as_u64().unwrap() >= 50,
        "the run stopped early: {summary:#}"
    );
    assert!(output.status.success());
}

/// A user as a directory sends it, inactive (so it makes no member): `person<n>`.
fn person(n: usize, domain: &str) -> Value {
    json!({
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"],
        "userName": format!("person{n:03}@{domain}"),
        "name": { "givenName": format!("Given{n:03}"), "familyName": "Person" },
        "emails": [{ "value": format!("p{n:03}@mail.{domain}"), "primary": true }],
        "externalId": format!("ext-{n:03}"),
        "active": false
    })
}

/// The list at `base` (`/Users`, `/Groups`) with these query parameters.
async fn list(app: &TestApp, dir: &Directory, path: &str, params: &[(&str, &str)]) -> Value {
    let url = reqwest::Url::parse_with_params(&format!("{}{path}", dir.base), params).unwrap();
    scim_json(
        scim(app, &dir.token, Method::GET, url.as_str(), None).await,
        200,
    )
    .await
}

fn user_names(list: &Value) -> Vec<&str> {
    list["Resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|user| user["userName"].as_str().unwrap())
        .collect()
}

#[on_both_backends]
async fn a_filter_finds_its_users_among_hundreds_and_pages_them_in_order(app: TestApp) {
    let domain = "acme-scim7.test";
    let dir = directory(&app, "scim-owner7@acme-scim7.test", domain).await;
    let users = format!("{}/Users", dir.base);
    for n in 0..300 {
        scim_json(
            scim(
                &app,
                &dir.token,
                Method::POST,
                &users,
                Some(person(n, domain)),
            )
            .await,
            201,
        )
        .await;
    }

    // One user by userName, without case: totalResults 1.
    let one = list(
        &app,
        &dir,
        "/Users",
        &[("filter", r#"userName eq "PERSON123@Acme-SCIM7.test""#)],
    )
    .await;
    assert_eq!(one["totalResults"], 1, "{one}");
    assert_eq!(user_names(&one), ["person123@acme-scim7.test"]);
    let by_email = list(
        &app,
        &dir,
        "/Users",
        &[("filter", r#"emails.value eq "p042@mail.acme-scim7.test""#)],
    )
    .await;
    assert_eq!(user_names(&by_email), ["person042@acme-scim7.test"]);
    let none = list(
        &app,
        &dir,
        "/Users",
        &[("filter", r#"externalId eq "EXT-001""#)],
    )
    .await;
    assert_eq!(
        (
            none["totalResults"].as_u64(),
            none["Resources"].as_array().map(Vec::len)
        ),
        (Some(0), Some(0))
    );

    // A slice of a filtered listing, oldest first: the 11th to 15th of the hundred.
    let slice = list(
        &app,
        &dir,
        "/Users",
        &[
            ("filter", r#"userName sw "person1" and externalId pr"#),
            ("startIndex", "11"),
            ("count", "5"),
        ],
    )
    .await;
    assert_eq!(slice["totalResults"], 100);
    assert_eq!(slice["startIndex"], 11);
    assert_eq!(slice["itemsPerPage"], 5);
    let want: Vec<String> = (110..115).map(|n| format!("person{n}@{domain}")).collect();
    assert_eq!(user_names(&slice), want);

    // The end of the whole directory, and the total alone.
    let last = list(
        &app,
        &dir,
        "/Users",
        &[("startIndex", "299"), ("count", "10")],
    )
    .await;
    assert_eq!(last["totalResults"], 300);
    assert_eq!(
        user_names(&last),
        ["person298@acme-scim7.test", "person299@acme-scim7.test"]
    );
    let total = list(&app, &dir, "/Users", &[("count", "0")]).await;
    assert_eq!(
        (
            total["totalResults"].as_u64(),
            total["itemsPerPage"].as_u64()
        ),
        (Some(300), Some(0))
    );

    // A filter the store does not index (ew, a name part) gives the same kind of answer.
    let ending = list(
        &app,
        &dir,
        "/Users",
        &[
            ("filter", r#"userName ew "7@ACME-scim7.test""#),
            ("count", "3"),
            ("startIndex", "2"),
        ],
    )
    .await;
    assert_eq!(ending["totalResults"], 30);
    assert_eq!(
        user_names(&ending),
        [
            "person017@acme-scim7.test",
            "person027@acme-scim7.test",
            "person037@acme-scim7.test"
        ]
    );
    let given = list(
        &app,
        &dir,
        "/Users",
        &[("filter", r#"name.givenName eq "given250""#)],
    )
    .await;
    assert_eq!(user_names(&given), ["person250@acme-scim7.test"]);

    // A group's page without its members, then with them; the root's search runs on.
    let first = list(&app, &dir, "/Users", &[("count", "2")]).await;
    let members: Vec<Value> = first["Resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| json!({ "value": u["id"] }))
        .collect();
    let groups = format!("{}/Groups", dir.base);
    scim_json(scim(&app, &dir.token, Method::POST, &groups, Some(json!({ "schemas": ["urn:ietf:params:scim:schemas:core:2.0:Group"], "displayName": "Engineering", "members": members }))).await, 201).await;
    let bare = list(
        &app,
        &dir,
        "/Groups",
        &[
            ("filter", r#"displayName eq "engineering""#),
            ("excludedAttributes", "members"),
        ],
    )
    .await;
    assert_eq!(bare["totalResults"], 1);
    assert!(bare["Resources"][0].get("members").is_none(), "{bare}");
    let full = list(
        &app,
        &dir,
        "/Groups",
        &[("filter", r#"displayName co "GINEER""#)],
    )
    .await;
    assert_eq!(
        full["Resources"][0]["members"].as_array().map(Vec::len),
        Some(2),
        "{full}"
    );
    let searched = scim_json(scim(&app, &dir.token, Method::POST, &format!("{}/.search", dir.base), Some(json!({ "schemas": ["urn:ietf:params:scim:api:messages:2.0:SearchRequest"], "startIndex": 300, "count": 2 }))).await, 200).await;
    assert_eq!(searched["totalResults"], 301);
    assert_eq!(
        searched["Resources"][0]["userName"],
        "person299@acme-scim7.test"
    );
    assert_eq!(searched["Resources"][1]["displayName"], "Engineering");
}
