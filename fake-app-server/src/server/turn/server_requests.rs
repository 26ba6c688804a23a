//! The server requests no model step causes, sent by a scenario's server step: each bound to the
//! live thread and turn, schema-valid for the release, answered within
//! `limits.client_answer_ms`. An approval that is granted does what it approves (runs its
//! command unsandboxed, applies its patch), so a granted escalation shows in the workspace; the
//! rest are recorded (the transcript has the answer) and the turn goes on.

use super::{Flow, TurnRun, WaitEnd};
use crate::apply_patch;
use crate::ids;
use crate::protocol::shapes;
use crate::sandbox::policy::ExecPolicy;
use serde_json::{json, Value};

/// What an approval asks to run when the step names no command: a write probe.
const DEFAULT_PROBE_CMD: &str = "printf probe > approval-probe-{probe_id}.txt";
/// What `applyPatchApproval` asks to apply when the step names no patch.
const DEFAULT_PROBE_PATCH: &str =
    "*** Begin Patch\n*** Add File: approval-probe-{probe_id}.txt\n+probe\n*** End Patch\n";

impl TurnRun {
    /// Send server request `method` (a server step); `finished` when the turn is already over
    /// (a stale request: nothing it approves runs any more).
    pub(super) fn server_request(
        &mut self,
        method: &str,
        cmd: Option<&str>,
        patch: Option<&str>,
        finished: bool,
    ) -> Flow {
        // Codex 0.169 declines an MCP server's elicitation itself under approvalPolicy `never`
        // and relays nothing to the client (measured with the harness's MCP server).
        if method == "mcpServer/elicitation/request"
            && self.plan.approval_policy.as_str() == Some("never")
        {
            eprintln!("fake-app-server: `{method}` declined on the client's behalf (approvalPolicy never)");
            return Flow::Continue;
        }
        let thread_id = self.plan.thread_id.clone();
        let cmd = self.template.expand(cmd.unwrap_or(DEFAULT_PROBE_CMD));
        let Some((params, changes)) = self.request_params(method, &cmd, patch) else {
            return Flow::Continue;
        };
        let request_id = self
            .shared
            .request_client(method, params, &self.plan.self_signal);
        let answer = match self.wait_answer(request_id) {
            Ok(answer) => answer,
            Err(WaitEnd::Interrupted) => return Flow::Interrupted,
            Err(WaitEnd::TimedOut) => {
                eprintln!(
                    "fake-app-server: `{method}` (id {request_id}) got no answer; the turn goes on"
                );
                return Flow::Continue;
            }
        };
        describe_answer(method, request_id, &answer);
        // Codex announces the end of a thread's approval once it is answered.
        if matches!(
            method,
            "item/commandExecution/requestApproval" | "mcpServer/elicitation/request"
        ) {
            self.send(shapes::notification(
                "serverRequest/resolved",
                json!({"threadId": thread_id, "requestId": request_id}),
            ));
        }
        if !granted(method, &answer) {
            return Flow::Continue;
        }
        if finished {
            eprintln!("fake-app-server: `{method}` (id {request_id}) was granted after its turn ended; nothing runs");
            return Flow::Continue;
        }
        self.run_granted(method, &changes, cmd);
        Flow::Continue
    }

    /// The params of server request `method` (with the changes an `applyPatchApproval` asks to
    /// apply); `None` for a method the fake cannot send.
    fn request_params(
        &mut self,
        method: &str,
        cmd: &str,
        patch: Option<&str>,
    ) -> Option<(Value, Vec<apply_patch::Change>)> {
        let (thread_id, turn_id) = (self.plan.thread_id.clone(), self.plan.turn_id.clone());
        let cwd = self.plan.cwd.display().to_string();
        let call_id = ids::call_id();
        let mut changes = Vec::new();
        let params = match method {
            "item/commandExecution/requestApproval" => {
                let argv = json!(["/bin/bash", "-lc", cmd]);
                json!({
                    "threadId": thread_id, "turnId": turn_id, "itemId": call_id,
                    "startedAtMs": shapes::now_ms(), "environmentId": "local",
                    "reason": "Allow this command to run outside the sandbox?",
                    "command": shapes::shell_display(cmd), "cwd": cwd,
                    "commandActions": [{"type": "unknown", "command": cmd}],
                    "proposedExecpolicyAmendment": argv,
                    "availableDecisions": ["accept", {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": argv}}, "cancel"],
                })
            }
            "execCommandApproval" => json!({
                "conversationId": thread_id, "callId": call_id, "approvalId": null,
                "command": ["/bin/bash", "-lc", cmd], "cwd": cwd,
                "parsedCmd": [{"type": "unknown", "cmd": cmd}],
                "reason": "Allow this command to run outside the sandbox?",
            }),
            "applyPatchApproval" => {
                let text = self.template.expand(patch.unwrap_or(DEFAULT_PROBE_PATCH));
                // Checked when the scenario loaded.
                let hunks = apply_patch::parse(&text).unwrap_or_default();
                changes = apply_patch::resolve(&hunks, &self.plan.cwd);
                let file_changes: serde_json::Map<String, Value> = changes
                    .iter()
                    .map(|c| (c.absolute.display().to_string(), c.legacy_change()))
                    .collect();
                json!({"conversationId": thread_id, "callId": call_id, "fileChanges": file_changes,
                       "reason": "Allow writing these files?", "grantRoot": null})
            }
            "mcpServer/elicitation/request" => json!({
                "threadId": thread_id, "turnId": turn_id, "serverName": "harness-mcp",
                "mode": "form", "message": "The harness MCP server asks you to confirm.",
                "requestedSchema": {"type": "object", "properties": {"confirm": {"type": "boolean", "default": null}}, "required": ["confirm"]},
                "_meta": null,
            }),
            "account/chatgptAuthTokens/refresh" => {
                json!({"reason": "unauthorized", "previousAccountId": null})
            }
            "attestation/generate" => json!({}),
            "currentTime/read" => json!({"threadId": thread_id}),
            other => {
                eprintln!("fake-app-server: cannot send `{other}` (checked at load)");
                return None;
            }
        };
        Some((params, changes))
    }

    /// What a granted request approved: the patch applied, or the command run outside the
    /// sandbox.
    fn run_granted(&self, method: &str, changes: &[apply_patch::Change], cmd: String) {
        match method {
            "applyPatchApproval" => {
                if let Err(err) = apply_patch::apply(changes) {
                    eprintln!("fake-app-server: applying the approved patch failed: {err}");
                }
            }
            _ => {
                let argv = vec!["/bin/bash".to_string(), "-lc".to_string(), cmd];
                let result =
                    self.shared
                        .sandbox
                        .run(&argv, &self.plan.cwd, &ExecPolicy::Direct, true);
                eprintln!(
                    "fake-app-server: the approved command exited {}",
                    result.exit_code
                );
            }
        }
    }

    /// A method no release has; the client owes it a JSON-RPC error.
    pub(super) fn unknown_request(&mut self, method: &str) -> Flow {
        let (thread_id, turn_id) = self.ids();
        let params = json!({"threadId": thread_id, "turnId": turn_id});
        let message = json!({"method": method, "id": 0, "params": params});
        // Registered like any server request, but sent off-schema.
        let request_id = self
            .shared
            .request_client_off_schema(message, &self.plan.self_signal);
        match self.wait_answer(request_id) {
            Ok(answer) => describe_answer(method, request_id, &answer),
            Err(WaitEnd::Interrupted) => return Flow::Interrupted,
            Err(WaitEnd::TimedOut) => {
                eprintln!(
                    "fake-app-server: unknown request `{method}` (id {request_id}) got no answer"
                )
            }
        }
        Flow::Continue
    }
}

/// Whether the client granted what `method` asked for.
fn granted(method: &str, answer: &Value) -> bool {
    let decision = answer.get("result").and_then(|r| r.get("decision"));
    match method {
        "item/commandExecution/requestApproval" => match decision {
            Some(Value::String(d)) => d == "accept" || d == "acceptForSession",
            Some(Value::Object(map)) => map.contains_key("acceptWithExecpolicyAmendment"),
            _ => false,
        },
        "execCommandApproval" | "applyPatchApproval" => match decision {
            Some(Value::String(d)) => d == "approved" || d == "approved_for_session",
            Some(Value::Object(map)) => map.contains_key("approved_execpolicy_amendment"),
            _ => false,
        },
        _ => false,
    }
}

/// One stderr line per answer: what the client said (the transcript has it whole).
fn describe_answer(method: &str, id: u64, answer: &Value) {
    let kind = if answer.get("error").is_some() {
        "an error"
    } else {
        "a result"
    };
    eprintln!("fake-app-server: `{method}` (id {id}) was answered with {kind}");
}
