//! A client session as the explorer plays it, on both sides alike: the model script the mock
//! model API (or the fake) plays, the app-server's command line, what the client declares at
//! `initialize`, its requests in order, how it answers every server request, and what it does
//! to the transport. Serialised as a corpus scenario (`harness/explore-corpus/*.json`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One generated (or shrunk, or replayed) session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Session {
    /// The builtin scenario whose model script plays every turn (`healthy`, `command-approval`).
    pub scenario: String,
    /// Arguments after `app-server` (`--disable NAME`, `--enable NAME`), besides the model
    /// provider every side is given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub launch_args: Vec<String>,
    /// `initialize`'s `capabilities` (`null`: none sent).
    #[serde(default)]
    pub capabilities: Value,
    /// The client's requests after `initialized`, in order.
    pub steps: Vec<Step>,
    /// How every server request is answered.
    #[serde(default)]
    pub answer: AnswerKind,
    /// A choice of the server request's schema beyond the kinds (`acceptForSession`,
    /// `acceptWithExecpolicyAmendment`, a grant's scope `session`: `explore::choices`), made
    /// instead of `answer` to every request whose schema has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<String>,
    /// What the client does to the transport.
    #[serde(default)]
    pub transport: Transport,
}

/// One client request. Params may hold `{thread_id}` (the thread the last answer named),
/// `{turn_id}` (the last turn started) and `{cwd}` (the session's workspace).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub method: String,
    #[serde(default)]
    pub params: Value,
}

impl Step {
    /// Whether the client waits for the turn this request starts to complete.
    pub fn starts_turn(&self) -> bool {
        self.method == "turn/start"
    }
}

/// How the client answers a server request (the turn's course after each is the release's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnswerKind {
    /// The schema's accepting answer (`accept`, `approved`, an empty answer set, …).
    #[default]
    Accept,
    /// The schema's declining answer (`decline`, `denied`).
    Decline,
    /// The schema's cancelling answer (`cancel`, `abort`).
    Cancel,
    /// A JSON-RPC error instead of a result.
    Error,
    /// A result the schema does not allow (`{"decision": 42}`).
    Malformed,
    /// `turn/interrupt` first; the accepting answer once the turn has ended.
    Late,
}

pub const ANSWER_KINDS: &[AnswerKind] = &[
    AnswerKind::Accept,
    AnswerKind::Decline,
    AnswerKind::Cancel,
    AnswerKind::Error,
    AnswerKind::Malformed,
    AnswerKind::Late,
];

/// What the client does to the transport.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", deny_unknown_fields)]
pub enum Transport {
    /// Every step, then stdin closed and the exit awaited.
    #[default]
    Plain,
    /// stdin closed right after step `after` is sent (its answer not awaited).
    CloseStdinEarly { after: usize },
    /// `signal` (`TERM`, `INT`, `HUP`) to the app-server after step `after` is answered.
    Signal { after: usize, signal: String },
    /// The client reads nothing for `pause_ms` after every line it reads.
    SlowReader { pause_ms: u64 },
    /// After the first launch exits, a second one in the same home resumes the thread.
    SecondLaunch,
}

impl Session {
    /// One line naming the session, for reports.
    pub fn summary(&self) -> String {
        let methods: Vec<String> = self
            .steps
            .iter()
            .map(|s| format!("{} {}", s.method, s.params))
            .collect();
        format!(
            "scenario {}, args {:?}, capabilities {}, steps [{}], answer {}, transport {:?}",
            self.scenario,
            self.launch_args,
            self.capabilities,
            methods.join(", "),
            match &self.choice {
                Some(choice) => format!("{choice} (else {:?})", self.answer),
                None => format!("{:?}", self.answer),
            },
            self.transport
        )
    }
}
