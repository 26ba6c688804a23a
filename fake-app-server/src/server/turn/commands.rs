//! The shell steps of a turn: a command the sandbox runs, one escalated to the client for
//! approval, and one the automatic reviewer decides; each with the items, output and model
//! log entries Codex gives it.

use super::{auto_review, exec_approval, remembered, Flow, TurnRun, WaitEnd};
use crate::ids;
use crate::model_log::ModelLogEntry;
use crate::model_log_writer::{exec_output_text, rejected_output, APPROVAL_NEVER_OUTPUT};
use crate::protocol::shapes::{self, CommandView};
use crate::sandbox::policy::{ExecPolicy, LegacyPolicy, Permissions};
use crate::sandbox::ExecResult;
use crate::scenario::model::{write_outcome_told, Review};
use serde_json::{json, Value};

impl TurnRun {
    pub(super) fn shell(
        &mut self,
        cmd: &str,
        escalate: bool,
        justification: Option<&str>,
        review: Option<&Review>,
    ) -> Flow {
        let call_id = ids::call_id();
        let mut arguments = json!({"cmd": cmd});
        if escalate {
            arguments["sandbox_permissions"] = json!("require_escalated");
            if let Some(j) = justification {
                arguments["justification"] = json!(j);
            }
        }
        self.log(ModelLogEntry::ToolCall {
            call_id: call_id.clone(),
            name: "exec_command".into(),
            arguments: arguments.to_string(),
        });
        let argv = vec!["/bin/bash".to_string(), "-lc".to_string(), cmd.to_string()];
        // Without a sandbox nothing escalates: Codex 0.169 under danger-full-access, be it the
        // sandbox mode or the `:danger-full-access` permission profile (of thread/start or
        // turn/start), runs the command the model asked to escalate at once, asking nobody and
        // running no automatic review (measured under `on-request` with `harness explore`,
        // corpus `full-access-profile-escalation-*`).
        let unsandboxed = match &self.plan.permissions {
            Permissions::Legacy(policy) => *policy == LegacyPolicy::DangerFullAccess,
            Permissions::Profile(profile) => profile.unsandboxed,
        };
        // Under `untrusted` Codex 0.169 asks before every command, sandboxed or not (see
        // `exec_approval`), and asks the client even where `approvalsReviewer` is
        // `auto_review`: no automatic review runs (measured).
        let asks_every_command =
            exec_approval::asks_before_every_action(&self.plan.approval_policy);
        if asks_every_command || (escalate && !unsandboxed) {
            // Approved for the session, or allowed by an amendment's rule: run outside the
            // sandbox, nobody asked, the item as a sandboxed command's (measured with 0.169).
            if self.command_remembered(&argv, escalate) {
                self.run_command(call_id, cmd, &argv, &ExecPolicy::Direct);
                return Flow::Continue;
            }
            if self.plan.approval_policy.as_str() == Some("never") {
                self.tell_exec(call_id, APPROVAL_NEVER_OUTPUT.into());
                return Flow::Continue;
            }
            if self.plan.approvals_reviewer == "auto_review" && !asks_every_command {
                let review = review.cloned().unwrap_or_else(Review::unscripted);
                return self.auto_reviewed_shell(call_id, cmd, &review, &argv);
            }
            return self.escalated_shell(call_id, cmd, justification, &argv, escalate);
        }
        let policy = self.plan.permissions.exec_policy(&self.plan.cwd);
        self.run_command(call_id, cmd, &argv, &policy);
        Flow::Continue
    }

    /// Run `argv` under `policy`, nobody asked: its item (unless the sandbox denied it) and
    /// what the model is told.
    fn run_command(&mut self, call_id: String, cmd: &str, argv: &[String], policy: &ExecPolicy) {
        let (thread_id, turn_id) = (self.plan.thread_id.clone(), self.plan.turn_id.clone());
        let cwd = self.plan.cwd.display().to_string();
        let result = self.shared.sandbox.run(argv, &self.plan.cwd, policy, true);
        if !result.looks_like_sandbox_denial() {
            // A fast command's item/started goes out after it finished, as with Codex.
            let started = shapes::now_ms().saturating_sub(result.duration.as_millis() as u64);
            let view = CommandView::in_progress(
                &call_id,
                cmd,
                &cwd,
                "unifiedExecStartup",
                result.pid.map(|p| p.to_string()),
                started,
            );
            self.send(shapes::item_started(
                shapes::command_item(&view),
                &thread_id,
                &turn_id,
                started,
            ));
            self.complete_command(view, &result);
        }
        self.log_exec_output(call_id, &result);
    }

    fn command_key(&self, argv: &[String], escalated: bool) -> remembered::CommandKey {
        remembered::CommandKey {
            thread_id: self.plan.thread_id.clone(),
            argv: argv.to_vec(),
            cwd: self.plan.cwd.clone(),
            escalated,
        }
    }

    fn command_remembered(&self, argv: &[String], escalated: bool) -> bool {
        let home = remembered::rules_home();
        self.shared
            .remembered()
            .command_allowed(&self.command_key(argv, escalated), home.as_deref())
    }

    /// The command item ends `completed` or `failed` by its exit code, with its output.
    fn complete_command(&mut self, view: CommandView, result: &ExecResult) {
        let completed = shapes::now_ms();
        let done = shapes::command_item(&CommandView {
            status: if result.exit_code == 0 {
                "completed"
            } else {
                "failed"
            },
            // A command that printed nothing completes with `aggregatedOutput: null`, not an
            // empty string (measured with 0.169: `sleep 0`, `true`, `cat /dev/null`).
            aggregated_output: (!result.aggregated.is_empty())
                .then_some(result.aggregated.as_str()),
            exit_code: Some(result.exit_code),
            duration_ms: Some(result.duration.as_millis() as u64),
            completed: Some(completed),
            ..view
        });
        self.complete_item(done, completed);
    }

    /// What the model gets back from a command that ran.
    fn log_exec_output(&mut self, call_id: String, result: &ExecResult) {
        let output = exec_output_text(
            &ids::chunk_id(),
            result.duration,
            result.exit_code,
            &result.aggregated,
        );
        self.tell_exec(call_id, output);
    }

    /// Tell the model what became of its `exec_command` call; `{write_outcome}` follows from
    /// that text, as the mock model API derives it in front of the real Codex.
    fn tell_exec(&mut self, call_id: String, output: String) {
        self.template.write_outcome = Some(write_outcome_told(&output).to_string());
        self.log(ModelLogEntry::ToolOutput { call_id, output });
    }

    fn escalated_shell(
        &mut self,
        call_id: String,
        cmd: &str,
        justification: Option<&str>,
        argv: &[String],
        escalated: bool,
    ) -> Flow {
        let (thread_id, turn_id) = (self.plan.thread_id.clone(), self.plan.turn_id.clone());
        let cwd = self.plan.cwd.display().to_string();
        let started = shapes::now_ms();
        let view = CommandView::escalated(&call_id, cmd, &cwd, started);
        self.send(shapes::thread_status(
            &thread_id,
            shapes::active_status(&["waitingOnApproval"]),
        ));
        self.send(shapes::item_started(
            shapes::command_item(&view),
            &thread_id,
            &turn_id,
            started,
        ));
        let amendment = exec_approval::proposed_amendment(argv);
        let mut params = json!({
            "threadId": thread_id, "turnId": turn_id, "itemId": call_id, "startedAtMs": started,
            "environmentId": "local", "command": shapes::shell_display(cmd),
            "cwd": cwd, "commandActions": [{"type": "unknown", "command": cmd}], "kind": "command",
            "proposedExecpolicyAmendment": amendment,
            "availableDecisions": ["accept", {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": amendment}}, "cancel"],
        });
        // Codex leaves `reason` out when the model gave no justification (an unescalated
        // command asked under `untrusted`; measured with 0.169).
        if let Some(reason) = justification {
            params["reason"] = json!(reason);
        }
        let request_id = self.shared.request_client(
            "item/commandExecution/requestApproval",
            params,
            &self.plan.self_signal,
        );
        let answer = self.wait_answer(request_id);
        if answer == Err(WaitEnd::Interrupted) {
            // Measured with 0.169: the item never completes, the thread stays waiting until the
            // turn ends, and the request is resolved after it.
            self.unresolved.push(request_id);
            return Flow::Interrupted;
        }
        self.send(shapes::notification(
            "serverRequest/resolved",
            json!({"threadId": thread_id, "requestId": request_id}),
        ));
        // An error answer, or a result without a decision the release knows, fails the
        // approval: the item ends `failed`, the model is told so and the turn goes on
        // (measured with 0.169 and `harness explore`).
        let decision = match &answer {
            Ok(message) => decision_of(message).unwrap_or_else(|| "failed".to_string()),
            Err(_) => "cancel".to_string(),
        };
        if let Ok(message) = &answer {
            let home = remembered::rules_home();
            let key = self.command_key(argv, escalated);
            self.shared.remembered().command_accepted(
                key,
                &message["result"]["decision"],
                home.as_deref(),
            );
        }
        self.approval_decided(&decision, call_id.clone(), &view, argv)
    }

    /// What the client's decision on an escalated command does: an accepted command runs
    /// outside the sandbox; a declined or failed one is told to the model; a cancel interrupts
    /// the turn.
    fn approval_decided(
        &mut self,
        decision: &str,
        call_id: String,
        view: &CommandView,
        argv: &[String],
    ) -> Flow {
        match decision {
            "accept"
            | "acceptForSession"
            | "acceptWithExecpolicyAmendment"
            // Runs the command as `accept` does (measured with 0.169, an `allow` amendment).
            | "applyNetworkPolicyAmendment" => {
                self.send(shapes::thread_status(
                    &self.plan.thread_id,
                    shapes::active_status(&[]),
                ));
                let result =
                    self.shared
                        .sandbox
                        .run(argv, &self.plan.cwd, &ExecPolicy::Direct, true);
                // The approved command's item names its process and the unified exec startup
                // that ran it (measured with 0.169 and `harness explore`).
                let ran = CommandView {
                    process_id: result.pid.map(|p| p.to_string()),
                    source: "unifiedExecStartup",
                    ..view.clone()
                };
                self.complete_command(ran, &result);
                self.log_exec_output(call_id, &result);
                Flow::Continue
            }
            "decline" => {
                self.declined(view, "declined");
                self.tell_exec(call_id, rejected_output("rejected by user"));
                Flow::Continue
            }
            "failed" => {
                self.declined(view, "failed");
                self.tell_exec(call_id, rejected_output(APPROVAL_FAILED));
                Flow::Continue
            }
            _ => {
                // cancel (or no answer): the item ends declined and the turn is interrupted;
                // nothing goes back to the model.
                self.declined(view, "declined");
                Flow::Interrupted
            }
        }
    }

    /// A declined command's item completes before the thread leaves `waitingOnApproval`
    /// (measured with 0.169); an accepted one runs after it.
    fn declined(&mut self, view: &CommandView, status: &'static str) {
        let done = shapes::command_item(&CommandView {
            status,
            completed: Some(shapes::now_ms()),
            ..view.clone()
        });
        self.complete_item(done, shapes::now_ms());
        self.send(shapes::thread_status(
            &self.plan.thread_id,
            shapes::active_status(&[]),
        ));
    }

    /// An escalation under `approvalsReviewer: auto_review`: the scripted review decides and
    /// the client is not asked.
    fn auto_reviewed_shell(
        &mut self,
        call_id: String,
        cmd: &str,
        review: &Review,
        argv: &[String],
    ) -> Flow {
        let (thread_id, turn_id) = (self.plan.thread_id.clone(), self.plan.turn_id.clone());
        let cwd = self.plan.cwd.display().to_string();
        let started = shapes::now_ms();
        let view = CommandView::escalated(&call_id, cmd, &cwd, started);
        // Measured with 0.169: the command item starts, the review runs, then the command
        // runs (and its item completes like any command) or the item ends `declined`.
        self.send(shapes::item_started(
            auto_review::with_display_action(shapes::command_item(&view), cmd),
            &thread_id,
            &turn_id,
            started,
        ));
        self.auto_review(
            &call_id,
            auto_review::command_action(cmd, &cwd),
            review,
            started,
        );
        if review.allows() {
            let result = self
                .shared
                .sandbox
                .run(argv, &self.plan.cwd, &ExecPolicy::Direct, true);
            let ran = CommandView {
                process_id: result.pid.map(|p| p.to_string()),
                source: "unifiedExecStartup",
                ..view
            };
            self.complete_command(ran, &result);
            self.log_exec_output(call_id, &result);
        } else {
            let done = shapes::command_item(&CommandView {
                status: "declined",
                completed: Some(shapes::now_ms()),
                ..view
            });
            self.complete_item(
                auto_review::with_display_action(done, cmd),
                shapes::now_ms(),
            );
            self.tell_exec(call_id, auto_review::denied_output(review));
        }
        Flow::Continue
    }
}

/// The decisions of `CommandExecutionApprovalDecision` (0.169's schema): a string one, or the
/// key of an object one.
const COMMAND_DECISIONS: &[&str] = &[
    "accept",
    "acceptForSession",
    "acceptWithExecpolicyAmendment",
    "applyNetworkPolicyAmendment",
    "decline",
    "cancel",
];

/// What the model is told of an approval that failed (`approval request failed`, 0.169).
pub(super) const APPROVAL_FAILED: &str = "approval request failed";

/// The client's decision, `None` for an error answer or a result the schema does not allow.
fn decision_of(message: &Value) -> Option<String> {
    let decision = match message.get("result")?.get("decision")? {
        Value::String(s) => s.clone(),
        Value::Object(map) if map.len() == 1 => map.keys().next().cloned()?,
        _ => return None,
    };
    COMMAND_DECISIONS
        .contains(&decision.as_str())
        .then_some(decision)
}

impl<'a> CommandView<'a> {
    /// A command that has started and not finished, from `source` (`agent` for an escalated
    /// command waiting for its approval, `unifiedExecStartup` for one the sandbox ran).
    fn in_progress(
        id: &'a str,
        cmd: &'a str,
        cwd: &'a str,
        source: &'a str,
        process_id: Option<String>,
        started: u64,
    ) -> CommandView<'a> {
        CommandView {
            id,
            cmd,
            cwd,
            process_id,
            source,
            status: "inProgress",
            aggregated_output: None,
            exit_code: None,
            duration_ms: None,
            started,
            completed: None,
        }
    }

    /// An escalated command waiting for its approval (the model's own `agent` source).
    fn escalated(id: &'a str, cmd: &'a str, cwd: &'a str, started: u64) -> CommandView<'a> {
        Self::in_progress(id, cmd, cwd, "agent", None, started)
    }
}
