//! Installing and resolving the pinned real Codex.
//!
//! The npm package `@openai/codex@VERSION` is installed on first use into a cache folder (never
//! globally); its platform package ships the `codex` binary and Codex's own bubblewrap. The
//! binary's `--version` is checked against the pin.

use anyhow::{bail, Context, Result};
use sandbox::system::{wait_bounded, which};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The Codex versions the project pins.
pub const PINNED: &str = "0.169.0";
/// The newest published Codex the matrix runs (`runner-codex-0-171`); not the pin: the fake
/// serves the pin, and `harness drift 0.171.0` names what changed.
pub const NEWEST: &str = "0.171.0";

/// Every Codex version `matrix`'s runners name, the pin first: what `harness provision`
/// installs and the schema tests check against, so a new runner needs no code change. A fake
/// runner's `plays` counts: its persona is checked against that real Codex.
pub fn matrix_versions(matrix: &suites::Matrix) -> Vec<String> {
    let mut versions = vec![PINNED.to_string()];
    for runner in matrix.file.runners.values() {
        for version in runner.codex_version.iter().chain(runner.plays.iter()) {
            if !versions.contains(version) {
                versions.push(version.clone());
            }
        }
    }
    versions
}

/// Bound on one `npm install`.
const NPM_INSTALL_TIMEOUT: Duration = Duration::from_secs(600);
/// Bound on `codex --version`.
const VERSION_TIMEOUT: Duration = Duration::from_secs(30);

/// A resolved, version-checked Codex installation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodexInstall {
    pub version: String,
    /// The `codex` binary.
    pub binary: PathBuf,
    /// The platform package's vendor folder (holds `codex-resources/bwrap`).
    pub package_dir: PathBuf,
}

impl CodexInstall {
    /// Codex's bundled bubblewrap (used when `/usr/bin/bwrap` is absent).
    pub fn bundled_bwrap(&self) -> PathBuf {
        self.package_dir.join("codex-resources").join("bwrap")
    }
}

/// The cache root: `$CODEX_DRIVER_CACHE`, else `$XDG_CACHE_HOME/codex-driver-conformance`,
/// else `$HOME/.cache/codex-driver-conformance`.
pub fn cache_root() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("CODEX_DRIVER_CACHE").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(dir).join("codex-driver-conformance"));
    }
    let home = std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .context("cannot choose a cache folder: set CODEX_DRIVER_CACHE (HOME is not set)")?;
    Ok(PathBuf::from(home)
        .join(".cache")
        .join("codex-driver-conformance"))
}

fn platform() -> Result<(&'static str, &'static str)> {
    match std::env::consts::ARCH {
        "x86_64" => Ok(("codex-linux-x64", "x86_64-unknown-linux-musl")),
        "aarch64" => Ok(("codex-linux-arm64", "aarch64-unknown-linux-musl")),
        other => bail!("no Codex platform package is known for architecture {other}"),
    }
}

/// Where the npm prefix of `version` lives in the cache.
pub(crate) fn prefix_for(version: &str) -> Result<PathBuf> {
    Ok(cache_root()?.join("npm").join(format!("codex-{version}")))
}

/// Resolve an already-installed version without installing anything.
pub fn resolve(version: &str) -> Result<CodexInstall> {
    if let Some(install) = already_verified(version) {
        return Ok(install);
    }
    let install = resolve_uncached(version)?;
    remember(&install);
    Ok(install)
}

fn resolve_uncached(version: &str) -> Result<CodexInstall> {
    let prefix = prefix_for(version)?;
    let (package, triple) = platform()?;
    let package_dir = prefix
        .join("node_modules")
        .join("@openai")
        .join(package)
        .join("vendor")
        .join(triple);
    let binary = package_dir.join("bin").join("codex");
    if !binary.is_file() {
        bail!(
            "Codex {version} is not installed: {} does not exist (run `harness` with network to npm, or ci/install-codex.sh)",
            binary.display()
        );
    }
    let install = CodexInstall {
        version: version.to_string(),
        binary,
        package_dir,
    };
    check_version(&install)?;
    Ok(install)
}

/// Installs already resolved and version-checked by this process: every cell asks again, and
/// running `codex --version` per cell would be pure harness overhead.
fn verified() -> &'static std::sync::Mutex<std::collections::HashMap<String, CodexInstall>> {
    static VERIFIED: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<String, CodexInstall>>,
    > = std::sync::OnceLock::new();
    VERIFIED.get_or_init(Default::default)
}

/// Resolve `version`, installing it from npm into the cache first if needed.
pub fn ensure(version: &str) -> Result<CodexInstall> {
    // Checked before npm is asked: a typo would otherwise cost an install attempt (and its
    // registry timeout) and leave a lock file behind.
    suites::generate::check_version(version).map_err(anyhow::Error::msg)?;
    // `resolve` keeps what it verified, so only the first call per version runs `codex --version`.
    if let Ok(install) = resolve(version) {
        return Ok(install);
    }
    let prefix = prefix_for(version)?;
    std::fs::create_dir_all(&prefix)
        .with_context(|| format!("creating the cache folder {}", prefix.display()))?;
    // Parallel cells may ask for the same version at once: one installs, the others wait.
    let lock = std::fs::File::create(prefix.join(".install.lock"))?;
    lock.lock().context("locking the Codex install folder")?;
    if let Ok(install) = resolve(version) {
        return Ok(install);
    }
    npm_install(&prefix, version)?;
    resolve(version)
}

/// This process's verified install of `version`, if it is still there.
fn already_verified(version: &str) -> Option<CodexInstall> {
    verified()
        .lock()
        .ok()?
        .get(version)
        .filter(|install| install.binary.is_file())
        .cloned()
}

fn remember(install: &CodexInstall) {
    if let Ok(mut map) = verified().lock() {
        map.insert(install.version.clone(), install.clone());
    }
}

fn npm_install(prefix: &Path, version: &str) -> Result<()> {
    let npm = which("npm").context(
        "npm is not installed: it is needed to install the pinned @openai/codex package (apt-get install npm)",
    )?;
    let spec = format!("@openai/codex@{version}");
    let mut child = Command::new(npm)
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(prefix)
        .arg(&spec)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting npm")?;
    let status = wait_bounded(&mut child, NPM_INSTALL_TIMEOUT)
        .with_context(|| format!("npm install {spec}"))?
        .with_context(|| format!("npm install {spec}: timed out after {NPM_INSTALL_TIMEOUT:?}"))?;
    if !status.success() {
        let output = child.wait_with_output()?;
        bail!(
            "npm install {spec} failed ({status}): {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

fn check_version(install: &CodexInstall) -> Result<()> {
    let mut child = Command::new(&install.binary)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {} --version", install.binary.display()))?;
    wait_bounded(&mut child, VERSION_TIMEOUT)?.with_context(|| {
        format!(
            "{} --version: timed out after {VERSION_TIMEOUT:?}",
            install.binary.display()
        )
    })?;
    let output = child.wait_with_output()?;
    let printed = String::from_utf8_lossy(&output.stdout).trim().to_string();
    let expected = format!("codex-cli {}", install.version);
    if printed != expected {
        bail!(
            "{} --version printed `{printed}`, expected `{expected}`",
            install.binary.display()
        );
    }
    Ok(())
}
