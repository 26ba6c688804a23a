//! Can a cell run on this machine? Checked once per runner and environment per process.
//!
//! The rule (docs/prerequisites.md): what the machine is expected to provide and the user did
//! not name (root, runc, bubblewrap, a Docker engine, Codex with no npm to install it, the
//! suites' driver interpreter) is a missing prerequisite: the cell is ignored with the reason,
//! and under `CI=true` it fails. What the user named, or what is there but broken (a
//! `--driver-cmd` program that does not exist, an unwritable cache, a failing install, a probe
//! that disagrees with its spec), is an error.

use crate::context::CellContext;
use crate::program::{self, Where};
use crate::stages::driver::{external_command, external_command_line, external_where};
use codex::provision;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use suites::spec::{AppServerKind, DriverKind};
use suites::Cell;

/// Why a cell cannot run here, if it cannot.
pub fn missing(cell: &Cell, ctx: &CellContext) -> Option<String> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<String>>>> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let check = |key: String, compute: &dyn Fn() -> Option<String>| {
        if let Some(found) = cache.lock().expect("prerequisite cache").get(&key) {
            return found.clone();
        }
        let found = compute();
        cache
            .lock()
            .expect("prerequisite cache")
            .insert(key, found.clone());
        found
    };
    let environment = cell.id.environment.clone();
    let env_missing = check(format!("env:{environment}"), &|| {
        sandbox::environment::check_prerequisites(&environment)
            .err()
            .map(|m| format!("environment `{environment}`: {m}"))
    });
    if env_missing.is_some() {
        return env_missing;
    }
    if cell.runner.app_server == AppServerKind::Codex {
        let version = cell.runner.codex_version.clone().unwrap_or_default();
        let codex_missing = check(format!("codex:{version}"), &|| codex_missing(&version));
        if codex_missing.is_some() {
            return codex_missing;
        }
    }
    if cell.runner.driver == DriverKind::External {
        if let Some(reason) = driver_missing(cell, ctx) {
            return Some(reason);
        }
    }
    if let Some(declared) = &cell.runner.declared {
        // The interpreter the suites name must be here ([`crate::program`]: the same check a
        // drivers file's driver gets when it loads); a path the user named that does not exist
        // is no prerequisite: the cell runs and fails with an error naming it.
        let at = Where {
            repo_root: ctx.repo_root.as_deref(),
            base_dir: declared.base_dir.as_deref(),
        };
        if let Err(e) = program::resolve(&declared.command, at) {
            if e.is_not_on_path() {
                return Some(format!("the declared driver: {e}"));
            }
        }
    }
    None
}

/// The external driver's program is a missing prerequisite only when the suites name it by a
/// bare name that is not on PATH (`python3`). A program the user named (`--driver-cmd`), or one
/// named by its path, that does not exist is no prerequisite: the cell runs and fails with an
/// error naming it (see docs/prerequisites.md).
fn driver_missing(cell: &Cell, ctx: &CellContext) -> Option<String> {
    if ctx.driver_cmd.is_some() {
        return None;
    }
    let command = external_command_line(ctx, cell).ok()?;
    match program::resolve(&command, external_where(ctx)) {
        Err(e) if e.is_not_on_path() => Some(format!("the external driver: {e}")),
        _ => None,
    }
}

/// Check what the user named for the whole run, before any cell starts: a `--driver-cmd`
/// whose program does not exist is an error of the run, never a skip of its cells.
pub fn check_named(ctx: &CellContext, cells: &[Cell]) -> anyhow::Result<()> {
    if ctx.driver_cmd.is_none() {
        return Ok(());
    }
    if let Some(cell) = cells
        .iter()
        .find(|c| c.runner.driver == DriverKind::External)
    {
        external_command(ctx, cell).map_err(|e| anyhow::anyhow!("--driver-cmd: {e:#}"))?;
    }
    Ok(())
}

/// Codex is runnable when installed, or installable (npm is there: `ensure` installs it on
/// first use).
fn codex_missing(version: &str) -> Option<String> {
    match provision::resolve(version) {
        Ok(_) => None,
        Err(_) if sandbox::system::which("npm").is_some() => None,
        Err(e) => Some(format!(
            "Codex {version} is not installed and npm is missing to install it: {e:#}"
        )),
    }
}
