//! Custom roles, as an organization that wants an auditor would try them: the auditor reads
//! what it was given and nothing else (its token says so to the product too), a change reaches
//! every holder at once, a role held cannot be deleted, and no one hands out more than they
//! hold. Business and Enterprise only.

use reqwest::Method;
use serde_json::{json, Value};

use crate::accounts::verify_offline;
use crate::helpers::{detail_of, json_of, loc, locs_of, on_both_backends, TestApp, PASSWORD};

const AUDITOR: [&str; 3] = [
    "organization.read",
    "organization.members.read",
    "audit.read",
];

async fn define(
    app: &TestApp,
    token: &str,
    org: &str,
    key: &str,
    permissions: &[&str],
) -> reqwest::Response {
    app.send_as(
        Method::POST,
        token,
        &format!("/api/v1/organizations/{org}/roles"),
        Some(json!({ "key": key, "name": key.to_uppercase(), "description": "for the tests", "permissions": permissions })),
    )
    .await
}

/// The status of a call as `token`'s holder.
async fn status(
    app: &TestApp,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> u16 {
    app.send_as(method, token, path, body)
        .await
        .status()
        .as_u16()
}

#[on_both_backends]
async fn an_auditor_reads_what_it_was_given_and_nothing_else(app: TestApp) {
    let owner = app.logged_in("roles-olive@example.com").await;
    let team = app.create_team(&owner.access_token, "Audited Co").await;
    let org = team["id"].as_str().unwrap().to_owned();
    let org_path = format!("/api/v1/organizations/{org}");

    // A plan without custom roles says so.
    let refused = detail_of(
        define(&app, &owner.access_token, &org, "auditor", &AUDITOR).await,
        403,
    )
    .await;
    assert!(refused.contains("business"), "{refused}");
    app.set_plan(&org, "business").await;
    let role = json_of(
        define(&app, &owner.access_token, &org, "auditor", &AUDITOR).await,
        201,
    )
    .await;
    assert_eq!(role["key"], "auditor");
    assert_eq!(role["permissions"], json!(AUDITOR));
    assert_eq!(role["built_in"], false);

    // Bad definitions name their field; a taken key is a conflict.
    let owners = define(
        &app,
        &owner.access_token,
        &org,
        "boss",
        &["organization.delete"],
    )
    .await;
    assert_eq!(locs_of(owners).await, vec![loc(&["body", "permissions"])]);
    let unknown = define(&app, &owner.access_token, &org, "boss", &["everything"]).await;
    assert_eq!(locs_of(unknown).await, vec![loc(&["body", "permissions"])]);
    let builtin = define(&app, &owner.access_token, &org, "admin", &AUDITOR).await;
    assert_eq!(locs_of(builtin).await, vec![loc(&["body", "key"])]);
    detail_of(
        define(&app, &owner.access_token, &org, "auditor", &AUDITOR).await,
        409,
    )
    .await;

    // The four built-in roles come first, read-only.
    let roles = json_of(
        app.get_as(&owner.access_token, &format!("{org_path}/roles"))
            .await,
        200,
    )
    .await;
    let keys: Vec<&str> = roles["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, ["owner", "admin", "member", "viewer", "auditor"]);
    assert_eq!(roles["total"], 5, "{roles}");
    detail_of(
        app.send_as(
            Method::PATCH,
            &owner.access_token,
            &format!("{org_path}/roles/admin"),
            Some(json!({ "name": "Boss" })),
        )
        .await,
        403,
    )
    .await;
    detail_of(
        app.send_as(
            Method::DELETE,
            &owner.access_token,
            &format!("{org_path}/roles/viewer"),
            None,
        )
        .await,
        403,
    )
    .await;

    // Ann joins as an auditor.
    let ann = app
        .member_of(
            &owner.access_token,
            &org,
            "roles-ann@example.com",
            "auditor",
        )
        .await;
    let listed = json_of(
        app.get_as(
            &owner.access_token,
            &format!("{org_path}/members?role=auditor"),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(listed["total"], 1, "{listed}");
    assert_eq!(listed["items"][0]["role"], "auditor");
    let token = &ann.access_token;
    for path in [
        org_path.clone(),
        format!("{org_path}/members"),
        format!("{org_path}/audit-log"),
    ] {
        assert_eq!(
            status(&app, token, Method::GET, &path, None).await,
            200,
            "{path}"
        );
    }
    for (method, path, body) in [
        (
            Method::PATCH,
            org_path.clone(),
            Some(json!({ "name": "Renamed" })),
        ),
        (Method::GET, format!("{org_path}/applications"), None),
        (
            Method::POST,
            format!("{org_path}/members"),
            Some(json!({ "email": "x@example.com", "role": "viewer" })),
        ),
        (Method::GET, format!("{org_path}/service-accounts"), None),
        (Method::GET, format!("{org_path}/api-keys"), None),
        (Method::DELETE, org_path.clone(), None),
    ] {
        assert_eq!(
            status(&app, token, method.clone(), &path, body).await,
            403,
            "{method} {path}"
        );
    }
    let refused = detail_of(app.create_api_key(token, "auditor key", &org).await, 403).await;
    assert!(refused.contains("api_keys.create"), "{refused}");

    // The product reads the same from Ann's organization token (PyJWT verifies it).
    let tokens = json_of(
            app.post_json("/api/v1/auth/login", &json!({ "email": "roles-ann@example.com", "password": PASSWORD, "organization_id": org })).await,
            200,
        )
        .await;
    let claims = verify_offline(&app, tokens["access_token"].as_str().unwrap()).await;
    assert_eq!(claims["org_role"], "auditor");
    assert_eq!(claims["org_permissions"], json!(AUDITOR));

    // A change reaches every holder at once.
    let mut wider = AUDITOR.to_vec();
    wider.push("applications.read");
    let changed = json_of(
        app.send_as(
            Method::PATCH,
            &owner.access_token,
            &format!("{org_path}/roles/auditor"),
            Some(json!({ "permissions": wider })),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(
        changed["permissions"],
        json!([
            "organization.read",
            "organization.members.read",
            "applications.read",
            "audit.read"
        ])
    );
    assert_eq!(
        status(
            &app,
            token,
            Method::GET,
            &format!("{org_path}/applications"),
            None
        )
        .await,
        200
    );

    // Held, it stays; once nobody holds it, it goes.
    let held = detail_of(
        app.send_as(
            Method::DELETE,
            &owner.access_token,
            &format!("{org_path}/roles/auditor"),
            None,
        )
        .await,
        409,
    )
    .await;
    assert!(held.contains("hold"), "{held}");
    json_of(
        app.send_as(
            Method::PATCH,
            &owner.access_token,
            &format!("{org_path}/members/{}", ann.user_id),
            Some(json!({ "role": "viewer" })),
        )
        .await,
        200,
    )
    .await;
    assert_eq!(
        app.send_as(
            Method::DELETE,
            &owner.access_token,
            &format!("{org_path}/roles/auditor"),
            None
        )
        .await
        .status(),
        204
    );
    for action in ["role.created", "role.updated", "role.deleted"] {
        let records = app.audit_records(&format!("?action={action}")).await;
        assert_eq!(records.len(), 1, "{action}: {records:?}");
        assert_eq!(
            records[0]["target"],
            json!({ "type": "role", "id": "auditor" })
        );
    }
    // Gone: it cannot be given any more.
    let gone = app
        .send_as(
            Method::PATCH,
            &owner.access_token,
            &format!("{org_path}/members/{}", ann.user_id),
            Some(json!({ "role": "auditor" })),
        )
        .await;
    assert_eq!(locs_of(gone).await, vec![loc(&["body", "role"])]);
}

#[on_both_backends]
async fn a_service_account_with_a_custom_role_acts_with_it(app: TestApp) {
    let owner = app.logged_in("roles-sam@example.com").await;
    let team = app
        .create_team(&owner.access_token, "Bots With Roles")
        .await;
    let org = team["id"].as_str().unwrap().to_owned();
    let org_path = format!("/api/v1/organizations/{org}");
    app.set_plan(&org, "business").await;
    json_of(
        define(&app, &owner.access_token, &org, "auditor", &AUDITOR).await,
        201,
    )
    .await;
    let account = json_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            &format!("{org_path}/service-accounts"),
            Some(json!({ "name": "Exporter", "role": "auditor" })),
        )
        .await,
        201,
    )
    .await;
    assert_eq!(account["role"], "auditor");
    let key = json_of(
        app.send_as(
            Method::POST,
            &owner.access_token,
            &format!(
                "{org_path}/service-accounts/{}/keys",
                account["id"].as_str().unwrap()
            ),
            Some(json!({ "name": "nightly" })),
        )
        .await,
        201,
    )
    .await;
    let with_key = |method: Method, path: String| {
        app.client
            .request(method, app.url(&path))
            .header("X-API-Key", key["key"].as_str().unwrap())
            .header("X-Organization-ID", &org)
            .send()
    };
    assert_eq!(
        with_key(Method::GET, format!("{org_path}/audit-log"))
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        with_key(Method::GET, format!("{org_path}/applications"))
            .await
            .unwrap()
            .status(),
        403
    );
    // Held by the account: not deleted.
    detail_of(
        app.send_as(
            Method::DELETE,
            &owner.access_token,
            &format!("{org_path}/roles/auditor"),
            None,
        )
        .await,
        409,
    )
    .await;
}

#[on_both_backends]
async fn no_one_hands_out_more_than_they_hold(app: TestApp) {
    let owner = app.logged_in("roles-rex@example.com").await;
    let team = app.create_team(&owner.access_token, "Careful Co").await;
    let org = team["id"].as_str().unwrap().to_owned();
    let org_path = format!("/api/v1/organizations/{org}");
    app.set_plan(&org, "business").await;
    // A people manager may change roles and define roles, and nothing else.
    let manager = [
        "organization.read",
        "organization.members.read",
        "organization.members.update",
        "applications.read",
        "roles.manage",
    ];
    json_of(
        define(&app, &owner.access_token, &org, "people-manager", &manager).await,
        201,
    )
    .await;
    let pam = app
        .member_of(
            &owner.access_token,
            &org,
            "roles-pam@example.com",
            "people-manager",
        )
        .await;
    let vic = app
        .member_of(&owner.access_token, &org, "roles-vic@example.com", "viewer")
        .await;

    // Pam gives what she holds, not more.
    let vic_path = format!("{org_path}/members/{}", vic.user_id);
    let refused = detail_of(
        app.send_as(
            Method::PATCH,
            &pam.access_token,
            &vic_path,
            Some(json!({ "role": "admin" })),
        )
        .await,
        403,
    )
    .await;
    assert!(refused.contains("more than your own"), "{refused}");
    json_of(
        app.send_as(
            Method::PATCH,
            &pam.access_token,
            &vic_path,
            Some(json!({ "role": "viewer" })),
        )
        .await,
        200,
    )
    .await;
    let wider = [
        "organization.read",
        "organization.members.read",
        "audit.read",
    ];
    detail_of(
        define(&app, &pam.access_token, &org, "peeker", &wider).await,
        403,
    )
    .await;
    json_of(
        define(
            &app,
            &pam.access_token,
            &org,
            "reader",
            &["organization.read"],
        )
        .await,
        201,
    )
    .await;
    // Nor can she take a role above hers away from someone.
    let admin = app
        .member_of(&owner.access_token, &org, "roles-ada@example.com", "admin")
        .await;
    detail_of(
        app.send_as(
            Method::PATCH,
            &pam.access_token,
            &format!("{org_path}/members/{}", admin.user_id),
            Some(json!({ "role": "viewer" })),
        )
        .await,
        403,
    )
    .await;

    // Another organization's role is no role here.
    let other = app.logged_in("roles-other@example.com").await;
    let theirs = app.create_team(&other.access_token, "Other Co").await;
    let theirs = theirs["id"].as_str().unwrap();
    let invite = app
        .invite(
            &other.access_token,
            theirs,
            "roles-x@example.com",
            "people-manager",
        )
        .await;
    assert_eq!(locs_of(invite).await, vec![loc(&["body", "role"])]);
    detail_of(
        app.get_as(&other.access_token, &format!("{org_path}/roles"))
            .await,
        404,
    )
    .await;
}
