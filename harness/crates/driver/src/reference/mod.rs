//! The reference Codex driver: launches the app-server by the launch policy, opens a session,
//! runs the task's turns (with the plan review flow), answers server requests by policy, and
//! writes every step as run events. It never writes `run.ended`: it returns the terminal, and
//! the harness appends its own evidence first.

pub(crate) mod control;
mod conversation;
pub(crate) mod items;
pub(crate) mod recovery;
pub(crate) mod session;
pub(crate) mod skills;
pub mod standalone;
pub(crate) mod tools;
pub(crate) mod turn;

use crate::event_log::EventLog;
use crate::launch::{self, profiles::HostPaths, LaunchPlan, LaunchRequest};
use crate::rpc::TransportError;
use crate::run::RunSpec;
use crate::task::Relaunch;
use control::Controls;
use conversation::{run_turns, Conversation};
use graders::events::{
    ApprovalResolved, Body, Diagnostic, Ending, Level, PolicyGeneration, RunEnded, RunStarted,
    SessionRelaunched, Source,
};
use sandbox::launcher::Launcher;
use session::{OpenFailure, Opening};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use turn::TurnRequest;

/// The reference driver, run in this process: what it is told ([`RunSpec`]) and how it starts
/// the app-server. (`harness drive` is this, in its own process, on the host of wherever it
/// runs; tests also run it in process, through any launcher.)
pub struct DriverConfig {
    pub run: RunSpec,
    /// Where the app-server runs.
    pub launcher: Arc<dyn Launcher>,
    /// The app-server's stderr goes here.
    pub stderr_log: PathBuf,
    /// Where the driver's JSON-RPC client appends every line it sends and receives (JSONL, the
    /// transcript's shape, `graders::wire::transcript`; see `crate::rpc::transcript`). `None`: not
    /// recorded (the tap, or the fake app-server, keeps the transcript).
    pub transcript: Option<PathBuf>,
}

impl DriverConfig {
    /// The launch plan for this run, with the app-server's own HOME, CODEX_HOME and install
    /// folder named in the restricted profiles.
    pub(crate) fn launch_plan(&self) -> LaunchPlan {
        self.launch_plan_under(self.run.launch.policy)
    }

    /// The launch plan for this run under `policy` instead of the run's own (a relaunch).
    pub(crate) fn launch_plan_under(&self, policy: PolicyGeneration) -> LaunchPlan {
        let run = &self.run;
        let host = HostPaths::from_env_pairs(&run.app_server.env, Some(&run.app_server.program));
        let request = LaunchRequest {
            policy,
            ..run.launch.clone()
        };
        launch::plan_with(&request, &host)
    }

    /// The app-server's own folders (`HOME`, `CODEX_HOME`, its install folder).
    pub(crate) fn host_paths(&self) -> HostPaths {
        HostPaths::from_env_pairs(&self.run.app_server.env, Some(&self.run.app_server.program))
    }

    /// This configuration with another workspace (the task's own, `Task::workspace`).
    fn with_workspace(&self, workspace: PathBuf) -> DriverConfig {
        let mut run = self.run.clone();
        run.launch.workspace = workspace;
        DriverConfig {
            run,
            launcher: Arc::clone(&self.launcher),
            stderr_log: self.stderr_log.clone(),
            transcript: self.transcript.clone(),
        }
    }
}

/// An early end of the run, carrying its terminal.
#[derive(Debug)]
pub(crate) struct Stop(pub RunEnded);

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

/// An approval request (`request_id`) was settled as `decision`.
pub(crate) fn emit_resolved(
    log: &mut EventLog,
    request_id: String,
    decision: &str,
) -> Result<(), Stop> {
    emit(
        log,
        Body::ApprovalResolved(ApprovalResolved {
            request_id,
            decision: decision.into(),
        }),
    )
}

/// A run the user interrupted: not a success; the task may be run again.
fn interrupted(reason: &str) -> Stop {
    stop(Ending::FailedPermanently, true, "interrupted", reason)
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
    run_controlled(config, Controls::none(), log).await
}

/// [`run_reference`], told to interrupt or steer its turns through `controls`
/// ([`control`]).
pub(crate) async fn run_controlled(
    config: &DriverConfig,
    controls: Controls,
    log: &mut EventLog,
) -> RunEnded {
    let workspace = match effective_workspace(config) {
        Ok(workspace) => workspace,
        Err(refused) => return refuse_workspace(config, &refused, log),
    };
    let owned;
    let config = match workspace {
        Some(workspace) => {
            owned = config.with_workspace(workspace);
            &owned
        }
        None => config,
    };
    match run_inner(config, controls, log).await {
        Ok(ended) | Err(Stop(ended)) => ended,
    }
}

/// The task's own workspace, when it names one and it is safe; `Ok(None)`: the run's. The
/// run's own is checked too: no workspace is used that the runner contract refuses.
fn effective_workspace(
    config: &DriverConfig,
) -> Result<Option<PathBuf>, launch::workspace::UnsafeWorkspace> {
    let host = config.host_paths();
    let asked = match &config.run.task.workspace {
        Some(text) => Some(launch::workspace::resolve(text, &host)?),
        None => None,
    };
    let workspace = asked.as_deref().unwrap_or(&config.run.launch.workspace);
    let own_home = std::env::var_os("HOME").map(PathBuf::from);
    let homes: Vec<&Path> = own_home.iter().map(PathBuf::as_path).collect();
    launch::workspace::check(workspace, &host, &homes)?;
    Ok(asked)
}

/// An unsafe workspace ends the run before anything is launched: `run.started`, then the
/// refusal.
fn refuse_workspace(
    config: &DriverConfig,
    refused: &launch::workspace::UnsafeWorkspace,
    log: &mut EventLog,
) -> RunEnded {
    let started = emit(
        log,
        Body::RunStarted(RunStarted {
            cell: config.run.cell.clone(),
            driver: "reference".into(),
            launch: config.launch_plan().summary(),
            protocol: None,
        }),
    );
    let Stop(ended) = started.err().unwrap_or_else(|| {
        stop(
            Ending::FailedPermanently,
            false,
            "unsafe_workspace",
            &format!("{refused}; refused before launching the app-server"),
        )
    });
    ended
}

async fn run_inner(
    config: &DriverConfig,
    controls: Controls,
    log: &mut EventLog,
) -> Result<RunEnded, Stop> {
    let relaunch = config.run.task.relaunch.as_ref();
    let plan = match relaunch {
        Some(relaunch) => config.launch_plan_under(relaunch.first_policy(config.run.launch.policy)),
        None => config.launch_plan(),
    };
    emit(
        log,
        Body::RunStarted(RunStarted {
            cell: config.run.cell.clone(),
            driver: "reference".into(),
            launch: plan.summary(),
            protocol: None,
        }),
    )?;
    if config.run.task.mode != config.run.launch.mode {
        return Err(stop(
            Ending::FailedPermanently,
            false,
            "task_mode_mismatch",
            &format!(
                "the task is a {:?} task but the launch is for {:?}",
                config.run.task.mode, config.run.launch.mode
            ),
        ));
    }
    if let Some(approvals) = config.run.task.approvals {
        // The reference driver's answers are fixed (docs/driver-contract.md): a task asking for
        // another handling is refused rather than run differently from what it says.
        return Err(stop(
            Ending::FailedPermanently,
            false,
            "unsupported_task",
            &format!(
                "the task asks for approvals `{approvals:?}`; the reference driver answers approval requests its own way"
            ),
        ));
    }
    let opening = Opening::Start {
        persist: relaunch.is_some(),
    };
    let mut conversation = Conversation::new(&config.run.task, controls);
    let first = TurnRequest {
        text: config.run.task.prompt.clone(),
        params: plan.turn_params.clone(),
    };
    let thread_id = run_session(config, &plan, &opening, &mut conversation, first, log).await?;
    match relaunch {
        None => Ok(succeeded()),
        Some(relaunch) => {
            resume_after_relaunch(config, &plan, relaunch, thread_id, &mut conversation, log).await
        }
    }
}

/// One launch: open a session (with the start-up retries), run the turns from `first`, shut
/// the app-server down. Returns the session's thread id when its turns succeeded.
async fn run_session(
    config: &DriverConfig,
    plan: &LaunchPlan,
    opening: &Opening,
    conversation: &mut Conversation<'_>,
    first: TurnRequest,
    log: &mut EventLog,
) -> Result<String, Stop> {
    let mut session = open_with_retries(config, plan, opening, log).await?;
    let result = run_turns(config, plan, &mut session, conversation, first, log).await;
    let thread_id = session.thread_id.clone();
    session.client.shutdown(config.run.timeouts.shutdown).await;
    result.map(|_| thread_id)
}

/// The second launch of a run (`Task::relaunch`): the first app-server is gone; compute the
/// launch plan under the relaunch's rules, compare launch identities and resume the saved
/// thread when they are equal — or start a new thread, saying why, when they are not. The
/// decision is recorded as a `session.relaunched` event (`docs/events.md`) before the
/// relaunch's `session.open-requested`.
async fn resume_after_relaunch(
    config: &DriverConfig,
    first: &LaunchPlan,
    relaunch: &Relaunch,
    saved_thread: String,
    conversation: &mut Conversation<'_>,
    log: &mut EventLog,
) -> Result<RunEnded, Stop> {
    let plan = config.launch_plan_under(relaunch.relaunch_policy(config.run.launch.policy));
    let decision = relaunch_decision(first, &plan, saved_thread);
    emit(log, Body::SessionRelaunched(decision.relaunched))?;
    emit(log, decision.note)?;
    let opening = decision.opening;
    // The earlier session's result belonged to its own turns.
    conversation.state.results.reset();
    let request = TurnRequest {
        text: relaunch.prompt.clone(),
        params: plan.turn_params.clone(),
    };
    run_session(config, &plan, &opening, conversation, request, log).await?;
    Ok(succeeded())
}

/// What a relaunch does with the saved thread, and how the run records it.
struct RelaunchDecision {
    /// The graders' record of the relaunch (`session.relaunched`).
    relaunched: SessionRelaunched,
    /// The same decision in words, for people reading the log; nothing parses it.
    note: Body,
    opening: Opening,
}

/// Whether a relaunch resumes the saved thread: only when the launch identity is unchanged.
fn relaunch_decision(
    first: &LaunchPlan,
    next: &LaunchPlan,
    saved_thread: String,
) -> RelaunchDecision {
    let policy_name = |p: PolicyGeneration| match p {
        PolicyGeneration::Current => "current",
        PolicyGeneration::Legacy => "legacy",
    };
    let summary = next.summary();
    let rules = format!(
        "relaunched under the {} rules after a first launch under the {} rules",
        policy_name(next.request.policy),
        policy_name(first.request.policy)
    );
    let (resume_thread, note, opening) = if next.identity == first.identity {
        (
            Some(saved_thread.clone()),
            diagnostic(
                Level::Info,
                format!(
                    "{rules}; the launch identity is unchanged: resuming the saved thread {saved_thread}"
                ),
            ),
            Opening::Resume {
                thread_id: saved_thread,
            },
        )
    } else {
        (
            None,
            diagnostic(
                Level::Warn,
                format!(
                    "{rules}; the launch identity changed ({} -> {}): the saved thread {saved_thread} is not resumed; starting a new thread",
                    first.identity, next.identity
                ),
            ),
            Opening::Start { persist: true },
        )
    };
    RelaunchDecision {
        relaunched: SessionRelaunched {
            identity: summary.identity,
            policy: summary.policy,
            argv: summary.argv,
            thread_permissions: summary.thread_permissions,
            resume_thread,
        },
        note,
        opening,
    }
}

fn diagnostic(level: Level, message: String) -> Body {
    Body::Diagnostic(Diagnostic { level, message })
}

async fn open_with_retries(
    config: &DriverConfig,
    plan: &LaunchPlan,
    opening: &Opening,
    log: &mut EventLog,
) -> Result<session::Session, Stop> {
    let attempts = config.run.timeouts.startup_attempts.max(1);
    let mut last = String::new();
    for attempt in 1..=attempts {
        match session::open(config, plan, opening, attempt, log).await {
            Ok(session) => return Ok(session),
            Err(OpenFailure::Rejected(error)) => {
                let code = match opening {
                    Opening::Start { .. } => "provider_startup_rejected",
                    Opening::Resume { .. } => "provider_resume_rejected",
                };
                return Err(stop(Ending::FailedPermanently, true, code, &error.message));
            }
            Err(OpenFailure::Transport(error)) => return Err(transport_stop(&error)),
            Err(OpenFailure::Stop(s)) => return Err(s),
            Err(OpenFailure::Transient(reason)) => {
                emit(
                    log,
                    diagnostic(
                        Level::Warn,
                        format!("start-up attempt {attempt} of {attempts} failed: {reason}"),
                    ),
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

/// A warning of the reference driver's, as its run events say it.
fn warning(message: impl Into<String>) -> Body {
    Body::Diagnostic(Diagnostic {
        level: Level::Warn,
        message: message.into(),
    })
}

#[cfg(test)]
mod tests;
