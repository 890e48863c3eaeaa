//! `docs/architecture.md` lists every port trait and every service of this crate: a port or a
//! service added, renamed or removed without the document following fails here, with the
//! names.
//!
//! The names come from the sources, read as text (no parser): every `pub trait` under
//! `src/ports/`, and every service under `src/service/`: a `pub struct` named `...Service`, or
//! any other `pub struct` holding a `...Ports` struct (`Authenticator`, `DeliveryEngine`).
//! Directories are walked at any depth, so a module split into a folder is still read.
//!
//! The document lists them as table rows that begin with the name in backticks
//! (`` | `AccountStore` | ... ``): ports under its `### Ports` heading, services under its
//! `### Services` heading.

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

/// The crate's own directory.
fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A file's text; the test fails, naming the file, when it cannot be read.
fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Every `.rs` file under `dir`, at any depth, leaving out unit-test files (`tests.rs`,
/// `*_tests.rs`).
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries =
            fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()));
        for entry in entries {
            let path = entry
                .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
                .path();
            let name = path
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or_default();
            if path.is_dir() {
                pending.push(path);
            } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The identifier `text` starts with; empty when it starts with anything else (`$name` in a
/// macro).
fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// The names of the `pub trait`s declared in `source`.
fn traits_in(source: &str) -> Vec<String> {
    source
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("pub trait "))
        .map(identifier)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Whether a struct's fields (`name: Type,` each, on one line or several) hold a `...Ports`
/// struct.
fn holds_ports(fields: &str) -> bool {
    fields.split([',', '\n']).any(|field| {
        field
            .split_once(':')
            .map(|(_, ty)| identifier(ty.trim()))
            .is_some_and(|ty| ty.ends_with("Ports"))
    })
}

/// The services declared in `source`: `pub struct ...Service`, and any other `pub struct`
/// whose fields hold a `...Ports` struct.
fn services_in(source: &str) -> Vec<String> {
    let lines: Vec<&str> = source.lines().collect();
    let mut services = Vec::new();
    for (at, line) in lines.iter().enumerate() {
        let Some(rest) = line.trim_start().strip_prefix("pub struct ") else {
            continue;
        };
        let name = identifier(rest);
        if name.is_empty() {
            continue;
        }
        let fields = match (rest.find('{'), rest.find('}')) {
            // `pub struct Name { a: A, b: B }`
            (Some(open), Some(close)) if open < close => rest[open + 1..close].to_owned(),
            // The fields on the lines that follow, up to the closing brace.
            (Some(_), None) => lines[at + 1..]
                .iter()
                .take_while(|line| !line.trim_start().starts_with('}'))
                .copied()
                .collect::<Vec<_>>()
                .join("\n"),
            // A unit or tuple struct.
            _ => String::new(),
        };
        if name.ends_with("Service") || holds_ports(&fields) {
            services.push(name.to_owned());
        }
    }
    services
}

/// Every name `collect` finds in the sources under `src/<dir>`.
fn names_under(dir: &str, collect: fn(&str) -> Vec<String>) -> BTreeSet<String> {
    rust_files(&crate_dir().join("src").join(dir))
        .iter()
        .flat_map(|path| collect(&read(path)))
        .collect()
}

/// The names the rows of the document's table under `heading` begin with (`` | `Name` | ``),
/// up to the next heading.
fn listed_under(doc: &str, heading: &str) -> BTreeSet<String> {
    let mut lines = doc.lines().skip_while(|line| line.trim_end() != heading);
    assert!(
        lines.next().is_some(),
        "docs/architecture.md has no `{heading}` heading: the test reads its table there"
    );
    lines
        .take_while(|line| !line.starts_with('#'))
        .filter_map(|line| line.strip_prefix("| `"))
        .map(|cell| identifier(cell).to_owned())
        .filter(|name| !name.is_empty())
        .collect()
}

/// The document's text.
fn architecture_doc() -> String {
    read(&crate_dir().join("../../docs/architecture.md"))
}

/// What is in the code and not in the document's table, and the other way round; empty when
/// they agree.
fn disagreement(
    heading: &str,
    in_code: &BTreeSet<String>,
    listed: &BTreeSet<String>,
) -> Option<String> {
    let missing: Vec<&str> = in_code.difference(listed).map(String::as_str).collect();
    let unknown: Vec<&str> = listed.difference(in_code).map(String::as_str).collect();
    let mut problems = Vec::new();
    if !missing.is_empty() {
        problems.push(format!(
            "missing from its `{heading}` table: {}",
            missing.join(", ")
        ));
    }
    if !unknown.is_empty() {
        problems.push(format!(
            "listed under `{heading}` but not in the code: {}",
            unknown.join(", ")
        ));
    }
    (!problems.is_empty()).then(|| problems.join("; "))
}

/// Fails, naming them, when the names the scan found in the code and the table under
/// `heading` disagree. `known` are a few names the scan must find, so that a scan broken by a
/// move of the sources fails rather than finding nothing and comparing nothing.
fn assert_doc_lists(heading: &str, in_code: &BTreeSet<String>, known: &[&str]) {
    for name in known {
        assert!(in_code.contains(*name), "the scan did not find `{name}`");
    }
    let listed = listed_under(&architecture_doc(), heading);
    if let Some(problem) = disagreement(heading, in_code, &listed) {
        panic!("docs/architecture.md: {problem}");
    }
}

#[test]
fn the_architecture_doc_lists_every_port_trait() {
    let ports = names_under("ports", traits_in);
    assert_doc_lists(
        "### Ports",
        &ports,
        &["AccountStore", "Clock", "WebhookSender"],
    );
}

#[test]
fn the_architecture_doc_lists_every_service() {
    let services = names_under("service", services_in);
    let known = ["OrganizationService", "Authenticator", "DeliveryEngine"];
    assert_doc_lists("### Services", &services, &known);
}

#[test]
fn the_scan_reads_both_kinds_of_service_and_skips_the_rest() {
    let source = "
pub struct AuthService {
    ports: AuthPorts,
}
pub struct Authenticator {
    ports: AuthenticatorPorts,
    settings: Settings,
}
pub struct Engine { ports: DeliveryPorts, limit: u32 }
pub struct Registered {
    pub user: User,
}
pub struct Forbidden(pub Permission);
macro_rules! m { (pub struct $name:ident) => { pub struct $name { a: APorts } } }
";
    assert_eq!(
        services_in(source),
        ["AuthService", "Authenticator", "Engine"]
    );
    assert_eq!(
        traits_in("pub trait Clock: Send {\n    pub trait $name {}\n"),
        ["Clock"]
    );
    let doc = "### Ports\n\n| port | file |\n|---|---|\n| `Clock` | `ports/platform.rs` |\n\n### Services\n| `AuthService` | x |\n";
    assert_eq!(
        listed_under(doc, "### Ports"),
        BTreeSet::from(["Clock".to_owned()])
    );
}
