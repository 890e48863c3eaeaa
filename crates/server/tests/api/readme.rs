//! The docs, held to the server: the README's curl walk-through runs as written (bash, curl and
//! python3, the block a reader copies, with only the address changed) against the real server,
//! and every step answers what its comment says; the README signs Ada in with the password it
//! registered her with; docs/webhooks.md lists every type of the event catalogue.

use std::process::Command;

use serde_json::Value;

use crate::helpers::{json_of, on_both_backends, TestApp};

/// A file of the repository, from its root.
fn repository_file(path: &str) -> String {
    let full = format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// The text of a `## heading` section, up to the next `## ` heading.
fn section<'a>(markdown: &'a str, heading: &str) -> &'a str {
    let start = markdown
        .find(&format!("\n## {heading}\n"))
        .unwrap_or_else(|| panic!("no section '## {heading}'"));
    let rest = &markdown[start + heading.len() + 5..];
    rest.find("\n## ").map_or(rest, |end| &rest[..end])
}

/// The shell blocks (```` ```sh ````) of a piece of markdown, in order.
fn shell_blocks(markdown: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut rest = markdown;
    while let Some(start) = rest.find("```sh\n") {
        let body = &rest[start + 6..];
        let end = body.find("\n```").expect("an unclosed shell block");
        blocks.push(&body[..end]);
        rest = &body[end + 4..];
    }
    blocks
}

/// The walk-through's first block, as a script that marks where each step (a comment after a
/// blank line) begins, so that each step's output can be told apart.
fn marked(block: &str) -> String {
    let mut script = String::new();
    let mut after_blank = true;
    for line in block.lines() {
        if after_blank && line.starts_with("# ") {
            let title = line.trim_start_matches("# ").replace('\'', "");
            script.push_str(&format!("echo; echo '@@step {title}'\n"));
        }
        after_blank = line.trim().is_empty();
        script.push_str(line);
        script.push('\n');
    }
    script
}

/// Runs the script with bash (stopping at the first failing command) in a fresh directory, the
/// README's `localhost:8080` being the test server; returns what it printed.
async fn run(app: &TestApp, script: &str) -> String {
    let address = app.url("").trim_start_matches("http://").to_owned();
    let script = script.replace("localhost:8080", &address);
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().to_owned();
    let output = tokio::task::spawn_blocking(move || {
        Command::new("bash")
            .args(["-euo", "pipefail", "-c", &script])
            .current_dir(path)
            .env("NO_PROXY", "*")
            .env("no_proxy", "*")
            .output()
            .expect("bash runs")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the walk-through failed: {stderr}\n{stdout}"
    );
    stdout
}

/// Each step's title (its comment's first words) and what it printed.
fn steps(output: &str) -> Vec<(String, String)> {
    output
        .split("@@step ")
        .skip(1)
        .map(|step| {
            let (title, printed) = step.split_once('\n').unwrap_or((step, ""));
            (title.to_owned(), printed.trim().to_owned())
        })
        .collect()
}

fn json(step: &str, printed: &str) -> Value {
    serde_json::from_str(printed).unwrap_or_else(|e| panic!("{step}: not JSON ({e}): {printed}"))
}

/// The password the walk-through registers Ada with.
fn registered_password(block: &str) -> String {
    let register = &block[block.find("auth/register").expect("a registration")..];
    let value = &register[register.find("\"password\":\"").unwrap() + 12..];
    value[..value.find('"').unwrap()].to_owned()
}

#[on_both_backends]
async fn the_readme_walk_through_runs_as_written(app: TestApp) {
    let readme = repository_file("README.md");
    let blocks = shell_blocks(section(&readme, "A walk through with curl"));
    let block = blocks.first().expect("the walk-through's block");
    let output = run(&app, &marked(block)).await;
    let steps = steps(&output);
    let titles: Vec<&str> = steps
        .iter()
        .map(|(title, _)| title.split(':').next().unwrap_or(title))
        .collect();
    assert_eq!(
        titles,
        [
            "Register",
            "Log in",
            "Who am I?",
            "A new access token for the same session.",
            "Log out",
            "Guessing"
        ],
        "{output}"
    );
    for (title, printed) in &steps {
        match title.split(':').next().unwrap_or(title) {
            "Register" => {
                let body = json(title, printed);
                assert_eq!(body["email"], "ada@example.com", "{body}");
                assert!(
                    body["user_id"].is_string() && body["organization_id"].is_string(),
                    "{body}"
                );
            }
            "Log in" => {
                let body = json(title, printed);
                assert!(
                    body["access_token"].is_string() && body["refresh_token"].is_string(),
                    "{body}"
                );
            }
            "Who am I?" => assert_eq!(json(title, printed)["email"], "ada@example.com"),
            "A new access token for the same session." => {
                assert!(
                    json(title, printed)["access_token"].is_string(),
                    "{printed}"
                );
            }
            "Log out" => {
                let (logout, after) = printed.split_once("\r\n\r\n").unwrap_or((printed, ""));
                assert!(logout.starts_with("HTTP/1.1 204"), "{printed}");
                assert!(
                    json(title, after.trim())["detail"].is_string(),
                    "the token is refused: {after}"
                );
            }
            "Guessing" => {
                assert!(printed.starts_with("401 401 401 401 401"), "{printed}");
                let locked = printed.lines().nth(1).unwrap_or_default();
                assert!(locked.starts_with("HTTP/1.1 429"), "{printed}");
                assert!(
                    printed.to_ascii_lowercase().contains("\nretry-after: "),
                    "{printed}"
                );
            }
            other => panic!("a step the test does not know: {other}"),
        }
    }
    // Registered, then locked out: the account is Ada's, as the walk-through says.
    let me = app
        .login("ada@example.com", &registered_password(block))
        .await;
    assert_eq!(me.status(), 429);
}

#[on_both_backends]
async fn the_docs_list_every_event_type_of_the_catalogue(app: TestApp) {
    let ada = app.logged_in("docs-catalogue@example.com").await;
    let catalogue = json_of(
        app.get_as(&ada.access_token, "/api/v1/webhooks/events")
            .await,
        200,
    )
    .await;
    let catalogue = catalogue.as_array().unwrap();
    let doc = repository_file("docs/webhooks.md");
    let table = section(&doc, "The event types");
    for entry in catalogue {
        let row = format!(
            "| `{}` | {} | {} |",
            entry["type"].as_str().unwrap(),
            entry["category"].as_str().unwrap(),
            entry["source"].as_str().unwrap()
        );
        assert!(table.contains(&row), "docs/webhooks.md lacks {row}");
    }
    assert_eq!(
        table.matches("\n| `").count(),
        catalogue.len(),
        "a type the catalogue does not have"
    );
    assert!(
        doc.contains(&format!("lists the {} types", catalogue.len())),
        "the count in docs/webhooks.md"
    );
}

/// Every sign-in of Ada's in the README (the API's JSON and the example clients' arguments)
/// uses the password the walk-through registered her with.
#[test]
fn the_readme_signs_ada_in_with_the_password_it_registered() {
    let readme = repository_file("README.md");
    let walk_through = shell_blocks(section(&readme, "A walk through with curl"))[0];
    let password = registered_password(walk_through);
    let mut checked = 0;
    for block in shell_blocks(&readme) {
        for line in block.lines() {
            let unescaped = line.replace("\\\"", "\"");
            let mut rest = unescaped.as_str();
            while let Some(at) = rest.find("\"password\":\"") {
                let value = &rest[at + 12..];
                let value = &value[..value.find('"').unwrap()];
                // The walk-through's wrong guesses are wrong on purpose.
                if !value.starts_with("guess") {
                    assert_eq!(value, password, "{line}");
                    checked += 1;
                }
                rest = &rest[at + 12..];
            }
            if let Some(at) = line.find("ada@example.com '") {
                let value = &line[at + 17..];
                assert_eq!(&value[..value.find('\'').unwrap()], password, "{line}");
                checked += 1;
            }
        }
    }
    assert!(checked >= 5, "{checked} sign-ins found");
}
