//! The model script: what the *model* does in each turn, written in terms of the model's own
//! actions (tool calls and messages), never of the fake's internals. The same script drives the
//! fake app-server directly and the mock model API that the real Codex talks to.

use serde::{Deserialize, Serialize};

/// What the model does in one turn, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ModelTurn {
    #[serde(default)]
    pub steps: Vec<ModelStep>,
}

/// One action of the model.
///
/// Text fields may use the template `{probe_id}`: a short id unique to the thread, chosen by
/// whoever plays the script (the fake, or the mock model API), so probe files of parallel runs
/// never collide.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ModelStep {
    /// Run a shell command through the exec tool (`exec_command` for the real Codex). With
    /// `escalate`, the model asks to run it outside the sandbox, which makes the app-server ask
    /// the client for approval.
    Shell {
        cmd: String,
        #[serde(default)]
        escalate: bool,
        #[serde(default)]
        justification: Option<String>,
    },
    /// Propose a plan (a `<proposed_plan>` block for the real Codex; a `plan` item).
    Plan { text: String },
    /// Update the checklist plan (`turn/plan/updated`).
    PlanUpdate {
        #[serde(default)]
        explanation: Option<String>,
        steps: Vec<PlanStepSpec>,
    },
    /// Say something to the user (an `agentMessage` item).
    Message { text: String },
    /// Call a client-side dynamic tool (`item/tool/call`), e.g. `paperclip_finish`.
    ToolCall {
        name: String,
        #[serde(default)]
        arguments: serde_json::Value,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanStepSpec {
    pub step: String,
    /// `pending`, `inProgress` or `completed`.
    pub status: String,
}

/// Replace the `{probe_id}` template in a script text.
pub fn expand_template(text: &str, probe_id: &str) -> String {
    text.replace("{probe_id}", probe_id)
}
