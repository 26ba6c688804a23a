//! Payloads of what happened inside a turn: its items, plan updates, approvals and their
//! reviews, and the tool calls the model API saw.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemEvent {
    pub turn_id: Option<String>,
    pub item: Item,
}

/// An item of a turn, reduced to what graders need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Item {
    CommandExecution(CommandExecution),
    FileChange {
        id: String,
        paths: Vec<String>,
        status: Option<String>,
    },
    Plan {
        id: String,
        text: String,
    },
    AgentMessage {
        id: String,
        text: String,
    },
    DynamicToolCall(DynamicToolCall),
    /// Any other item type, named verbatim.
    Other {
        id: String,
        item_type: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandExecution {
    pub id: String,
    /// The command string as the app-server reported it.
    pub command: String,
    pub cwd: Option<String>,
    /// `inProgress`, `completed`, `failed`, `declined`, verbatim.
    pub status: String,
    pub exit_code: Option<i64>,
    /// Separate streams when the source knows them (command/exec), else `None`.
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    /// Merged output when the source only has that (item `aggregatedOutput`).
    pub aggregated_output: Option<String>,
    /// The sandbox the command ran under, as far as the driver knows (profile id or policy).
    pub sandbox: Option<String>,
    /// Whether the command ran inside the sandbox: `false` after an approved escalation (it
    /// ran outside), `true` when the source says it ran sandboxed, `None` when unknown.
    #[serde(default)]
    pub ran_in_sandbox: Option<bool>,
}

impl CommandExecution {
    /// Every output text the source gave: the separate streams and the merged output.
    pub fn outputs(&self) -> impl Iterator<Item = &str> {
        [&self.aggregated_output, &self.stdout, &self.stderr]
            .into_iter()
            .flatten()
            .map(String::as_str)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DynamicToolCall {
    pub id: String,
    pub tool: String,
    pub arguments: serde_json::Value,
    pub status: Option<String>,
    pub success: Option<bool>,
    /// The text the driver answered with.
    pub result_text: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanStep {
    pub step: String,
    pub status: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanUpdated {
    pub turn_id: Option<String>,
    pub explanation: Option<String>,
    pub steps: Vec<PlanStep>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalKind {
    /// A command asked to run (e.g. with escalated permissions).
    Command,
    FileChange,
    Permissions,
    /// A proposed plan, approved (or sent back for revision) by the driver.
    Plan,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequested {
    /// The server request id (or a driver-assigned id for plan approvals).
    pub request_id: String,
    pub kind: ApprovalKind,
    pub item_id: Option<String>,
    pub command: Option<String>,
    /// The reason the app-server gave (for an escalation: the model's justification).
    pub reason: Option<String>,
    /// `availableDecisions`, verbatim JSON (strings or objects); `None` when not offered.
    #[serde(default)]
    pub available_decisions: Option<Vec<serde_json::Value>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalResolved {
    pub request_id: String,
    /// `accept`, `decline`, `cancel`, `revise`, … as the driver answered.
    pub decision: String,
}

/// An automatic approval review (`approvalsReviewer: "auto_review"`): Codex asks a model to
/// review an escalation instead of asking the client, and tells the client with
/// `item/autoApprovalReview/started` / `…/completed` (the driver source: the wire).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AutoReview {
    /// `reviewId`.
    pub review_id: String,
    /// `targetItemId`: the item (command) under review.
    pub target_item_id: Option<String>,
    /// `review.status` verbatim: `inProgress`, `approved`, `denied`, …
    pub status: String,
    /// The reviewed action's command (`action.command`), when the action is a command.
    pub command: Option<String>,
    /// `review.rationale`, cut to an excerpt.
    pub rationale: Option<String>,
    /// `decisionSource` (`agent`, …) of a completed review.
    pub decision_source: Option<String>,
}

/// A tool call the model made (seen by the model API, not the driver).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelToolCall {
    pub call_id: String,
    pub name: String,
    /// The arguments string as the model sent it.
    pub arguments: String,
    /// The arguments' `sandbox_permissions` (`use_default`, `require_escalated`), decoded by
    /// the writer; graders decode `arguments` themselves and treat either as an escalation.
    #[serde(default)]
    pub sandbox_permissions: Option<String>,
    /// The arguments' `justification` for an escalation, decoded by the writer.
    #[serde(default)]
    pub justification: Option<String>,
}

/// The tool output the model got back for a call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelToolOutput {
    pub call_id: String,
    pub output: String,
}
