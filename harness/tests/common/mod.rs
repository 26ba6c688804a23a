//! Helpers shared by the integration tests (each of the two test binaries declares this module
//! once, `#[path = "../common/mod.rs"] mod common;`).

pub mod codex_cell;
pub mod codex_schema;
pub mod driver_copies;
pub mod evidence;
pub mod fake_driver;
pub mod fidelity;
pub mod harness_cli;
pub mod mutate;
pub mod prereq;
pub mod procs;
pub mod tapped;

/// A containment scope's cgroup folders: its folder in the v2 hierarchy and its mirrors in the
/// v1 ones.
pub fn scope_folders(scope: &str) -> Vec<std::path::PathBuf> {
    let relative = std::path::Path::new(sandbox::containment::ROOT_NAME).join(scope);
    let mut folders = sandbox::cgroup::v1_mirrors(&relative);
    folders.extend(sandbox::cgroup::unified_mount().map(|mount| mount.join(&relative)));
    folders
}
