//! The lines the driver sent: its requests (a session, a turn, a relaunch) and its answers to the
//! app-server's requests (approvals, questions, tool calls).

use super::exchange::decision_of;
use super::{id_text, non_null, text, text_at, Fold, Pending, TurnInfo, EXCERPT_CHARS};
use crate::events::{
    ApprovalResolved, Body, Diagnostic, Level, Outcome, ResultProposed, SessionOpenRequested,
    SessionRelaunched, TurnSubmitted,
};
use crate::excerpt::excerpt;
use crate::wire::items::joined_texts;
use crate::wire::{launch_argv, launch_identity, Context};
use serde_json::Value;

impl Fold {
    pub(super) fn driver_line(&mut self, launch: u64, message: &Value, ctx: &Context) {
        let method = text(message, "method");
        let id = message.get("id").map(id_text);
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        match (method, id) {
            (Some(method), Some(id)) => {
                self.record_client_request(launch, &id, &method, &params);
                self.client_request(launch, &method, &id, &params, ctx);
                let time = self.now;
                let state = self.launches.entry(launch).or_default();
                state.requests.insert(
                    id,
                    Pending {
                        method,
                        params,
                        time,
                    },
                );
            }
            (Some(method), None) => self.record_client_notification(launch, &method, &params),
            (None, Some(id)) => self.answer_to_server(launch, &id, message),
            (None, None) => self.push(Body::Diagnostic(Diagnostic {
                level: Level::Warn,
                message: "the driver sent a JSON line that is neither a request, a notification nor a response".into(),
            })),
        }
    }

    fn client_request(
        &mut self,
        launch: u64,
        method: &str,
        id: &str,
        params: &Value,
        ctx: &Context,
    ) {
        match method {
            "initialize" => {
                let experimental = params
                    .pointer("/capabilities/experimentalApi")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                let opted_out = params
                    .pointer("/capabilities/optOutNotificationMethods")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|m| m.as_str().map(str::to_string))
                    .collect();
                let state = self.launches.entry(launch).or_default();
                state.experimental_api = experimental;
                state.initialized = Some(super::InitializeDeclared {
                    experimental_api: experimental,
                    opted_out,
                });
            }
            "thread/start" | "thread/resume" => {
                self.note_relaunch(launch, method, params, ctx);
                self.opens += 1;
                let state = self.launches.entry(launch).or_default();
                let cwd = text(params, "cwd")
                    .or_else(|| state.record.as_ref().and_then(|r| r.cwd.clone()))
                    .unwrap_or_default();
                let experimental_api = state.experimental_api;
                self.push(Body::SessionOpenRequested(SessionOpenRequested {
                    permissions: text(params, "permissions"),
                    cwd,
                    experimental_api,
                }));
            }
            "turn/start" => {
                let collaboration = text_at(params, "/collaborationMode/mode");
                let thread = text(params, "threadId");
                if let Some((request_id, plan_thread)) = self.plan_pending.take() {
                    if plan_thread.is_none() || plan_thread == thread {
                        let decision = if collaboration.as_deref() == Some("plan") {
                            "revise"
                        } else {
                            "accept"
                        };
                        self.push(Body::ApprovalResolved(ApprovalResolved {
                            request_id,
                            decision: decision.into(),
                        }));
                    }
                }
                let input = joined_texts(params, "input").unwrap_or_default();
                let permissions = text(params, "permissions");
                self.push(Body::TurnSubmitted(TurnSubmitted {
                    approval_policy: non_null(params, "approvalPolicy"),
                    approvals_reviewer: text(params, "approvalsReviewer"),
                    index: self.turn_index,
                    permissions: permissions.clone(),
                    collaboration_mode: collaboration.clone(),
                    input_excerpt: excerpt(&input, EXCERPT_CHARS),
                }));
                self.turn_index += 1;
                self.turn_requests.insert(
                    (launch, id.to_string()),
                    TurnInfo {
                        launch: Some(launch),
                        thread,
                        permissions,
                        plan_mode: collaboration.as_deref() == Some("plan"),
                        ..TurnInfo::default()
                    },
                );
            }
            _ => {}
        }
    }

    /// A session opened in a later launch than the last session's: a relaunch.
    fn note_relaunch(&mut self, launch: u64, method: &str, params: &Value, ctx: &Context) {
        let Some((session_launch, _)) = &self.last_session else {
            return;
        };
        let state = self.launches.entry(launch).or_default();
        if *session_launch == launch || state.relaunch_noted {
            return;
        }
        state.relaunch_noted = true;
        let argv = launch_argv(state.record.as_ref().map_or(&[][..], |r| &r.argv));
        let permissions = text(params, "permissions");
        let cwd = text(params, "cwd").unwrap_or_default();
        self.push(Body::SessionRelaunched(SessionRelaunched {
            identity: launch_identity(ctx, &argv, permissions.as_deref(), &cwd),
            policy: ctx.policy,
            argv,
            thread_permissions: permissions,
            resume_thread: (method == "thread/resume")
                .then(|| text(params, "threadId"))
                .flatten(),
        }));
    }

    /// The driver's answer to a server request: a protocol event for every answer (a second one,
    /// one to an id never asked), and what the first answer decided.
    fn answer_to_server(&mut self, launch: u64, id: &str, message: &Value) {
        let Some(pending) = self
            .launches
            .entry(launch)
            .or_default()
            .server_requests
            .remove(id)
        else {
            self.record_server_answer(launch, id, None, message);
            return;
        };
        self.record_server_answer(launch, id, Some((&pending.method, pending.time)), message);
        let result = message.get("result").cloned().unwrap_or(Value::Null);
        match pending.method.as_str() {
            "item/commandExecution/requestApproval"
            | "item/fileChange/requestApproval"
            | "item/permissions/requestApproval"
            | "execCommandApproval"
            | "applyPatchApproval" => {
                let decision = match decision_of(&result) {
                    Some(decision) => decision,
                    None if message.get("error").is_some() => "error".into(),
                    None => "none".into(),
                };
                if decision.starts_with("accept") || decision == "approved" {
                    // An approved command runs outside Codex's sandbox.
                    if let Some(item) = text(&pending.params, "itemId") {
                        self.approved_items.insert(item);
                    }
                }
                self.push(Body::ApprovalResolved(ApprovalResolved {
                    request_id: id.to_string(),
                    decision,
                }));
            }
            "item/tool/call" => self.tool_answer(&pending.params, &result),
            _ => {}
        }
    }

    /// The result tools of the task (`paperclip_finish`, `paperclip_block`): an answer with
    /// `success: true` is the driver accepting the result it reports to its user.
    fn tool_answer(&mut self, params: &Value, result: &Value) {
        if self.result_accepted || result.get("success").and_then(Value::as_bool) != Some(true) {
            return;
        }
        let args = params.get("arguments").cloned().unwrap_or(Value::Null);
        let field = |k: &str| text(&args, k).filter(|s| !s.is_empty());
        let proposed = match text(params, "tool").as_deref() {
            Some("paperclip_finish") => {
                let outcome = match field("status").as_deref() {
                    Some("done") => Outcome::Done,
                    Some("blocked") => Outcome::Blocked,
                    _ => return,
                };
                let Some(summary) = field("summary") else {
                    return;
                };
                ResultProposed {
                    outcome,
                    summary,
                    owner: None,
                    action: None,
                }
            }
            Some("paperclip_block") => {
                let (Some(owner), Some(action)) = (field("owner"), field("action")) else {
                    return;
                };
                ResultProposed {
                    outcome: Outcome::Blocked,
                    summary: field("summary").unwrap_or_else(|| action.clone()),
                    owner: Some(owner),
                    action: Some(action),
                }
            }
            _ => return,
        };
        self.result_accepted = true;
        self.push(Body::ResultProposed(proposed));
    }
}
