//! Every organization route, walked by every kind of caller: the status each gets, and that no
//! answer to an outsider carries the organization's data.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::helpers::{detail_of, json_of, on_both_backends, TestApp, PASSWORD};

/// How a caller authenticates.
#[derive(Clone)]
enum Credential {
    Bearer(String),
    ApiKey { key: String, organization: String },
    Nothing,
}

/// One route call of the walk: what, how, and the status expected.
type Check<'a> = (&'a str, Method, String, Option<Value>, Option<&'a str>, u16);

struct Caller {
    name: &'static str,
    credential: Credential,
}

async fn call(
    app: &TestApp,
    caller: &Caller,
    method: Method,
    path: &str,
    body: Option<Value>,
    organization_header: Option<&str>,
) -> (StatusCode, String) {
    let mut request = app.client.request(method, app.url(path));
    match &caller.credential {
        Credential::Bearer(token) => request = request.bearer_auth(token),
        Credential::ApiKey { key, organization } => {
            request = request.header("X-API-Key", key).header(
                "X-Organization-ID",
                organization_header.unwrap_or(organization),
            );
        }
        Credential::Nothing => {}
    }
    if let (Some(org), Credential::Bearer(_)) = (organization_header, &caller.credential) {
        request = request.header("X-Organization-ID", org);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    let body: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    if !status.is_success() {
        assert!(
            body["detail"].is_string() || body["detail"].is_array(),
            "{text}"
        );
    }
    (status, text)
}

#[on_both_backends]
async fn every_route_answers_every_kind_of_caller_as_the_role_table_says(app: TestApp) {
    let owner = app.logged_in("perm-owner@example.com").await;
    let team = app
        .create_team(&owner.access_token, "Secret Project Falcon")
        .await;
    let org = team["id"].as_str().unwrap().to_owned();
    let admin = app
        .member_of(&owner.access_token, &org, "perm-admin@example.com", "admin")
        .await;
    let member = app
        .member_of(
            &owner.access_token,
            &org,
            "perm-member@example.com",
            "member",
        )
        .await;
    let viewer = app
        .member_of(
            &owner.access_token,
            &org,
            "perm-viewer@example.com",
            "viewer",
        )
        .await;
    let outsider = app.logged_in("perm-outsider@example.com").await;
    let owner_key = json_of(
        app.create_api_key(&owner.access_token, "owner key", &org)
            .await,
        201,
    )
    .await;
    let outsider_key = json_of(
        app.create_api_key(
            &outsider.access_token,
            "other key",
            &outsider.organization_id,
        )
        .await,
        201,
    )
    .await;
    // An auditor: a custom role that reads the organization, its members and its audit log.
    app.set_plan(&org, "business").await;
    json_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/roles"),
            Some(json!({ "key": "auditor", "name": "Auditor",
                "permissions": ["organization.read", "organization.members.read", "audit.read"] })),
        )
        .await,
        201,
    )
    .await;
    let auditor = app
        .member_of(
            &owner.access_token,
            &org,
            "perm-auditor@example.com",
            "auditor",
        )
        .await;
    // Service accounts act with their own role, through their keys.
    let mut bot_keys = Vec::new();
    for (name, role) in [("admin bot", "admin"), ("viewer bot", "viewer")] {
        let account = json_of(
            app.send_as(
                Method::POST,
                &owner.access_token,
                &format!("/api/v1/organizations/{org}/service-accounts"),
                Some(json!({ "name": name, "role": role })),
            )
            .await,
            201,
        )
        .await;
        let key = json_of(
            app.send_as(
                Method::POST,
                &owner.access_token,
                &format!(
                    "/api/v1/organizations/{org}/service-accounts/{}/keys",
                    account["id"].as_str().unwrap()
                ),
                Some(json!({ "name": name })),
            )
            .await,
            201,
        )
        .await;
        bot_keys.push(key["key"].as_str().unwrap().to_owned());
    }

    let callers = [
        Caller {
            name: "owner",
            credential: Credential::Bearer(owner.access_token.clone()),
        },
        Caller {
            name: "admin",
            credential: Credential::Bearer(admin.access_token.clone()),
        },
        Caller {
            name: "member",
            credential: Credential::Bearer(member.access_token.clone()),
        },
        Caller {
            name: "viewer",
            credential: Credential::Bearer(viewer.access_token.clone()),
        },
        Caller {
            name: "owner's API key",
            credential: Credential::ApiKey {
                key: owner_key["key"].as_str().unwrap().to_owned(),
                organization: org.clone(),
            },
        },
        Caller {
            name: "user of another organization",
            credential: Credential::Bearer(outsider.access_token.clone()),
        },
        Caller {
            name: "API key of another organization",
            credential: Credential::ApiKey {
                key: outsider_key["key"].as_str().unwrap().to_owned(),
                organization: outsider.organization_id.clone(),
            },
        },
        Caller {
            name: "no credentials",
            credential: Credential::Nothing,
        },
        Caller {
            name: "admin service account's key",
            credential: Credential::ApiKey {
                key: bot_keys[0].clone(),
                organization: org.clone(),
            },
        },
        Caller {
            name: "viewer service account's key",
            credential: Credential::ApiKey {
                key: bot_keys[1].clone(),
                organization: org.clone(),
            },
        },
        Caller {
            name: "auditor (a custom role)",
            credential: Credential::Bearer(auditor.access_token.clone()),
        },
    ];

    // The members each caller may remove or re-role, so that a permitted call really
    // succeeds: one target per caller.
    let mut targets = Vec::new();
    for (i, _) in callers.iter().enumerate() {
        let target = app
            .member_of(
                &owner.access_token,
                &org,
                &format!("perm-target{i}@example.com"),
                "viewer",
            )
            .await;
        targets.push(target.user_id);
    }

    //              owner admin member viewer key  outsider other-key nothing bot(admin) bot(viewer) auditor
    let read = [200, 200, 200, 200, 200, 404, 404, 401, 200, 200, 200];
    let manage = [200, 200, 403, 403, 200, 404, 404, 401, 200, 403, 403];
    // An invitation names the person who sends it: a service account sends none.
    let invite = [201, 201, 403, 403, 201, 404, 404, 401, 403, 403, 403];
    let revoke_missing = [404, 404, 403, 403, 404, 404, 404, 401, 404, 403, 403];
    // A member creates API keys for the organization; a viewer only reads. Keys are made
    // by a signed-in user, never by a key (403), and never for a stranger's organization.
    let create_key = [201, 201, 201, 403, 403, 404, 403, 401, 403, 403, 403];
    // With a header naming this organization, another organization's key is refused as a
    // credential (401), not as a stranger (404).
    let iam = [200, 200, 200, 200, 200, 404, 401, 401, 200, 200, 200];
    // Service accounts and the organization's keys: owners and admins (and keys acting as
    // them); a service account names the member who made it, signed in: no key makes one.
    let iam_manage = [200, 200, 403, 403, 200, 404, 404, 401, 200, 403, 403];
    let create_account = [201, 201, 403, 403, 403, 404, 404, 401, 403, 403, 403];
    // Ownership moves by the owner signed in, with their password (to nobody here: 404).
    let transfer = [404, 403, 403, 403, 403, 404, 404, 401, 403, 403, 403];
    // Applications: every built-in role reads them; the auditor was not given them.
    let applications = [200, 200, 200, 200, 200, 404, 404, 401, 200, 200, 403];
    // The audit log: owners and admins, and the auditor it was given to.
    let audit = [200, 200, 403, 403, 200, 404, 404, 401, 200, 403, 200];
    // Roles: every member reads them; owners and admins define them.
    let define_role = [201, 201, 403, 403, 201, 404, 404, 401, 201, 403, 403];

    for (i, caller) in callers.iter().enumerate() {
        let org_path = format!("/api/v1/organizations/{org}");
        let target_path = format!("{org_path}/members/{}", targets[i]);
        let checks: Vec<Check> = vec![
            (
                "read the organization",
                Method::GET,
                org_path.clone(),
                None,
                None,
                read[i],
            ),
            (
                "list members",
                Method::GET,
                format!("{org_path}/members"),
                None,
                None,
                read[i],
            ),
            (
                "update the organization",
                Method::PATCH,
                org_path.clone(),
                Some(json!({ "settings": { "allow_member_invite": false } })),
                None,
                manage[i],
            ),
            (
                "invite",
                Method::POST,
                format!("{org_path}/members"),
                Some(json!({ "email": format!("perm-invitee{i}@example.com"), "role": "viewer" })),
                None,
                invite[i],
            ),
            (
                "change a role",
                Method::PATCH,
                target_path.clone(),
                Some(json!({ "role": "member" })),
                None,
                manage[i],
            ),
            (
                "remove a member",
                Method::DELETE,
                target_path.clone(),
                None,
                None,
                manage[i],
            ),
            (
                "revoke an unknown invitation",
                Method::DELETE,
                format!("{org_path}/invitations/{}", uuid::Uuid::now_v7()),
                None,
                None,
                revoke_missing[i],
            ),
            (
                "list IAM users",
                Method::GET,
                "/api/v1/iam/users".to_owned(),
                None,
                Some(org.as_str()),
                iam[i],
            ),
            (
                "create an API key for the organization",
                Method::POST,
                "/api/v1/api-keys".to_owned(),
                Some(json!({ "name": format!("key {i}"), "organization_id": org })),
                None,
                create_key[i],
            ),
            (
                "list applications",
                Method::GET,
                format!("{org_path}/applications"),
                None,
                None,
                applications[i],
            ),
            (
                "read the audit log",
                Method::GET,
                format!("{org_path}/audit-log"),
                None,
                None,
                audit[i],
            ),
            (
                "list roles",
                Method::GET,
                format!("{org_path}/roles"),
                None,
                None,
                read[i],
            ),
            (
                "define a role",
                Method::POST,
                format!("{org_path}/roles"),
                Some(
                    json!({ "key": format!("role-{i}"), "name": "Reader", "permissions": ["organization.read"] }),
                ),
                None,
                define_role[i],
            ),
            (
                "list service accounts",
                Method::GET,
                format!("{org_path}/service-accounts"),
                None,
                None,
                iam_manage[i],
            ),
            (
                "create a service account",
                Method::POST,
                format!("{org_path}/service-accounts"),
                Some(json!({ "name": format!("bot {i}"), "role": "viewer" })),
                None,
                create_account[i],
            ),
            (
                "list the organization's keys",
                Method::GET,
                format!("{org_path}/api-keys"),
                None,
                None,
                iam_manage[i],
            ),
            (
                "revoke an unknown key",
                Method::DELETE,
                format!("{org_path}/api-keys/{}", uuid::Uuid::now_v7()),
                None,
                None,
                revoke_missing[i],
            ),
            (
                "list SCIM tokens",
                Method::GET,
                format!("{org_path}/scim-tokens"),
                None,
                None,
                iam_manage[i],
            ),
            (
                "read the group-to-role map",
                Method::GET,
                format!("{org_path}/scim/group-roles"),
                None,
                None,
                iam_manage[i],
            ),
            // A SCIM token names the person who made it, as a service account does.
            (
                "create a SCIM token",
                Method::POST,
                format!("{org_path}/scim-tokens"),
                Some(json!({ "name": format!("idp {i}") })),
                None,
                create_account[i],
            ),
            (
                "revoke an unknown SCIM token",
                Method::DELETE,
                format!("{org_path}/scim-tokens/{}", uuid::Uuid::now_v7()),
                None,
                None,
                revoke_missing[i],
            ),
            (
                "transfer ownership",
                Method::POST,
                format!("{org_path}/transfer-ownership"),
                Some(json!({ "user_id": uuid::Uuid::now_v7(), "password": PASSWORD })),
                None,
                transfer[i],
            ),
            (
                "delete the organization",
                Method::DELETE,
                org_path.clone(),
                None,
                None,
                // Only the owner may; it is tried last below.
                match i {
                    0 | 4 => 0,
                    5 | 6 => 404,
                    7 => 401,
                    _ => 403,
                },
            ),
        ];
        for (what, method, path, body, header, expected) in checks {
            if expected == 0 {
                continue;
            }
            let (status, text) = call(&app, caller, method, &path, body, header).await;
            assert_eq!(
                status.as_u16(),
                expected,
                "{} may {what}? got {text}",
                caller.name
            );
            if matches!(i, 5..=7) {
                assert!(
                    !text.contains("Falcon") && !text.contains("perm-"),
                    "{} saw the organization's data: {text}",
                    caller.name
                );
            }
        }
    }

    let (status, _) = call(
        &app,
        &callers[0],
        Method::DELETE,
        &format!("/api/v1/organizations/{org}"),
        None,
        None,
    )
    .await;
    assert_eq!(status, 200);
    for caller in &callers[..4] {
        let (status, _) = call(
            &app,
            caller,
            Method::GET,
            &format!("/api/v1/organizations/{org}"),
            None,
            None,
        )
        .await;
        assert_eq!(
            status, 404,
            "{} still sees a deleted organization",
            caller.name
        );
    }
}

#[on_both_backends]
async fn a_member_creates_what_members_create_where_a_viewer_only_reads(app: TestApp) {
    let owner = app.logged_in("roles-owner@example.com").await;
    let team = app.create_team(&owner.access_token, "Roles").await;
    let org = team["id"].as_str().unwrap().to_owned();
    let org_path = format!("/api/v1/organizations/{org}");
    let member = app
        .member_of(
            &owner.access_token,
            &org,
            "roles-member@example.com",
            "member",
        )
        .await;
    let viewer = app
        .member_of(
            &owner.access_token,
            &org,
            "roles-viewer@example.com",
            "viewer",
        )
        .await;
    json_of(
        app.send_as(
            Method::PATCH,
            &owner.access_token,
            &org_path,
            Some(json!({ "settings": { "allow_member_invite": true } })),
        )
        .await,
        200,
    )
    .await;

    // The spec's role table: a member "may create resources", a viewer has "read-only access".
    let member_key = json_of(
        app.create_api_key(&member.access_token, "member key", &org)
            .await,
        201,
    )
    .await;
    assert_eq!(member_key["organization_id"], org.as_str());
    json_of(
        app.invite(
            &member.access_token,
            &org,
            "roles-by-member@example.com",
            "viewer",
        )
        .await,
        201,
    )
    .await;

    let refused = detail_of(
        app.create_api_key(&viewer.access_token, "viewer key", &org)
            .await,
        403,
    )
    .await;
    assert!(refused.contains("api_keys.create"), "{refused}");
    let refused = detail_of(
        app.invite(
            &viewer.access_token,
            &org,
            "roles-by-viewer@example.com",
            "viewer",
        )
        .await,
        403,
    )
    .await;
    assert!(refused.contains("organization.members.create"), "{refused}");
    let keys = json_of(
        app.get_as(&viewer.access_token, "/api/v1/api-keys").await,
        200,
    )
    .await;
    assert!(
        !keys.to_string().contains(&org),
        "the viewer holds no key for the organization: {keys}"
    );

    // Read-only is still reading: the organization, its members, its applications.
    for path in [
        org_path.clone(),
        format!("{org_path}/members"),
        format!("{org_path}/applications"),
    ] {
        json_of(app.get_as(&viewer.access_token, &path).await, 200).await;
    }

    // The member's key acts with the member's role: it invites too, while allowed.
    let key = member_key["key"].as_str().unwrap();
    let invited = app
        .client
        .post(app.url(&format!("{org_path}/members")))
        .header("X-API-Key", key)
        .header("X-Organization-ID", &org)
        .json(&json!({ "email": "roles-by-key@example.com", "role": "member" }))
        .send()
        .await
        .unwrap();
    json_of(invited, 201).await;
}

#[on_both_backends]
async fn the_permission_catalogue_names_every_permission_and_the_roles_that_hold_it(app: TestApp) {
    let ada = app.logged_in("catalogue@example.com").await;
    let catalogue = json_of(
        app.get_as(&ada.access_token, "/api/v1/iam/permissions?page_size=100")
            .await,
        200,
    )
    .await;
    assert_eq!(catalogue["total"], 22, "{catalogue}");
    let entries = catalogue["items"].as_array().unwrap();
    assert_eq!(entries.len(), 22, "{catalogue}");
    let entry = |name: &str| {
        entries
            .iter()
            .find(|e| e["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} missing"))
    };
    assert_eq!(
        entry("organization.members.read")["roles"],
        json!(["owner", "admin", "member", "viewer"])
    );
    assert_eq!(
        entry("api_keys.create")["roles"],
        json!(["owner", "admin", "member"])
    );
    for owners in ["organization.delete", "organization.transfer_ownership"] {
        assert_eq!(entry(owners)["roles"], json!(["owner"]));
        assert_eq!(entry(owners)["owner_only"], true);
    }
    for admins in [
        "service_accounts.manage",
        "api_keys.manage",
        "roles.manage",
        "sso.manage",
    ] {
        assert_eq!(entry(admins)["roles"], json!(["owner", "admin"]));
        assert_eq!(entry(admins)["owner_only"], false);
    }
    assert!(entries
        .iter()
        .all(|e| e["description"].as_str().is_some_and(|d| !d.is_empty())));
    detail_of(
        app.client
            .get(app.url("/api/v1/iam/permissions"))
            .send()
            .await
            .unwrap(),
        401,
    )
    .await;
}
