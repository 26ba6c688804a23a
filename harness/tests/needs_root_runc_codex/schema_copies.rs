//! The schema files the harness judges and chooses by are copies of what the real Codex
//! generates, and stay so: every file under `graders/protocol/VERSION/` (the server requests and
//! notifications a release has, and the answer each request is owed: the graders' validators)
//! and under `harness/crates/client-choices/schema/VERSION/` (the client's parameter types: the
//! legitimate population's vocabulary) must be byte for byte the file of the same name that
//! `codex app-server generate-json-schema --experimental` of that release writes. Both folders'
//! READMEs and headers promise it; a copy edited by hand, or recorded from another release,
//! would make the graders validate against a protocol no Codex speaks.
//!
//! One trial per release with a copy. Needs that real Codex version: without it the trial is
//! reported as ignored with the reason; under `CI=true` it fails instead.

use crate::common;

use common::{codex_schema, prereq};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The folders of committed copies, from the workspace root: one folder per release below each.
const COPIES: &[&str] = &["graders/protocol", "harness/crates/client-choices/schema"];

pub fn trials() -> Vec<libtest_mimic::Trial> {
    let root = workspace_root();
    // The releases are the copies' folders, so a release recorded without a trial cannot be.
    let releases: BTreeSet<String> = COPIES
        .iter()
        .flat_map(|copies| {
            std::fs::read_dir(root.join(copies))
                .unwrap_or_else(|e| panic!("{copies}: {e}"))
                .filter_map(|entry| {
                    let path = entry.ok()?.path();
                    path.is_dir()
                        .then(|| path.file_name()?.to_str().map(str::to_string))
                        .flatten()
                })
        })
        .collect();
    releases
        .into_iter()
        .map(|version| {
            prereq::trial(
                format!("the_committed_schema_copies_are_the_real_codex_ones_needs_real_codex::{version}"),
                prereq::version_missing(&version),
                move || the_committed_copies_are_the_generated_files(&version),
            )
        })
        .collect()
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// Every regular file below `dir`, by file name (generate-json-schema writes each name once,
/// in `v1/`, `v2/` or the top folder); a name found twice is recorded with every path.
fn files_by_name(dir: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut found: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in
            std::fs::read_dir(&folder).unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        {
            let path = entry.expect("a folder entry").path();
            if path.is_dir() {
                pending.push(path);
            } else if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
                found.entry(name.to_string()).or_default().push(path);
            }
        }
    }
    found
}

fn the_committed_copies_are_the_generated_files(
    version: &str,
) -> Result<(), libtest_mimic::Failed> {
    let lab = tempfile::tempdir().expect("a temporary folder");
    codex_schema::generate_version(version, lab.path());
    let generated = files_by_name(lab.path());
    let root = workspace_root();
    let mut problems = Vec::new();
    let mut compared = 0;
    for copies in COPIES {
        let folder = root.join(copies).join(version);
        if !folder.is_dir() {
            continue;
        }
        for (name, paths) in files_by_name(&folder) {
            if !name.ends_with(".json") {
                continue;
            }
            for copy in paths {
                let shown = copy
                    .strip_prefix(&root)
                    .unwrap_or(&copy)
                    .display()
                    .to_string();
                match generated.get(&name).map(Vec::as_slice) {
                    None | Some([]) => {
                        problems.push(format!("{shown}: Codex {version} generates no {name}"))
                    }
                    Some([real]) => {
                        compared += 1;
                        if std::fs::read(&copy).ok() != std::fs::read(real).ok() {
                            problems.push(format!(
                                "{shown} differs from the {} Codex {version} generates (copy it again from `codex app-server generate-json-schema --experimental`)",
                                real.strip_prefix(lab.path()).unwrap_or(real).display()
                            ));
                        }
                    }
                    Some(several) => problems.push(format!(
                        "{shown}: Codex {version} generates {} files named {name}",
                        several.len()
                    )),
                }
            }
        }
    }
    if compared == 0 && problems.is_empty() {
        problems.push(format!(
            "no committed copy of Codex {version}'s schema was found in {COPIES:?}"
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n").into())
    }
}
