//! Can a cell run on this machine? Checked once per runner and environment per process.

use super::MatrixOptions;
use crate::codex::provision;
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
        crate::env::check_prerequisites(&environment)
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
        if let Err(e) = options.driver_command(cell) {
            return Some(format!("{e:#}"));
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
                provision::which(&program).is_some()
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

/// Codex is runnable when installed, or installable (npm is there: `ensure` installs it on
/// first use).
fn codex_missing(version: &str) -> Option<String> {
    match provision::resolve(version) {
        Ok(_) => None,
        Err(_) if provision::which("npm").is_some() => None,
        Err(e) => Some(format!(
            "Codex {version} is not installed and npm is missing to install it: {e:#}"
        )),
    }
}
