//! The shape of `suites.toml`.

pub use graders::events::Capability;
use graders::events::{
    Declarations, InterruptSignal, Mode, OutcomeDeclaration, PolicyGeneration, ResumeHow,
    SteerChannel, Target,
};
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
    /// The reference driver (`driver::reference`), run as its own process (`harness drive`).
    Reference,
    /// An external driver command (`driver::external`).
    External,
    /// A driver declared in a drivers file (`RunnerSpec::declared`), run unmodified and graded
    /// from the wire through the tap.
    Declared,
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
    /// For `app_server = "fake"`: the Codex release the fake plays (one it has a persona for,
    /// `fake_app_server::persona`); the pin when absent.
    #[serde(default)]
    pub plays: Option<String>,
    /// For `driver = "external"`: a command line, run as a declared driver's is; `{repo}` stands for the repository
    /// root.
    #[serde(default)]
    pub driver_cmd: Option<String>,
    /// For `driver = "declared"`: the declared driver (from a drivers file).
    #[serde(default)]
    pub declared: Option<DeclaredDriver>,
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
    /// Whose obligations the suite checks.
    pub profile: Profile,
    /// How many cells the matrix must expand to, when a file wants that checked; the shipped
    /// suites leave it out: their size is derived and their cell list is a reviewed snapshot.
    #[serde(default)]
    pub expected_cells: Option<usize>,
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
    /// The shipped case of the same suite whose grader grades this one (default: this case's own
    /// name). Lets a drivers file add cases of its own: the graders know only the shipped cases.
    #[serde(default)]
    pub grade_as: Option<String>,
    /// Overrides the environment's target.
    #[serde(default)]
    pub target: Option<Target>,
    /// What a declared driver must declare for the case to apply to it (a driver that does not
    /// is not applicable, with the key to declare named).
    #[serde(default)]
    pub requires: Vec<Capability>,
    pub network: bool,
    /// The harness plants canary files in the app-server's `HOME` (the Codex home's `auth.json`
    /// and `config.toml`, a host secret) and records their digests after the run.
    #[serde(default)]
    pub home_canaries: bool,
    /// The rest of the driver's task (`driver::task::Task` fields other than the mode).
    #[serde(default)]
    pub task: toml::Table,
}

/// Whose obligations a suite checks. A case belongs to exactly one profile: its suite's.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, serde::Serialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Profile {
    /// What every client of `codex app-server` owes the protocol: each case derived from the
    /// release's generated JSON Schema or the real Codex's observed behaviour. The default for
    /// declared drivers.
    Protocol,
    /// The contract of the runner whose incident started this project (semantic result tools,
    /// Retry offered, launch identity across relaunches, planning profiles for external
    /// sandboxes, its transport-closing policy): opt-in for declared drivers.
    RunnerContract,
}

impl Profile {
    pub const ALL: [Profile; 2] = [Profile::Protocol, Profile::RunnerContract];

    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Protocol => "protocol",
            Profile::RunnerContract => "runner-contract",
        }
    }
}

/// The bound on a line the harness's own drivers read (the reference driver's JSON-RPC client,
/// `driver::rpc::Limits`, and the example external driver): 4 MiB.
pub const HARNESS_OWN_MAX_LINE_BYTES: u64 = 4 * 1024 * 1024;

/// One cross product: every runner × environment × case listed.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatrixBlock {
    pub runners: Vec<String>,
    pub environments: Vec<String>,
    pub cases: Vec<String>,
    /// Whether the runners added at run time (a drivers file's, `--codex VERSION`'s) join this
    /// block as they join every other: `false` keeps a costly block to the runners it lists.
    #[serde(default = "generated_runners_join")]
    pub generated_runners: bool,
}

fn generated_runners_join() -> bool {
    true
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

/// How a declared driver finds the `codex` program. Whatever it names, the harness puts its
/// wire tap there (the `tap` crate), which relays to the cell's app-server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodexDiscovery {
    /// `"path"`: the first `codex` on `PATH` (the harness puts a folder holding the tap as
    /// `codex` first on the driver's `PATH`).
    Path,
    /// `"env:NAME"`: the environment variable `NAME` (e.g. `CODEX_PATH`, `CODEX_BIN`).
    Env(String),
    /// `"arg"`: `{codex}` in the command line.
    Arg,
}

impl CodexDiscovery {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "path" => Ok(Self::Path),
            "arg" => Ok(Self::Arg),
            _ => match text.strip_prefix("env:") {
                Some(name)
                    if !name.is_empty()
                        && name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_')
                        && !name.starts_with(|c: char| c.is_ascii_digit()) =>
                {
                    Ok(Self::Env(name.to_string()))
                }
                _ => Err(format!(
                    "codex = `{text}`: must be \"path\", \"arg\" or \"env:NAME\" (NAME a shell variable name)"
                )),
            },
        }
    }
}

impl<'de> Deserialize<'de> for CodexDiscovery {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// What a declared driver gives the harness besides its wire traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DriverContract {
    /// Nothing: it is graded from the wire alone.
    #[default]
    Wire,
    /// It also writes run events to `HARNESS_EVENTS` (docs/driver-contract.md): an optional
    /// second source, compared with the wire; the wire wins.
    Events,
}

/// Who answers a command's or a file change's request to escalate, and how: a task's
/// `approvals` (`driver::task::Task::approvals`) and what a declared driver can be told. The
/// published drivers' launch scripts (`drivers/`) map each to the driver's own settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Approvals {
    /// `approvalsReviewer: "auto_review"`: Codex's automatic reviewer (a model request)
    /// decides; the driver is sent no approval request.
    AutoReview,
    /// `approvalPolicy: "never"`: nothing can escalate.
    Never,
    /// The reviewer is the user: the driver is asked and accepts.
    UserAccept,
    /// The reviewer is the user: the driver is asked and refuses.
    UserDecline,
    /// The reviewer is the user: the driver is asked, and nobody told it how to answer, so its
    /// own default handling decides (a read-only run's user never agreed to a write).
    UserDefault,
}

impl Approvals {
    pub fn name(self) -> &'static str {
        match self {
            Self::AutoReview => "auto-review",
            Self::Never => "never",
            Self::UserAccept => "user-accept",
            Self::UserDecline => "user-decline",
            Self::UserDefault => "user-default",
        }
    }
}

/// A driver declared outside the harness (`harness run --drivers FILE`), or shipped with it.
/// Each one is crossed with the fake and with every real-Codex runner.
///
/// Its declaration keys (`outcome` … `max_line_bytes`) are the drivers file's edge of
/// `graders::events::Declarations`, converted once by [`DeclaredDriver::declarations`]; they are
/// not a flattened `Declarations` because the formats differ (`own_events` is no key, it follows
/// from `contract`) and because serde's `flatten` under `deny_unknown_fields` loses the drivers
/// file's error positions and the list of known keys an unknown one is refused with.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeclaredDriver {
    #[serde(default)]
    pub about: Option<String>,
    /// A command line: words split by the shell's quoting rules, run without a shell
    /// (`crate::declared`). Placeholders: `{workspace}`, `{prompt}`, `{mode}`, `{model}`,
    /// `{codex}`, `{task}` (the task envelope's path), `{repo}` (the harness repository root),
    /// `{cache}` (the harness cache, where `harness provision` installs published drivers).
    pub command: String,
    pub codex: CodexDiscovery,
    #[serde(default)]
    pub contract: DriverContract,
    /// The run modes the driver can be told to use; a case in another mode is not applicable.
    pub modes: Vec<Mode>,
    /// The driver can take the task's plan reviews (approve / revise) — with `contract = "wire"`
    /// only a driver that reads the task envelope can.
    #[serde(default)]
    pub plan_reviews: bool,
    /// The driver can answer the model's questions from the task's `answers`.
    #[serde(default)]
    pub answers: bool,
    /// The task `approvals` the driver can be told to use (it reads them from the task
    /// envelope); a case asking for another is not applicable. Empty: the driver answers
    /// escalations its own way only, so every case that names `approvals` is not applicable.
    #[serde(default)]
    pub approvals: Vec<Approvals>,
    /// Extra environment variables for the driver's process (values may use placeholders).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The profiles the driver is held to (default: the protocol's only).
    #[serde(default = "default_profiles")]
    pub profiles: Vec<Profile>,
    /// How the driver's own verdict on its run is read; without it, cases about turn outcomes
    /// are not applicable.
    #[serde(default)]
    pub outcome: Option<OutcomeDeclaration>,
    /// The signal that asks the driver to interrupt its running turn.
    #[serde(default)]
    pub interrupt: Option<InterruptSignal>,
    /// How the harness asks the driver to steer its running turn.
    #[serde(default)]
    pub steer: Option<SteerChannel>,
    /// What the driver does when its app-server dies.
    #[serde(default)]
    pub resume: Option<ResumeHow>,
    /// The driver registers dynamic tools on `thread/start`.
    #[serde(default)]
    pub dynamic_tools: bool,
    /// The driver owns ChatGPT tokens (answers `account/chatgptAuthTokens/refresh`).
    #[serde(default)]
    pub chatgpt_tokens: bool,
    /// The longest line the driver reads, in bytes, if it has a bound: a legal line above it may
    /// fail the run, as a classified failure.
    #[serde(default)]
    pub max_line_bytes: Option<u64>,
    /// How long the driver waits, in seconds, for its app-server to say anything before it gives
    /// up on its own: the harness then bounds the driver's silence on the wire by this plus a
    /// margin, instead of its own default (so a `hang` cell lasts as long as the driver's own
    /// wait, and a driver with a longer wait is not killed before it classifies the hang).
    #[serde(default)]
    pub idle_timeout_seconds: Option<u64>,
    /// The folder the driver's process starts in and its command line's relative paths are
    /// resolved from: the drivers file's folder (set when the file is loaded, not a key of it;
    /// `None` for a driver declared in suites.toml, which runs in the workspace).
    #[serde(skip)]
    pub base_dir: Option<std::path::PathBuf>,
}

fn default_profiles() -> Vec<Profile> {
    vec![Profile::Protocol]
}

impl DeclaredDriver {
    /// The harness's own drivers run as processes (the reference driver's `harness drive`, the
    /// example external driver): under the events contract, `codex` first on `PATH`, every
    /// mode, plan reviews and answers from the task, held to both profiles, registering the
    /// result tools as dynamic tools, exiting 0 exactly when the run succeeded. The reference
    /// driver is told to interrupt by SIGINT and to steer by a stdin line, and recovers after a
    /// crash when its task asks (`resume_on_crash`, as every case that needs `resume` does); the
    /// example external driver is in no block of a case that needs these.
    pub fn harness_own(command: String) -> Self {
        Self {
            about: None,
            command,
            codex: CodexDiscovery::Path,
            contract: DriverContract::Events,
            modes: vec![Mode::Planning, Mode::Standard, Mode::Ask],
            plan_reviews: true,
            answers: true,
            approvals: vec![],
            env: BTreeMap::new(),
            profiles: Profile::ALL.to_vec(),
            // Both exit 0 exactly when their run succeeded.
            outcome: Some(OutcomeDeclaration::ExitStatus),
            interrupt: Some(InterruptSignal::Sigint),
            steer: Some(SteerChannel::StdinLine),
            resume: Some(ResumeHow::Relaunch),
            dynamic_tools: true,
            chatgpt_tokens: false,
            max_line_bytes: Some(HARNESS_OWN_MAX_LINE_BYTES),
            idle_timeout_seconds: None,
            base_dir: None,
        }
    }

    /// What the driver declared, as the graders read it (`run.started.protocol`).
    pub fn declarations(&self) -> Declarations {
        Declarations {
            outcome: self.outcome,
            interrupt: self.interrupt,
            steer: self.steer,
            resume: self.resume,
            dynamic_tools: self.dynamic_tools,
            chatgpt_tokens: self.chatgpt_tokens,
            max_line_bytes: self.max_line_bytes,
            own_events: self.contract == DriverContract::Events,
        }
    }

    /// Whether the driver declares `capability`.
    pub fn declares(&self, capability: Capability) -> bool {
        self.declarations().declares(capability)
    }
}
