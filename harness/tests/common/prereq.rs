//! The one rule for a test that needs something this machine may not have (root, runc,
//! bubblewrap, the pinned Codex): runnability is decided before the test runs. A missing
//! prerequisite makes the trial *ignored*, with the reason on stderr; under `CI=true` it makes
//! the trial *fail*, naming what is missing. Never a test that returns early and passes.
//!
//! The test binary using this is a libtest-mimic harness (`harness = false` in Cargo.toml,
//! tests/needs_root_runc_codex/main.rs); its modules differ only in which prerequisites they
//! check.

use codex::provision::{self, PINNED};
use libtest_mimic::{Failed, Trial};
use sandbox::environment::Runtime;
use std::future::Future;
use std::sync::OnceLock;

fn ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Why the pinned Codex cannot run here, if it cannot. A test never installs it (that would be
/// an unbounded download inside a test); CI provisions it before the tests run.
pub fn codex_missing() -> Option<String> {
    // Asked once per test binary: resolving runs `codex --version`, and a crate asks per trial.
    static MISSING: OnceLock<Option<String>> = OnceLock::new();
    MISSING
        .get_or_init(|| {
            provision::resolve(PINNED)
                .err()
                .map(|err| format!("the pinned Codex {PINNED}: {err:#}"))
        })
        .clone()
}

/// Why Codex `version` cannot run here, if it cannot.
pub fn version_missing(version: &str) -> Option<String> {
    provision::resolve(version)
        .err()
        .map(|err| format!("Codex {version}: {err:#}"))
}

/// Why some Codex version of the matrix's runners cannot run here, if one cannot (`harness
/// provision` installs them all).
pub fn matrix_codex_missing() -> Option<String> {
    super::codex_schema::matrix_versions()
        .into_iter()
        .find_map(|version| {
            provision::resolve(&version)
                .err()
                .map(|err| format!("Codex {version} (a runner of the matrix): {err:#}"))
        })
}

/// Why `environment` cannot run here, if it cannot: its own prerequisites (bubblewrap; root and
/// a runtime for a container environment), and for a container environment the runc runtime,
/// which is what these tests exercise (a virtual machine's environment: the kvm runtime's).
pub fn environment_missing(environment: &str) -> Option<String> {
    match sandbox::environment::select_runtime(environment) {
        Ok(Runtime::Host | Runtime::Runc | Runtime::Kvm) => None,
        Ok(other) => Some(format!(
            "environment `{environment}` needs runc, the runtime selected here is {}",
            other.as_str()
        )),
        // The reason names what is missing (and the environment where that matters).
        Err(missing) => Some(missing.to_string()),
    }
}

/// A trial running `body` when nothing is `missing`. Otherwise ignored with the reason on
/// stderr, or failing under `CI=true`; run anyway (`--include-ignored`), it fails with the
/// reason rather than pass without testing anything.
pub fn trial(
    name: impl Into<String>,
    missing: Option<String>,
    body: impl FnOnce() -> Result<(), Failed> + Send + 'static,
) -> Trial {
    let name = name.into();
    match missing {
        None => Trial::test(name, body),
        Some(reason) if ci() => Trial::test(name, move || {
            Err(format!("CI=true and a prerequisite is missing: {reason}").into())
        }),
        Some(reason) => {
            eprintln!("ignored: {name}: {reason}");
            Trial::test(name, move || {
                Err(format!("cannot run here: {reason}").into())
            })
            .with_ignored_flag(true)
        }
    }
}

/// Run an async test body to completion on its own runtime, as `#[tokio::test]` does (a
/// current-thread runtime with I/O and timers). A panic in the body fails the trial.
pub fn block_on(body: impl Future<Output = ()>) -> Result<(), Failed> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the tokio runtime: {e}"))?;
    runtime.block_on(body);
    Ok(())
}
