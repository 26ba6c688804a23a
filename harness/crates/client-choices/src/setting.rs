//! One client's choices (a [`Setting`]), written `name=value,name=value` in the order of the
//! dimensions, so a setting fits a command line word and names itself in a failure.

use serde::{Deserialize, Serialize};
use std::fmt;

/// `capabilities.optOutNotificationMethods` of `initialize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OptOut {
    /// The field is not sent.
    Absent,
    /// An empty list.
    Empty,
    /// [`QUIET_NOTIFICATIONS`]: progress a client may not want.
    Quiet,
}

/// The notifications a `quiet` client opts out of: progress it does not show (token usage,
/// rate limits, message deltas — the completed item carries the whole text).
pub const QUIET_NOTIFICATIONS: &[&str] = &[
    "thread/tokenUsage/updated",
    "account/rateLimits/updated",
    "item/agentMessage/delta",
];

/// `sandbox` of `thread/start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxChoice {
    /// Not sent: the app-server's default.
    Absent,
    /// The mode's own: `read-only` for planning, `workspace-write` otherwise.
    ByMode,
    /// `read-only` in every mode.
    ReadOnly,
    /// `danger-full-access` outside planning (a planning task still sends `read-only`).
    FullAccess,
}

impl SandboxChoice {
    /// The `SandboxMode` sent for a task of `mode` (`planning`, `standard`, `ask`); `None`: not
    /// sent.
    pub fn mode_for(self, mode: &str) -> Option<&'static str> {
        match (self, mode == "planning") {
            (Self::Absent, _) => None,
            (_, true) | (Self::ReadOnly, false) => Some("read-only"),
            (Self::ByMode, false) => Some("workspace-write"),
            (Self::FullAccess, false) => Some("danger-full-access"),
        }
    }
}

/// The `SandboxMode`s a setting can send.
pub const SANDBOX_MODES: &[&str] = &["read-only", "workspace-write", "danger-full-access"];

/// How a server request that is not an approval is answered, where the client has a
/// schema-valid result to give (`item/tool/requestUserInput`, `item/tool/call`,
/// `currentTime/read`); the others (`attestation/generate`, a token refresh, an unknown method)
/// always get a JSON-RPC error: a client has no token to make up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OtherAnswer {
    Result,
    Error,
}

/// How the client stops its app-server once its turn is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Stop {
    CloseStdin,
    Sigterm,
    Sigint,
}

/// The launches of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Launches {
    /// One app-server.
    One,
    /// `codex --version` first, then the app-server.
    VersionProbe,
    /// The app-server, then after the turn a second one: `initialize`, `initialized`, stopped.
    SecondAppServer,
    /// Both.
    ProbeAndSecond,
}

impl Launches {
    pub fn probes_version(self) -> bool {
        matches!(self, Self::VersionProbe | Self::ProbeAndSecond)
    }
    pub fn second_app_server(self) -> bool {
        matches!(self, Self::SecondAppServer | Self::ProbeAndSecond)
    }
}

/// Where the app-server's stderr goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StderrChoice {
    /// The driver's own stderr.
    Inherit,
    /// A pipe the driver reads and drops, on a thread of its own.
    Drain,
    /// `/dev/null`.
    Null,
}

/// When a server request is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnswerOrder {
    /// As soon as it is read.
    AtOnce,
    /// After the notifications already waiting behind it have been read.
    AfterPending,
}

/// The type of the client's JSON-RPC request ids (`RequestId`: a string or an integer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RequestIds {
    Integer,
    String,
}

/// How the task's prompt is sent as `input` of `turn/start` (`UserInput` items).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TurnInput {
    /// One `text` item.
    OneText,
    /// Two `text` items whose concatenation is the prompt, cut at a space near its middle: a
    /// client that sends its own context and the user's words as separate items.
    SplitText,
}

impl TurnInput {
    /// The `text` items that carry `prompt`.
    pub fn texts(self, prompt: &str) -> Vec<&str> {
        if self == Self::OneText {
            return vec![prompt];
        }
        let middle = prompt.len() / 2;
        // After a space, so that no word (a `MARKER-` token) is cut in two.
        let cut = prompt
            .char_indices()
            .filter(|(_, c)| c.is_whitespace())
            .map(|(i, c)| i + c.len_utf8())
            .min_by_key(|i| i.abs_diff(middle));
        match cut {
            Some(cut) if cut < prompt.len() => vec![&prompt[..cut], &prompt[cut..]],
            _ => vec![prompt],
        }
    }
}

/// The answer to an approval request: a refusal decision the schema lists (`decline`,
/// `cancel`) or `error`, a JSON-RPC error. Grants are no choice of a client nobody told to
/// grant ([`crate::Vocabulary::grants`]).
pub type ApprovalAnswer = String;

/// The JSON-RPC error answer, as an approval answer.
pub const ERROR_ANSWER: &str = "error";

/// One client's choices.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    pub experimental_api: bool,
    pub opt_out: OptOut,
    pub client_title: bool,
    /// `ephemeral` of `thread/start`: absent, `false` or `true`.
    pub ephemeral: Option<bool>,
    /// `approvalPolicy` of `thread/start`: absent or one of the schema's `AskForApproval`.
    pub approval_policy: Option<String>,
    pub sandbox: SandboxChoice,
    pub approval_answer: ApprovalAnswer,
    pub other_answer: OtherAnswer,
    pub stop: Stop,
    pub launches: Launches,
    pub answer_order: AnswerOrder,
    pub request_ids: RequestIds,
    pub stderr: StderrChoice,
    pub turn_input: TurnInput,
}

/// The dimensions' names, in their order.
pub const DIMENSIONS: &[&str] = &[
    "experimental-api",
    "opt-out",
    "client-title",
    "ephemeral",
    "approval-policy",
    "sandbox",
    "approval-answer",
    "other-answer",
    "stop",
    "launches",
    "answer-order",
    "request-ids",
    "stderr",
    "turn-input",
];

/// Why a setting's text does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    #[error("setting `{0}`: expected name=value")]
    NotAPair(String),
    #[error("setting: unknown dimension `{0}` (dimensions: {dims})", dims = DIMENSIONS.join(", "))]
    UnknownDimension(String),
    #[error("setting: `{name}={value}` is not a value of `{name}`")]
    BadValue { name: String, value: String },
    #[error("setting: `{0}` is given twice")]
    Repeated(String),
    #[error("setting: `{0}` is missing")]
    MissingDimension(String),
}

fn word<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        other => unreachable!("a choice serialises as a string: {other:?}"),
    }
}

fn from_word<T: for<'de> Deserialize<'de>>(name: &str, value: &str) -> Result<T, SettingError> {
    serde_json::from_value(serde_json::Value::String(value.into())).map_err(|_| {
        SettingError::BadValue {
            name: name.into(),
            value: value.into(),
        }
    })
}

fn on_off(name: &str, value: &str, on: &str, off: &str) -> Result<bool, SettingError> {
    match value {
        v if v == on => Ok(true),
        v if v == off => Ok(false),
        _ => Err(SettingError::BadValue {
            name: name.into(),
            value: value.into(),
        }),
    }
}

/// `absent` or a value.
pub(crate) const ABSENT: &str = "absent";

impl Setting {
    /// The setting's value of each dimension, in [`DIMENSIONS`] order.
    pub fn values(&self) -> Vec<String> {
        let optional = |v: &Option<String>| v.clone().unwrap_or_else(|| ABSENT.into());
        vec![
            if self.experimental_api { "on" } else { "off" }.into(),
            word(&self.opt_out),
            if self.client_title { "present" } else { ABSENT }.into(),
            optional(&self.ephemeral.map(|e| e.to_string())),
            optional(&self.approval_policy),
            word(&self.sandbox),
            self.approval_answer.clone(),
            word(&self.other_answer),
            word(&self.stop),
            word(&self.launches),
            word(&self.answer_order),
            word(&self.request_ids),
            word(&self.stderr),
            word(&self.turn_input),
        ]
    }

    /// A setting from one value per dimension, in [`DIMENSIONS`] order. Values of the
    /// schema-derived dimensions are taken as they are; [`crate::Space::contains`] says whether
    /// the release's schema allows them.
    pub fn from_values(values: &[&str]) -> Result<Self, SettingError> {
        if values.len() != DIMENSIONS.len() {
            return Err(SettingError::MissingDimension(
                DIMENSIONS[values.len().min(DIMENSIONS.len() - 1)].into(),
            ));
        }
        let optional = |v: &str| (v != ABSENT).then(|| v.to_string());
        let [exp, opt_out, title, eph, policy, sandbox, approval, other, stop, launches, order, ids, stderr, input] =
            values
        else {
            unreachable!("the length was checked")
        };
        Ok(Self {
            experimental_api: on_off(DIMENSIONS[0], exp, "on", "off")?,
            opt_out: from_word(DIMENSIONS[1], opt_out)?,
            client_title: on_off(DIMENSIONS[2], title, "present", ABSENT)?,
            ephemeral: match *eph {
                ABSENT => None,
                v => Some(on_off(DIMENSIONS[3], v, "true", "false")?),
            },
            approval_policy: optional(policy),
            sandbox: from_word(DIMENSIONS[5], sandbox)?,
            approval_answer: approval.to_string(),
            other_answer: from_word(DIMENSIONS[7], other)?,
            stop: from_word(DIMENSIONS[8], stop)?,
            launches: from_word(DIMENSIONS[9], launches)?,
            answer_order: from_word(DIMENSIONS[10], order)?,
            request_ids: from_word(DIMENSIONS[11], ids)?,
            stderr: from_word(DIMENSIONS[12], stderr)?,
            turn_input: from_word(DIMENSIONS[13], input)?,
        })
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pairs: Vec<String> = DIMENSIONS
            .iter()
            .zip(self.values())
            .map(|(name, value)| format!("{name}={value}"))
            .collect();
        f.write_str(&pairs.join(","))
    }
}

impl std::str::FromStr for Setting {
    type Err = SettingError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut values: Vec<Option<&str>> = vec![None; DIMENSIONS.len()];
        for pair in text.split(',').filter(|p| !p.is_empty()) {
            let (name, value) = pair
                .split_once('=')
                .ok_or_else(|| SettingError::NotAPair(pair.into()))?;
            let index = DIMENSIONS
                .iter()
                .position(|d| *d == name)
                .ok_or_else(|| SettingError::UnknownDimension(name.into()))?;
            if values[index].replace(value).is_some() {
                return Err(SettingError::Repeated(name.into()));
            }
        }
        let values: Vec<&str> = values
            .iter()
            .zip(DIMENSIONS)
            .map(|(v, name)| v.ok_or_else(|| SettingError::MissingDimension((*name).into())))
            .collect::<Result<_, _>>()?;
        Self::from_values(&values)
    }
}

#[cfg(test)]
mod tests {
    use super::TurnInput;

    #[test]
    fn a_split_prompt_is_two_texts_cut_after_a_space_that_join_back_to_it() {
        let prompt = "Write the file MARKER-abc-1 into the workspace, then stop.";
        let texts = TurnInput::SplitText.texts(prompt);
        assert_eq!(texts.len(), 2, "{texts:?}");
        assert_eq!(texts.concat(), prompt);
        assert!(texts[0].ends_with(' '), "{texts:?}");
        assert!(texts.iter().all(|t| !t.is_empty()));
        assert_eq!(TurnInput::OneText.texts(prompt), vec![prompt]);
        // Nothing to cut at: one text, as a client with one word to say sends it.
        assert_eq!(TurnInput::SplitText.texts("MARKER-x"), vec!["MARKER-x"]);
    }
}
