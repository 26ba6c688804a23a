//! The workspace's crates form layers whose edges only point down (docs/architecture.md):
//! every normal or build dependency of a crate on another crate of the workspace names a crate
//! of a lower layer. Cargo already refuses a cycle; this also refuses an edge that points up or
//! sideways, so a new crate or dependency is placed on purpose. Dev-dependencies are not
//! edges of the layers: test binaries sit on top of everything (the suites test binary runs
//! the matrix).

use std::collections::BTreeMap;
use std::path::Path;

/// The layers, bottom first: each crate's place.
const LAYERS: &[&[&str]] = &[
    &["graders"],
    &["suites", "fake-app-server", "client-choices"],
    &["sandbox", "tap", "report"],
    &["driver"],
    &["codex"],
    &["matrix"],
    &["harness"],
];

/// Every workspace crate's manifest, by package name.
fn manifests() -> BTreeMap<String, toml::Table> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
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
            found.insert(name, manifest);
        }
    }
    found
}

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
