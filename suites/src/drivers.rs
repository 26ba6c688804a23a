//! A drivers file: drivers declared in the user's own repository (`harness run --drivers FILE`),
//! with optional cases and baseline entries of the user's own, under the rules of `suites.toml`
//! and `baseline.toml`.
//!
//! ```toml
//! [drivers.my-runner]
//! command = "node dist/cli.js --cwd {workspace} --prompt {prompt} --mode {mode}"
//! codex = "env:CODEX_PATH"
//! modes = ["planning", "standard"]
//!
//! [suites.core-compatibility]          # cases of the user's own, added to a shipped suite
//! expected_cells = 2
//! [suites.core-compatibility.cases.long-marker]
//! about = "…"
//! scenario = "builtin:message-marker"
//! grade_as = "message-marker"
//! mode = "standard"
//! network = false
//! task = { prompt = "…" }
//! [[suites.core-compatibility.matrix]]
//! runners = ["my-runner-fake", "my-runner-codex"]
//! environments = ["local"]
//! cases = ["long-marker"]
//!
//! [[expected]]                         # as in baseline.toml
//! cell = "core-compatibility.my-runner-codex.local.long-marker"
//! verdict = "incomplete"
//! reason = "…"
//! ```

use crate::baseline::BaselineEntry;
use crate::declared::Placeholders;
use crate::names::check_name;
use crate::spec::{CaseSpec, DeclaredDriver, MatrixBlock};
use crate::SuitesError;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Cases a drivers file adds to one shipped suite, with the matrix blocks that run them.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserSuite {
    /// How many cells this file's blocks add to the suite (checked like `suites.toml`'s).
    #[serde(default)]
    pub expected_cells: Option<usize>,
    #[serde(default)]
    pub cases: BTreeMap<String, CaseSpec>,
    #[serde(default)]
    pub matrix: Vec<MatrixBlock>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DriversToml {
    #[serde(default)]
    drivers: BTreeMap<String, DeclaredDriver>,
    #[serde(default)]
    suites: BTreeMap<String, UserSuite>,
    #[serde(default)]
    expected: Vec<BaselineEntry>,
}

/// A parsed, checked drivers file.
#[derive(Debug, Clone, PartialEq)]
pub struct DriversFile {
    /// How messages name the file: its path as the user gave it.
    pub name: String,
    pub drivers: BTreeMap<String, DeclaredDriver>,
    pub suites: BTreeMap<String, UserSuite>,
    pub expected: Vec<BaselineEntry>,
}

/// The largest drivers file read: far above any real one, far below what would hurt.
pub(crate) const MAX_DRIVERS_FILE_BYTES: u64 = 4 << 20;

impl DriversFile {
    /// Read and check the drivers file at `path`. A file that does not exist is an error: the
    /// user named it. Each driver's `base_dir` becomes the file's folder.
    pub fn read(path: &Path) -> Result<Self, SuitesError> {
        let name = path.display().to_string();
        let unreadable = |message: String| SuitesError::DriversFileUnreadable {
            path: name.clone(),
            message,
        };
        let text = crate::source::read_bounded(path, MAX_DRIVERS_FILE_BYTES, "a drivers file")
            .map_err(unreadable)?;
        let absolute = std::path::absolute(path).map_err(|e| unreadable(e.to_string()))?;
        let dir = absolute.parent().map(Path::to_path_buf);
        Self::parse(&text, &name, dir)
    }

    /// Parse and check a drivers file's text; `name` is how messages name it.
    pub fn parse(text: &str, name: &str, base_dir: Option<PathBuf>) -> Result<Self, SuitesError> {
        let invalid = |message: String| SuitesError::Invalid {
            file: name.to_string(),
            message,
        };
        let parsed: DriversToml = toml::from_str(text).map_err(|e| SuitesError::Parse {
            file: name.to_string(),
            message: e.to_string(),
        })?;
        if parsed.drivers.is_empty() {
            return Err(invalid(
                "declares no driver: add a `[drivers.NAME]` table (see docs/driver-contract.md)"
                    .into(),
            ));
        }
        let mut drivers = BTreeMap::new();
        for (driver_name, mut driver) in parsed.drivers {
            check_name(name, "driver", &driver_name)?;
            check_driver(&driver).map_err(|e| invalid(format!("driver `{driver_name}`: {e}")))?;
            driver.base_dir = base_dir.clone();
            drivers.insert(driver_name, driver);
        }
        Ok(Self {
            name: name.to_string(),
            drivers,
            suites: parsed.suites,
            expected: parsed.expected,
        })
    }
}

/// A declared line bound: at least a small JSON-RPC message, at most what a line reader can
/// sensibly hold.
const MAX_LINE_BYTES_RANGE: std::ops::RangeInclusive<u64> = 1024..=(1 << 30);

/// A declared idle timeout: at least a second (the harness looks at the wire every 100 ms), at
/// most ten minutes (every cell of the driver may wait that long on a silent app-server).
const IDLE_TIMEOUT_SECONDS_RANGE: std::ops::RangeInclusive<u64> = 1..=600;

/// A declared number, if given, must lie in `range` (of `unit`s).
fn within(
    key: &str,
    value: Option<u64>,
    range: std::ops::RangeInclusive<u64>,
    unit: &str,
) -> Result<(), String> {
    match value {
        Some(value) if !range.contains(&value) => Err(format!(
            "{key} = {value}: must be between {} and {} {unit}",
            range.start(),
            range.end()
        )),
        _ => Ok(()),
    }
}

/// What can be checked of a declaration before any cell runs: a command, modes without
/// repeats, placeholders that exist and agree with the codex discovery, environment names.
fn check_driver(driver: &DeclaredDriver) -> Result<(), String> {
    if driver.command.trim().is_empty() {
        return Err("`command` is empty".into());
    }
    if driver.command.contains('\0') || driver.env.values().any(|v| v.contains('\0')) {
        return Err(
            "`command` or an `env` value holds a NUL byte, which no process can be given".into(),
        );
    }
    if driver.profiles.is_empty() {
        return Err(
            "`profiles` is empty: declare the profiles the driver is held to (\"protocol\", \"runner-contract\")"
                .into(),
        );
    }
    for (i, profile) in driver.profiles.iter().enumerate() {
        if driver.profiles[..i].contains(profile) {
            return Err(format!("profile `{}` is listed twice", profile.as_str()));
        }
    }
    within(
        "max_line_bytes",
        driver.max_line_bytes,
        MAX_LINE_BYTES_RANGE,
        "bytes",
    )?;
    within(
        "idle_timeout_seconds",
        driver.idle_timeout_seconds,
        IDLE_TIMEOUT_SECONDS_RANGE,
        "seconds",
    )?;
    if driver.modes.is_empty() {
        return Err("`modes` is empty: declare the run modes the driver can be told to use".into());
    }
    for (i, mode) in driver.modes.iter().enumerate() {
        if driver.modes[..i].contains(mode) {
            return Err(format!("mode `{}` is listed twice", mode.as_str()));
        }
    }
    let sample = Placeholders {
        workspace: "/workspace".into(),
        prompt: "prompt".into(),
        mode: "standard".into(),
        codex: "/tap/codex".into(),
        task: "/task.json".into(),
        repo: "/repo".into(),
        cache: "/cache".into(),
        idle_seconds: 60,
        model: "gpt-5.5".into(),
    };
    driver
        .command_words(&sample)
        .map_err(|e| format!("command: {e}"))?;
    driver
        .environment(&sample)
        .map_err(|e| format!("env: {e}"))?;
    for key in driver.env.keys() {
        let ok = !key.is_empty()
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !key.starts_with(|c: char| c.is_ascii_digit());
        if !ok {
            return Err(format!("env: `{key}` is not a shell variable name"));
        }
    }
    Ok(())
}
