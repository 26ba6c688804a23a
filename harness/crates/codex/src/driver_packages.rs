//! Installing and resolving the published drivers of `codex app-server` that the matrix runs
//! unmodified: the official Python SDK (PyPI `openai-codex`, into a virtual environment) and
//! `@agentclientprotocol/codex-acp` (npm, into a prefix). Both go into the same cache as the
//! pinned Codex ([`super::provision::cache_root`]), pinned here, and are checked after install.
//!
//! Layout: `<cache>/pypi/openai-codex-<version>/` (a venv) and
//! `<cache>/npm/codex-acp-<version>/` (an npm prefix).

use super::provision::cache_root;
use anyhow::{bail, Context, Result};
use sandbox::system::{wait_bounded, which};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Bound on one `pip install` / `npm install` (the SDK's dependency ships a Codex binary).
const INSTALL_TIMEOUT: Duration = Duration::from_secs(900);
/// Bound on creating a venv and on each version check.
const QUICK_TIMEOUT: Duration = Duration::from_secs(120);

/// Which registry a driver package comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registry {
    PyPi,
    Npm,
}

/// One pinned driver package.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverPackage {
    /// The short name the drivers file and the launch scripts use (`drivers/<id>/`).
    pub id: &'static str,
    pub registry: Registry,
    /// The registry's package name.
    pub package: &'static str,
    pub version: &'static str,
    /// Further requirements installed with it, pinned as well (`name==version` / `name@version`):
    /// the package's own dependency ranges are open, so the versions measured are pinned here.
    pub pinned_dependencies: &'static [&'static str],
}

/// The official Python SDK: launches `<codex_bin> app-server --listen stdio://`.
pub const PYTHON_SDK: DriverPackage = DriverPackage {
    id: "python-sdk",
    registry: Registry::PyPi,
    package: "openai-codex",
    version: "0.163.0",
    pinned_dependencies: &["pydantic==2.14.4", "packaging==26.4"],
};

/// The ACP agent for Codex: spawns `$CODEX_PATH app-server`.
pub const CODEX_ACP: DriverPackage = DriverPackage {
    id: "codex-acp",
    registry: Registry::Npm,
    package: "@agentclientprotocol/codex-acp",
    version: "2.6.0",
    pinned_dependencies: &[],
};

/// The oldest Node.js codex-acp runs on: its dependencies (`open`, `wsl-utils`) declare
/// `node >= 20`.
pub(crate) const NODE_MAJOR_MIN: u32 = 20;

/// Every driver package `harness provision` installs.
pub const ALL: [DriverPackage; 2] = [PYTHON_SDK, CODEX_ACP];

/// The package named `id`, or an error listing the known ones.
pub fn by_id(id: &str) -> Result<DriverPackage> {
    ALL.into_iter().find(|p| p.id == id).with_context(|| {
        format!(
            "unknown driver package `{id}` (known: {})",
            ALL.map(|p| p.id).join(", ")
        )
    })
}

/// A resolved, version-checked driver installation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledDriver {
    pub package: DriverPackage,
    /// The venv or the npm prefix.
    pub prefix: PathBuf,
    /// What runs it: the venv's `python` (run the launch script with it), or the package's
    /// `dist/index.js` (run with `node`).
    pub entry: PathBuf,
}

impl DriverPackage {
    /// Where this package lives in the cache.
    pub(crate) fn prefix(&self) -> Result<PathBuf> {
        Ok(cache_root()?.join(self.cache_relative()))
    }

    /// The prefix below the cache root, e.g. `pypi/openai-codex-0.163.0` (what a drivers file
    /// names after `{cache}/`).
    pub(crate) fn cache_relative(&self) -> String {
        let short = self.package.rsplit('/').next().unwrap_or(self.package);
        let folder = match self.registry {
            Registry::PyPi => "pypi",
            Registry::Npm => "npm",
        };
        format!("{folder}/{short}-{}", self.version)
    }

    fn spec(&self) -> String {
        match self.registry {
            Registry::PyPi => format!("{}=={}", self.package, self.version),
            Registry::Npm => format!("{}@{}", self.package, self.version),
        }
    }

    fn entry_in(&self, prefix: &Path) -> PathBuf {
        match self.registry {
            Registry::PyPi => prefix.join("bin").join("python"),
            Registry::Npm => {
                let mut dir = prefix.join("node_modules");
                for part in self.package.split('/') {
                    dir = dir.join(part);
                }
                dir.join("dist").join("index.js")
            }
        }
    }

    /// Resolve an installed package without installing anything; its version is checked.
    pub fn resolve(&self) -> Result<InstalledDriver> {
        self.resolve_in(self.prefix()?)
    }

    fn resolve_in(&self, prefix: PathBuf) -> Result<InstalledDriver> {
        let entry = self.entry_in(&prefix);
        if !entry.is_file() {
            bail!(
                "{} is not installed: {} does not exist (run `harness provision`)",
                self.spec(),
                entry.display()
            );
        }
        let installed = self.installed_version(&prefix)?;
        if installed != self.version {
            bail!(
                "{} holds {} {installed}, expected {} (remove the folder and run `harness provision`)",
                prefix.display(),
                self.package,
                self.version
            );
        }
        Ok(InstalledDriver {
            package: *self,
            prefix,
            entry,
        })
    }

    /// Resolve the package, installing it from its registry into the cache first if needed.
    pub fn ensure(&self) -> Result<InstalledDriver> {
        if let Ok(installed) = self.resolve() {
            return Ok(installed);
        }
        let prefix = self.prefix()?;
        let parent = prefix.parent().context("cache prefix has no parent")?;
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating the cache folder {}", parent.display()))?;
        // Parallel callers may install the same package at once: one installs, the others wait.
        let lock_path = parent.join(format!(
            ".{}.install.lock",
            prefix.file_name().unwrap_or_default().to_string_lossy()
        ));
        let lock = std::fs::File::create(&lock_path)
            .with_context(|| format!("creating {}", lock_path.display()))?;
        lock.lock().context("locking the driver install folder")?;
        if let Ok(installed) = self.resolve() {
            return Ok(installed);
        }
        match self.registry {
            Registry::PyPi => self.pip_install(&prefix)?,
            Registry::Npm => self.npm_install(&prefix)?,
        }
        self.resolve()
            .with_context(|| format!("after installing {}", self.spec()))
    }

    /// Why the runtime this package runs on is missing or too old here, if it is (`node` for
    /// an npm package; a venv carries its own interpreter).
    pub fn runtime_missing(&self) -> Option<String> {
        if self.registry == Registry::PyPi {
            return None;
        }
        let Some(node) = which("node") else {
            return Some(format!(
                "node is not installed ({} runs on Node.js >= {NODE_MAJOR_MIN})",
                self.package
            ));
        };
        let version = Command::new(&node)
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let major = version
            .trim_start_matches('v')
            .split('.')
            .next()
            .and_then(|m| m.parse::<u32>().ok());
        match major {
            Some(major) if major >= NODE_MAJOR_MIN => None,
            _ => Some(format!(
                "{} printed `{version}` for --version; {} needs Node.js >= {NODE_MAJOR_MIN}",
                node.display(),
                self.package
            )),
        }
    }

    fn pip_install(&self, venv: &Path) -> Result<()> {
        let python = which("python3").context(
            "python3 is not installed: it is needed to install the pinned openai-codex package (apt-get install python3 python3-venv)",
        )?;
        if venv.exists() {
            // A half-made venv (an interrupted install) is rebuilt from scratch.
            std::fs::remove_dir_all(venv)
                .with_context(|| format!("removing the incomplete {}", venv.display()))?;
        }
        let mut create = Command::new(python);
        create.args(["-m", "venv"]).arg(venv);
        run_bounded(
            create,
            QUICK_TIMEOUT,
            "python3 -m venv (is python3-venv installed?)",
        )?;
        let mut install = Command::new(venv.join("bin").join("pip"));
        install
            .args([
                "install",
                "--disable-pip-version-check",
                "--no-input",
                "--quiet",
            ])
            .arg(self.spec())
            .args(self.pinned_dependencies);
        run_bounded(
            install,
            INSTALL_TIMEOUT,
            &format!("pip install {}", self.spec()),
        )
    }

    fn npm_install(&self, prefix: &Path) -> Result<()> {
        let npm = which("npm").with_context(|| {
            format!(
                "npm is not installed: it is needed to install the pinned {} package (apt-get install npm)",
                self.package
            )
        })?;
        std::fs::create_dir_all(prefix)
            .with_context(|| format!("creating {}", prefix.display()))?;
        let mut install = Command::new(npm);
        install
            .args(["install", "--no-audit", "--no-fund", "--prefix"])
            .arg(prefix)
            .arg(self.spec())
            .args(self.pinned_dependencies);
        run_bounded(
            install,
            INSTALL_TIMEOUT,
            &format!("npm install {}", self.spec()),
        )
    }

    /// The version actually installed under `prefix`, read from the package's own metadata.
    fn installed_version(&self, prefix: &Path) -> Result<String> {
        match self.registry {
            Registry::PyPi => {
                let mut child = Command::new(self.entry_in(prefix))
                    .args([
                        "-c",
                        "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))",
                        self.package,
                    ])
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .with_context(|| format!("running the python of {}", prefix.display()))?;
                let status = wait_bounded(&mut child, QUICK_TIMEOUT)?
                    .with_context(|| format!("timed out after {QUICK_TIMEOUT:?}"))?;
                let output = child.wait_with_output()?;
                if !status.success() {
                    bail!(
                        "reading the installed {} version failed ({status}): {}",
                        self.package,
                        String::from_utf8_lossy(&output.stderr).trim()
                    );
                }
                Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
            }
            Registry::Npm => {
                let manifest = self
                    .entry_in(prefix)
                    .parent()
                    .and_then(Path::parent)
                    .context("package folder")?
                    .join("package.json");
                let text = std::fs::read_to_string(&manifest)
                    .with_context(|| format!("reading {}", manifest.display()))?;
                let value: serde_json::Value = serde_json::from_str(&text)
                    .with_context(|| format!("parsing {}", manifest.display()))?;
                value["version"]
                    .as_str()
                    .map(str::to_string)
                    .with_context(|| format!("{} has no version", manifest.display()))
            }
        }
    }
}

/// Run `command` to completion within `limit`; a failure carries its stderr.
fn run_bounded(mut command: Command, limit: Duration, what: &str) -> Result<()> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {what}"))?;
    // Drained on threads: a chatty installer must not block on a full pipe while we wait.
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut pipe) = pipe {
                let _ = std::io::Read::read_to_string(&mut pipe, &mut text);
            }
            text
        })
    };
    let out = drain(stdout.map(|p| Box::new(p) as _));
    let err = drain(stderr.map(|p| Box::new(p) as _));
    let status = wait_bounded(&mut child, limit)
        .with_context(|| what.to_string())?
        .with_context(|| format!("{what}: timed out after {limit:?}"))?;
    let _ = out.join();
    let stderr = err.join().unwrap_or_default();
    if !status.success() {
        bail!("{what} failed ({status}): {}", stderr.trim());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_lookups_name_the_known_ones() {
        assert_eq!(by_id("python-sdk").unwrap(), PYTHON_SDK);
        assert_eq!(by_id("codex-acp").unwrap(), CODEX_ACP);
        let err = by_id("nope").unwrap_err().to_string();
        assert!(err.contains("python-sdk, codex-acp"), "{err}");
    }

    #[test]
    fn specs_and_entries_follow_each_registry() {
        assert_eq!(PYTHON_SDK.spec(), "openai-codex==0.163.0");
        assert_eq!(CODEX_ACP.spec(), "@agentclientprotocol/codex-acp@2.6.0");
        assert_eq!(
            PYTHON_SDK.entry_in(Path::new("/c/v")),
            Path::new("/c/v/bin/python")
        );
        assert_eq!(
            CODEX_ACP.entry_in(Path::new("/c/p")),
            Path::new("/c/p/node_modules/@agentclientprotocol/codex-acp/dist/index.js")
        );
    }

    /// The shipped drivers file names each pinned package by its cache path: a pin moved here
    /// without the drivers file (or the reverse) fails this test, not a cell.
    #[test]
    fn the_shipped_drivers_file_runs_the_pinned_packages_with_its_launch_scripts() {
        let text = include_str!("../../../../drivers/published.toml");
        let file: toml::Table = toml::from_str(text).unwrap();
        let drivers = file["drivers"].as_table().unwrap();
        assert_eq!(drivers.len(), ALL.len());
        // The repository root: this crate is `harness/crates/codex`.
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..");
        for package in ALL {
            let command = drivers[package.id]["command"].as_str().unwrap();
            let entry = package.entry_in(Path::new(&format!(
                "{{cache}}/{}",
                package.cache_relative()
            )));
            let words = shlex::split(command).unwrap();
            assert!(
                words.iter().any(|w| Path::new(w) == entry),
                "{}: `{command}` does not run {}",
                package.id,
                entry.display()
            );
            let script = words
                .iter()
                .find_map(|w| w.strip_prefix("{repo}/"))
                .unwrap_or_else(|| panic!("{}: no launch script under {{repo}}", package.id));
            assert!(
                repo.join(script).is_file(),
                "{script} is not in the repository"
            );
        }
    }

    #[test]
    fn a_missing_or_wrong_install_names_what_is_wrong_and_how_to_fix_it() {
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("codex-acp-2.6.0");
        let err = CODEX_ACP
            .resolve_in(prefix.clone())
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not installed"), "{err}");
        assert!(err.contains("harness provision"), "{err}");

        let package = prefix.join("node_modules/@agentclientprotocol/codex-acp");
        std::fs::create_dir_all(package.join("dist")).unwrap();
        std::fs::write(package.join("dist/index.js"), "").unwrap();
        std::fs::write(package.join("package.json"), r#"{"version":"2.5.0"}"#).unwrap();
        let err = CODEX_ACP
            .resolve_in(prefix.clone())
            .unwrap_err()
            .to_string();
        assert!(err.contains("2.5.0, expected 2.6.0"), "{err}");

        std::fs::write(package.join("package.json"), r#"{"version":"2.6.0"}"#).unwrap();
        let installed = CODEX_ACP.resolve_in(prefix).unwrap();
        assert_eq!(installed.entry, package.join("dist/index.js"));
    }
}
