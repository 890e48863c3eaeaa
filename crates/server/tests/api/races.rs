//! Races across replicas (issue 49, point 9): requests that land at the same moment on two
//! servers of one database, each run many times. What must hold is decided where the data is
//! (a lock or a compare in the transaction), so it holds whichever replica answers.

use futures::future::join_all;
use reqwest::Method;
use serde_json::json;

use crate::helpers::{json_of, on_both_backends, PASSWORD};

/// Rounds of each race: enough to land the requests on both sides of the change many times.
const ROUNDS: usize = 6;
/// Sign-ins in flight in each round: fewer than the checks one account may have under way at
/// once (five, `LockoutRule::admit`), so that none is turned away before its password is
/// checked.
const IN_FLIGHT: usize = 4;

on_both_backends! {
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
                        assert_eq!(app.refresh(refresh).await.status(), 401, "round {round}: a session of the old password survived");
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

    async fn concurrent_sign_ins_keep_the_session_limit(app: TestApp) {
        let other = app.replica().await;
        let owner = app.logged_in("owner@example.com").await;
        let team = app.create_team(&owner.access_token, "Acme").await;
        let org = team["id"].as_str().unwrap().to_owned();
        app.set_plan(&org, "business").await;
        app.member_of(&owner.access_token, &org, "bob@example.com", "member").await;
        let policies = crate::policies::policies(|p| p["session_policy"]["max_concurrent_sessions"] = json!(3));
        let saved = app
            .send_as(Method::PUT, &owner.access_token, &format!("/api/v1/organizations/{org}/policies"), Some(policies))
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
                if app.refresh(tokens["refresh_token"].as_str().unwrap()).await.status() == 200 {
                    live += 1;
                }
            }
            assert!(live <= 3, "round {round}: {live} sessions live, the policy allows 3");
        }
    }

    async fn a_key_made_for_a_service_account_being_deleted_is_a_404_never_a_500(app: TestApp) {
        let other = app.replica().await;
        let owner = app.logged_in("owner@example.com").await;
        let team = app.create_team(&owner.access_token, "Robots").await;
        let accounts = format!("/api/v1/organizations/{}/service-accounts", team["id"].as_str().unwrap());
        for round in 0..ROUNDS {
            let body = json!({ "name": format!("CI {round}"), "role": "member" });
            let account = json_of(app.send_as(Method::POST, &owner.access_token, &accounts, Some(body)).await, 201).await;
            let path = format!("{accounts}/{}", account["id"].as_str().unwrap());
            // Keys asked for on one replica while the account is deleted on the other.
            let keys_path = format!("{path}/keys");
            let keys = join_all((0..IN_FLIGHT).map(|n| {
                app.send_as(Method::POST, &owner.access_token, &keys_path, Some(json!({ "name": format!("k{n}") })))
            }));
            let deleted = other.send_as(Method::DELETE, &owner.access_token, &path, None);
            let (keys, deleted) = tokio::join!(keys, deleted);
            assert_eq!(deleted.status(), 204, "round {round}");
            for key in keys {
                let status = key.status().as_u16();
                assert!(status == 201 || status == 404, "round {round}: {status} {}", key.text().await.unwrap());
            }
        }
    }
}
