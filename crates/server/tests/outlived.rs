//! `scripts/outlived`, with which `scripts/test` fails when a process the tests started
//! outlives them: it names a process of the run while it lives, and no other.
#![allow(clippy::expect_used)]

use std::{
    path::PathBuf,
    process::{Child, Command},
};

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/outlived")
}

/// What `scripts/outlived MARK` prints.
fn outlived(mark: &str) -> String {
    let output = Command::new("bash")
        .arg(script())
        .arg(mark)
        .output()
        .expect("bash runs scripts/outlived");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).expect("its output is UTF-8")
}

fn sleeper(mark: &str) -> Child {
    Command::new("sleep")
        .arg("60")
        .env("GATEHOUSE_TEST_RUN", mark)
        .spawn()
        .expect("sleep starts")
}

fn listed(output: &str, child: &Child) -> bool {
    output
        .lines()
        .any(|line| line.split(' ').next() == Some(&child.id().to_string()))
}

#[test]
fn a_process_of_the_run_is_named_while_it_lives_and_one_of_another_run_never() {
    let run = format!("outlived-test-{}", std::process::id());
    let other = format!("{run}-other");
    let mut ours = sleeper(&run);
    let mut theirs = sleeper(&other);

    let found = outlived(&run);
    assert!(listed(&found, &ours), "ours is not named: {found:?}");
    assert!(found.contains("sleep 60"), "{found:?}");
    assert!(
        !listed(&found, &theirs),
        "another run's is named: {found:?}"
    );

    ours.kill().expect("kill");
    ours.wait().expect("reap");
    let found = outlived(&run);
    assert!(
        !listed(&found, &ours),
        "an ended process is named: {found:?}"
    );

    theirs.kill().expect("kill");
    theirs.wait().expect("reap");
}
