//! Payloads of the protocol-level kinds (schema version 3): what the driver and the app-server
//! exchanged, message by message for requests and answers, and as one bounded summary for the
//! app-server's notifications (a burst of deltas never becomes one event each). Documented in
//! `docs/events.md`, "Protocol exchanges".

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the protocol graders need to know beyond the wire, recorded in `run.started` so a
/// stream can be graded again alone.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProtocolSetup {
    /// The Codex release whose protocol applies (`0.169.0`): the release the fake plays, or the
    /// real Codex's version. `None`: not known, so every answer's shape is `unchecked`.
    #[serde(default)]
    pub release: Option<String>,
    /// What the driver declared in the drivers file.
    #[serde(default)]
    pub declarations: Declarations,
    /// The canary secrets the harness put in the driver's environment, if it planted any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canaries: Option<PlantedCanaries>,
    /// The notifications the release sends only to a client that declared
    /// `capabilities.experimentalApi` at `initialize` (measured from the real binary by
    /// `harness drift`, kept with the fake's persona of the release).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub experimental_only_notifications: Vec<String>,
    /// The choices of the task the driver was given, as the task-binding cases check them
    /// against its requests. `None` in older streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskChoices>,
}

/// What the task chose (beyond the mode, `run.started.launch.mode`), as the harness told the
/// driver: what its requests must carry.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TaskChoices {
    /// The workspace, the thread's working folder: the path the driver was told
    /// (`{workspace}`, `HARNESS_WORKSPACE`) and the same folder as the kernel resolves it
    /// (symbolic links followed), when that differs. Either spelling names it.
    #[serde(default)]
    pub workspace: Vec<String>,
    /// The task's `approvals` (`auto-review`, `never`, `user-accept`, `user-decline`,
    /// `user-default`), when it names them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals: Option<String>,
    /// The model the task names, when it names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// The canary secrets the harness planted in the driver's environment (values starting
/// `ccf-canary-`, random per run): what `protocol-credentials` looks for in what the model's
/// commands printed. The values are never recorded, only a digest committing to them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlantedCanaries {
    /// The variables' names, sorted.
    pub names: Vec<String>,
    /// `sha256:` and the hex SHA-256 of the sorted `NAME=value\n` lines.
    pub digest: String,
}

/// A driver's declarations (drivers file keys): what a `wire` driver can be told, and its bounds.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Declarations {
    /// How the driver reports its own verdict on the run.
    #[serde(default)]
    pub outcome: Option<OutcomeDeclaration>,
    /// The signal that asks the driver to interrupt the running turn.
    #[serde(default)]
    pub interrupt: Option<InterruptSignal>,
    /// How the driver is asked to steer the running turn.
    #[serde(default)]
    pub steer: Option<SteerChannel>,
    /// How the driver recovers after an app-server crash.
    #[serde(default)]
    pub resume: Option<ResumeHow>,
    /// The driver registers dynamic tools on `thread/start` (so `item/tool/call` can reach it).
    #[serde(default)]
    pub dynamic_tools: bool,
    /// The driver owns ChatGPT tokens (so `account/chatgptAuthTokens/refresh` applies).
    #[serde(default)]
    pub chatgpt_tokens: bool,
    /// The driver's declared line bound in bytes: legal lines above it may fail, as a
    /// classified failure.
    #[serde(default)]
    pub max_line_bytes: Option<u64>,
    /// The driver also writes run events (`contract = "events"`): what the wire cannot show,
    /// such as the Retry it offers its user, is then its own events' to say.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub own_events: bool,
}

impl Declarations {
    /// Whether the driver declares `capability`.
    pub fn declares(&self, capability: Capability) -> bool {
        match capability {
            Capability::Outcome => self.outcome.is_some(),
            Capability::Interrupt => self.interrupt.is_some(),
            Capability::Steer => self.steer.is_some(),
            Capability::Resume => self.resume.is_some(),
            Capability::DynamicTools => self.dynamic_tools,
            Capability::ChatgptTokens => self.chatgpt_tokens,
            Capability::MaxLineBytes => self.max_line_bytes.is_some(),
        }
    }
}

/// A declaration a case needs the driver to have made, because the wire alone cannot show it or
/// the harness cannot ask for it otherwise (a case's `requires` in suites.toml; what a grader
/// needs to decide).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    /// `outcome`: the driver's own verdict on its run can be read (its exit status).
    Outcome,
    /// `interrupt`: the harness can ask the driver to interrupt the running turn.
    Interrupt,
    /// `steer`: the harness can ask the driver to steer the running turn.
    Steer,
    /// `resume`: after its app-server dies, the driver relaunches it and resumes the thread.
    Resume,
    /// `dynamic_tools = true`: the driver registers dynamic tools, so `item/tool/call` can
    /// reach it.
    DynamicTools,
    /// `chatgpt_tokens = true`: the driver owns ChatGPT tokens, so
    /// `account/chatgptAuthTokens/refresh` can reach it.
    ChatgptTokens,
    /// `max_line_bytes = N`: the driver bounds the lines it reads, so a line over that bound is
    /// a transport fault to it. Reading every legal line whole is a choice the protocol allows:
    /// to a driver that declares no bound, no line is oversized.
    MaxLineBytes,
}

impl Capability {
    /// The drivers-file key (and value) that declares it.
    pub fn declaration(self) -> &'static str {
        match self {
            Capability::Outcome => "outcome = \"exit-status\"",
            Capability::Interrupt => "interrupt = \"sigint\" (or \"sigterm\")",
            Capability::Steer => "steer = \"stdin-line\"",
            Capability::Resume => "resume = \"relaunch\"",
            Capability::DynamicTools => "dynamic_tools = true",
            Capability::ChatgptTokens => "chatgpt_tokens = true",
            Capability::MaxLineBytes => "max_line_bytes = N (its bound on a line it reads)",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutcomeDeclaration {
    /// Exit status 0: the driver says the task succeeded; anything else: it did not.
    ExitStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InterruptSignal {
    Sigint,
    Sigterm,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SteerChannel {
    /// A line on the driver's stdin.
    StdinLine,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResumeHow {
    /// The driver relaunches the app-server and resumes the same thread.
    Relaunch,
}

/// A JSON-RPC error object, as sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RpcError {
    /// `error.code`, verbatim (`None`: not an integer).
    pub code: Option<i64>,
    /// `error.message`, cut to an excerpt.
    pub message: String,
}

/// A request the driver sent the app-server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientRequest {
    /// The launch of the app-server it went to (1-based, as in the transcript).
    pub launch: u64,
    /// The JSON-RPC id, as text.
    pub id: String,
    pub method: String,
    /// `params.threadId`, `params.turnId`, `params.expectedTurnId`.
    pub thread_id: Option<String>,
    pub turn_id: Option<String>,
    pub expected_turn_id: Option<String>,
    /// `params.sandbox` (the legacy sandbox mode of `thread/start` / `thread/resume`:
    /// `read-only`, `workspace-write`, `danger-full-access`), verbatim.
    pub sandbox: Option<Value>,
    /// `params.sandboxPolicy` (`turn/start`: `{type: readOnly | workspaceWrite | …}`), verbatim.
    pub sandbox_policy: Option<Value>,
    /// `params.input` of `turn/start` and `turn/steer`, part by part (at most 32 parts; empty
    /// for other requests).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<InputPart>,
    /// `params.config.skills.include_instructions` of `thread/start` / `thread/resume` (the
    /// thread configuration's switch for skill instructions), verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill_instructions: Option<Value>,
    /// `params.ephemeral` of `thread/start`: a thread the driver opens on the side (codex-acp's
    /// title generation), not the session's; absent when not sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<bool>,
    /// The thread settings the request sets (`thread/start`, `thread/resume`, `turn/start`,
    /// `thread/settings/update`; sticky for the turns after it), verbatim.
    #[serde(default, skip_serializing_if = "SettingsSent::is_empty")]
    pub settings: SettingsSent,
}

/// The thread settings a request sets, each as sent (`None`: not sent, or `null`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SettingsSent {
    /// `params.cwd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `params.permissions`: a permission profile's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<String>,
    /// `params.approvalPolicy` (`AskForApproval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_policy: Option<Value>,
    /// `params.approvalsReviewer` (`ApprovalsReviewer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals_reviewer: Option<String>,
    /// `params.collaborationMode.mode` (`ModeKind`: `plan`, `default`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collaboration_mode: Option<String>,
    /// `params.model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl SettingsSent {
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }
}

/// One part of a turn's input (`UserInput`): its `type`, and its text (an excerpt) or the
/// skill it names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputPart {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// A turn as a `thread/read` answer lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnStatus {
    pub id: String,
    pub status: String,
}

/// A launch of the app-server, as the tap recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppServerLaunched {
    pub launch: u64,
    /// The names (never the values) of the environment the driver started it with, sorted (at
    /// most 256; the rest counted in `env_names_left_out`).
    pub env_names: Vec<String>,
    #[serde(default)]
    pub env_names_left_out: u64,
    /// The folder the driver started it in (the app-server's own when no `cwd` is sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

/// A notification the driver sent the app-server (`initialized`, or a request sent without an
/// id by mistake).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientNotification {
    pub launch: u64,
    pub method: String,
    /// `params.threadId` and `params.turnId`, when the notification carries them.
    pub thread_id: Option<String>,
    pub turn_id: Option<String>,
}

/// The app-server's answer to a request of the driver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientRequestAnswered {
    pub launch: u64,
    pub id: String,
    /// The method of the request it answers.
    pub method: String,
    /// The error answer; `None` for a result.
    pub error: Option<RpcError>,
    /// `result.thread.id` and `result.turn.id` (or `result.turnId`), when the result names them.
    pub thread_id: Option<String>,
    pub turn_id: Option<String>,
    /// `result.sandbox`: the sandbox policy the app-server reports in force (authoritative).
    pub sandbox: Option<Value>,
    /// Milliseconds from the request to the answer, as the tap saw them.
    pub latency_ms: u64,
    /// `result.thread.cwd` (`thread/read`, `thread/start`, `thread/resume`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// `result.thread.turns` when the answer lists them (`thread/read` with `includeTurns`):
    /// each turn's id and status, at most 64 (the last ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turns: Option<Vec<TurnStatus>>,
    /// `result.codexHome` (`initialize`): the app-server's Codex home.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub codex_home: Option<String>,
    /// `result.approvalPolicy`, `result.approvalsReviewer` and `result.model` (`thread/start`,
    /// `thread/resume`, `thread/fork`): the thread's settings as the app-server took them, its
    /// defaults and the launch's configuration included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_policy: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals_reviewer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

/// A request the app-server sent the driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerRequest {
    pub launch: u64,
    pub id: String,
    pub method: String,
    /// The thread, turn and item it is about (`threadId`/`conversationId`, `turnId`,
    /// `itemId`/`callId`).
    pub thread_id: Option<String>,
    pub turn_id: Option<String>,
    pub item_id: Option<String>,
}

/// Whether a driver's `result` validates against the release's answer schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum SchemaVerdict {
    Valid,
    /// The first schema error, where in the answer (a JSON pointer; empty: the whole result),
    /// and the schema file that says so.
    Invalid {
        error: String,
        path: String,
        schema: String,
    },
    /// Not checked, and why (no release known, no schema for the method). Never a pass for a
    /// check of the answer's shape.
    Unchecked {
        why: String,
    },
}

/// The driver's answer to a server request — or to an id the app-server never asked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerRequestAnswered {
    pub launch: u64,
    pub id: String,
    /// The method of the request it answers; `None` when the app-server never sent a request
    /// with this id on this launch.
    pub method: Option<String>,
    /// 1 for the first answer to this id, 2 for a second, …
    pub answer_number: u32,
    /// The error answer; `None` for a result.
    pub error: Option<RpcError>,
    /// For approvals: `result.decision` (a string, or the key of an object decision).
    pub decision: Option<String>,
    /// The result, as JSON text cut to an excerpt.
    pub result_excerpt: Option<String>,
    /// Milliseconds from the request to this answer (`None` for an id never asked).
    pub latency_ms: Option<u64>,
    /// A result's shape against the release's schema (`None` for an error answer).
    pub schema: Option<SchemaVerdict>,
}

/// The driver closed the app-server's stdin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StdinClosed {
    pub launch: u64,
}

/// An app-server launch ended, as the tap recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppServerExited {
    pub launch: u64,
    pub status: Option<i64>,
    pub signal: Option<i64>,
    /// The app-server could not be started or waited for.
    pub error: Option<String>,
    /// Whether the driver had closed its stdin before: `false` is an app-server that went away
    /// on its own (a crash), unless the driver stopped it with a signal (`after_driver_signal`).
    pub after_stdin_closed: bool,
    /// Whether the driver had sent its `codex` a signal before (SIGTERM, SIGINT or SIGHUP, which
    /// the tap passes on) without closing its stdin first: stopping the app-server so is the
    /// driver's doing, as closing its stdin is. Absent in older streams.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub after_driver_signal: bool,
}

impl AppServerExited {
    /// Whether the driver ended this launch itself (closed its stdin or signalled it), rather
    /// than the app-server going away on its own.
    pub fn ended_by_the_driver(&self) -> bool {
        self.after_stdin_closed || self.after_driver_signal
    }
}

/// How many notifications of one method the app-server sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotificationCount {
    pub method: String,
    pub count: u64,
    /// Whether the release has this notification (`None`: no release known).
    pub known: Option<bool>,
    /// How many were checked against the release's schema (the first few of each method).
    pub checked: u64,
    /// How many of the checked ones did not validate (an unknown enum value, item type, …).
    pub invalid: u64,
    /// How many carried top-level `params` fields (or message fields) the schema does not name.
    pub extra_fields: u64,
}

/// Every notification the app-server sent in the run, one line per method (written once, after
/// the other wire events).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerNotifications {
    /// The release they were checked against.
    pub release: Option<String>,
    /// Sorted by method; at most a bounded number of methods.
    pub methods: Vec<NotificationCount>,
    /// Notifications of methods past that bound (counted, not listed).
    pub unlisted: u64,
    /// The longest line the app-server sent, in bytes (a kept line's JSON, or the size the tap
    /// noted for a line too long to keep).
    pub largest_line_bytes: u64,
    /// The app-server's output ended inside a line (its driver let go of it, or it exited):
    /// the bytes of that line the harness read, a lower bound of its size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_line_bytes: Option<u64>,
    /// Notifications of the release the app-server does not owe this client, sorted: in every
    /// launch the driver initialized, one it opted out of (`optOutNotificationMethods`) or one
    /// the release sends only to clients that declared `experimentalApi`, which it did not.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_owed: Vec<String>,
}

/// Events the translator did not write because a bound was reached: graders that need every
/// one of them cannot decide.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotRecorded {
    /// The kind of event left out (`protocol.client-request`, …).
    pub what: String,
    pub count: u64,
}

/// How the driver's process ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "how", rename_all = "kebab-case")]
pub enum DriverEnded {
    /// It exited on its own with this status.
    Exited { code: i32 },
    /// A signal ended it (not the harness's bound).
    Signaled { signal: i32 },
    /// The harness killed it at the run's bound: it ended nothing itself.
    KilledAtBound { reason: String },
    /// It could not be started.
    NotStarted { error: String },
}
