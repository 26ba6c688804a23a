//! What this binary's trials may need that the machine may lack: the real Codex of a release,
//! as a reason when it is missing. The rule that turns a reason into an ignored trial (a failure
//! under `CI=true`) is the workspace's one, `test_support::trial`.

use std::path::PathBuf;

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
