//! Codex's own tools, as a `tool-call` step names them. A model causes Codex's server requests
//! by calling these tools, so a script says what the model does and the player (the fake, or the
//! mock model API in front of the real Codex) makes the same call:
//!
//! | tool | arguments | what Codex 0.169 does (measured) |
//! | --- | --- | --- |
//! | `apply_patch` | `{ input = "*** Begin Patch…" }` (a freeform tool: the real model sends the text as a `custom_tool_call`) | a `fileChange` item; in a sandbox that cannot write it, `item/fileChange/requestApproval`, then `turn/diff/updated` once applied |
//! | `request_user_input` | `{ questions = [{ id, header, question, options = [{ label, description }] }] }` | in plan mode, `item/tool/requestUserInput`; otherwise the model is told it is unavailable |
//! | `request_permissions` | `{ permissions = { network = { enabled }, file_system = { read, write } }, reason }` | `item/permissions/requestApproval` (the real Codex offers the tool with `--enable request_permissions_tool`) |
//! | `create_goal` / `update_goal` | `{ objective }` / `{ status }` | `thread/goal/updated`; while a goal is active, the server starts the next turn on its own when one completes |
//! | `spawn_agent` / `wait_agent` | `{ task_name, message, fork_turns }` / `{ timeout_ms }` | with the `multi_agent_v2` feature (offered in the `collaboration` namespace): a sub-agent thread whose `turn/started` … `turn/completed` (its own thread and turn ids) the client receives in the middle of the parent's turn; `wait_agent` returns once that turn completed (0.160, 0.169, 0.171). Without the feature: `unsupported call` |
//!
//! A tool-call whose name is [`DYNAMIC_TOOL`] calls the first dynamic tool the thread
//! registered (`item/tool/call`), whatever the driver named it.

use serde::Deserialize;
use serde_json::Value;

/// The tool name that stands for the first dynamic tool the driver registered on `thread/start`.
pub const DYNAMIC_TOOL: &str = "{dynamic_tool}";

pub const APPLY_PATCH: &str = "apply_patch";
pub const REQUEST_USER_INPUT: &str = "request_user_input";
pub const REQUEST_PERMISSIONS: &str = "request_permissions";
pub const CREATE_GOAL: &str = "create_goal";
pub const UPDATE_GOAL: &str = "update_goal";
pub const SPAWN_AGENT: &str = "spawn_agent";
pub const WAIT_AGENT: &str = "wait_agent";
/// The namespace Codex offers its sub-agent tools in (`multi_agent_v2`): the model's call must
/// name it, or Codex answers `unsupported call` (measured, 0.169).
pub const SUB_AGENT_NAMESPACE: &str = "collaboration";

/// A call of one of Codex's own tools, its arguments checked.
#[derive(Debug, Clone, PartialEq)]
pub enum CodexToolCall {
    ApplyPatch(Vec<crate::apply_patch::Hunk>),
    RequestUserInput(UserInputArgs),
    RequestPermissions(PermissionsArgs),
    CreateGoal(CreateGoalArgs),
    UpdateGoal(UpdateGoalArgs),
    SpawnAgent(SpawnAgentArgs),
    WaitAgent(WaitAgentArgs),
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserInputArgs {
    pub questions: Vec<UserInputQuestion>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserInputQuestion {
    pub id: String,
    pub header: String,
    pub question: String,
    pub options: Vec<UserInputOption>,
}

#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct UserInputOption {
    pub label: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionsArgs {
    pub permissions: RequestedPermissions,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub environment_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestedPermissions {
    #[serde(default)]
    pub network: Option<NetworkRequest>,
    #[serde(default)]
    pub file_system: Option<FileSystemRequest>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkRequest {
    #[serde(default)]
    pub enabled: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileSystemRequest {
    #[serde(default)]
    pub read: Option<Vec<String>>,
    #[serde(default)]
    pub write: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateGoalArgs {
    pub objective: String,
    #[serde(default)]
    pub token_budget: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateGoalArgs {
    pub status: GoalStatus,
}

/// The statuses a model may set (`update_goal`'s enum).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum GoalStatus {
    Complete,
    Paused,
    Blocked,
}

impl GoalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            GoalStatus::Complete => "complete",
            GoalStatus::Paused => "paused",
            GoalStatus::Blocked => "blocked",
        }
    }
}

/// `spawn_agent`'s parameters (0.169's tool schema).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpawnAgentArgs {
    pub task_name: String,
    pub message: String,
    #[serde(default)]
    pub fork_turns: Option<ForkTurns>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub reasoning_effort: Option<String>,
}

/// The only values of `fork_turns` the tool accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ForkTurns {
    All,
    None,
}

/// `wait_agent`'s parameters: Codex bounds the wait to 10 s … 1 h.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitAgentArgs {
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApplyPatchArgs {
    input: String,
}

/// `Some(call)` when `name` is one of Codex's own tools (its arguments checked), `None` for any
/// other name (a dynamic tool, or one nobody offers).
pub fn parse(name: &str, arguments: &Value) -> Option<Result<CodexToolCall, String>> {
    fn args<T: serde::de::DeserializeOwned>(name: &str, arguments: &Value) -> Result<T, String> {
        serde_json::from_value(arguments.clone()).map_err(|e| format!("`{name}` arguments: {e}"))
    }
    let call = match name {
        APPLY_PATCH => args::<ApplyPatchArgs>(name, arguments).and_then(|a| {
            crate::apply_patch::parse(&a.input)
                .map(CodexToolCall::ApplyPatch)
                .map_err(|e| format!("`apply_patch` input: {e}"))
        }),
        REQUEST_USER_INPUT => args(name, arguments).map(CodexToolCall::RequestUserInput),
        REQUEST_PERMISSIONS => args(name, arguments).map(CodexToolCall::RequestPermissions),
        CREATE_GOAL => args(name, arguments).map(CodexToolCall::CreateGoal),
        UPDATE_GOAL => args(name, arguments).map(CodexToolCall::UpdateGoal),
        SPAWN_AGENT => args(name, arguments).map(CodexToolCall::SpawnAgent),
        WAIT_AGENT => args::<WaitAgentArgs>(name, arguments).and_then(|a| match a.timeout_ms {
            Some(ms) if !(10_000..=3_600_000).contains(&ms) => Err(format!(
                "`{name}` timeout_ms {ms}: Codex takes 10000 to 3600000"
            )),
            _ => Ok(CodexToolCall::WaitAgent(a)),
        }),
        _ => return None,
    };
    Some(call)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn codex_tools_are_recognised_and_their_arguments_checked() {
        assert!(parse("paperclip_finish", &json!({})).is_none());
        let patch = parse(
            APPLY_PATCH,
            &json!({"input": "*** Begin Patch\n*** Add File: a.txt\n+a\n*** End Patch\n"}),
        );
        assert!(matches!(patch, Some(Ok(CodexToolCall::ApplyPatch(_)))));
        let bad = parse(APPLY_PATCH, &json!({"patch": "x"}))
            .unwrap()
            .unwrap_err();
        assert!(bad.contains("unknown field `patch`"), "{bad}");
        let question = json!({"questions": [{"id": "q", "header": "H", "question": "Q?", "options": [{"label": "a", "description": "A."}]}]});
        assert!(matches!(
            parse(REQUEST_USER_INPUT, &question),
            Some(Ok(CodexToolCall::RequestUserInput(_)))
        ));
        let goal = parse(UPDATE_GOAL, &json!({"status": "done"}))
            .unwrap()
            .unwrap_err();
        assert!(goal.contains("unknown variant `done`"), "{goal}");
        let spawn = json!({"task_name": "helper", "message": "Say hi.", "fork_turns": "none"});
        assert!(matches!(
            parse(SPAWN_AGENT, &spawn),
            Some(Ok(CodexToolCall::SpawnAgent(_)))
        ));
        let short = parse(WAIT_AGENT, &json!({"timeout_ms": 500}))
            .unwrap()
            .unwrap_err();
        assert!(short.contains("10000 to 3600000"), "{short}");
    }
}
