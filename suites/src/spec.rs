//! The shape of `suites.toml`.

use graders::events::{Mode, PolicyGeneration, Target};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuitesFile {
    pub runners: BTreeMap<String, RunnerSpec>,
    pub environments: BTreeMap<String, EnvironmentSpec>,
    pub suites: BTreeMap<String, SuiteSpec>,
}

/// Which program drives the app-server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DriverKind {
    /// The reference driver, in process (`harness::driver::run_reference`).
    Reference,
    /// An external driver command (`harness::driver::external::run_external`).
    External,
}

/// Which app-server the driver launches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AppServerKind {
    /// The fake app-server, embedded in the running binary.
    Fake,
    /// The pinned real Codex, offline, behind the mock model API.
    Codex,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunnerSpec {
    pub about: String,
    pub driver: DriverKind,
    pub app_server: AppServerKind,
    pub policy: PolicyGeneration,
    /// For `app_server = "codex"`: the npm version of `@openai/codex`.
    #[serde(default)]
    pub codex_version: Option<String>,
    /// For `driver = "external"`: a `sh -c` command line; `{repo}` stands for the repository
    /// root.
    #[serde(default)]
    pub driver_cmd: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentSpec {
    pub about: String,
    /// The execution target the driver is told about in this environment.
    pub target: Target,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuiteSpec {
    pub about: String,
    /// How many cells the matrix must expand to.
    pub expected_cells: usize,
    pub cases: BTreeMap<String, CaseSpec>,
    pub matrix: Vec<MatrixBlock>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseSpec {
    pub about: String,
    /// `builtin:NAME` (a fake app-server built-in) or `file:NAME` (from `suites/scenarios/`).
    pub scenario: String,
    /// For real-Codex runners, when `scenario` scripts server answers (e.g. a `thread/start`
    /// error) that only the fake can play: the scenario whose model script Codex plays instead.
    #[serde(default)]
    pub codex_scenario: Option<String>,
    pub mode: Mode,
    /// Overrides the environment's target.
    #[serde(default)]
    pub target: Option<Target>,
    pub network: bool,
    /// The rest of the driver's task (`harness::task::Task` fields other than the mode).
    #[serde(default)]
    pub task: toml::Table,
}

/// One cross product: every runner × environment × case listed.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixBlock {
    pub runners: Vec<String>,
    pub environments: Vec<String>,
    pub cases: Vec<String>,
}

/// A scenario reference, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScenarioRef {
    Builtin(String),
    File(String),
}

impl ScenarioRef {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.split_once(':') {
            Some(("builtin", name)) if !name.is_empty() => Ok(Self::Builtin(name.to_string())),
            Some(("file", name)) if !name.is_empty() => Ok(Self::File(name.to_string())),
            _ => Err(format!(
                "scenario `{text}` must be `builtin:NAME` or `file:NAME`"
            )),
        }
    }
}
