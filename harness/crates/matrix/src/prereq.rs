//! Can a cell run on this machine? Checked once per runner and environment per process.
//!
//! The rule (docs/prerequisites.md): what the machine is expected to provide and the user did
//! not name (root, runc, bubblewrap, a Docker engine, Codex with no npm to install it, the
//! suites' driver interpreter) is a missing prerequisite: the cell is ignored with the reason,
//! and under `CI=true` it fails. What the user named, or what is there but broken (a
//! `--driver-cmd` program that does not exist, an unwritable cache, a failing install, a probe
//! that disagrees with its spec), is an error.

use super::MatrixOptions;
use codex::provision;
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use suites::spec::{AppServerKind, DriverKind};
use suites::Cell;

/// Why a cell cannot run here, if it cannot.
pub fn missing(cell: &Cell, options: &MatrixOptions) -> Option<String> {
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
        if let Some(reason) = driver_missing(cell, options) {
            return Some(reason);
        }
    }
    if let Some(declared) = &cell.runner.declared {
        // The program the command line starts must be here; a placeholder stands for a path
        // the harness provides.
        let program = shlex::split(&declared.command)
            .and_then(|words| words.into_iter().next())
            .unwrap_or_default();
        if !program.contains('{') {
            let found = if program.contains('/') {
                std::path::Path::new(&program).is_file()
            } else {
                sandbox::system::which(&program).is_some()
            };
            if !found {
                return Some(format!(
                    "the declared driver's program `{program}` is not installed or does not exist"
                ));
            }
        }
    }
    None
}

/// The external driver's program is a missing prerequisite only when the suites name it by a
/// bare name that is not on PATH (`python3`). A program the user named (`--driver-cmd`), or one
/// named by its path, that does not exist is no prerequisite: the cell runs and fails with an
/// error naming it (see docs/prerequisites.md).
fn driver_missing(cell: &Cell, options: &MatrixOptions) -> Option<String> {
    if options.driver_cmd.is_some() {
        return None;
    }
    let template = cell.runner.driver_cmd.as_deref()?;
    let program = template.split_whitespace().next()?;
    if program.contains('/') {
        return None;
    }
    options.driver_command(cell).err().map(|e| format!("{e:#}"))
}

/// Check what the user named for the whole run, before any cell starts: a `--driver-cmd`
/// whose program does not exist is an error of the run, never a skip of its cells.
pub fn check_named(options: &MatrixOptions, cells: &[Cell]) -> anyhow::Result<()> {
    if options.driver_cmd.is_none() {
        return Ok(());
    }
    if let Some(cell) = cells
        .iter()
        .find(|c| c.runner.driver == DriverKind::External)
    {
        options
            .driver_command(cell)
            .map_err(|e| anyhow::anyhow!("--driver-cmd: {e:#}"))?;
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
