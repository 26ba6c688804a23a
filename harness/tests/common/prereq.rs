//! What the harness's tests may need that this machine may not have (root, runc, bubblewrap,
//! the pinned Codex), each a reason when it is missing. The rule that turns a reason into an
//! ignored trial (a failure under `CI=true`) is the workspace's one, `test_support::trial`.
//!
//! The test binary using this is a libtest-mimic harness (`harness = false` in Cargo.toml,
//! tests/needs_root_runc_codex/main.rs); its modules differ only in which prerequisites they
//! check.

use codex::provision::{self, PINNED};
use libtest_mimic::Failed;
use sandbox::environment::Runtime;
use std::future::Future;
use std::sync::OnceLock;
// The rule's one definition, under the name this tree's trials call; the fast binary includes
// this module too and builds no trial.
#[allow(unused_imports)]
pub use test_support::trial;

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
