//! The reference Codex driver: launches the app-server by the launch policy, opens a session,
//! runs the task's turns (with the plan review flow), answers server requests by policy, and
//! writes every step as run events. It never writes `run.ended`: it returns the terminal, and
//! the harness appends its own evidence first.

pub mod external;
pub mod items;
pub mod session;
pub mod tools;
pub mod turn;

use crate::event_log::EventLog;
use crate::launch::{self, profiles::HostPaths, LaunchPlan, LaunchRequest};
use crate::launcher::Launcher;
use crate::rpc::TransportError;
use crate::task::{PlanReview, Task};
use graders::events::{
    ApprovalKind, ApprovalRequested, ApprovalResolved, Body, CellId, Diagnostic, Ending, Level,
    Mode, Outcome, ResultProposed, RunEnded, RunStarted, Source,
};
use session::OpenFailure;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use turn::{RunState, TurnRequest};

/// The app-server program: what to execute, independent of the launch policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppServerProgram {
    pub program: PathBuf,
    /// Before the policy's arguments, e.g. `["fake-app-server", "app-server"]` or `["app-server"]`.
    pub leading_args: Vec<String>,
    /// After the policy's `-c` arguments, e.g. the model provider configuration.
    pub extra_args: Vec<String>,
    /// The complete, allowlisted environment.
    pub env: Vec<(String, String)>,
}

/// Bounds on every wait of a run. The defaults suit the fake app-server; the real Codex runner
/// raises them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Waiting for the response to one request (`initialize`, `thread/start`, `turn/start`).
    pub request: Duration,
    /// Waiting for the next message during a turn.
    pub turn_idle: Duration,
    /// A whole turn.
    pub turn_total: Duration,
    /// The app-server's exit after its stdin is closed.
    pub shutdown: Duration,
    /// Same-run attempts to open a session after transient start-up failures.
    pub startup_attempts: u32,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            request: Duration::from_secs(10),
            turn_idle: Duration::from_secs(10),
            turn_total: Duration::from_secs(60),
            shutdown: Duration::from_secs(5),
            startup_attempts: 3,
        }
    }
}

pub struct DriverConfig {
    pub cell: CellId,
    pub task: Task,
    pub launch: LaunchRequest,
    pub app_server: AppServerProgram,
    pub launcher: Arc<dyn Launcher>,
    pub workspace: PathBuf,
    pub stderr_log: PathBuf,
    pub timeouts: Timeouts,
}

impl DriverConfig {
    /// The launch plan for this run, with the app-server's own HOME, CODEX_HOME and install
    /// folder named in the restricted profiles.
    pub fn launch_plan(&self) -> LaunchPlan {
        let host = HostPaths::from_env_pairs(&self.app_server.env, Some(&self.app_server.program));
        launch::plan_with(&self.launch, &host)
    }
}

/// An early end of the run, carrying its terminal.
#[derive(Debug)]
pub struct Stop(pub RunEnded);

pub(crate) fn stop(ending: Ending, retry_offered: bool, code: &str, reason: &str) -> Stop {
    Stop(RunEnded {
        ending,
        retry_offered,
        error_code: Some(code.to_string()),
        reason: Some(reason.to_string()),
    })
}

pub(crate) fn transport_stop(error: &TransportError) -> Stop {
    if error.is_timeout() {
        stop(Ending::TimedOut, true, "timed_out", &error.to_string())
    } else {
        stop(
            Ending::TransportLost,
            true,
            "transport_lost",
            &error.to_string(),
        )
    }
}

pub(crate) fn emit(log: &mut EventLog, body: Body) -> Result<(), Stop> {
    log.emit(Source::Driver, body).map(|_| ()).map_err(|e| {
        stop(
            Ending::FailedPermanently,
            false,
            "event_log_failed",
            &e.to_string(),
        )
    })
}

fn succeeded() -> RunEnded {
    RunEnded {
        ending: Ending::Succeeded,
        retry_offered: false,
        error_code: None,
        reason: None,
    }
}

/// Run the task with the reference driver. Writes `run.started` and every event up to (not
/// including) `run.ended`; returns the terminal.
pub async fn run_reference(config: &DriverConfig, log: &mut EventLog) -> RunEnded {
    match run_inner(config, log).await {
        Ok(ended) | Err(Stop(ended)) => ended,
    }
}

async fn run_inner(config: &DriverConfig, log: &mut EventLog) -> Result<RunEnded, Stop> {
    let plan = config.launch_plan();
    emit(
        log,
        Body::RunStarted(RunStarted {
            cell: config.cell.clone(),
            driver: "reference".into(),
            launch: plan.summary(),
        }),
    )?;
    if config.task.mode != config.launch.mode {
        return Err(stop(
            Ending::FailedPermanently,
            false,
            "task_mode_mismatch",
            &format!(
                "the task is a {:?} task but the launch is for {:?}",
                config.task.mode, config.launch.mode
            ),
        ));
    }
    let mut session = open_with_retries(config, &plan, log).await?;
    let result = run_turns(config, &plan, &mut session, log).await;
    session.client.shutdown(config.timeouts.shutdown).await;
    result
}

async fn open_with_retries(
    config: &DriverConfig,
    plan: &LaunchPlan,
    log: &mut EventLog,
) -> Result<session::Session, Stop> {
    let attempts = config.timeouts.startup_attempts.max(1);
    let mut last = String::new();
    for attempt in 1..=attempts {
        match session::open(config, plan, attempt, log).await {
            Ok(session) => return Ok(session),
            Err(OpenFailure::Rejected(error)) => {
                return Err(stop(
                    Ending::FailedPermanently,
                    true,
                    "provider_startup_rejected",
                    &error.message,
                ))
            }
            Err(OpenFailure::Transport(error)) => return Err(transport_stop(&error)),
            Err(OpenFailure::Stop(s)) => return Err(s),
            Err(OpenFailure::Transient(reason)) => {
                emit(
                    log,
                    Body::Diagnostic(Diagnostic {
                        level: Level::Warn,
                        message: format!(
                            "start-up attempt {attempt} of {attempts} failed: {reason}"
                        ),
                    }),
                )?;
                last = reason;
            }
        }
    }
    Err(stop(
        Ending::RetriesExhausted,
        true,
        "retry_exhausted",
        &format!("{attempts} start-up attempts failed; the last: {last}"),
    ))
}

async fn run_turns(
    config: &DriverConfig,
    plan: &LaunchPlan,
    session: &mut session::Session,
    log: &mut EventLog,
) -> Result<RunEnded, Stop> {
    let task = &config.task;
    let mut state = RunState {
        results: tools::ToolResults::default(),
        answers: task.answers.iter().cloned().collect(),
        turn_index: 0,
    };
    let mut reviews = task.plan_reviews.iter();
    let mut plans_seen = 0u32;
    let mut next = Some(TurnRequest {
        text: task.prompt.clone(),
        params: plan.turn_params.clone(),
    });
    let mut last_message: Option<String> = None;
    while let Some(request) = next.take() {
        if state.turn_index >= task.max_turns {
            return Err(stop(
                Ending::FailedPermanently,
                false,
                "max_turns_exceeded",
                &format!("the task allows {} turns", task.max_turns),
            ));
        }
        let outcome = turn::run(config, plan, session, &mut state, &request, log).await?;
        if outcome.last_message.is_some() {
            last_message = outcome.last_message.clone();
        }
        match outcome.status.as_str() {
            "completed" => {}
            "failed" => {
                return Err(stop(
                    Ending::FailedPermanently,
                    true,
                    "turn_failed",
                    outcome.error.as_deref().unwrap_or("the turn failed"),
                ))
            }
            other => {
                return Err(stop(
                    Ending::FailedPermanently,
                    true,
                    "turn_not_completed",
                    &format!(
                        "turn {} ended `{other}`{}",
                        outcome.turn_id,
                        outcome.error.map(|e| format!(": {e}")).unwrap_or_default()
                    ),
                ))
            }
        }
        let plan_turn = request.params.collaboration_mode.as_deref() == Some("plan");
        if let (true, Some((item_id, text))) = (plan_turn, &outcome.plan) {
            plans_seen += 1;
            let request_id = format!("plan-{plans_seen}");
            emit(
                log,
                Body::ApprovalRequested(ApprovalRequested {
                    request_id: request_id.clone(),
                    kind: ApprovalKind::Plan,
                    item_id: Some(item_id.clone()),
                    command: None,
                    reason: Some(crate::rpc::excerpt(text, 500)),
                }),
            )?;
            let (decision, following) = match reviews.next() {
                Some(PlanReview::Approve) => (
                    "accept",
                    TurnRequest {
                        text: task.follow_up_prompt.clone(),
                        params: plan
                            .follow_up_turn_params
                            .clone()
                            .unwrap_or_else(|| plan.turn_params.clone()),
                    },
                ),
                Some(PlanReview::Revise { text }) => (
                    "revise",
                    TurnRequest {
                        text: text.clone(),
                        params: plan.turn_params.clone(),
                    },
                ),
                None => {
                    emit(
                        log,
                        Body::ResultProposed(ResultProposed {
                            outcome: Outcome::NeedsReview,
                            summary: crate::rpc::excerpt(text, 500),
                            owner: Some("user".into()),
                            action: Some("review the proposed plan".into()),
                        }),
                    )?;
                    return Ok(succeeded());
                }
            };
            emit(
                log,
                Body::ApprovalResolved(ApprovalResolved {
                    request_id,
                    decision: decision.into(),
                }),
            )?;
            // A plan under review is not a final result, whatever the turn reported.
            state.results.reset();
            next = Some(following);
            continue;
        }
        if let Some(result) = &outcome.new_result {
            let asks_user = result.outcome == Outcome::Blocked
                && result.owner.as_deref() == Some("user")
                && task.mode == Mode::Ask;
            if asks_user {
                if let Some(answer) = state.answers.pop_front() {
                    state.results.reset();
                    next = Some(TurnRequest {
                        text: answer,
                        params: plan.turn_params.clone(),
                    });
                    continue;
                }
            }
            return Ok(succeeded());
        }
        if state.results.accepted().is_some() {
            // A result from an earlier turn still stands.
            return Ok(succeeded());
        }
        emit(
            log,
            Body::ResultProposed(ResultProposed {
                outcome: Outcome::NeedsReview,
                summary: last_message
                    .as_deref()
                    .map(|m| crate::rpc::excerpt(m, 500))
                    .unwrap_or_else(|| "the run ended without reporting a result".into()),
                owner: Some("user".into()),
                action: Some("review the run's last message".into()),
            }),
        )?;
        return Ok(succeeded());
    }
    Ok(succeeded())
}
