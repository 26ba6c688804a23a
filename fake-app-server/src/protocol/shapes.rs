//! The JSON shapes of Codex 0.169.0's results, notifications and items (copied field by field
//! from recorded real messages; the fidelity test validates them against the real schema).

use serde_json::{json, Map, Value};

/// The version of the Codex the fake plays (`--version`, the user agent, `cliVersion`).
pub fn cli_version() -> &'static str {
    crate::persona::current().version
}

pub use graders::events::now_ms;

pub fn now_s() -> u64 {
    now_ms() / 1000
}

/// What `thread/start` chose for a thread's history, as every thread object then says it
/// (Codex 0.169 echoes the client's `historyMode` and `daybreakEnabled`, measured with
/// `harness explore`; absent or `null`: `paginated` and `null`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryChoice {
    pub history_mode: String,
    pub daybreak_enabled: Option<bool>,
}

impl Default for HistoryChoice {
    fn default() -> Self {
        Self {
            history_mode: "paginated".into(),
            daybreak_enabled: None,
        }
    }
}

/// What a thread object is built from.
#[derive(Debug, Clone)]
pub struct ThreadView<'a> {
    pub id: &'a str,
    pub cwd: &'a str,
    pub ephemeral: bool,
    pub path: Option<&'a str>,
    pub model: &'a str,
    pub model_provider: &'a str,
    pub originator: &'a str,
    pub preview: &'a str,
    pub created_at: u64,
    pub updated_at: u64,
    pub status: Value,
    pub turns: Vec<Value>,
    pub history: &'a HistoryChoice,
}

pub fn thread(view: &ThreadView) -> Value {
    json!({
        "id": view.id,
        "environments": [{"environmentId": "local", "cwd": view.cwd, "runtimeWorkspaceRoots": [view.cwd]}],
        "extra": null,
        "sessionId": view.id,
        "forkedFromId": null,
        "attachedToThreadId": null,
        "parentThreadId": null,
        "preview": view.preview,
        "ephemeral": view.ephemeral,
        "section": null,
        "sectionEnteredAt": null,
        "projectId": null,
        "historyMode": view.history.history_mode,
        "modelProvider": view.model_provider,
        "model": view.model,
        "reasoningEffort": null,
        "createdAt": view.created_at,
        "updatedAt": view.updated_at,
        "recencyAt": view.updated_at,
        "status": view.status,
        "path": view.path,
        "cwd": view.cwd,
        "cliVersion": cli_version(),
        "originator": view.originator,
        "source": "vscode",
        "canAcceptDirectInput": true,
        "threadSource": null,
        "agentNickname": null,
        "agentRole": null,
        "gitInfo": null,
        "name": null,
        "daybreakEnabled": view.history.daybreak_enabled,
        "turns": view.turns,
    })
}

/// The fields thread/start and thread/resume results share besides `thread`.
pub struct ThreadSettingsView<'a> {
    pub cwd: &'a str,
    pub model: &'a str,
    pub model_provider: &'a str,
    pub service_tier: &'a Value,
    pub instruction_sources: Vec<String>,
    pub approval_policy: &'a Value,
    pub approvals_reviewer: &'a str,
    pub sandbox: Value,
    pub active_permission_profile: Value,
}

/// The release's recorded answer to `method` (the persona's `thread_answers.json`) with the
/// fields the fake knows from its state written over it: every other field, and its value,
/// is the real release's.
fn from_recorded(method: &str, known: Value) -> Value {
    let mut result = match crate::persona::current().answer_template(method) {
        Value::Object(recorded) => recorded.clone(),
        _ => Map::new(),
    };
    if let Value::Object(known) = known {
        result.extend(known);
    }
    Value::Object(result)
}

fn known_thread_settings(thread: Value, settings: &ThreadSettingsView) -> Value {
    json!({
        "thread": thread,
        "model": settings.model,
        "modelProvider": settings.model_provider,
        "serviceTier": settings.service_tier,
        "cwd": settings.cwd,
        "runtimeWorkspaceRoots": [settings.cwd],
        "instructionSources": settings.instruction_sources,
        "approvalPolicy": settings.approval_policy,
        "approvalsReviewer": settings.approvals_reviewer,
        "sandbox": settings.sandbox,
        "activePermissionProfile": settings.active_permission_profile,
    })
}

pub fn thread_start_result(thread: Value, settings: &ThreadSettingsView) -> Value {
    from_recorded("thread/start", known_thread_settings(thread, settings))
}

pub fn thread_resume_result(thread: Value, settings: &ThreadSettingsView) -> Value {
    let mut known = known_thread_settings(thread, settings);
    let object = known.as_object_mut().expect("object");
    object.insert(
        "collaborationMode".into(),
        json!({"mode": "default", "settings": {"model": settings.model, "reasoning_effort": null, "developer_instructions": null}}),
    );
    // The fake pages no history: the real release's cursors name its own rollout.
    object.insert("initialTurnsPage".into(), Value::Null);
    object.insert("turnsBackwardsCursor".into(), Value::Null);
    object.insert("itemsBackwardsCursor".into(), Value::Null);
    from_recorded("thread/resume", known)
}

/// A `turn/start` answer: the recorded one's turn, with the fake's turn written over it.
pub fn turn_start_result(turn: Value) -> Value {
    let recorded_turn = match &crate::persona::current().answer_template("turn/start")["turn"] {
        Value::Object(recorded) => recorded.clone(),
        _ => Map::new(),
    };
    let mut merged = recorded_turn;
    if let Value::Object(known) = turn {
        merged.extend(known);
    }
    from_recorded("turn/start", json!({"turn": merged}))
}

/// A turn object. `started_at` / `completed_at` are seconds, like Codex.
pub struct TurnView<'a> {
    pub id: &'a str,
    pub items: Vec<Value>,
    pub items_view: &'a str,
    pub status: &'a str,
    pub error: Value,
    pub started_at: Option<u64>,
    pub completed_at: Option<u64>,
    pub duration_ms: Option<u64>,
}

pub fn turn(view: &TurnView) -> Value {
    json!({
        "id": view.id,
        "rootTurnId": view.id,
        "items": view.items,
        "itemsView": view.items_view,
        "status": view.status,
        "error": view.error,
        "startedAt": view.started_at,
        "completedAt": view.completed_at,
        "durationMs": view.duration_ms,
    })
}

pub fn notification(method: &str, params: Value) -> Value {
    json!({"method": method, "params": params, "emittedAtMs": now_ms()})
}

pub fn user_message_item(id: &str, input: &Value, started: u64, completed: Option<u64>) -> Value {
    let content: Vec<Value> = input
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|item| {
                    let mut item = item.clone();
                    if item.get("type").and_then(Value::as_str) == Some("text")
                        && item.get("text_elements").is_none()
                    {
                        item["text_elements"] = json!([]);
                    }
                    item
                })
                .collect()
        })
        .unwrap_or_default();
    json!({"type": "userMessage", "id": id, "clientId": null, "content": content, "startedAtMs": started, "completedAtMs": completed})
}

pub fn agent_message_item(id: &str, text: &str, started: u64, completed: Option<u64>) -> Value {
    json!({
        "type": "agentMessage", "moderation": null, "id": id, "text": text, "phase": null,
        "memoryCitation": null, "delivery": null, "questions": null,
        "startedAtMs": started, "completedAtMs": completed
    })
}

pub fn plan_item(id: &str, text: &str, started: u64, completed: Option<u64>) -> Value {
    json!({"type": "plan", "id": id, "text": text, "startedAtMs": started, "completedAtMs": completed})
}

/// A commandExecution item. `cmd` is the model's command; Codex shows it as `/bin/bash -lc CMD`,
/// quoted only where a shell needs it (see [`shell_display`]).
#[derive(Clone)]
pub struct CommandView<'a> {
    pub id: &'a str,
    pub cmd: &'a str,
    pub cwd: &'a str,
    pub process_id: Option<String>,
    pub source: &'a str,
    pub status: &'a str,
    pub aggregated_output: Option<&'a str>,
    pub exit_code: Option<i32>,
    pub duration_ms: Option<u64>,
    pub started: u64,
    pub completed: Option<u64>,
}

/// How Codex shows the command it runs: the argv joined as a shell would read it, each word
/// quoted only where it must be (measured with 0.169: `/bin/bash -lc env`, `/bin/bash -lc
/// 'printf probe > p.txt && echo WRITE_SUCCEEDED'`) — the `shlex` crate's join, which Codex uses.
pub fn shell_display(cmd: &str) -> String {
    shlex::try_join(["/bin/bash", "-lc", cmd])
        .unwrap_or_else(|_| format!("/bin/bash -lc '{}'", cmd.replace('\'', "'\\''")))
}

pub fn command_item(view: &CommandView) -> Value {
    json!({
        "type": "commandExecution", "id": view.id, "pluginId": null, "scriptPath": null,
        "command": shell_display(view.cmd), "cwd": view.cwd, "processId": view.process_id,
        "source": view.source, "status": view.status,
        "commandActions": [{"type": "unknown", "command": view.cmd}],
        "aggregatedOutput": view.aggregated_output, "exitCode": view.exit_code,
        "durationMs": view.duration_ms, "startedAtMs": view.started, "completedAtMs": view.completed
    })
}

pub struct DynamicToolView<'a> {
    pub id: &'a str,
    pub tool: &'a str,
    pub arguments: &'a Value,
    pub status: &'a str,
    pub content_items: Value,
    pub success: Value,
    pub duration_ms: Option<u64>,
    pub started: u64,
    pub completed: Option<u64>,
}

pub fn dynamic_tool_item(view: &DynamicToolView) -> Value {
    json!({
        "type": "dynamicToolCall", "id": view.id, "namespace": null, "tool": view.tool,
        "arguments": view.arguments, "status": view.status, "contentItems": view.content_items,
        "success": view.success, "durationMs": view.duration_ms,
        "startedAtMs": view.started, "completedAtMs": view.completed
    })
}

pub fn item_started(item: Value, thread_id: &str, turn_id: &str, started: u64) -> Value {
    notification(
        "item/started",
        json!({"item": item, "threadId": thread_id, "turnId": turn_id, "startedAtMs": started}),
    )
}

pub fn item_completed(item: Value, thread_id: &str, turn_id: &str, completed: u64) -> Value {
    notification(
        "item/completed",
        json!({"item": item, "threadId": thread_id, "turnId": turn_id, "contentTokenCount": null, "completedAtMs": completed}),
    )
}

pub fn thread_status(thread_id: &str, status: Value) -> Value {
    notification(
        "thread/status/changed",
        json!({"threadId": thread_id, "status": status}),
    )
}

pub fn active_status(flags: &[&str]) -> Value {
    json!({"type": "active", "activeFlags": flags})
}

pub fn idle_status() -> Value {
    json!({"type": "idle"})
}

/// Input and output tokens of one response of the scripted model.
pub const TOKENS_IN: u64 = 10;
pub const TOKENS_OUT: u64 = 5;
/// The tokens of one model response (a thread's usage counts in responses).
pub const TOKENS_PER_RESPONSE: u64 = TOKENS_IN + TOKENS_OUT;

/// `thread/tokenUsage/updated` of a thread whose model answered `responses` times, the last of
/// them in `turn_id` (every response of the scripted model uses the same tokens).
pub fn token_usage_updated(
    thread_id: &str,
    turn_id: &str,
    responses: u64,
    context_window: u64,
) -> Value {
    let breakdown = |n: u64| {
        json!({"cacheWriteInputTokens": 0, "cachedInputTokens": 0, "inputTokens": TOKENS_IN * n,
               "outputTokens": TOKENS_OUT * n, "reasoningOutputTokens": 0, "totalTokens": (TOKENS_IN + TOKENS_OUT) * n})
    };
    notification(
        "thread/tokenUsage/updated",
        json!({"threadId": thread_id, "turnId": turn_id, "tokenUsage": {
            "last": breakdown(1), "total": breakdown(responses),
            "modelContextWindow": context_window}}),
    )
}

#[cfg(test)]
mod tests {
    use super::shell_display;

    #[test]
    fn a_command_is_quoted_only_where_a_shell_needs_it_as_codex_shows_it() {
        // Measured with Codex 0.169.
        assert_eq!(shell_display("env"), "/bin/bash -lc env");
        assert_eq!(
            shell_display("printf probe > p.txt && echo WRITE_SUCCEEDED"),
            "/bin/bash -lc 'printf probe > p.txt && echo WRITE_SUCCEEDED'"
        );
        // Still one word a shell reads back as the command.
        let shown = shell_display("echo 'it''s'");
        assert_eq!(
            shlex::split(&shown).unwrap(),
            ["/bin/bash", "-lc", "echo 'it''s'"]
        );
    }
}
