//! The transcript → run events fold (the rules are in `docs/events.md`, "Events from the
//! wire"). Launches are folded in record order; each keeps its own pending requests, so two
//! app-servers of one driver never mix their ids.

use super::items::{excerpt, joined_texts, reduce};
use super::terminal::{self, LaunchEnd, WireTerminal};
use super::transcript::{Direction, Launch, Record};
use super::{launch_argv, launch_identity, Context};
use crate::events::{
    ApprovalKind, ApprovalRequested, ApprovalResolved, AutoReview, Body, Diagnostic, Item,
    ItemEvent, LaunchSummary, Level, Outcome, PlanStep, PlanUpdated, ResultProposed, RunStarted,
    SandboxFacts, SessionOpenRequested, SessionRejected, SessionRelaunched, SessionStarted,
    TurnCompleted, TurnError, TurnStarted, TurnSubmitted,
};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};

/// Longest user text kept in `turn.submitted.input_excerpt`, and plan text in a plan approval.
const EXCERPT_CHARS: usize = 500;

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

/// The string at a JSON pointer (`/review/status`).
fn text_at(v: &Value, pointer: &str) -> Option<String> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .map(str::to_string)
}

fn non_null(v: &Value, key: &str) -> Option<Value> {
    v.get(key).filter(|v| !v.is_null()).cloned()
}

fn id_text(id: &Value) -> String {
    id.as_str().map_or_else(|| id.to_string(), str::to_string)
}

/// A request still waiting for its answer.
#[derive(Debug, Clone)]
struct Pending {
    method: String,
    params: Value,
}

#[derive(Debug, Default)]
struct LaunchState {
    record: Option<Launch>,
    experimental_api: bool,
    /// Client requests by id.
    requests: HashMap<String, Pending>,
    /// Server requests by id.
    server_requests: HashMap<String, Pending>,
    relaunch_noted: bool,
    messages: u64,
    end: LaunchEnd,
}

/// What a turn carried, by turn id.
#[derive(Debug, Clone, Default)]
struct TurnInfo {
    thread: Option<String>,
    permissions: Option<String>,
    plan_mode: bool,
    plan_item: Option<(String, String)>,
    completed: bool,
}

#[derive(Debug, Default)]
struct Fold {
    events: Vec<Body>,
    /// `times[i]`: when the wire line that produced `events[i]` went through the tap.
    times: Vec<u64>,
    /// The time of the record being folded.
    now: u64,
    launches: BTreeMap<u64, LaunchState>,
    turn_index: u32,
    opens: u32,
    rejections: u32,
    sessions: u32,
    /// The thread of the last session that opened, and the launch it opened in.
    last_session: Option<(u64, String)>,
    /// Turn ids announced in `turn/start` results, with what the turn carried.
    turns: HashMap<String, TurnInfo>,
    /// `turn/start` request ids not yet answered → what the turn carried.
    turn_requests: HashMap<(u64, String), TurnInfo>,
    plans_seen: u32,
    /// A plan approval the driver has not yet answered: (request id, thread).
    plan_pending: Option<(String, Option<String>)>,
    result_accepted: bool,
    /// Items whose approval the driver granted.
    approved_items: HashSet<String>,
}

/// Fold `records` into events (without `run.started`, which [`translate`] puts first).
fn fold(records: &[Record], ctx: &Context) -> Fold {
    let mut fold = Fold::default();
    for record in records {
        fold.now = record.time();
        let launch = record.launch();
        let state = fold.launches.entry(launch).or_default();
        match record {
            Record::Launch(l) => state.record = Some(l.clone()),
            Record::Message {
                direction, message, ..
            } => {
                state.messages += 1;
                match direction {
                    Direction::In => fold.driver_line(launch, message, ctx),
                    Direction::Out => fold.server_line(launch, message),
                }
            }
            Record::Raw {
                direction: Direction::Out,
                text,
                ..
            } => {
                state.end.fault.get_or_insert(format!(
                    "the app-server sent a line that is not JSON-RPC: {}",
                    excerpt(text, 200)
                ));
            }
            Record::Raw {
                direction: Direction::In,
                text,
                ..
            } => fold.push(Body::Diagnostic(Diagnostic {
                level: Level::Warn,
                message: format!(
                    "the driver sent a line that is not JSON: {}",
                    excerpt(text, 200)
                ),
            })),
            Record::Note {
                direction: Direction::Out,
                bytes: Some(bytes),
                ..
            } => {
                state.end.fault.get_or_insert(format!(
                    "the app-server sent an oversized line of {bytes} bytes"
                ));
            }
            Record::Note { .. } => {}
            Record::StdinClosed { time, .. } => state.end.stdin_closed = Some(*time),
            Record::Exit {
                time,
                status,
                signal,
                error,
                ..
            } => {
                state.end.exit = Some(terminal::Exit {
                    time: *time,
                    status: *status,
                    signal: *signal,
                    error: error.clone(),
                });
            }
        }
    }
    for state in fold.launches.values_mut() {
        state.end.pending = state.requests.values().map(|p| p.method.clone()).collect();
        state.end.pending.sort();
        state.end.messages = state.messages;
    }
    let open_turns: Vec<String> = fold
        .turns
        .iter()
        .filter(|(_, t)| !t.completed)
        .map(|(id, _)| id.clone())
        .collect();
    // A turn still open at the end is pending on the launch that started it; which launch is
    // not recorded per turn, so it is charged to the last launch with messages.
    if let Some(state) = fold.launches.values_mut().rev().find(|s| s.messages > 0) {
        state.end.open_turns = open_turns;
    }
    fold
}

impl Fold {
    fn push(&mut self, body: Body) {
        self.events.push(body);
        self.times.push(self.now);
    }

    fn driver_line(&mut self, launch: u64, message: &Value, ctx: &Context) {
        let method = text(message, "method");
        let id = message.get("id").map(id_text);
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        match (method, id) {
            (Some(method), Some(id)) => {
                self.client_request(launch, &method, &id, &params, ctx);
                let state = self.launches.entry(launch).or_default();
                state.requests.insert(id, Pending { method, params });
            }
            (Some(_), None) => {}
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
                self.launches.entry(launch).or_default().experimental_api = experimental;
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

    fn answer_to_server(&mut self, launch: u64, id: &str, message: &Value) {
        let Some(pending) = self
            .launches
            .entry(launch)
            .or_default()
            .server_requests
            .remove(id)
        else {
            return;
        };
        let result = message.get("result").cloned().unwrap_or(Value::Null);
        match pending.method.as_str() {
            "item/commandExecution/requestApproval"
            | "item/fileChange/requestApproval"
            | "item/permissions/requestApproval"
            | "execCommandApproval"
            | "applyPatchApproval" => {
                let decision = match result.get("decision") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Object(map)) => map.keys().next().cloned().unwrap_or_default(),
                    Some(other) => other.to_string(),
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

    fn server_line(&mut self, launch: u64, message: &Value) {
        let method = text(message, "method");
        let id = message.get("id").map(id_text);
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        match (method, id) {
            (None, Some(id)) => self.response(launch, &id, message),
            (Some(method), Some(id)) => self.server_request(launch, &method, &id, params),
            (Some(method), None) => self.notification(&method, &params),
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
            "turn/completed" => {
                let turn = params.get("turn").cloned().unwrap_or(Value::Null);
                let turn_id = text(&turn, "id").unwrap_or_default();
                let error = match turn.get("error") {
                    Some(Value::Object(e)) => {
                        e.get("message").and_then(Value::as_str).map(str::to_string)
                    }
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
            "item/started" | "item/completed" => {
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
}

/// The first launch that talked (else the first launch): its argv is the run's launch.
fn first_server_launch(fold: &Fold) -> Option<&Launch> {
    fold.launches
        .values()
        .find(|s| s.messages > 0)
        .or_else(|| fold.launches.values().next())
        .and_then(|s| s.record.as_ref())
}

/// The events of `records` (`run.started` first, no `run.ended`) and the terminal the wire shows.
/// The events, the wire time of each (`run.started`: the first launch's), and the terminal.
pub fn events_and_terminal(
    records: &[Record],
    ctx: &Context,
) -> (Vec<Body>, Vec<u64>, WireTerminal) {
    let fold = fold(records, ctx);
    let argv = launch_argv(first_server_launch(&fold).map_or(&[][..], |l| &l.argv));
    let first_of =
        |pick: fn(&Body) -> Option<Option<String>>| fold.events.iter().find_map(pick).flatten();
    let thread_permissions = first_of(|b| match b {
        Body::SessionOpenRequested(o) => Some(o.permissions.clone()),
        _ => None,
    });
    // A turn that carries no profile keeps the thread's (and so does a run that never got to a
    // turn): that is the profile its turns run under.
    let turn_permissions = first_of(|b| match b {
        Body::TurnSubmitted(t) => Some(t.permissions.clone()),
        _ => None,
    })
    .or_else(|| thread_permissions.clone());
    let cwd = fold
        .events
        .iter()
        .find_map(|b| match b {
            Body::SessionOpenRequested(o) => Some(o.cwd.clone()),
            _ => None,
        })
        .unwrap_or_default();
    let identity = launch_identity(ctx, &argv, thread_permissions.as_deref(), &cwd);
    let mut events = vec![Body::RunStarted(RunStarted {
        cell: ctx.cell.clone(),
        driver: ctx.driver.clone(),
        launch: LaunchSummary {
            mode: ctx.mode,
            target: ctx.target,
            network_enabled: ctx.network_enabled,
            policy: ctx.policy,
            argv,
            thread_permissions,
            turn_permissions,
            identity,
        },
    })];
    let launches: Vec<LaunchEnd> = fold.launches.values().map(|s| s.end.clone()).collect();
    let wire = WireTerminal {
        launches,
        opens: fold.opens,
        rejections: fold.rejections,
        sessions: fold.sessions,
    };
    let started_at = records.first().map_or(0, Record::time);
    let mut times = vec![started_at];
    times.extend(fold.times);
    events.extend(fold.events);
    (events, times, wire)
}
