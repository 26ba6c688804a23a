//! The server requests of a turn (tool calls, approvals, questions) and the reference driver's
//! answers to them.

use super::super::session::Session;
use super::super::tools::ToolDecision;
use super::super::{emit, emit_resolved, stop, transport_stop, Stop};
use super::{RunState, TurnOutcome};
use crate::event_log::EventLog;
use crate::launch::LaunchPlan;
use crate::rpc::RpcClient;
use graders::events::{
    ApprovalKind, ApprovalRequested, Body, Diagnostic, Ending, Level, Mode, Target,
};
use serde_json::{json, Value};

/// Whether the driver approves a request to run outside the sandbox or to change files
/// outside the turn's profile. Only a standard run inside an external sandbox does (the target
/// itself is the sandbox there); a planning run never approves a write, and an ask run answers
/// questions without changing anything.
fn approves_escalation(mode: Mode, target: Target) -> bool {
    mode == Mode::Standard && target == Target::ExternalSandbox
}

#[allow(clippy::too_many_arguments)]
pub(super) async fn on_request(
    plan: &LaunchPlan,
    session: &mut Session,
    state: &mut RunState,
    turn_id: &str,
    (id, method, params): (&Value, &str, &Value),
    outcome: &mut TurnOutcome,
    log: &mut EventLog,
) -> Result<(), Stop> {
    let approve = approves_escalation(plan.request.mode, plan.request.target);
    let client = &mut session.client;
    match method {
        "item/tool/call" => {
            let thread_id = session.thread_id.as_str();
            let binding = (thread_id, turn_id);
            on_tool_call(client, state, binding, id, params, outcome, log).await
        }
        "item/commandExecution/requestApproval" | "item/fileChange/requestApproval" => {
            let kind = if method.starts_with("item/commandExecution") {
                ApprovalKind::Command
            } else {
                ApprovalKind::FileChange
            };
            let request = ApprovalRequested {
                request_id: request_id(id),
                kind,
                item_id: params["itemId"].as_str().map(String::from),
                command: params["command"].as_str().map(String::from),
                reason: params["reason"].as_str().map(String::from),
                available_decisions: available_decisions(params),
            };
            let decisions = (Decision::plain("accept"), Decision::plain("decline"));
            answer_escalation(client, log, id, request, approve, decisions, outcome).await
        }
        "execCommandApproval" | "applyPatchApproval" => {
            on_legacy_approval(client, (id, method, params), approve, outcome, log).await
        }
        "item/permissions/requestApproval" => {
            // Widening a profile mid-run is never granted: the launch policy is the whole grant.
            let request = ApprovalRequested {
                request_id: request_id(id),
                kind: ApprovalKind::Permissions,
                item_id: params["itemId"].as_str().map(String::from),
                command: None,
                reason: params["reason"].as_str().map(String::from),
                available_decisions: available_decisions(params),
            };
            let answer = json!({"permissions": {}, "scope": "turn"});
            answer_approval(client, log, id, request, answer, "decline").await
        }
        "item/tool/requestUserInput" => on_user_input(client, state, id, params, log).await,
        other => on_unsupported(client, id, other, log).await,
    }
}

/// The JSON-RPC id of a request, as the events name it.
fn request_id(id: &Value) -> String {
    match id {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `item/tool/call`: the result tools (`paperclip_finish`, `paperclip_block`), answered by what
/// the run's results decide; a call bound to another thread or turn closes the session.
async fn on_tool_call(
    client: &mut RpcClient,
    state: &mut RunState,
    (thread_id, turn_id): (&str, &str),
    id: &Value,
    params: &Value,
    outcome: &mut TurnOutcome,
    log: &mut EventLog,
) -> Result<(), Stop> {
    match state.results.decide(params, thread_id, Some(turn_id)) {
        ToolDecision::Accepted(result) => {
            let tool = params["tool"].as_str().unwrap_or_default();
            client
                .respond(id, tool_answer(&format!("{tool} acknowledged"), true))
                .await
                .map_err(|e| transport_stop(&e))?;
            emit(log, Body::ResultProposed(result.clone()))?;
            outcome.new_result = Some(result);
        }
        ToolDecision::Repeated => {
            let tool = params["tool"].as_str().unwrap_or_default();
            client
                .respond(id, tool_answer(&format!("{tool} acknowledged"), true))
                .await
                .map_err(|e| transport_stop(&e))?;
        }
        ToolDecision::Rejected(why) => {
            client
                .respond(id, tool_answer(&why, false))
                .await
                .map_err(|e| transport_stop(&e))?;
            emit(
                log,
                crate::reference::warning(format!("tool call rejected: {why}")),
            )?;
        }
        ToolDecision::WrongBinding(why) => {
            // Best effort: the session is closed either way.
            let _ = client.respond_error(id, -32600, &why).await;
            emit(
                log,
                Body::Diagnostic(Diagnostic {
                    level: Level::Error,
                    message: format!("session closed: {why}"),
                }),
            )?;
            return Err(stop(
                Ending::FailedPermanently,
                true,
                "protocol_violation",
                &why,
            ));
        }
    }
    Ok(())
}

/// `execCommandApproval` / `applyPatchApproval`, the approvals of the older protocol: the
/// command comes as an argv, the item as a call id, the decisions are `approved` / `denied`.
async fn on_legacy_approval(
    client: &mut RpcClient,
    (id, method, params): (&Value, &str, &Value),
    approve: bool,
    outcome: &mut TurnOutcome,
    log: &mut EventLog,
) -> Result<(), Stop> {
    let kind = if method == "execCommandApproval" {
        ApprovalKind::Command
    } else {
        ApprovalKind::FileChange
    };
    let command = params["command"].as_array().map(|parts| {
        parts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" ")
    });
    let request = ApprovalRequested {
        request_id: request_id(id),
        kind,
        item_id: params["callId"].as_str().map(String::from),
        command,
        reason: params["reason"].as_str().map(String::from),
        available_decisions: available_decisions(params),
    };
    // The legacy ReviewDecision denies with an object carrying the reason
    // (`DeniedReviewDecision`): a bare "denied" is no value of it.
    let decisions = (
        Decision::plain("approved"),
        Decision {
            name: "denied",
            answer: json!({"denied": {"rejection": "the runner's launch policy grants no escalation"}}),
        },
    );
    answer_escalation(client, log, id, request, approve, decisions, outcome).await
}

/// One decision of an approval: its name (what the run's events record) and the value the answer
/// carries as `decision`.
struct Decision {
    name: &'static str,
    answer: Value,
}

impl Decision {
    fn plain(name: &'static str) -> Self {
        Self {
            name,
            answer: json!(name),
        }
    }
}

/// Answer a request to run a command or change files beyond the profile: the first of
/// `decisions` when the run approves escalations (the item is then remembered as approved),
/// else the second.
async fn answer_escalation(
    client: &mut RpcClient,
    log: &mut EventLog,
    id: &Value,
    request: ApprovalRequested,
    approve: bool,
    (accept, decline): (Decision, Decision),
    outcome: &mut TurnOutcome,
) -> Result<(), Stop> {
    let decision = if approve { accept } else { decline };
    if approve {
        outcome.approved_items.extend(request.item_id.clone());
    }
    let answer = json!({"decision": decision.answer});
    answer_approval(client, log, id, request, answer, decision.name).await
}

/// `item/tool/requestUserInput`: the task's next answer to every question of the request, or
/// an error when the task has none left.
async fn on_user_input(
    client: &mut RpcClient,
    state: &mut RunState,
    id: &Value,
    params: &Value,
    log: &mut EventLog,
) -> Result<(), Stop> {
    match state.answers.pop_front() {
        Some(answer) => {
            let mut answers = serde_json::Map::new();
            for q in params["questions"].as_array().into_iter().flatten() {
                if let Some(qid) = q["id"].as_str() {
                    answers.insert(qid.to_string(), json!({"answers": [answer.clone()]}));
                }
            }
            client
                .respond(id, json!({"answers": answers}))
                .await
                .map_err(|e| transport_stop(&e))?;
        }
        None => {
            client
                .respond_error(id, -32000, "the task has no answer for this question")
                .await
                .map_err(|e| transport_stop(&e))?;
            emit(
                log,
                crate::reference::warning("the model asked a question the task has no answer for"),
            )?;
        }
    }
    Ok(())
}

/// Any other server request: declined as unsupported (method not found), and said so.
async fn on_unsupported(
    client: &mut RpcClient,
    id: &Value,
    method: &str,
    log: &mut EventLog,
) -> Result<(), Stop> {
    client
        .respond_error(
            id,
            -32601,
            &format!("`{method}` is not supported by this client"),
        )
        .await
        .map_err(|e| transport_stop(&e))?;
    emit(
        log,
        crate::reference::warning(format!("declined an unsupported server request `{method}`")),
    )
}

/// An approval request, as events around the client's answer: requested, answered on the
/// wire with `answer`, resolved as `decision`.
async fn answer_approval(
    client: &mut RpcClient,
    log: &mut EventLog,
    id: &Value,
    request: ApprovalRequested,
    answer: Value,
    decision: &str,
) -> Result<(), Stop> {
    let request_id = request.request_id.clone();
    emit(log, Body::ApprovalRequested(request))?;
    client
        .respond(id, answer)
        .await
        .map_err(|e| transport_stop(&e))?;
    emit_resolved(log, request_id, decision)
}

/// `availableDecisions` of an approval request, verbatim.
fn available_decisions(params: &Value) -> Option<Vec<Value>> {
    params["availableDecisions"].as_array().cloned()
}

fn tool_answer(text: &str, success: bool) -> Value {
    json!({"contentItems": [{"type": "inputText", "text": text}], "success": success})
}
