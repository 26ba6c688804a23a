//! Codex's own tools when the model calls them (see `crate::scenario::codex_tools`): the items,
//! server requests and notifications Codex 0.169 sends for each, and what the model is told
//! (all measured with the real binary, offline, against a mock of the model API).

use super::{auto_review, exec_approval, Flow, TurnPlan, TurnRun, WaitEnd};
use crate::apply_patch::{self, Change};
use crate::ids;
use crate::model_log::ModelLogEntry;
use crate::protocol::shapes;
use crate::sandbox::policy::ExecPolicy;
use crate::scenario::codex_tools::{
    CodexToolCall, CreateGoalArgs, GoalStatus, PermissionsArgs, UserInputArgs,
};
use crate::scenario::model::Review;
use crate::server::Shared;
use auto_review::ReviewTarget;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Instant;

/// The decisions of `FileChangeApprovalDecision` (0.169's schema).
const FILE_CHANGE_DECISIONS: &[&str] = &["accept", "acceptForSession", "decline", "cancel"];

/// How the client answered an approval request.
enum Approval {
    /// One of the schema's decisions.
    Decision(String),
    /// An error answer, or a result without a decision the schema allows.
    Failed,
    /// The turn was interrupted, or no answer came within the scenario's limit.
    NoAnswer,
}

/// What the model is told when it asks the user outside plan mode (Codex 0.169).
/// What the model is told a `request_permissions` call was granted, in Codex 0.169's key order
/// (`network` before `file_system`, measured with raw events: the text is the model's, as is).
fn permissions_told(network: &Value, file_system: &Value, scope: &str) -> String {
    format!(
        r#"{{"permissions":{{"network":{network},"file_system":{file_system}}},"scope":{}}}"#,
        json!(scope)
    )
}

const USER_INPUT_UNAVAILABLE: &str = "request_user_input is unavailable in Default mode";

impl TurnRun {
    pub(super) fn codex_tool(
        &mut self,
        name: &str,
        arguments: &Value,
        call: CodexToolCall,
    ) -> Flow {
        let call_id = ids::call_id();
        self.log(ModelLogEntry::ToolCall {
            call_id: call_id.clone(),
            name: name.to_string(),
            arguments: arguments.to_string(),
        });
        match call {
            CodexToolCall::ApplyPatch(hunks) => self.apply_patch(call_id, &hunks),
            CodexToolCall::RequestUserInput(args) => self.request_user_input(call_id, &args),
            CodexToolCall::RequestPermissions(args) => self.request_permissions(call_id, &args),
            CodexToolCall::CreateGoal(args) => {
                self.create_goal(call_id, &args);
                Flow::Continue
            }
            CodexToolCall::UpdateGoal(args) => {
                self.update_goal(call_id, args.status);
                Flow::Continue
            }
            // The fake plays no sub-agents (another thread's turn is its builtin
            // `foreign-thread-events`): it answers as Codex does without `multi_agent_v2`.
            CodexToolCall::SpawnAgent(_) | CodexToolCall::WaitAgent(_) => {
                self.tell(call_id, format!("unsupported call: {name}"));
                Flow::Continue
            }
        }
    }

    fn tell(&self, call_id: String, output: String) {
        self.log(ModelLogEntry::ToolOutput { call_id, output });
    }

    /// Whether the thread's sandbox lets Codex write every changed file without asking.
    fn may_write(&self, changes: &[Change]) -> bool {
        match self.plan.permissions.exec_policy(&self.plan.cwd) {
            ExecPolicy::Direct => true,
            ExecPolicy::Sandboxed(spec) => changes
                .iter()
                .all(|c| spec.writable.iter().any(|w| c.absolute.starts_with(w))),
        }
    }

    fn file_change_item(
        &self,
        id: &str,
        changes: &[Change],
        status: &str,
        started: u64,
        completed: Option<u64>,
    ) -> Value {
        let changes: Vec<Value> = changes.iter().map(Change::item_change).collect();
        json!({"type": "fileChange", "id": id, "changes": changes, "status": status, "startedAtMs": started, "completedAtMs": completed})
    }

    /// `apply_patch`: applied at once where the sandbox may write (never under `untrusted`);
    /// else, unless the approval policy is `never`, `item/fileChange/requestApproval` decides
    /// (accept applies it and writes the workspace, decline tells the model, cancel or no
    /// answer interrupts the turn).
    fn apply_patch(&mut self, call_id: String, hunks: &[apply_patch::Hunk]) -> Flow {
        let (thread_id, turn_id) = (self.plan.thread_id.clone(), self.plan.turn_id.clone());
        let changes = apply_patch::resolve(hunks, &self.plan.cwd);
        let untrusted = exec_approval::asks_before_every_action(&self.plan.approval_policy);
        let files: Vec<std::path::PathBuf> = changes.iter().map(|c| c.absolute.clone()).collect();
        // Files accepted for the session are written without asking (measured with 0.169).
        let remembered = self.shared.remembered().files_allowed(&thread_id, &files);
        let writable = (self.may_write(&changes) && !untrusted) || remembered;
        if !writable && self.plan.approval_policy.as_str() == Some("never") {
            self.tell(call_id, apply_patch::READ_ONLY_NEVER_OUTPUT.into());
            return Flow::Continue;
        }
        let began = Instant::now();
        let started = shapes::now_ms();
        self.send(shapes::item_started(
            self.file_change_item(&call_id, &changes, "inProgress", started, None),
            &thread_id,
            &turn_id,
            started,
        ));
        // Under `untrusted` the client is asked even with the automatic reviewer (measured
        // with 0.169).
        if !writable && self.plan.approvals_reviewer == "auto_review" && !untrusted {
            let review = Review::unscripted();
            let files: Vec<String> = changes
                .iter()
                .map(|c| c.absolute.display().to_string())
                .collect();
            let cwd = self.plan.cwd.display().to_string();
            let action = auto_review::apply_patch_action(&cwd, &files);
            self.auto_review(&call_id, action, &review, shapes::now_ms());
            if !review.allows() {
                let completed = shapes::now_ms();
                let done =
                    self.file_change_item(&call_id, &changes, "declined", started, Some(completed));
                self.complete_item(done, completed);
                self.tell(call_id, auto_review::denial(&review));
                return Flow::Continue;
            }
        } else if !writable {
            let answer = self.approval(
                "item/fileChange/requestApproval",
                json!({"threadId": thread_id, "turnId": turn_id, "itemId": call_id, "startedAtMs": shapes::now_ms(), "reason": null, "grantRoot": null}),
            );
            let told = match answer {
                Approval::Decision(d) if d == "accept" => None,
                Approval::Decision(d) if d == "acceptForSession" => {
                    self.shared
                        .remembered()
                        .files_accepted_for_session(&thread_id, &files);
                    None
                }
                Approval::Decision(d) if d == "decline" => Some(apply_patch::DECLINED_OUTPUT),
                // An error answer, or a result without a decision the release knows, declines
                // the change: the model is told the approval failed and the turn goes on
                // (measured with 0.169 and `harness explore`).
                Approval::Failed => Some(super::commands::APPROVAL_FAILED),
                // cancel or no answer: the item never completes and the turn is interrupted
                // (measured for cancel).
                _ => return Flow::Interrupted,
            };
            if let Some(told) = told {
                let completed = shapes::now_ms();
                let done =
                    self.file_change_item(&call_id, &changes, "declined", started, Some(completed));
                self.complete_item(done, completed);
                self.tell(call_id, told.into());
                return Flow::Continue;
            }
        }
        let status = match apply_patch::apply(&changes) {
            Ok(()) => "completed",
            Err(err) => {
                eprintln!("fake-app-server: applying the patch failed: {err}");
                "failed"
            }
        };
        let completed = shapes::now_ms();
        let done = self.file_change_item(&call_id, &changes, status, started, Some(completed));
        self.complete_item(done, completed);
        if status == "completed" {
            self.changes.extend(changes.iter().cloned());
            self.turn_diff();
            self.tell(
                call_id,
                apply_patch::success_output(&changes, began.elapsed()),
            );
        } else {
            self.tell(call_id, "patch failed to apply".into());
        }
        Flow::Continue
    }

    /// The automatic reviewer's notifications for `action` on `item_id`, a review begun at
    /// `started`, with `review`'s verdict (the client is not asked). Codex's reviewer has no
    /// script for its own tools' calls: the mock model API answers the real Codex's review of
    /// one with [`Review::unscripted`], a denial.
    pub(super) fn auto_review(&self, item_id: &str, action: Value, review: &Review, started: u64) {
        let (thread_id, turn_id) = self.ids();
        let review_id = ids::uuid_v7();
        let target = ReviewTarget {
            thread_id,
            turn_id,
            review_id: &review_id,
            item_id,
            action,
            started,
        };
        self.send(auto_review::started(&target));
        self.send(auto_review::verdict_warning(thread_id, review));
        self.send(auto_review::completed(&target, review, shapes::now_ms()));
    }

    /// Send an approval-like request with the thread waiting on it; the client's decision
    /// (`result.decision`, one of [`FILE_CHANGE_DECISIONS`]).
    fn approval(&mut self, method: &str, params: Value) -> Approval {
        let Some(answer) = self.ask_client(method, params, "waitingOnApproval") else {
            return Approval::NoAnswer;
        };
        match answer.get("result").and_then(|r| r.get("decision")) {
            Some(Value::String(decision)) if FILE_CHANGE_DECISIONS.contains(&decision.as_str()) => {
                Approval::Decision(decision.clone())
            }
            _ => Approval::Failed,
        }
    }

    /// A server request during which the thread's status carries `flag`: status, request,
    /// bounded wait, `serverRequest/resolved`, status back. The client's whole answer, or
    /// `None` when none came within `limits.client_answer_ms`.
    pub(super) fn ask_client(&mut self, method: &str, params: Value, flag: &str) -> Option<Value> {
        let thread_id = self.plan.thread_id.clone();
        self.send(shapes::thread_status(
            &thread_id,
            shapes::active_status(&[flag]),
        ));
        let request_id = self
            .shared
            .request_client(method, params, &self.plan.self_signal);
        let answer = match self.wait_answer(request_id) {
            Ok(answer) => Some(answer),
            Err(WaitEnd::Interrupted) => {
                // Measured with 0.169: the thread stays waiting until the turn ends, and the
                // request is resolved after it.
                self.unresolved.push(request_id);
                return None;
            }
            Err(WaitEnd::TimedOut) => None,
        };
        if answer.is_some() {
            self.send(shapes::notification(
                "serverRequest/resolved",
                json!({"threadId": thread_id, "requestId": request_id}),
            ));
        }
        self.send(shapes::thread_status(
            &thread_id,
            shapes::active_status(&[]),
        ));
        answer
    }

    /// `request_user_input`: in plan mode `item/tool/requestUserInput` (no item); the model gets
    /// the answers back as JSON, empty answers for an error or a malformed answer. Outside plan
    /// mode the model is told the tool is unavailable.
    fn request_user_input(&mut self, call_id: String, args: &UserInputArgs) -> Flow {
        if !self.plan.plan_mode {
            self.tell(call_id, USER_INPUT_UNAVAILABLE.into());
            return Flow::Continue;
        }
        let questions: Vec<Value> = args
            .questions
            .iter()
            .map(|q| json!({"id": q.id, "header": q.header, "question": q.question, "isOther": true, "isSecret": false, "options": q.options}))
            .collect();
        let (thread_id, turn_id) = self.ids();
        let params = json!({"threadId": thread_id, "turnId": turn_id, "itemId": call_id, "questions": questions, "isBlocking": true, "autoResolutionMs": null});
        let Some(answer) =
            self.ask_client("item/tool/requestUserInput", params, "waitingOnUserInput")
        else {
            return Flow::Interrupted;
        };
        let answers = answer
            .get("result")
            .and_then(|r| r.get("answers"))
            .filter(|a| a.is_object())
            .cloned()
            .unwrap_or_else(|| json!({}));
        self.tell(call_id, json!({"answers": answers}).to_string());
        Flow::Continue
    }

    /// `request_permissions`: `item/permissions/requestApproval`, unless the approval policy is
    /// `never`; the model is told what was granted (nothing for an error, an answer of another
    /// shape or `never`, as the real Codex does).
    fn request_permissions(&mut self, call_id: String, args: &PermissionsArgs) -> Flow {
        if !self.plan.request_permissions_tool {
            // Not offered: the model's call is refused as any unknown tool's (measured).
            self.tell(call_id, "unsupported call: request_permissions".into());
            return Flow::Continue;
        }
        if self.plan.approval_policy.as_str() == Some("never") {
            // Measured with 0.169: no request to the client; the model is told that nothing
            // was granted.
            self.tell(
                call_id,
                permissions_told(&Value::Null, &Value::Null, "turn"),
            );
            return Flow::Continue;
        }
        let requested = &args.permissions;
        let network = requested
            .network
            .as_ref()
            .map(|n| json!({"enabled": n.enabled}))
            .unwrap_or(Value::Null);
        let file_system = requested
            .file_system
            .as_ref()
            .map(|f| json!({"read": f.read, "write": f.write}))
            .unwrap_or(Value::Null);
        if self.plan.approvals_reviewer == "auto_review" {
            // Measured with 0.169: no item and no request to the client; the model is told
            // that nothing was granted.
            let review = Review::unscripted();
            let asked = json!({"network": network, "fileSystem": file_system});
            let action = auto_review::permissions_action(args.reason.as_deref(), asked);
            self.auto_review(&call_id, action, &review, shapes::now_ms());
            if !review.allows() {
                self.tell(
                    call_id,
                    permissions_told(&Value::Null, &Value::Null, "turn"),
                );
                return Flow::Continue;
            }
        }
        let (thread_id, turn_id) = self.ids();
        let params = json!({
            "threadId": thread_id, "turnId": turn_id, "itemId": call_id,
            "environmentId": args.environment_id.as_deref().unwrap_or("local"),
            "startedAtMs": shapes::now_ms(), "cwd": self.plan.cwd.display().to_string(),
            "reason": args.reason, "permissions": {"network": network, "fileSystem": file_system},
        });
        let Some(answer) = self.ask_client(
            "item/permissions/requestApproval",
            params,
            "waitingOnApproval",
        ) else {
            return Flow::Interrupted;
        };
        let granted = answer
            .get("result")
            .and_then(|r| r.get("permissions"))
            .filter(|p| p.is_object());
        let scope = answer
            .get("result")
            .filter(|_| granted.is_some())
            .and_then(|r| r.get("scope"))
            .and_then(Value::as_str)
            .unwrap_or("turn");
        // Codex 0.169 keeps only what the model asked for (measured with raw events: network
        // asked, fileSystem granted, the model told `network: null, file_system: null`).
        let field = |key: &str, asked: bool| {
            granted
                .filter(|_| asked)
                .and_then(|g| g.get(key))
                .cloned()
                .unwrap_or(Value::Null)
        };
        let told = permissions_told(
            &field("network", requested.network.is_some()),
            &field("fileSystem", requested.file_system.is_some()),
            scope,
        );
        self.tell(call_id, told);
        Flow::Continue
    }

    fn send_goal(&self, goal: &Value) {
        let (thread_id, turn_id) = self.ids();
        self.send(shapes::notification(
            "thread/goal/updated",
            json!({"threadId": thread_id, "turnId": turn_id, "goal": goal}),
        ));
    }

    /// `create_goal`: `thread/goal/updated` (active); while the goal is active the server starts
    /// the next turn itself whenever one completes.
    fn create_goal(&mut self, call_id: String, args: &CreateGoalArgs) {
        let now = shapes::now_s();
        let goal = json!({"threadId": self.plan.thread_id, "objective": args.objective, "status": "active",
            "tokenBudget": args.token_budget, "tokensUsed": 0, "timeUsedSeconds": 0, "createdAt": now, "updatedAt": now});
        self.shared
            .goals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(self.plan.thread_id.clone(), goal.clone());
        self.goal_changed = true;
        self.send_goal(&goal);
        self.tell(call_id, goal_output(&goal));
    }

    fn update_goal(&mut self, call_id: String, status: GoalStatus) {
        let goal = {
            let mut goals = self.shared.goals.lock().unwrap_or_else(|p| p.into_inner());
            goals.get_mut(&self.plan.thread_id).map(|goal| {
                goal["status"] = json!(status.as_str());
                goal["updatedAt"] = json!(shapes::now_s());
                goal.clone()
            })
        };
        match goal {
            Some(goal) => {
                self.goal_changed = true;
                self.send_goal(&goal);
                self.tell(call_id, goal_output(&goal));
            }
            None => self.tell(call_id, "no goal to update".into()),
        }
    }

    /// An active goal counts the tokens of every response (`thread/goal/updated`).
    pub(super) fn goal_tokens(&mut self, tokens: u64) {
        let goal = {
            let mut goals = self.shared.goals.lock().unwrap_or_else(|p| p.into_inner());
            goals
                .get_mut(&self.plan.thread_id)
                .filter(|g| g["status"] == "active")
                .map(|goal| {
                    let used = goal["tokensUsed"].as_u64().unwrap_or(0) + tokens;
                    goal["tokensUsed"] = json!(used);
                    goal["updatedAt"] = json!(shapes::now_s());
                    goal.clone()
                })
        };
        if let Some(goal) = goal {
            self.send_goal(&goal);
        }
    }
}

/// What `create_goal` / `update_goal` tell the model: the goal without its null budget.
fn goal_output(goal: &Value) -> String {
    let mut shown = goal.clone();
    if shown["tokenBudget"].is_null() {
        if let Some(map) = shown.as_object_mut() {
            map.remove("tokenBudget");
        }
    }
    json!({"goal": shown, "remainingTokens": null, "completionBudgetReport": null}).to_string()
}

pub(super) fn goal_active(shared: &Shared, thread_id: &str) -> bool {
    shared
        .goals
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(thread_id)
        .is_some_and(|g| g["status"] == "active")
}

/// The plan of a turn the server starts on its own on `thread_id` (the script's next turn), or
/// `None` when the thread is gone or busy (the client started a turn first).
pub(super) fn server_started_plan(shared: &Arc<Shared>, thread_id: &str) -> Option<TurnPlan> {
    let mut state = shared.state();
    let thread = state.threads.get_mut(thread_id)?;
    if thread.active.is_some() {
        return None;
    }
    let index = thread.turns_started;
    thread.turns_started += 1;
    let origin = crate::scenario::TurnOrigin {
        start_index: thread.start_index,
        ephemeral: Some(thread.ephemeral),
        output_schema: false,
    };
    let script = shared.scenario.turn_for(origin, index);
    Some(TurnPlan::begin(
        shared,
        thread,
        super::TurnStart {
            index,
            output_schema: false,
            input: json!([]),
            user_text: String::new(),
            script,
        },
    ))
}
