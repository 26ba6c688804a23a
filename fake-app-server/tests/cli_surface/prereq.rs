//! The project's rule for a test that needs something this machine may not have (here: the
//! real Codex of a release): runnability is decided before the test runs. A missing
//! prerequisite makes the trial *ignored*, with the reason on stderr; under `CI=true` it makes
//! the trial *fail*, naming what is missing. Never a test that returns early and passes. (The
//! same rule as harness/tests/common/prereq.rs; this crate cannot use the harness's.)
//!
//! Test crates using this are libtest-mimic harnesses (`harness = false` in Cargo.toml).

use libtest_mimic::{Failed, Trial};
use std::path::PathBuf;

fn ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// Where `harness provision` installs the real Codex `version` (its cache layout:
/// `$CODEX_DRIVER_CACHE`, else `$XDG_CACHE_HOME/codex-driver-conformance`, else
/// `~/.cache/codex-driver-conformance`; then `npm/codex-VERSION/…/bin/codex`), or why it is not
/// there. A test never installs it.
pub fn codex_binary(version: &str) -> Result<PathBuf, String> {
    let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let cache = match (
        env("CODEX_DRIVER_CACHE"),
        env("XDG_CACHE_HOME"),
        env("HOME"),
    ) {
        (Some(dir), _, _) => PathBuf::from(dir),
        (None, Some(dir), _) => PathBuf::from(dir).join("codex-driver-conformance"),
        (None, None, Some(home)) => PathBuf::from(home).join(".cache/codex-driver-conformance"),
        (None, None, None) => return Err("no cache folder: HOME is not set".into()),
    };
    let (package, triple) = match (std::env::consts::OS, std::env::consts::ARCH) {
        ("linux", "x86_64") => ("codex-linux-x64", "x86_64-unknown-linux-musl"),
        ("linux", "aarch64") => ("codex-linux-arm64", "aarch64-unknown-linux-musl"),
        (os, arch) => return Err(format!("no Codex package for {os}/{arch}")),
    };
    let binary = cache
        .join(format!("npm/codex-{version}/node_modules/@openai"))
        .join(package)
        .join("vendor")
        .join(triple)
        .join("bin/codex");
    if binary.is_file() {
        Ok(binary)
    } else {
        Err(format!(
            "the real Codex {version} is not installed ({} does not exist; `harness provision` installs it)",
            binary.display()
        ))
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
