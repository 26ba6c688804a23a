//! The scenario format (documented in `docs/scenarios.md`): how the fake server answers each
//! method, which faults it injects, the environment facts of the simulated sandbox, and the model
//! script of each turn.

pub mod builder;
mod builtin;
pub mod codex_tools;
pub mod model;
pub mod server_steps;
mod threads;
mod validate;

use model::{ModelStep, ModelTurn};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use builder::ScenarioBuilder;
pub use builtin::BUILTIN_NAMES;
pub use server_steps::{ForeignScope, ServerAction, ServerStep};
pub use threads::{ThreadSelector, TurnOrigin};

/// A whole scenario: server behaviour, environment facts and the model script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Free text naming the scenario (built-ins use their built-in name).
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Per JSON-RPC method (e.g. `"thread/start"`): how the server answers it.
    #[serde(default)]
    pub methods: BTreeMap<String, MethodBehaviour>,
    /// Per notification method (e.g. `"item/completed"`): transport faults on that notification.
    #[serde(default)]
    pub notifications: BTreeMap<String, NotificationFault>,
    /// Facts of the simulated environment (used by the simulated sandbox mode).
    #[serde(default)]
    pub environment: EnvironmentFacts,
    /// Limits on how long the fake waits for the client.
    #[serde(default)]
    pub limits: Limits,
    /// Turn N of a scripted thread plays `turns[N]`; turns past the end play
    /// [`Scenario::default_turn`].
    #[serde(default)]
    pub turns: Vec<ScenarioTurn>,
    /// Which threads play `turns`; every other thread gets the plain reply
    /// ([`Scenario::default_turn`]), as a side thread of a driver (a title generator) would get
    /// from a real model.
    #[serde(default)]
    pub threads: ThreadSelector,
    /// Every message the fake writes carries fields no release defines (at its top level, in
    /// its `params` / `result`, and in the `item`, `turn` and `thread` objects there): a
    /// forward-compatibility probe.
    #[serde(default, skip_serializing_if = "is_false")]
    pub extra_fields: bool,
    /// The app-server's own log filter (levels of [`LOG_LEVELS`], or `target=level`
    /// directives), as the harness sets it in the real Codex's environment (`RUST_LOG`): Codex
    /// then writes its log on stderr as it works (measured with 0.169, one short turn: none
    /// without it, about 470 KB at `info`, 1.4 MB at `trace`, most of it before `thread/start`
    /// is answered). The fake has no log of its own: it writes [`FAKE_LOG_BYTES`] of stderr at
    /// each turn's start in its place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_server_log: Option<String>,
}

/// The levels `app_server_log` may name.
pub const LOG_LEVELS: [&str; 5] = ["error", "warn", "info", "debug", "trace"];

/// What the fake writes on stderr for a turn of a scenario with `app_server_log`: about what
/// the real Codex logs at `trace` for a short turn.
pub const FAKE_LOG_BYTES: usize = 1 << 20;

fn is_false(value: &bool) -> bool {
    !value
}

/// How the server answers one method. Faults apply in this order: `delay_ms`, then exactly one of
/// `hang`, `crash_after_bytes`, `malformed`, or the answer (an `error`, a `result` override, or the
/// real answer), written as `oversized_bytes` padding and/or `split_writes` chunks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct MethodBehaviour {
    /// Apply this behaviour only to the first N calls of the method (then answer normally).
    #[serde(default)]
    pub times: Option<u32>,
    /// Answer with this error instead of the real answer.
    #[serde(default)]
    pub error: Option<RpcErrorSpec>,
    /// Answer with this result instead of the real one, for any method Codex knows, including
    /// one the fake does not implement.
    #[serde(default)]
    pub result: Option<serde_json::Value>,
    /// The same as `result`, written as JSON text: the way to answer JSON `null` (TOML has no
    /// null), e.g. `result_json = "null"`.
    #[serde(default)]
    pub result_json: Option<String>,
    /// Wait this long before answering.
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// Never answer (the server keeps serving other requests).
    #[serde(default)]
    pub hang: bool,
    /// Write only the first N bytes of the answer line, then exit with code 101.
    #[serde(default)]
    pub crash_after_bytes: Option<usize>,
    /// Write a line that is not JSON instead of the answer.
    #[serde(default)]
    pub malformed: bool,
    /// Pad the answer line (with JSON whitespace) to at least this many bytes.
    #[serde(default)]
    pub oversized_bytes: Option<usize>,
    /// Write the answer line in this many chunks, flushed separately.
    #[serde(default)]
    pub split_writes: Option<usize>,
    /// `turn/start` only: write the answer after the turn it started has completed (its
    /// `turn/started` … `turn/completed` come first; bounded by `limits.hang_ms`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub answer_after_turn: bool,
    /// `thread/resume` only: answer with another thread id, as a resume that silently forks
    /// the thread (the thread is known by the new id from then on).
    #[serde(default, skip_serializing_if = "is_false")]
    pub fork_thread: bool,
    /// `thread/read` only: the turns its answer lists, instead of the thread's own — for a driver
    /// that reconciles a resumed thread against the turn it saved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns_shown: Option<TurnsShown>,
}

/// What a scripted `thread/read` shows of the thread's turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TurnsShown {
    /// No turn at all: the turn a driver saved is missing.
    None,
    /// The thread's turns and another one, in progress.
    AnotherActive,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpcErrorSpec {
    pub code: i64,
    pub message: String,
}

/// Faults on one notification method.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct NotificationFault {
    /// Send every such notification twice.
    #[serde(default)]
    pub duplicate: bool,
    /// Hold every such notification back and send it after the next outgoing message.
    #[serde(default)]
    pub out_of_order: bool,
    /// Never send it.
    #[serde(default)]
    pub drop: bool,
}

/// What the simulated sandbox believes about the machine. In real mode these are ignored: the
/// kernel decides.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct EnvironmentFacts {
    /// Configuring loopback in a new network namespace fails (`bwrap: loopback: Failed
    /// RTM_NEWADDR: Operation not permitted`), e.g. a runtime refusing rtnetlink.
    #[serde(default)]
    pub loopback_refused: bool,
    /// Writing the uid map fails (`bwrap: setting up uid map: Permission denied`).
    #[serde(default)]
    pub uid_map_refused: bool,
    /// No user namespaces can be created (ENOSPC).
    #[serde(default)]
    pub user_namespaces_unavailable: bool,
    /// The `codex-linux-sandbox` helper alias is missing (`bwrap: execvp codex-linux-sandbox: No
    /// such file or directory`).
    #[serde(default)]
    pub helper_missing: bool,
}

impl EnvironmentFacts {
    pub fn is_healthy(&self) -> bool {
        *self == Self::default()
    }
}

/// Bounds on waiting for the client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// How long a server request (approval, dynamic tool call) waits for the client's answer.
    #[serde(default = "default_client_answer_ms")]
    pub client_answer_ms: u64,
    /// How long a `hang` fault lasts before the process exits (a hang must never be endless).
    #[serde(default = "default_hang_ms")]
    pub hang_ms: u64,
    /// How long one model shell command may run before it is killed.
    #[serde(default = "default_command_ms")]
    pub command_ms: u64,
    /// How many turns the server starts on its own while a goal the model created is active
    /// (Codex stops at the goal's budget; the fake at this count).
    #[serde(default = "default_goal_turns")]
    pub goal_turns: u32,
}

fn default_client_answer_ms() -> u64 {
    120_000
}
fn default_hang_ms() -> u64 {
    600_000
}
fn default_command_ms() -> u64 {
    60_000
}
fn default_goal_turns() -> u32 {
    5
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            client_answer_ms: default_client_answer_ms(),
            hang_ms: default_hang_ms(),
            command_ms: default_command_ms(),
            goal_turns: default_goal_turns(),
        }
    }
}

/// One turn: the model script plus what goes wrong on the server side during it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ScenarioTurn {
    #[serde(default)]
    pub steps: Vec<ModelStep>,
    /// A transport fault injected after step `after_step` (0-based; before any step if absent).
    #[serde(default)]
    pub fault: Option<TurnFault>,
    /// The model request fails after the steps (a `response.failed` for the real Codex): the
    /// turn ends `failed` with this message.
    #[serde(default)]
    pub fail: Option<TurnFailure>,
    /// The server ends the turn `interrupted` on its own after the steps.
    #[serde(default, skip_serializing_if = "is_false")]
    pub interrupted: bool,
    /// How many times the model stream of the turn's first response is cut before an attempt
    /// gets through: the real Codex retries each cut (an `error` with willRetry: true,
    /// `Reconnecting... N/5`, measured with 0.169); the fake sends those errors before the
    /// turn's first step. At most [`MAX_STREAM_DROPS`], Codex's own stream retries.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stream_drops: u32,
    /// What the server does on its own during the turn ([`ServerStep`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_steps: Vec<ServerStep>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnFault {
    pub kind: TurnFaultKind,
    #[serde(default)]
    pub after_step: Option<usize>,
    /// Size of the line for `oversized-line`.
    #[serde(default)]
    pub bytes: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TurnFaultKind {
    /// The process exits (code 101) in the middle of the turn.
    Crash,
    /// The turn stops making progress (bounded by `limits.hang_ms`, then the process exits).
    Hang,
    /// A line that is not JSON is written, then the turn goes on.
    GarbageLine,
    /// A valid but oversized notification line is written, then the turn goes on.
    OversizedLine,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnFailure {
    pub message: String,
    /// Whether the failure is announced by an `error` notification first (the real Codex
    /// always does; `false` makes a failed `turn/completed` come alone).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub error_notification: bool,
}

/// Codex's default `stream_max_retries`: a sixth cut fails the turn.
pub const MAX_STREAM_DROPS: u32 = 5;

fn is_zero(value: &u32) -> bool {
    *value == 0
}

fn yes() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

/// A scenario that cannot be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("unknown built-in scenario `{0}` (known: {known})", known = BUILTIN_NAMES.join(", "))]
    UnknownBuiltin(String),
    #[error("cannot read scenario file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid scenario file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("invalid scenario {origin}: {message}")]
    Invalid { origin: String, message: String },
}

impl MethodBehaviour {
    /// The scripted result (`result`, else `result_json` parsed), if the scenario sets one.
    pub fn scripted_result(&self) -> Option<serde_json::Value> {
        self.result.clone().or_else(|| {
            self.result_json
                .as_deref()
                .and_then(|text| serde_json::from_str(text).ok())
        })
    }
}

impl Scenario {
    /// The built-in scenario `name` (see [`BUILTIN_NAMES`]).
    pub fn builtin(name: &str) -> Result<Self, ScenarioError> {
        let text = builtin::text(name).ok_or_else(|| ScenarioError::UnknownBuiltin(name.into()))?;
        Self::from_toml_str(text, Path::new(&format!("builtin:{name}")))
    }

    /// Load a scenario file (TOML). Unknown keys fail, naming the key, the file and the line.
    pub fn from_file(path: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_toml_str(&text, path)
    }

    /// `builtin:NAME` or a file path.
    pub fn from_spec(spec: &str) -> Result<Self, ScenarioError> {
        match spec.strip_prefix("builtin:") {
            Some(name) => Self::builtin(name),
            None => Self::from_file(Path::new(spec)),
        }
    }

    /// Parse TOML text; `origin` names the file in errors.
    pub fn from_toml_str(text: &str, origin: &Path) -> Result<Self, ScenarioError> {
        let scenario: Scenario = toml::from_str(text).map_err(|err| ScenarioError::Parse {
            path: origin.to_path_buf(),
            message: describe_toml_error(text, &err),
        })?;
        scenario.validate(&origin.display().to_string())?;
        Ok(scenario)
    }

    fn validate(&self, origin: &str) -> Result<(), ScenarioError> {
        validate::validate(self).map_err(|message| ScenarioError::Invalid {
            origin: origin.to_string(),
            message,
        })
    }

    /// Why the mock model API in front of the real Codex cannot play this scenario (the real
    /// Codex decides these things itself), or `None` when it can.
    pub fn fake_only(&self) -> Option<String> {
        if let Some(method) = self.methods.keys().next() {
            return Some(format!("it scripts the answer to `{method}`"));
        }
        if let Some(method) = self.notifications.keys().next() {
            return Some(format!("it injects faults on `{method}` notifications"));
        }
        if self.extra_fields {
            return Some("it adds unknown fields to every message".into());
        }
        for (index, turn) in self.turns.iter().enumerate() {
            if let Some(fault) = &turn.fault {
                return Some(format!(
                    "turn {index} injects a {:?} transport fault",
                    fault.kind
                ));
            }
            if turn.interrupted {
                return Some(format!("turn {index} is interrupted by the server"));
            }
            if turn.fail.as_ref().is_some_and(|f| !f.error_notification) {
                return Some(format!(
                    "turn {index} fails without an `error` notification"
                ));
            }
            if let Some(step) = turn.server_steps.first() {
                return Some(format!(
                    "turn {index} has a server step ({:?})",
                    step.action
                ));
            }
        }
        None
    }

    /// The server requests its server steps send (`request` steps): a release that lacks one
    /// cannot play the scenario (e.g. `currentTime/read` after 0.169).
    pub fn server_requests(&self) -> Vec<&str> {
        self.turns
            .iter()
            .flat_map(|t| &t.server_steps)
            .filter_map(|s| match &s.action {
                ServerAction::Request { method, .. } => Some(method.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Whether the scenario sends, on purpose, messages no release's schema allows (unknown
    /// methods, item types, enum values).
    pub fn off_schema(&self) -> bool {
        self.turns
            .iter()
            .flat_map(|t| &t.server_steps)
            .any(|s| s.action.off_schema())
    }

    /// The model script alone (what a mock model API plays for the real Codex).
    pub fn model_script(&self) -> Vec<ModelTurn> {
        self.turns
            .iter()
            .map(|turn| ModelTurn {
                steps: turn.steps.clone(),
            })
            .collect()
    }

    /// The turn played when the script has no turn N: the model just answers.
    pub fn default_turn() -> ScenarioTurn {
        ScenarioTurn {
            steps: vec![ModelStep::Message {
                text: "Done.".to_string(),
            }],
            ..ScenarioTurn::default()
        }
    }

    /// The turn a thread plays as its turn `index`: the script's, when the selector covers it.
    pub fn turn_for(&self, origin: TurnOrigin, index: usize) -> ScenarioTurn {
        if !self.threads.scripts(origin) {
            return Self::default_turn();
        }
        self.turns
            .get(index)
            .cloned()
            .unwrap_or_else(Self::default_turn)
    }

    /// The behaviour configured for `method`, if any.
    pub fn method(&self, method: &str) -> Option<&MethodBehaviour> {
        self.methods.get(method)
    }
}

/// ` (did you mean `X`?)` for the known name nearest to `name` by edit distance, when one is
/// close (a typo, not a different name).
pub(crate) fn closest<'a>(name: &str, known: impl Iterator<Item = &'a str>) -> String {
    let best = known
        .map(|k| (edit_distance(name, k), k))
        .min_by_key(|(d, _)| *d);
    match best {
        Some((distance, k)) if distance <= 3 => format!(" (did you mean `{k}`?)"),
        _ => String::new(),
    }
}

// Levenshtein distance on a few dozen short names: ten lines, not worth a crate.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

/// toml's message already names the key and shows the offending line; add the line number
/// explicitly so the error reads `line N` even when the snippet is trimmed.
fn describe_toml_error(text: &str, err: &toml::de::Error) -> String {
    let message = err.message().trim().to_string();
    match err.span() {
        Some(span) => {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            let source_line = text.lines().nth(line - 1).unwrap_or("").trim();
            format!("line {line}: {message} (at `{source_line}`)")
        }
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_loads() {
        for name in BUILTIN_NAMES {
            let scenario = Scenario::builtin(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(scenario.name, *name);
        }
    }

    #[test]
    fn unknown_key_names_key_file_and_line() {
        let text = "name = \"x\"\n\n[methods.\"thread/start\"]\ndelay_ms = 1\nbogus_key = 2\n";
        let err = Scenario::from_toml_str(text, Path::new("scen.toml")).unwrap_err();
        let shown = err.to_string();
        assert!(shown.contains("scen.toml"), "{shown}");
        assert!(shown.contains("bogus_key"), "{shown}");
        assert!(shown.contains("line 5"), "{shown}");
    }

    #[test]
    fn unknown_step_field_fails() {
        let text = "[[turns]]\nsteps = [{ step = \"message\", text = \"hi\", loud = true }]\n";
        let err = Scenario::from_toml_str(text, Path::new("s.toml")).unwrap_err();
        assert!(err.to_string().contains("loud"), "{err}");
    }

    #[test]
    fn fault_after_missing_step_is_rejected() {
        let text = "[[turns]]\nsteps = []\nfault = { kind = \"crash\", after_step = 0 }\n";
        let err = Scenario::from_toml_str(text, Path::new("s.toml")).unwrap_err();
        assert!(err.to_string().contains("after_step"), "{err}");
    }

    #[test]
    fn a_misspelled_method_or_notification_is_named() {
        let text = "[methods.\"thread/strat\"]\ndelay_ms = 1\n";
        let err = Scenario::from_toml_str(text, Path::new("s.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("`thread/strat` is not a method"), "{err}");
        assert!(err.contains("did you mean `thread/start`"), "{err}");
        let text = "[notifications.\"item/complete\"]\ndrop = true\n";
        let err = Scenario::from_toml_str(text, Path::new("s.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("`item/complete` is not a notification"),
            "{err}"
        );
        assert!(err.contains("did you mean `item/completed`"), "{err}");
    }

    #[test]
    fn a_method_the_fake_does_not_implement_and_null_results_are_accepted() {
        let text = "[methods.\"thread/name/set\"]\nresult_json = \"null\"\n";
        let scenario = Scenario::from_toml_str(text, Path::new("s.toml")).unwrap();
        assert_eq!(
            scenario.methods["thread/name/set"].scripted_result(),
            Some(serde_json::Value::Null)
        );
        let text = "[methods.\"model/list\"]\nresult_json = \"{nope\"\n";
        let err = Scenario::from_toml_str(text, Path::new("s.toml")).unwrap_err();
        assert!(err.to_string().contains("result_json is not JSON"), "{err}");
    }

    #[test]
    fn unknown_builtin_is_an_error() {
        let err = Scenario::builtin("nope").unwrap_err();
        assert!(err.to_string().contains("plan-write-refused"), "{err}");
    }

    #[test]
    fn model_script_drops_server_faults() {
        let scenario = Scenario::builtin("crash-mid-turn").unwrap();
        let script = scenario.model_script();
        assert_eq!(script.len(), scenario.turns.len());
        assert_eq!(script[0].steps, scenario.turns[0].steps);
    }
}
