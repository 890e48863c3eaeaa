//! Races across replicas (issue 49, point 9): requests that land at the same moment on two
//! servers of one database, each run many times. What must hold is decided where the data is
//! (a lock or a compare in the transaction), so it holds whichever replica answers.

use futures::future::join_all;
use reqwest::Method;
use serde_json::json;

use crate::helpers::{json_of, on_both_backends, LoggedIn, TestApp, PASSWORD};

/// Rounds of each race: enough to land the requests on both sides of the change many times.
const ROUNDS: usize = 6;
/// Sign-ins in flight in each round: fewer than the checks one account may have under way at
/// once (five, `LockoutRule::admit`), so that none is turned away before its password is
/// checked.
const IN_FLIGHT: usize = 4;
/// Rounds of the races on an organization's one owner and on a custom role being given: each
/// round lands the two writes at another offset from each other.
const WRITE_ROUNDS: u32 = 20;

/// How many owners the organization's member list shows.
async fn owners(app: &TestApp, token: &str, org: &str) -> usize {
    let page = json_of(
        app.get_as(
            token,
            &format!("/api/v1/organizations/{org}/members?page_size=100"),
        )
        .await,
        200,
    )
    .await;
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|member| member["role"] == "owner")
        .count()
}

/// `user` joins the organization as `role`: invited by `inviter`, accepted by the invitation's id.
async fn joins(app: &TestApp, inviter: &str, org: &str, user: &LoggedIn, role: &str) {
    let invited = json_of(app.invite(inviter, org, &user.email, role).await, 201).await;
    let id = invited["invitation_id"].as_str().unwrap();
    json_of(
        app.send_as(
            Method::POST,
            &user.access_token,
            &format!("/api/v1/invitations/{id}/accept"),
            None,
        )
        .await,
        200,
    )
    .await;
}

/// The wait before a round's second write: from nothing to a little more than `span`, over the
/// rounds, so that some rounds land it inside the first write's transaction.
fn offset(round: u32, span: std::time::Duration) -> std::time::Duration {
    span.mul_f64(1.2 * f64::from(round) / f64::from(WRITE_ROUNDS))
}

#[on_both_backends]
async fn a_password_change_ends_the_sign_ins_still_in_flight_on_another_replica(app: TestApp) {
    let other = app.replica().await;
    let ada = app.logged_in("ada@example.com").await;
    let mut current = PASSWORD.to_owned();
    for round in 0..ROUNDS {
        let new = format!("{PASSWORD} staple {round}");
        // Sign-ins with the password as it is, on this replica, while Ada changes it on the
        // other one.
        let sign_ins = join_all((0..IN_FLIGHT).map(|_| app.login("ada@example.com", &current)));
        let change = other.change_password(&ada.access_token, &current, &new);
        let (sign_ins, changed) = tokio::join!(sign_ins, change);
        assert_eq!(changed.status(), 204, "round {round}");
        // Whatever sign-in checked the old password, finished before or after the change,
        // has no session now.
        for answer in sign_ins {
            match answer.status().as_u16() {
                200 => {
                    let tokens: serde_json::Value = answer.json().await.unwrap();
                    let refresh = tokens["refresh_token"].as_str().unwrap();
                    assert_eq!(
                        app.refresh(refresh).await.status(),
                        401,
                        "round {round}: a session of the old password survived"
                    );
                    assert_eq!(other.refresh(refresh).await.status(), 401, "round {round}");
                }
                401 => {}
                status => panic!("round {round}: {status}"),
            }
        }
        current = new;
        // The new password signs in, which also ends the count of the round's refusals.
        json_of(app.login("ada@example.com", &current).await, 200).await;
    }
    // The password as it is now signs in.
    json_of(app.login("ada@example.com", &current).await, 200).await;
}

#[on_both_backends]
async fn concurrent_sign_ins_keep_the_session_limit(app: TestApp) {
    let other = app.replica().await;
    let owner = app.logged_in("owner@example.com").await;
    let team = app.create_team(&owner.access_token, "Acme").await;
    let org = team["id"].as_str().unwrap().to_owned();
    app.set_plan(&org, "business").await;
    app.member_of(&owner.access_token, &org, "bob@example.com", "member")
        .await;
    let policies =
        crate::policies::policies(|p| p["session_policy"]["max_concurrent_sessions"] = json!(3));
    let saved = app
        .send_as(
            Method::PUT,
            &owner.access_token,
            &format!("/api/v1/organizations/{org}/policies"),
            Some(policies),
        )
        .await;
    assert_eq!(saved.status(), 200, "{}", saved.text().await.unwrap());
    for round in 0..ROUNDS {
        // Five sign-ins at once (as many as may be checked at once), on both replicas.
        let sign_ins = join_all((0..5).map(|n| {
            let server = if n % 2 == 0 { &app } else { &other };
            server.login("bob@example.com", PASSWORD)
        }))
        .await;
        let mut live = 0;
        for answer in sign_ins {
            let tokens = json_of(answer, 200).await;
            if app
                .refresh(tokens["refresh_token"].as_str().unwrap())
                .await
                .status()
                == 200
            {
                live += 1;
            }
        }
        assert!(
            live <= 3,
            "round {round}: {live} sessions live, the policy allows 3"
        );
    }
}

#[on_both_backends]
async fn a_key_made_for_a_service_account_being_deleted_is_a_404_never_a_500(app: TestApp) {
    let other = app.replica().await;
    let owner = app.logged_in("owner@example.com").await;
    let team = app.create_team(&owner.access_token, "Robots").await;
    let accounts = format!(
        "/api/v1/organizations/{}/service-accounts",
        team["id"].as_str().unwrap()
    );
    for round in 0..ROUNDS {
        let body = json!({ "name": format!("CI {round}"), "role": "member" });
        let account = json_of(
            app.send_as(Method::POST, &owner.access_token, &accounts, Some(body))
                .await,
            201,
        )
        .await;
        let path = format!("{accounts}/{}", account["id"].as_str().unwrap());
        // Keys asked for on one replica while the account is deleted on the other.
        let keys_path = format!("{path}/keys");
        let keys = join_all((0..IN_FLIGHT).map(|n| {
            app.send_as(
                Method::POST,
                &owner.access_token,
                &keys_path,
                Some(json!({ "name": format!("k{n}") })),
            )
        }));
        let deleted = other.send_as(Method::DELETE, &owner.access_token, &path, None);
        let (keys, deleted) = tokio::join!(keys, deleted);
        assert_eq!(deleted.status(), 204, "round {round}");
        for key in keys {
            let status = key.status().as_u16();
            assert!(
                status == 201 || status == 404,
                "round {round}: {status} {}",
                key.text().await.unwrap()
            );
        }
    }
}

#[on_both_backends]
async fn a_transfer_racing_the_new_owners_leaving_or_removal_leaves_exactly_one_owner(
    app: TestApp,
) {
    let other = app.replica().await;
    let owner = app.logged_in("race-owner@example.com").await;
    let ana = app.logged_in("race-ana@example.com").await;
    let bea = app.logged_in("race-bea@example.com").await;
    // A transfer checks the owner's password first: the removal is sent across that time.
    let started = std::time::Instant::now();
    json_of(app.login("race-owner@example.com", PASSWORD).await, 200).await;
    let span = started.elapsed();
    for round in 0..WRITE_ROUNDS {
        let team = app
            .create_team(&owner.access_token, &format!("Race {round}"))
            .await;
        let org = team["id"].as_str().unwrap().to_owned();
        joins(&app, &owner.access_token, &org, &ana, "member").await;
        joins(&app, &owner.access_token, &org, &bea, "admin").await;
        // Ana leaves (even rounds) or Bea removes her (odd rounds) on this replica, while the
        // owner hands Ana the organization on the other one.
        let remover = if round % 2 == 0 { &ana } else { &bea };
        let removal = async {
            tokio::time::sleep(offset(round, span)).await;
            app.send_as(
                Method::DELETE,
                &remover.access_token,
                &format!("/api/v1/organizations/{org}/members/{}", ana.user_id),
                None,
            )
            .await
        };
        let transfer_path = format!("/api/v1/organizations/{org}/transfer-ownership");
        let transfer = other.send_as(
            Method::POST,
            &owner.access_token,
            &transfer_path,
            Some(json!({ "user_id": ana.user_id, "password": PASSWORD })),
        );
        let (removed, transferred) = tokio::join!(removal, transfer);
        let (removed, transferred) = (removed.status().as_u16(), transferred.status().as_u16());
        // Either she is gone and nothing was handed over, or she owns it and stays.
        assert!(
            matches!((removed, transferred), (200, 404 | 409) | (422, 200)),
            "round {round}: removal {removed}, transfer {transferred}"
        );
        assert_eq!(
            owners(&app, &owner.access_token, &org).await,
            1,
            "round {round}: removal {removed}, transfer {transferred}"
        );
    }
}

#[on_both_backends]
async fn the_owner_deleting_their_account_while_its_only_invitation_is_accepted_leaves_no_team_without_owner(
    app: TestApp,
) {
    let other = app.replica().await;
    let ana = app.logged_in("race-invitee@example.com").await;
    let span = std::time::Duration::from_millis(30);
    for round in 0..WRITE_ROUNDS {
        let owner = app
            .logged_in(&format!("race-leaving{round}@example.com"))
            .await;
        let team = app
            .create_team(&owner.access_token, &format!("Leaving {round}"))
            .await;
        let org = team["id"].as_str().unwrap().to_owned();
        let invited = json_of(
            app.invite(&owner.access_token, &org, &ana.email, "member")
                .await,
            201,
        )
        .await;
        let id = invited["invitation_id"].as_str().unwrap().to_owned();
        // Ana accepts on this replica while the owner deletes their account on the other.
        let accept = async {
            tokio::time::sleep(offset(round, span)).await;
            app.send_as(
                Method::POST,
                &ana.access_token,
                &format!("/api/v1/invitations/{id}/accept"),
                None,
            )
            .await
        };
        let delete = other.send_as(
            Method::DELETE,
            &owner.access_token,
            "/api/v1/users/me",
            None,
        );
        let (accepted, deleted) = tokio::join!(accept, delete);
        let (accepted, deleted) = (accepted.status().as_u16(), deleted.status().as_u16());
        match (accepted, deleted) {
            // She joined first: the owner, who owns a team with a member now, stays.
            (200, 409) => assert_eq!(
                owners(&app, &ana.access_token, &org).await,
                1,
                "round {round}"
            ),
            // The account went first, with its team: there is nothing to join.
            (404 | 410, 204) => {
                assert_eq!(
                    app.get_as(&ana.access_token, &format!("/api/v1/organizations/{org}"))
                        .await
                        .status(),
                    404,
                    "round {round}"
                );
            }
            _ => panic!("round {round}: accept {accepted}, delete {deleted}"),
        }
    }
}

#[on_both_backends]
async fn a_custom_role_is_never_deleted_while_it_is_being_given(app: TestApp) {
    let other = app.replica().await;
    let owner = app.logged_in("race-roles@example.com").await;
    let team = app.create_team(&owner.access_token, "Roles").await;
    let org = team["id"].as_str().unwrap().to_owned();
    app.set_plan(&org, "business").await;
    let org_path = format!("/api/v1/organizations/{org}");
    let bob = app
        .member_of(&owner.access_token, &org, "race-bob@example.com", "member")
        .await;
    let span = std::time::Duration::from_millis(30);
    for round in 0..WRITE_ROUNDS {
        let key = format!("auditor-{round}");
        json_of(
                app.send_as(Method::POST, &owner.access_token, &format!("{org_path}/roles"), Some(json!({ "key": key, "name": "Auditor", "description": "reads", "permissions": ["organization.read"] }))).await,
                201,
            )
            .await;
        // Given to Bob, to a new service account and to an invitation on this replica, while
        // it is deleted on the other one.
        let (bob_path, accounts_path) = (
            format!("{org_path}/members/{}", bob.user_id),
            format!("{org_path}/service-accounts"),
        );
        let (invitee, role_path) = (
            format!("race-invitee{round}@example.com"),
            format!("{org_path}/roles/{key}"),
        );
        let given = async {
            tokio::time::sleep(offset(round, span)).await;
            tokio::join!(
                app.send_as(
                    Method::PATCH,
                    &owner.access_token,
                    &bob_path,
                    Some(json!({ "role": key }))
                ),
                app.send_as(
                    Method::POST,
                    &owner.access_token,
                    &accounts_path,
                    Some(json!({ "name": format!("CI {round}"), "role": key }))
                ),
                app.invite(&owner.access_token, &org, &invitee, &key),
            )
        };
        let delete = other.send_as(Method::DELETE, &owner.access_token, &role_path, None);
        let ((member, account, invitation), deleted) = tokio::join!(given, delete);
        let deleted = deleted.status().as_u16();
        let statuses = [
            member.status().as_u16(),
            account.status().as_u16(),
            invitation.status().as_u16(),
        ];
        let held = [statuses[0] == 200, statuses[1] == 201, statuses[2] == 201];
        for status in statuses {
            assert!(
                matches!(status, 200 | 201 | 404 | 422),
                "round {round}: {statuses:?}, delete {deleted}"
            );
        }
        let listed = json_of(
            app.get_as(
                &owner.access_token,
                &format!("{org_path}/roles?page_size=100"),
            )
            .await,
            200,
        )
        .await;
        let kept = listed["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|role| role["key"] == json!(key));
        match deleted {
            // Deleted: nobody was given it.
            204 => assert!(
                !kept && held.iter().all(|h| !h),
                "round {round}: {statuses:?}, deleted"
            ),
            // Kept: because someone holds it.
            409 => assert!(
                kept && held.iter().any(|h| *h),
                "round {round}: {statuses:?}, held"
            ),
            _ => panic!("round {round}: {statuses:?}, delete {deleted}"),
        }
        // Bob back to member, and the service account gone, for the next round.
        json_of(
            app.send_as(
                Method::PATCH,
                &owner.access_token,
                &format!("{org_path}/members/{}", bob.user_id),
                Some(json!({ "role": "member" })),
            )
            .await,
            200,
        )
        .await;
        if held[1] {
            let created: serde_json::Value = account.json().await.unwrap();
            let path = format!(
                "{org_path}/service-accounts/{}",
                created["id"].as_str().unwrap()
            );
            assert_eq!(
                app.send_as(Method::DELETE, &owner.access_token, &path, None)
                    .await
                    .status(),
                204
            );
        }
    }
}
