//! The lines the app-server sent: its responses to the driver's requests, its own requests
//! (approvals, questions, tool calls) and its notifications (turns, items, plans, reviews).

use super::{id_text, non_null, text, text_at, Fold, Pending, EXCERPT_CHARS};
use crate::events::{
    ApprovalKind, ApprovalRequested, AutoReview, Body, Diagnostic, Item, ItemEvent, Level,
    PlanStep, PlanUpdated, SandboxFacts, SessionRejected, SessionStarted, TurnCompleted, TurnError,
    TurnStarted,
};
use crate::excerpt::excerpt;
use crate::wire::items::reduce;
use serde_json::Value;

impl Fold {
    pub(super) fn server_line(&mut self, launch: u64, message: &Value) {
        let method = text(message, "method");
        let id = message.get("id").map(id_text);
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        self.note_server_line(Some(message), None);
        match (method, id) {
            (None, Some(id)) => self.response(launch, &id, message),
            (Some(method), Some(id)) => self.server_request(launch, &method, &id, params),
            (Some(method), None) => {
                self.count_notification(&method, &params, message);
                self.notification(&method, &params);
            }
            (None, None) => {
                let state = self.launches.entry(launch).or_default();
                state.end.fault.get_or_insert(
                    "the app-server sent a JSON line that is not a JSON-RPC message".into(),
                );
            }
        }
    }

    fn response(&mut self, launch: u64, id: &str, message: &Value) {
        let state = self.launches.entry(launch).or_default();
        let Some(pending) = state.requests.remove(id) else {
            return;
        };
        self.record_client_answer(launch, id, &pending.method, pending.time, message);
        let error = message.get("error");
        let result = message.get("result").cloned().unwrap_or(Value::Null);
        match pending.method.as_str() {
            "thread/start" | "thread/resume" => match error {
                Some(error) => {
                    self.rejections += 1;
                    self.push(Body::SessionRejected(SessionRejected {
                        code: error
                            .get("code")
                            .and_then(Value::as_i64)
                            .unwrap_or_default(),
                        message: text(error, "message").unwrap_or_default(),
                        attempt: self.opens,
                    }));
                }
                None => {
                    let thread_id = text_at(&result, "/thread/id").unwrap_or_default();
                    self.sessions += 1;
                    self.last_session = Some((launch, thread_id.clone()));
                    self.push(Body::SessionStarted(SessionStarted {
                        approval_policy: non_null(&result, "approvalPolicy"),
                        approvals_reviewer: text(&result, "approvalsReviewer"),
                        thread_id,
                        sandbox: SandboxFacts {
                            sandbox: result.get("sandbox").cloned(),
                            active_profile: text_at(&result, "/activePermissionProfile/id"),
                            instruction_sources: result
                                .get("instructionSources")
                                .and_then(Value::as_array)
                                .map(|a| {
                                    a.iter()
                                        .filter_map(|s| s.as_str().map(str::to_string))
                                        .collect()
                                })
                                .unwrap_or_default(),
                        },
                    }));
                }
            },
            "turn/start" => {
                let info = self
                    .turn_requests
                    .remove(&(launch, id.to_string()))
                    .unwrap_or_default();
                match (error, result.pointer("/turn/id").and_then(Value::as_str)) {
                    (None, Some(turn_id)) => {
                        self.turns.insert(turn_id.to_string(), info);
                    }
                    _ => self.push(Body::Diagnostic(Diagnostic {
                        level: Level::Warn,
                        message: format!(
                            "turn/start was refused: {}",
                            error
                                .and_then(|e| text(e, "message"))
                                .unwrap_or_else(|| "no turn id in the result".into())
                        ),
                    })),
                }
            }
            "initialize" => {
                if let Some(error) = error {
                    self.push(Body::Diagnostic(Diagnostic {
                        level: Level::Warn,
                        message: format!(
                            "initialize was refused: {}",
                            text(error, "message").unwrap_or_default()
                        ),
                    }));
                }
            }
            _ => {}
        }
    }

    fn server_request(&mut self, launch: u64, method: &str, id: &str, params: Value) {
        self.record_server_request(launch, id, method, &params);
        let kind = match method {
            "item/commandExecution/requestApproval" | "execCommandApproval" => {
                Some(ApprovalKind::Command)
            }
            "item/fileChange/requestApproval" | "applyPatchApproval" => {
                Some(ApprovalKind::FileChange)
            }
            "item/permissions/requestApproval" => Some(ApprovalKind::Permissions),
            _ => None,
        };
        if let Some(kind) = kind {
            let command = match params.get("command") {
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Array(parts)) => Some(
                    parts
                        .iter()
                        .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_string))
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
                _ => None,
            };
            self.push(Body::ApprovalRequested(ApprovalRequested {
                available_decisions: params
                    .get("availableDecisions")
                    .and_then(Value::as_array)
                    .cloned(),
                request_id: id.to_string(),
                kind,
                item_id: text(&params, "itemId"),
                command,
                reason: text(&params, "reason"),
            }));
        }
        self.launches
            .entry(launch)
            .or_default()
            .server_requests
            .insert(
                id.to_string(),
                Pending {
                    method: method.to_string(),
                    params,
                    time: self.now,
                },
            );
    }

    fn notification(&mut self, method: &str, params: &Value) {
        match method {
            "turn/started" => {
                if let Some(turn_id) = params.pointer("/turn/id").and_then(Value::as_str) {
                    self.turns.entry(turn_id.to_string()).or_default();
                    self.push(Body::TurnStarted(TurnStarted {
                        turn_id: turn_id.to_string(),
                    }));
                }
            }
            "turn/completed" => self.turn_completed(params),
            "item/started" | "item/completed" => self.item(method, params),
            "error" => {
                let error = params.get("error").cloned().unwrap_or(Value::Null);
                self.push(Body::TurnError(TurnError {
                    turn_id: text(params, "turnId"),
                    message: excerpt(&text(&error, "message").unwrap_or_default(), EXCERPT_CHARS),
                    will_retry: params.get("willRetry").and_then(Value::as_bool),
                    codex_error_info: non_null(&error, "codexErrorInfo"),
                    additional_details: text(&error, "additionalDetails")
                        .map(|d| excerpt(&d, EXCERPT_CHARS)),
                }));
            }
            "item/autoApprovalReview/started" | "item/autoApprovalReview/completed" => {
                let review = AutoReview {
                    review_id: text(params, "reviewId").unwrap_or_default(),
                    target_item_id: text(params, "targetItemId"),
                    status: text_at(params, "/review/status").unwrap_or_default(),
                    command: text_at(params, "/action/command"),
                    rationale: text_at(params, "/review/rationale")
                        .map(|r| excerpt(&r, EXCERPT_CHARS)),
                    decision_source: text(params, "decisionSource"),
                };
                self.push(if method.ends_with("/started") {
                    Body::ReviewStarted(review)
                } else {
                    Body::ReviewCompleted(review)
                });
            }
            "turn/plan/updated" => {
                let steps = params
                    .get("plan")
                    .and_then(Value::as_array)
                    .map(|steps| {
                        steps
                            .iter()
                            .map(|s| PlanStep {
                                step: text(s, "step").unwrap_or_default(),
                                status: text(s, "status").unwrap_or_default(),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                self.push(Body::PlanUpdated(PlanUpdated {
                    turn_id: text(params, "turnId"),
                    explanation: text(params, "explanation"),
                    steps,
                }));
            }
            _ => {}
        }
    }

    /// `turn/completed`: the turn's end, and in plan mode the plan it proposed, as an approval request.
    fn turn_completed(&mut self, params: &Value) {
        let turn = params.get("turn").cloned().unwrap_or(Value::Null);
        let turn_id = text(&turn, "id").unwrap_or_default();
        let error = match turn.get("error") {
            Some(Value::Object(e)) => e.get("message").and_then(Value::as_str).map(str::to_string),
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        self.push(Body::TurnCompleted(TurnCompleted {
            codex_error_info: turn
                .get("error")
                .and_then(|e| e.get("codexErrorInfo"))
                .filter(|v| !v.is_null())
                .cloned(),
            turn_id: turn_id.clone(),
            status: text(&turn, "status").unwrap_or_default(),
            error,
        }));
        let info = self.turns.entry(turn_id).or_default();
        info.completed = true;
        if let (true, Some((item_id, plan))) = (info.plan_mode, info.plan_item.clone()) {
            let thread = info.thread.clone();
            self.plans_seen += 1;
            let request_id = format!("plan-{}", self.plans_seen);
            self.push(Body::ApprovalRequested(ApprovalRequested {
                available_decisions: None,
                request_id: request_id.clone(),
                kind: ApprovalKind::Plan,
                item_id: Some(item_id),
                command: None,
                reason: Some(excerpt(&plan, EXCERPT_CHARS)),
            }));
            self.plan_pending = Some((request_id, thread));
        }
    }

    /// `item/started` and `item/completed`: the item reduced, a plan item kept for its turn.
    fn item(&mut self, method: &str, params: &Value) {
        let turn_id = text(params, "turnId");
        let sandbox = turn_id
            .as_ref()
            .and_then(|t| self.turns.get(t))
            .and_then(|t| t.permissions.clone());
        let item = reduce(
            params.get("item").unwrap_or(&Value::Null),
            sandbox.as_deref(),
            &self.approved_items,
        );
        let event = ItemEvent {
            turn_id: turn_id.clone(),
            item,
        };
        if method == "item/started" {
            self.push(Body::ItemStarted(event));
        } else {
            if let (Item::Plan { id, text }, Some(turn)) = (&event.item, &turn_id) {
                self.turns.entry(turn.clone()).or_default().plan_item =
                    Some((id.clone(), text.clone()));
            }
            self.push(Body::ItemCompleted(event));
        }
    }
}
