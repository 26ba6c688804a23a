//! What the server does in a turn on its own, beside the model's steps: server requests no model
//! causes, turn-level notifications, other threads' and turns' events, forward-compatibility
//! probes, and volume. A server step runs before the turn's first model step, after step N
//! (`after_step = N`), or after the turn's `turn/completed` (`after_turn = true`).
//!
//! Only the fake plays these: the real Codex decides such things itself, so a scenario with
//! server steps cannot be played by the mock model API ([`super::Scenario::fake_only`]).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One server step and where it runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerStep {
    pub action: ServerAction,
    /// Run after model step N (0-based); before the first step when neither position is given.
    pub after_step: Option<usize>,
    /// Run after the turn's `turn/completed`.
    pub after_turn: bool,
}

/// The server's own action.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ServerAction {
    /// Send a server request of the release (one no model step causes: `mcpServer/elicitation/request`,
    /// `account/chatgptAuthTokens/refresh`, `attestation/generate`, `currentTime/read`, the legacy
    /// `applyPatchApproval` / `execCommandApproval`, or a stand-alone
    /// `item/commandExecution/requestApproval`), bound to the live thread and turn; wait for the
    /// answer (`limits.client_answer_ms`). An approval that is granted runs its command (`cmd`) or
    /// applies its patch (`patch`) in the workspace.
    Request {
        method: String,
        /// The command an approval request asks for (default: a write probe in the workspace).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cmd: Option<String>,
        /// The patch `applyPatchApproval` asks for (default: a probe file added).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        patch: Option<String>,
    },
    /// A request no release has; the client must answer it with a JSON-RPC error.
    UnknownRequest { method: String },
    /// An `error` notification for the turn. `will_retry = true` is the real Codex's retried
    /// stream (`Reconnecting... 1/5`); the turn then goes on.
    Error {
        #[serde(default)]
        will_retry: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    /// A whole turn lifecycle that is not the driver's: of another thread (`thread/started`,
    /// `turn/started`, items, `turn/completed`) or another turn id of the driver's thread.
    ForeignTurn { of: ForeignScope },
    /// Item and status notifications for the turn after it ended (place it `after_turn`).
    StrayEvents {},
    /// A schema-valid instance of every notification of the release, generated from its
    /// schema, for a thread that is not the driver's.
    EveryNotification {},
    /// A notification method no release has.
    UnknownNotification { method: String },
    /// `item/started` + `item/completed` of an item type no release has, in the live turn.
    UnknownItem { item_type: String },
    /// Known notifications carrying enum values outside the schema (a thread status, an item
    /// status, a plan step status).
    UnknownEnumValues {},
    /// An agent message whose largest line (its `item/completed`) is exactly `bytes` long (the
    /// newline excluded); its one `item/agentMessage/delta` line is slightly shorter.
    LongLine { bytes: u64 },
    /// An agent message streamed as `count` one-character `item/agentMessage/delta`s, written
    /// in one buffered burst (several items of at most [`BURST_ITEM_DELTAS`] deltas each, so no
    /// `item/completed` line exceeds 32 KiB).
    DeltaBurst { count: u64 },
    /// Write `bytes` of log lines on stderr, unbounded: a client that does not drain the pipe
    /// blocks the fake here.
    StderrFlood { bytes: u64 },
    /// Wait (at most `max_ms`) for the client's `turn/interrupt` or `turn/steer`: an interrupt
    /// ends the turn `interrupted`, a steer adds its input to the turn (a `userMessage` item)
    /// and the turn goes on; when nothing comes the turn goes on.
    WaitForControl { max_ms: u64 },
}

/// Whose turn a [`ServerAction::ForeignTurn`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ForeignScope {
    OtherThread,
    SameThread,
}

/// Deltas per agent message item in a [`ServerAction::DeltaBurst`].
pub const BURST_ITEM_DELTAS: u64 = 16_384;

impl ServerAction {
    /// Whether the action sends what no release's schema allows (on purpose).
    pub fn off_schema(&self) -> bool {
        matches!(
            self,
            ServerAction::UnknownRequest { .. }
                | ServerAction::UnknownNotification { .. }
                | ServerAction::UnknownItem { .. }
                | ServerAction::UnknownEnumValues {}
        )
    }
}

// The position keys sit beside the action's own keys in one inline table
// (`{ step = "error", will_retry = true, after_step = 0 }`); serde's `flatten` cannot be combined
// with `deny_unknown_fields`, so the position is taken out by hand and the rest still rejects
// unknown keys.
impl<'de> Deserialize<'de> for ServerStep {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut table = toml::Table::deserialize(deserializer)?;
        let after_step = match table.remove("after_step") {
            Some(value) => Some(
                usize::try_from(value.as_integer().ok_or_else(|| {
                    D::Error::custom("`after_step` must be a non-negative integer")
                })?)
                .map_err(|_| D::Error::custom("`after_step` must be a non-negative integer"))?,
            ),
            None => None,
        };
        let after_turn = match table.remove("after_turn") {
            Some(value) => value
                .as_bool()
                .ok_or_else(|| D::Error::custom("`after_turn` must be true or false"))?,
            None => false,
        };
        let action = ServerAction::deserialize(toml::Value::Table(table))
            .map_err(|e| D::Error::custom(e.message()))?;
        Ok(ServerStep {
            action,
            after_step,
            after_turn,
        })
    }
}

impl Serialize for ServerStep {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::Error;
        let mut table = match toml::Value::try_from(&self.action).map_err(S::Error::custom)? {
            toml::Value::Table(table) => table,
            _ => return Err(S::Error::custom("a server action serialises as a table")),
        };
        if let Some(after) = self.after_step {
            table.insert("after_step".into(), toml::Value::Integer(after as i64));
        }
        if self.after_turn {
            table.insert("after_turn".into(), toml::Value::Boolean(true));
        }
        table.serialize(serializer)
    }
}
