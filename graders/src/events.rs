//! The run-event contract: one JSONL stream per run, one event per line.
//!
//! This module is the single definition of the schema (documented in `docs/events.md`).
//! Every line is an [`Event`]: a header (`v`, `seq`, `run`, `source`) plus a `kind` and a
//! `payload` whose shape depends on the kind. Writers use the typed [`Body`]; the streaming
//! reader (`crate::reader`) only parses the header eagerly and decodes payloads on demand, so a
//! grader can stream a 200 MB log in constant memory.
//!
//! The file is long on purpose (over 600 lines): `Body`, `Kind` and their names are one list
//! that must change together, and keeping them beside the run's and session's payloads they tag
//! is what keeps them in step. The payloads that need no such care live apart, each re-exported
//! here: the protocol-level ones in `exchange`, a turn's items, approvals and model tool calls
//! in `items`, what the harness found after the run in `evidence`.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

mod evidence;
mod exchange;
mod items;
pub use evidence::*;
pub use exchange::*;
pub use items::*;

/// Version of the event schema written in every line's `v` field.
///
/// Version 2 added, all optional so version-1 payloads still decode: `ts_ms` on every line,
/// the session's approval policy and reviewer, approval decisions offered, the model's
/// escalation request, whether a command ran inside the sandbox, and the `turn.error` kind.
/// Version 3 added the protocol-level kinds (`protocol.*`: requests and answers both ways,
/// client notifications, the app-server's notifications summarised, stdin closed, the
/// app-server's exit), `driver.ended`, and `run.started.protocol` (the release whose schema
/// applies and the driver's declarations); older streams decode unchanged.
pub const SCHEMA_VERSION: u32 = 3;

/// Every schema version this crate reads (older streams stay gradable).
pub const READABLE_VERSIONS: &[u32] = &[1, 2, SCHEMA_VERSION];

/// One line of a run's event stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub v: u32,
    /// Continuous from 0 within a run.
    pub seq: u64,
    /// When the event was observed, in milliseconds since the Unix epoch. Required from
    /// version 2 on; version-1 lines have none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ts_ms: Option<u64>,
    /// The run id; every line of a stream carries the same one.
    pub run: String,
    pub source: Source,
    #[serde(flatten)]
    pub body: Body,
}

/// Who observed the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// The driver under test (what it sent and what the app-server told it).
    Driver,
    /// The harness around the driver (workspace evidence, diagnostics, the terminal).
    Harness,
    /// What the model was told: the mock model API of the real-Codex runner, or the fake
    /// app-server's own model log.
    Model,
}

/// A cell of the conformance matrix: `suite.runner.environment.case`.
///
/// This is the one place cell names are formed and parsed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CellId {
    pub suite: String,
    pub runner: String,
    pub environment: String,
    pub case: String,
}

impl CellId {
    pub fn new(suite: &str, runner: &str, environment: &str, case: &str) -> Self {
        Self {
            suite: suite.into(),
            runner: runner.into(),
            environment: environment.into(),
            case: case.into(),
        }
    }
}

impl fmt::Display for CellId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{}.{}.{}",
            self.suite, self.runner, self.environment, self.case
        )
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("cell name `{0}` is not of the form suite.runner.environment.case (four non-empty parts, no other dots)")]
pub struct BadCellName(pub String);

impl FromStr for CellId {
    type Err = BadCellName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = s.split('.').collect();
        match parts.as_slice() {
            [a, b, c, d] if parts.iter().all(|p| !p.is_empty()) => Ok(CellId::new(a, b, c, d)),
            _ => Err(BadCellName(s.to_string())),
        }
    }
}

/// The kind-tagged payload of an event. `kind` names are stable strings (see `docs/events.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "payload")]
pub enum Body {
    #[serde(rename = "run.started")]
    RunStarted(RunStarted),
    #[serde(rename = "session.open-requested")]
    SessionOpenRequested(SessionOpenRequested),
    #[serde(rename = "session.started")]
    SessionStarted(SessionStarted),
    #[serde(rename = "session.rejected")]
    SessionRejected(SessionRejected),
    #[serde(rename = "session.relaunched")]
    SessionRelaunched(SessionRelaunched),
    #[serde(rename = "turn.submitted")]
    TurnSubmitted(TurnSubmitted),
    #[serde(rename = "turn.started")]
    TurnStarted(TurnStarted),
    #[serde(rename = "turn.completed")]
    TurnCompleted(TurnCompleted),
    #[serde(rename = "turn.error")]
    TurnError(TurnError),
    #[serde(rename = "item.started")]
    ItemStarted(ItemEvent),
    #[serde(rename = "item.completed")]
    ItemCompleted(ItemEvent),
    #[serde(rename = "plan.updated")]
    PlanUpdated(PlanUpdated),
    #[serde(rename = "approval.requested")]
    ApprovalRequested(ApprovalRequested),
    #[serde(rename = "approval.resolved")]
    ApprovalResolved(ApprovalResolved),
    #[serde(rename = "review.started")]
    ReviewStarted(AutoReview),
    #[serde(rename = "review.completed")]
    ReviewCompleted(AutoReview),
    #[serde(rename = "model.tool-call")]
    ModelToolCall(ModelToolCall),
    #[serde(rename = "model.tool-output")]
    ModelToolOutput(ModelToolOutput),
    #[serde(rename = "result.proposed")]
    ResultProposed(ResultProposed),
    #[serde(rename = "workspace.evidence")]
    WorkspaceEvidence(WorkspaceEvidence),
    #[serde(rename = "home.evidence")]
    HomeEvidence(HomeEvidence),
    #[serde(rename = "diagnostic")]
    Diagnostic(Diagnostic),
    #[serde(rename = "protocol.client-request")]
    ClientRequest(ClientRequest),
    #[serde(rename = "protocol.client-notification")]
    ClientNotification(ClientNotification),
    #[serde(rename = "protocol.client-request-answered")]
    ClientRequestAnswered(ClientRequestAnswered),
    #[serde(rename = "protocol.server-request")]
    ServerRequest(ServerRequest),
    #[serde(rename = "protocol.server-request-answered")]
    ServerRequestAnswered(ServerRequestAnswered),
    #[serde(rename = "protocol.server-notifications")]
    ServerNotifications(ServerNotifications),
    #[serde(rename = "protocol.stdin-closed")]
    StdinClosed(StdinClosed),
    #[serde(rename = "protocol.app-server-launched")]
    AppServerLaunched(AppServerLaunched),
    #[serde(rename = "protocol.app-server-exited")]
    AppServerExited(AppServerExited),
    #[serde(rename = "protocol.not-recorded")]
    NotRecorded(NotRecorded),
    #[serde(rename = "driver.ended")]
    DriverEnded(DriverEnded),
    #[serde(rename = "run.ended")]
    RunEnded(RunEnded),
}

impl Body {
    /// The `kind` string this body serializes under.
    pub fn kind(&self) -> Kind {
        match self {
            Body::RunStarted(_) => Kind::RunStarted,
            Body::SessionOpenRequested(_) => Kind::SessionOpenRequested,
            Body::SessionStarted(_) => Kind::SessionStarted,
            Body::SessionRejected(_) => Kind::SessionRejected,
            Body::SessionRelaunched(_) => Kind::SessionRelaunched,
            Body::TurnSubmitted(_) => Kind::TurnSubmitted,
            Body::TurnStarted(_) => Kind::TurnStarted,
            Body::TurnCompleted(_) => Kind::TurnCompleted,
            Body::TurnError(_) => Kind::TurnError,
            Body::ItemStarted(_) => Kind::ItemStarted,
            Body::ItemCompleted(_) => Kind::ItemCompleted,
            Body::PlanUpdated(_) => Kind::PlanUpdated,
            Body::ApprovalRequested(_) => Kind::ApprovalRequested,
            Body::ApprovalResolved(_) => Kind::ApprovalResolved,
            Body::ReviewStarted(_) => Kind::ReviewStarted,
            Body::ReviewCompleted(_) => Kind::ReviewCompleted,
            Body::ModelToolCall(_) => Kind::ModelToolCall,
            Body::ModelToolOutput(_) => Kind::ModelToolOutput,
            Body::ResultProposed(_) => Kind::ResultProposed,
            Body::WorkspaceEvidence(_) => Kind::WorkspaceEvidence,
            Body::HomeEvidence(_) => Kind::HomeEvidence,
            Body::Diagnostic(_) => Kind::Diagnostic,
            Body::ClientRequest(_) => Kind::ClientRequest,
            Body::ClientNotification(_) => Kind::ClientNotification,
            Body::ClientRequestAnswered(_) => Kind::ClientRequestAnswered,
            Body::ServerRequest(_) => Kind::ServerRequest,
            Body::ServerRequestAnswered(_) => Kind::ServerRequestAnswered,
            Body::ServerNotifications(_) => Kind::ServerNotifications,
            Body::StdinClosed(_) => Kind::StdinClosed,
            Body::AppServerLaunched(_) => Kind::AppServerLaunched,
            Body::AppServerExited(_) => Kind::AppServerExited,
            Body::NotRecorded(_) => Kind::NotRecorded,
            Body::DriverEnded(_) => Kind::DriverEnded,
            Body::RunEnded(_) => Kind::RunEnded,
        }
    }
}

/// The `kind` discriminant alone, for cheap header-only parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Kind {
    #[serde(rename = "run.started")]
    RunStarted,
    #[serde(rename = "session.open-requested")]
    SessionOpenRequested,
    #[serde(rename = "session.started")]
    SessionStarted,
    #[serde(rename = "session.rejected")]
    SessionRejected,
    #[serde(rename = "session.relaunched")]
    SessionRelaunched,
    #[serde(rename = "turn.submitted")]
    TurnSubmitted,
    #[serde(rename = "turn.started")]
    TurnStarted,
    #[serde(rename = "turn.completed")]
    TurnCompleted,
    #[serde(rename = "turn.error")]
    TurnError,
    #[serde(rename = "item.started")]
    ItemStarted,
    #[serde(rename = "item.completed")]
    ItemCompleted,
    #[serde(rename = "plan.updated")]
    PlanUpdated,
    #[serde(rename = "approval.requested")]
    ApprovalRequested,
    #[serde(rename = "approval.resolved")]
    ApprovalResolved,
    #[serde(rename = "review.started")]
    ReviewStarted,
    #[serde(rename = "review.completed")]
    ReviewCompleted,
    #[serde(rename = "model.tool-call")]
    ModelToolCall,
    #[serde(rename = "model.tool-output")]
    ModelToolOutput,
    #[serde(rename = "result.proposed")]
    ResultProposed,
    #[serde(rename = "workspace.evidence")]
    WorkspaceEvidence,
    #[serde(rename = "home.evidence")]
    HomeEvidence,
    #[serde(rename = "diagnostic")]
    Diagnostic,
    #[serde(rename = "protocol.client-request")]
    ClientRequest,
    #[serde(rename = "protocol.client-notification")]
    ClientNotification,
    #[serde(rename = "protocol.client-request-answered")]
    ClientRequestAnswered,
    #[serde(rename = "protocol.server-request")]
    ServerRequest,
    #[serde(rename = "protocol.server-request-answered")]
    ServerRequestAnswered,
    #[serde(rename = "protocol.server-notifications")]
    ServerNotifications,
    #[serde(rename = "protocol.stdin-closed")]
    StdinClosed,
    #[serde(rename = "protocol.app-server-launched")]
    AppServerLaunched,
    #[serde(rename = "protocol.app-server-exited")]
    AppServerExited,
    #[serde(rename = "protocol.not-recorded")]
    NotRecorded,
    #[serde(rename = "driver.ended")]
    DriverEnded,
    #[serde(rename = "run.ended")]
    RunEnded,
}

impl Kind {
    /// The wire name (`item.completed`, …), as in `docs/events.md`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::RunStarted => "run.started",
            Kind::SessionOpenRequested => "session.open-requested",
            Kind::SessionStarted => "session.started",
            Kind::SessionRejected => "session.rejected",
            Kind::SessionRelaunched => "session.relaunched",
            Kind::TurnSubmitted => "turn.submitted",
            Kind::TurnStarted => "turn.started",
            Kind::TurnCompleted => "turn.completed",
            Kind::TurnError => "turn.error",
            Kind::ItemStarted => "item.started",
            Kind::ItemCompleted => "item.completed",
            Kind::PlanUpdated => "plan.updated",
            Kind::ApprovalRequested => "approval.requested",
            Kind::ApprovalResolved => "approval.resolved",
            Kind::ReviewStarted => "review.started",
            Kind::ReviewCompleted => "review.completed",
            Kind::ModelToolCall => "model.tool-call",
            Kind::ModelToolOutput => "model.tool-output",
            Kind::ResultProposed => "result.proposed",
            Kind::WorkspaceEvidence => "workspace.evidence",
            Kind::HomeEvidence => "home.evidence",
            Kind::Diagnostic => "diagnostic",
            Kind::ClientRequest => "protocol.client-request",
            Kind::ClientNotification => "protocol.client-notification",
            Kind::ClientRequestAnswered => "protocol.client-request-answered",
            Kind::ServerRequest => "protocol.server-request",
            Kind::ServerRequestAnswered => "protocol.server-request-answered",
            Kind::ServerNotifications => "protocol.server-notifications",
            Kind::StdinClosed => "protocol.stdin-closed",
            Kind::AppServerLaunched => "protocol.app-server-launched",
            Kind::AppServerExited => "protocol.app-server-exited",
            Kind::NotRecorded => "protocol.not-recorded",
            Kind::DriverEnded => "driver.ended",
            Kind::RunEnded => "run.ended",
        }
    }
}

impl Kind {
    /// The sources that may write this kind (`docs/events.md`): `model.*` comes from the model
    /// log, `workspace.evidence`, `home.evidence` and `run.ended` from the harness, diagnostics and
    /// `driver.ended` (the wire translator writes it for the harness, which saw the process
    /// end) from either, and everything else — the `protocol.*` kinds included — from the
    /// driver. Graders ignore evidence from any other source.
    pub fn documented_sources(self) -> &'static [Source] {
        match self {
            Kind::ModelToolCall | Kind::ModelToolOutput => &[Source::Model],
            Kind::WorkspaceEvidence | Kind::HomeEvidence | Kind::RunEnded => &[Source::Harness],
            Kind::Diagnostic | Kind::DriverEnded => &[Source::Harness, Source::Driver],
            _ => &[Source::Driver],
        }
    }

    pub fn accepts_source(self, source: Source) -> bool {
        self.documented_sources().contains(&source)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The driver's run mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    Planning,
    Standard,
    Ask,
}

impl Mode {
    /// The mode as every file and report spells it (its serialised name).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Planning => "planning",
            Mode::Standard => "standard",
            Mode::Ask => "ask",
        }
    }
}

/// Where the app-server runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    Local,
    Ssh,
    /// The execution target is itself the sandbox (e.g. a Daytona container).
    ExternalSandbox,
}

/// Which generation of launch rules the driver applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyGeneration {
    /// The rules after the fix: full-disk read for planning inside an external sandbox.
    Current,
    /// The pre-fix rules: restricted reads for planning everywhere.
    Legacy,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStarted {
    pub cell: CellId,
    /// Free-form name of the driver (e.g. `reference` or the external command).
    pub driver: String,
    pub launch: LaunchSummary,
    /// The release whose protocol applies and the driver's declarations (v3; `None` in older
    /// streams and for drivers the harness runs in-process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<ProtocolSetup>,
}

/// What the launch policy decided, as the graders need it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchSummary {
    pub mode: Mode,
    pub target: Target,
    pub network_enabled: bool,
    pub policy: PolicyGeneration,
    /// The app-server argv after the program name (the `-c` overrides and flags).
    pub argv: Vec<String>,
    /// The profile selected on `thread/start` (`None` when the default applies).
    pub thread_permissions: Option<String>,
    /// The profile each turn will carry on `turn/start`.
    pub turn_permissions: Option<String>,
    /// Stable digest of the launch, independent of the profiles' filesystem/network rules.
    pub identity: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionOpenRequested {
    /// `permissions` sent on `thread/start`.
    pub permissions: Option<String>,
    pub cwd: String,
    pub experimental_api: bool,
}

/// The sandbox facts the app-server reported in the `thread/start` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct SandboxFacts {
    /// The legacy `sandbox` projection, verbatim.
    pub sandbox: Option<serde_json::Value>,
    /// `activePermissionProfile.id`.
    pub active_profile: Option<String>,
    pub instruction_sources: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionStarted {
    pub thread_id: String,
    pub sandbox: SandboxFacts,
    /// `approvalPolicy` the app-server reported (`on-request`, `never`, … or an object),
    /// verbatim JSON; `None` when not reported (and in version-1 streams).
    #[serde(default)]
    pub approval_policy: Option<serde_json::Value>,
    /// `approvalsReviewer` the app-server reported (`user`, `auto_review`, …), verbatim.
    #[serde(default)]
    pub approvals_reviewer: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRejected {
    /// JSON-RPC error code, verbatim.
    pub code: i64,
    /// The provider's message, verbatim.
    pub message: String,
    /// The attempt number within this run (1-based).
    pub attempt: u32,
}

/// A further launch of the app-server within the run (after the first app-server was shut
/// down), and what the driver decided to do with the thread the earlier launch saved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRelaunched {
    /// The relaunch's launch identity, computed like `run.started.launch.identity`.
    pub identity: String,
    /// The generation of launch rules the relaunch applies.
    pub policy: PolicyGeneration,
    /// The relaunched app-server's argv after the program name (as `launch.argv`).
    pub argv: Vec<String>,
    /// The profile the relaunch sends on `thread/resume` or `thread/start` (`None`: the
    /// default applies).
    pub thread_permissions: Option<String>,
    /// The saved thread the driver resumes; `None` when it starts a new thread instead
    /// (because the launch identity changed).
    pub resume_thread: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnSubmitted {
    /// 0-based index of the turn within the run.
    pub index: u32,
    /// `permissions` sent on `turn/start`.
    pub permissions: Option<String>,
    /// `collaborationMode.mode` sent on `turn/start`, if any (e.g. `plan`).
    pub collaboration_mode: Option<String>,
    /// The user text, truncated to an excerpt.
    pub input_excerpt: String,
    /// `approvalPolicy` sent on `turn/start` (verbatim JSON), if the driver overrode it.
    #[serde(default)]
    pub approval_policy: Option<serde_json::Value>,
    /// `approvalsReviewer` sent on `turn/start`, if the driver overrode it.
    #[serde(default)]
    pub approvals_reviewer: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnStarted {
    pub turn_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnCompleted {
    pub turn_id: String,
    /// `completed`, `failed`, `interrupted`, … verbatim from the app-server.
    pub status: String,
    pub error: Option<String>,
    /// The turn error's `codexErrorInfo`, verbatim JSON (`"other"`,
    /// `{"responseStreamDisconnected":{…}}`, …).
    #[serde(default)]
    pub codex_error_info: Option<serde_json::Value>,
}

/// An `error` notification of the app-server during a turn (e.g. the model stream failed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnError {
    pub turn_id: Option<String>,
    /// `error.message`, verbatim.
    pub message: String,
    /// `willRetry`: the app-server retries on its own (`Reconnecting... 2/5`); `false` means
    /// the turn fails.
    pub will_retry: Option<bool>,
    /// `error.codexErrorInfo`, verbatim JSON.
    pub codex_error_info: Option<serde_json::Value>,
    /// `error.additionalDetails`, verbatim.
    pub additional_details: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    Done,
    NeedsReview,
    Blocked,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultProposed {
    pub outcome: Outcome,
    pub summary: String,
    /// For `blocked`: who must act, and what they must do.
    pub owner: Option<String>,
    pub action: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    Info,
    Warn,
    Error,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnostic {
    pub level: Level,
    pub message: String,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ending {
    Succeeded,
    /// A permanent failure; the run must not be retried in place.
    FailedPermanently,
    /// Bounded same-run retries were used up.
    RetriesExhausted,
    /// The app-server's transport broke (crash, garbage, oversized line, closed pipe).
    TransportLost,
    /// A bounded wait expired.
    TimedOut,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEnded {
    pub ending: Ending,
    /// Whether a Retry (a fresh run with a fresh app-server) is offered to the user.
    pub retry_offered: bool,
    /// A stable error code, e.g. `provider_startup_rejected`, `retry_exhausted`.
    pub error_code: Option<String>,
    pub reason: Option<String>,
}

/// Milliseconds since the Unix epoch, now (0 if the clock is before the epoch).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Event {
    /// An event of the current schema version, stamped now.
    pub fn new(seq: u64, run: &str, source: Source, body: Body) -> Self {
        Self::at(now_ms(), seq, run, source, body)
    }

    /// An event of the current schema version observed at `ts_ms`.
    pub fn at(ts_ms: u64, seq: u64, run: &str, source: Source, body: Body) -> Self {
        Self {
            v: SCHEMA_VERSION,
            seq,
            ts_ms: Some(ts_ms),
            run: run.to_string(),
            source,
            body,
        }
    }
}

#[cfg(test)]
mod tests;
