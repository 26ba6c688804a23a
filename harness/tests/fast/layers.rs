//! The workspace's crates form layers whose edges only point down (docs/architecture.md):
//! every normal or build dependency of a crate on another crate of the workspace names a crate
//! of a lower layer. Cargo already refuses a cycle; this also refuses an edge that points up or
//! sideways, so a new crate or dependency is placed on purpose. Dev-dependencies are not
//! edges of the layers: test binaries sit on top of everything (the suites test binary runs
//! the matrix).
//!
//! The stack's crates `matrix`, `codex` and `driver` publish only what their `lib.rs` says they
//! own (every other item `pub(crate)`, held by `#![deny(unreachable_pub)]`), and the time bounds
//! of a run live in one module, `driver::bounds`.

use std::collections::BTreeMap;
use std::path::Path;

/// The layers, bottom first: each crate's place.
const LAYERS: &[&[&str]] = &[
    &["graders", "test-support"],
    &["suites", "fake-app-server", "client-choices"],
    &["sandbox", "tap", "report"],
    &["driver"],
    &["codex"],
    &["matrix"],
    &["maintainer-tools"],
    &["harness"],
];

/// The workspace's root folder.
pub(crate) fn workspace_root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every workspace crate's folder and manifest, by package name.
pub(crate) fn workspace_crates() -> BTreeMap<String, (std::path::PathBuf, toml::Table)> {
    let root = workspace_root();
    let workspace: toml::Table =
        toml::from_str(&std::fs::read_to_string(root.join("Cargo.toml")).unwrap()).unwrap();
    let mut found = BTreeMap::new();
    for member in workspace["workspace"]["members"].as_array().unwrap() {
        let member = member.as_str().unwrap();
        let folders: Vec<std::path::PathBuf> = match member.strip_suffix("/*") {
            Some(parent) => std::fs::read_dir(root.join(parent))
                .unwrap()
                .map(|entry| entry.unwrap().path())
                .filter(|path| path.join("Cargo.toml").is_file())
                .collect(),
            None => vec![root.join(member)],
        };
        for folder in folders {
            let manifest: toml::Table =
                toml::from_str(&std::fs::read_to_string(folder.join("Cargo.toml")).unwrap())
                    .unwrap();
            let name = manifest["package"]["name"].as_str().unwrap().to_string();
            found.insert(name, (folder, manifest));
        }
    }
    found
}

/// Every workspace crate's manifest, by package name.
fn manifests() -> BTreeMap<String, toml::Table> {
    workspace_crates()
        .into_iter()
        .map(|(name, (_, manifest))| (name, manifest))
        .collect()
}

/// The crates only test binaries may use.
const TEST_ONLY: &[&str] = &["test-support"];

fn layer_of(name: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&name))
}

#[test]
fn every_workspace_crate_depends_only_on_lower_layers() {
    let manifests = manifests();
    let mut problems = Vec::new();
    for (name, manifest) in &manifests {
        let Some(own) = layer_of(name) else {
            problems.push(format!(
                "`{name}` has no layer: place it in LAYERS and in docs/architecture.md"
            ));
            continue;
        };
        for section in ["dependencies", "build-dependencies"] {
            let Some(deps) = manifest.get(section).and_then(|d| d.as_table()) else {
                continue;
            };
            for dep in deps.keys().filter(|dep| manifests.contains_key(*dep)) {
                match layer_of(dep) {
                    // What the test binaries share never becomes part of a program.
                    _ if TEST_ONLY.contains(&dep.as_str()) => problems.push(format!(
                        "`{name}` depends on `{dep}`, which only test binaries may use (a dev-dependency)"
                    )),
                    Some(layer) if layer < own => {}
                    _ => problems.push(format!(
                        "`{name}` (layer {own}) depends on `{dep}`, which is not below it"
                    )),
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    for layer in LAYERS.iter().flat_map(|layer| layer.iter()) {
        assert!(
            manifests.contains_key(*layer),
            "LAYERS names `{layer}`, which is not a workspace crate"
        );
    }
}

/// The crates whose API is what their `lib.rs` header names (issue 40: they made every module
/// `pub`; the tools were the `harness` crate's, all `pub`).
const NARROWED: &[&str] = &[
    "matrix",
    "codex",
    "driver",
    "maintainer-tools",
    "tap",
    "report",
    "client-choices",
    "graders",
    "suites",
    "fake-app-server",
];

/// The crates a run goes through, whose time bounds are `driver::bounds`' (the tools' own bounds
/// stay beside their code).
const RUN_CRATES: &[&str] = &["matrix", "codex", "driver"];

/// A stack crate's `src/`: below `harness/crates/`, or a top-level folder of the workspace.
fn crate_src(name: &str) -> std::path::PathBuf {
    let harness = Path::new(env!("CARGO_MANIFEST_DIR"));
    let nested = harness.join("crates").join(name);
    let crate_dir = if nested.is_dir() {
        nested
    } else {
        harness.parent().expect("the workspace root").join(name)
    };
    crate_dir.join("src")
}

#[test]
fn the_stack_crates_publish_only_what_their_lib_rs_names() {
    let mut problems = Vec::new();
    for name in NARROWED {
        let lib = std::fs::read_to_string(crate_src(name).join("lib.rs")).unwrap();
        if !lib.contains("#![deny(unreachable_pub)]") {
            problems.push(format!("`{name}`'s lib.rs does not deny `unreachable_pub`"));
        }
        let header: String = lib
            .lines()
            .filter(|line| line.starts_with("//!"))
            .collect::<Vec<_>>()
            .join(" ");
        for module in lib.lines().filter_map(|line| {
            line.strip_prefix("pub mod ")
                .and_then(|rest| rest.strip_suffix(';'))
        }) {
            if !header.contains(&format!("[`{module}")) {
                problems.push(format!(
                    "`{name}` publishes `{module}`, which its lib.rs header does not name as its API"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The `Duration` constants of the stack's crates that are no bound of a run, and why.
const NOT_A_RUN_BOUND: &[(&str, &str)] = &[
    ("POLL", "a polling cadence, not a bound"),
    (
        "FAKE_CELL",
        "the scheduler's estimate of a cell's length, to order the cells",
    ),
    (
        "REAL_CODEX_CELL",
        "the scheduler's estimate of a cell's length, to order the cells",
    ),
    (
        "WIRE_LINE",
        "the scheduler's estimate of a wire line's cost, to order the cells",
    ),
    (
        "NPM_INSTALL_TIMEOUT",
        "provisioning (`harness provision`), before any run",
    ),
    (
        "VERSION_TIMEOUT",
        "provisioning (`harness provision`), before any run",
    ),
    (
        "INSTALL_TIMEOUT",
        "provisioning a published driver, before any run",
    ),
    (
        "QUICK_TIMEOUT",
        "provisioning a published driver, before any run",
    ),
];

#[test]
fn the_time_bounds_of_a_run_are_in_one_module() {
    fn walk(folder: &Path, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(folder).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("bounds.rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                for line in text.lines() {
                    let Some((before, _)) = line.split_once(": Duration =") else {
                        continue;
                    };
                    let Some(name) = before.split_whitespace().last() else {
                        continue;
                    };
                    if before.contains("const ")
                        && !NOT_A_RUN_BOUND.iter().any(|(known, _)| *known == name)
                    {
                        found.push(format!("{}: {name}", path.display()));
                    }
                }
            }
        }
    }
    let mut found = Vec::new();
    for name in RUN_CRATES {
        walk(&crate_src(name), &mut found);
    }
    assert!(
        found.is_empty(),
        "time bounds outside driver::bounds (move them there, with why their value):\n{}",
        found.join("\n")
    );
}
