//! One turn: `turn/start`, then every notification and server request of the turn until its
//! `turn/completed` (turn items are collected from `item/*` notifications: the items of
//! `turn/completed` are only a summary).

mod requests;

use super::control::Controls;
use super::session::Session;
use super::tools::ToolResults;
use super::{emit, items, skills, stop, transport_stop, DriverConfig, Stop};
use crate::event_log::EventLog;
use crate::launch::{LaunchPlan, TurnParams};
use crate::rpc::{excerpt, Incoming};
use graders::events::{
    Body, Diagnostic, Ending, ItemEvent, Level, PlanStep, PlanUpdated, ResultProposed,
    TurnCompleted, TurnError, TurnStarted, TurnSubmitted,
};
use requests::on_request;
use serde_json::{json, Value};
use std::collections::VecDeque;

/// What to send as the next turn.
#[derive(Debug, Clone)]
pub(crate) struct TurnRequest {
    pub(crate) text: String,
    pub(crate) params: TurnParams,
}

/// How a turn went.
#[derive(Debug, Default)]
pub(crate) struct TurnOutcome {
    pub(crate) turn_id: String,
    pub(crate) status: String,
    pub(crate) error: Option<String>,
    /// The last completed `plan` item: (item id, text).
    pub(crate) plan: Option<(String, String)>,
    pub(crate) last_message: Option<String>,
    /// A result accepted during this turn.
    pub(crate) new_result: Option<ResultProposed>,
    /// Items whose approval the driver granted: they run outside Codex's sandbox.
    pub(crate) approved_items: std::collections::HashSet<String>,
}

/// Mutable run state a turn reads and updates.
pub(crate) struct RunState {
    pub(crate) results: ToolResults,
    pub(crate) answers: VecDeque<String>,
    pub(crate) turn_index: u32,
    /// What the run is told while it runs (interrupt, steer).
    pub(crate) controls: Controls,
    /// The driver's turn in progress, once `turn/start` named it: what a recovery reconciles.
    pub(crate) live_turn: Option<String>,
    /// Recoveries after the app-server died (bounded per run).
    pub(crate) recoveries: u32,
}

impl RunState {
    pub(crate) fn new(answers: VecDeque<String>, controls: Controls) -> Self {
        Self {
            results: ToolResults::default(),
            answers,
            turn_index: 0,
            controls,
            live_turn: None,
            recoveries: 0,
        }
    }
}

/// Longest user text kept in `turn.submitted`.
const INPUT_EXCERPT_CHARS: usize = 500;

/// Run one turn: start it, then follow it to its end.
pub(crate) async fn run(
    config: &DriverConfig,
    plan: &LaunchPlan,
    session: &mut Session,
    state: &mut RunState,
    request: &TurnRequest,
    log: &mut EventLog,
) -> Result<TurnOutcome, Stop> {
    let turn_id = start(config, session, state, request, log).await?;
    follow(config, plan, session, state, &turn_id, request, log).await
}

/// `turn/start` with the request's text (and the skills it names): the new turn's id, which
/// is the run's live turn from then on.
async fn start(
    config: &DriverConfig,
    session: &mut Session,
    state: &mut RunState,
    request: &TurnRequest,
    log: &mut EventLog,
) -> Result<String, Stop> {
    let t = &config.run.timeouts;
    let mut params = request
        .params
        .to_params(&session.thread_id, &request.text, &session.model);
    params["input"] = skills::input_items(config, session, &request.text, log).await?;
    emit(
        log,
        Body::TurnSubmitted(TurnSubmitted {
            index: state.turn_index,
            permissions: request.params.permissions.clone(),
            collaboration_mode: request.params.collaboration_mode.clone(),
            input_excerpt: excerpt(&request.text, INPUT_EXCERPT_CHARS),
            approval_policy: params
                .get("approvalPolicy")
                .cloned()
                .filter(|v| !v.is_null()),
            approvals_reviewer: params["approvalsReviewer"].as_str().map(String::from),
        }),
    )?;
    state.turn_index += 1;
    let response = session
        .client
        .request("turn/start", params, t.request)
        .await
        .map_err(|e| transport_stop(&e))?;
    let result = response.map_err(|e| {
        stop(
            Ending::FailedPermanently,
            true,
            "turn_start_rejected",
            &e.message,
        )
    })?;
    let turn_id = result["turn"]["id"]
        .as_str()
        .ok_or_else(|| {
            stop(
                Ending::TransportLost,
                true,
                "protocol_violation",
                &format!(
                    "turn/start result without turn.id: {}",
                    excerpt(&result.to_string(), 200)
                ),
            )
        })?
        .to_string();
    state.live_turn = Some(turn_id.clone());
    Ok(turn_id)
}

/// Follow the live turn `turn_id` to its `turn/completed`: every notification and server
/// request of it, and what the run is told meanwhile (an interrupt, a steer) — acted on at
/// once, since the turn's id is known.
pub(crate) async fn follow(
    config: &DriverConfig,
    plan: &LaunchPlan,
    session: &mut Session,
    state: &mut RunState,
    turn_id: &str,
    request: &TurnRequest,
    log: &mut EventLog,
) -> Result<TurnOutcome, Stop> {
    let t = &config.run.timeouts;
    let mut outcome = TurnOutcome {
        turn_id: turn_id.to_string(),
        ..TurnOutcome::default()
    };
    let sandbox = request.params.permissions.clone();
    let deadline = tokio::time::Instant::now() + t.turn_total;
    let mut interrupt_sent = false;
    loop {
        state.controls.poll();
        if state.controls.interrupt_requested() && !interrupt_sent {
            interrupt_sent = true;
            interrupt(config, session, turn_id, log).await?;
        }
        for text in state.controls.take_steers() {
            steer(config, session, turn_id, &text, log).await?;
        }
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        if remaining.is_zero() {
            return Err(stop(
                Ending::TimedOut,
                true,
                "timed_out",
                &format!("turn {turn_id} did not complete within {:?}", t.turn_total),
            ));
        }
        let msg = tokio::select! {
            // A control that arrives while the turn waits is acted on at the top of the loop.
            () = state.controls.arrived() => continue,
            msg = session.client.next(t.turn_idle.min(remaining)) => {
                msg.map_err(|e| transport_stop(&e))?
            }
        };
        match msg {
            Incoming::Notification { method, params } => {
                if let Some(done) = on_notification(
                    &method,
                    &params,
                    turn_id,
                    sandbox.as_deref(),
                    &mut outcome,
                    log,
                )? {
                    outcome.status = done.0;
                    outcome.error = done.1;
                    state.live_turn = None;
                    return Ok(outcome);
                }
            }
            Incoming::Request { id, method, params } => {
                on_request(
                    plan,
                    session,
                    state,
                    turn_id,
                    (&id, &method, &params),
                    &mut outcome,
                    log,
                )
                .await?;
            }
            Incoming::Response { id, .. } => {
                emit(
                    log,
                    super::warning(format!(
                        "a response to no pending request (id {id}) was ignored"
                    )),
                )?;
            }
        }
    }
}

/// The run was asked to interrupt: `turn/interrupt` with the live ids, as a request, its answer
/// awaited (bounded). The turn then ends on its own (`turn/completed`, `interrupted`) and the
/// session stays open until it has.
async fn interrupt(
    config: &DriverConfig,
    session: &mut Session,
    turn_id: &str,
    log: &mut EventLog,
) -> Result<(), Stop> {
    let params = json!({"threadId": session.thread_id, "turnId": turn_id});
    let done = format!("asked to interrupt: turn {turn_id} interrupted");
    control_request(config, session, "turn/interrupt", params, done, log).await
}

/// A steering text: `turn/steer` of the live turn, with `expectedTurnId` (Codex refuses a steer
/// without it) and the skills the text names. A refused steer leaves the turn as it was.
async fn steer(
    config: &DriverConfig,
    session: &mut Session,
    turn_id: &str,
    text: &str,
    log: &mut EventLog,
) -> Result<(), Stop> {
    let input = skills::input_items(config, session, text, log).await?;
    let params = json!({
        "threadId": session.thread_id,
        "input": input,
        "expectedTurnId": turn_id,
    });
    let done = format!(
        "steered turn {turn_id} with: {}",
        excerpt(text, INPUT_EXCERPT_CHARS)
    );
    control_request(config, session, "turn/steer", params, done, log).await
}

/// A control request of the live turn, its answer awaited within the request bound: `done`
/// when accepted, a warning naming the refusal otherwise (the turn goes on either way).
async fn control_request(
    config: &DriverConfig,
    session: &mut Session,
    method: &str,
    params: Value,
    done: String,
    log: &mut EventLog,
) -> Result<(), Stop> {
    let answer = session
        .client
        .request(method, params, config.run.timeouts.request)
        .await
        .map_err(|e| transport_stop(&e))?;
    let (level, message) = match answer {
        Ok(_) => (Level::Info, done),
        Err(e) => (
            Level::Warn,
            format!("the app-server refused {method}: {}", e.message),
        ),
    };
    emit(log, Body::Diagnostic(Diagnostic { level, message }))
}

/// Handle one notification; `Some((status, error))` when the turn completed.
fn on_notification(
    method: &str,
    params: &Value,
    turn_id: &str,
    sandbox: Option<&str>,
    outcome: &mut TurnOutcome,
    log: &mut EventLog,
) -> Result<Option<(String, Option<String>)>, Stop> {
    let param_turn = params["turnId"].as_str().map(String::from);
    let body = match method {
        "turn/started" if params["turn"]["id"].as_str() == Some(turn_id) => {
            Body::TurnStarted(TurnStarted {
                turn_id: turn_id.to_string(),
            })
        }
        "turn/completed" if params["turn"]["id"].as_str() == Some(turn_id) => {
            let completed = turn_completed(turn_id, &params["turn"]);
            let ended = (completed.status.clone(), completed.error.clone());
            emit(log, Body::TurnCompleted(completed))?;
            return Ok(Some(ended));
        }
        "item/started" | "item/completed" => {
            item_event(method, params, param_turn, sandbox, outcome)
        }
        "turn/plan/updated" => plan_updated(params, param_turn),
        "error" => turn_error(params, param_turn),
        "configWarning" | "warning" => app_server_warning(method, params),
        _ => return Ok(None),
    };
    emit(log, body)?;
    Ok(None)
}

/// `turn/completed` of the driver's turn.
fn turn_completed(turn_id: &str, turn: &Value) -> TurnCompleted {
    let status = turn["status"].as_str().unwrap_or("unknown").to_string();
    let error = turn["error"]["message"]
        .as_str()
        .map(String::from)
        .or_else(|| turn["error"].as_str().map(String::from));
    TurnCompleted {
        turn_id: turn_id.to_string(),
        status,
        error,
        codex_error_info: turn["error"]
            .get("codexErrorInfo")
            .cloned()
            .filter(|v| !v.is_null()),
    }
}

/// `item/started` / `item/completed`, reduced; a completed plan or agent message is kept for
/// the turn's outcome.
fn item_event(
    method: &str,
    params: &Value,
    turn_id: Option<String>,
    sandbox: Option<&str>,
    outcome: &mut TurnOutcome,
) -> Body {
    let item = items::reduce(&params["item"], sandbox, &outcome.approved_items);
    if method == "item/completed" {
        match &item {
            graders::events::Item::Plan { id, text } => {
                outcome.plan = Some((id.clone(), text.clone()))
            }
            graders::events::Item::AgentMessage { text, .. } => {
                outcome.last_message = Some(text.clone())
            }
            _ => {}
        }
    }
    let event = ItemEvent { turn_id, item };
    if method == "item/started" {
        Body::ItemStarted(event)
    } else {
        Body::ItemCompleted(event)
    }
}

/// `turn/plan/updated`.
fn plan_updated(params: &Value, turn_id: Option<String>) -> Body {
    let steps = params["plan"]
        .as_array()
        .map(|steps| {
            steps
                .iter()
                .map(|s| PlanStep {
                    step: s["step"].as_str().unwrap_or_default().to_string(),
                    status: s["status"].as_str().unwrap_or_default().to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    Body::PlanUpdated(PlanUpdated {
        turn_id,
        explanation: params["explanation"].as_str().map(String::from),
        steps,
    })
}

/// `error`: a turn's error, maybe retried by the app-server.
fn turn_error(params: &Value, turn_id: Option<String>) -> Body {
    let error = &params["error"];
    Body::TurnError(TurnError {
        turn_id,
        message: excerpt(error["message"].as_str().unwrap_or_default(), 500),
        will_retry: params["willRetry"].as_bool(),
        codex_error_info: error
            .get("codexErrorInfo")
            .cloned()
            .filter(|v| !v.is_null()),
        additional_details: error["additionalDetails"].as_str().map(|d| excerpt(d, 500)),
    })
}

/// `configWarning` / `warning`: said as a diagnostic.
fn app_server_warning(method: &str, params: &Value) -> Body {
    let text = params["error"]["message"]
        .as_str()
        .or_else(|| params["summary"].as_str())
        .or_else(|| params["message"].as_str())
        .unwrap_or_default();
    super::warning(format!("app-server {method}: {}", excerpt(text, 500)))
}
