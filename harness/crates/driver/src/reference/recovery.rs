//! Recovery after the app-server died mid-turn, when the task asks for it
//! (`Task::resume_on_crash`; the runner contract's recovery): a new app-server transport;
//! `thread/read` of the saved thread, its identity and working directory checked; `thread/resume`
//! of exactly that thread (an error, or an answer naming another thread, fails recovery — a resume
//! that lands elsewhere has lost the conversation); `thread/read` again to reconcile. Only the
//! saved live turn counts: kept when still active (followed to its end), ended when terminal (a
//! turn the crash cut short is run on with a continuation), a recoverable failure when it is
//! missing or another turn is active.

use super::session::{self, OpenFailure, Opening, Session};
use super::turn::{self, RunState, TurnOutcome, TurnRequest};
use super::{emit, stop, transport_stop, DriverConfig, Stop};
use crate::event_log::EventLog;
use crate::launch::LaunchPlan;
use crate::rpc::{RpcClient, TransportError};
use graders::events::{
    Body, Diagnostic, Ending, Level, SessionOpenRequested, SessionRejected, SessionRelaunched,
};
use serde_json::{json, Value};
use std::path::Path;

/// Most recoveries in one run: an app-server that dies again after that ends the run.
pub(crate) const MAX_RECOVERIES: u32 = 2;

/// The user text of the turn that carries on after the crash cut the live one short.
pub(crate) const CONTINUE_PROMPT: &str =
    "The session was interrupted by a restart. Continue the task where it stopped.";

/// What the run does after a recovery.
#[derive(Debug)]
pub(crate) enum Recovered {
    /// The live turn's end, as reconciled (followed on the new app-server, or read back).
    Outcome(TurnOutcome),
    /// Run this turn next (the crash ended the live turn, or it never started).
    Again(TurnRequest),
}

/// How the saved live turn stands on the recovered thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reconciliation {
    /// Still in progress: follow it.
    Kept(String),
    /// Over, with this status and error message.
    Ended {
        turn_id: String,
        status: String,
        error: Option<String>,
    },
    /// No turn was live when the app-server died (it died before `turn/start` was answered).
    NoLiveTurn,
    /// The thread does not have it: a recoverable failure.
    Missing(String),
    /// Another turn of the thread is in progress: a recoverable failure.
    OtherActive {
        saved: Option<String>,
        other: String,
    },
}

/// Reconcile `saved` (the live turn when the app-server died) with the turns a `thread/read`
/// reported.
pub(crate) fn reconcile(saved: Option<&str>, turns: &[Value]) -> Reconciliation {
    let status = |t: &Value| t["status"].as_str().unwrap_or("unknown").to_string();
    if let Some(other) = turns
        .iter()
        .filter(|t| t["id"].as_str() != saved)
        .find(|t| status(t) == "inProgress")
    {
        return Reconciliation::OtherActive {
            saved: saved.map(String::from),
            other: other["id"].as_str().unwrap_or("(no id)").to_string(),
        };
    }
    let Some(saved) = saved else {
        return Reconciliation::NoLiveTurn;
    };
    match turns.iter().find(|t| t["id"].as_str() == Some(saved)) {
        None => Reconciliation::Missing(saved.to_string()),
        Some(turn) if status(turn) == "inProgress" => Reconciliation::Kept(saved.to_string()),
        Some(turn) => Reconciliation::Ended {
            turn_id: saved.to_string(),
            status: status(turn),
            error: turn["error"]["message"].as_str().map(String::from),
        },
    }
}

/// Whether the turn's failure is the app-server going away, and the run may still recover.
pub(crate) fn can_recover(config: &DriverConfig, session: &Session, state: &RunState) -> bool {
    config.run.task.resume_on_crash
        && state.recoveries < MAX_RECOVERIES
        && matches!(session.client.closed(), Some(TransportError::Closed(_)))
}

fn failed(reason: String) -> Stop {
    stop(Ending::FailedPermanently, true, "recovery_failed", &reason)
}

fn note(log: &mut EventLog, level: Level, message: String) -> Result<(), Stop> {
    emit(log, Body::Diagnostic(Diagnostic { level, message }))
}

/// Whether two working directories are the same folder (as written, or resolved).
fn same_dir(a: &str, b: &Path) -> bool {
    let a = Path::new(a);
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// `thread/read` of `thread_id` with its turns; an error answer is a capability error that
/// fails recovery.
async fn read(
    config: &DriverConfig,
    client: &mut RpcClient,
    thread_id: &str,
    when: &str,
) -> Result<Value, Stop> {
    let params = json!({"threadId": thread_id, "includeTurns": true});
    match client
        .request("thread/read", params, config.run.timeouts.request)
        .await
        .map_err(|e| transport_stop(&e))?
    {
        Ok(result) => Ok(result),
        Err(e) => Err(failed(format!(
            "thread/read of the saved thread {thread_id} ({when}) was refused: {}; recovery needs it",
            e.message
        ))),
    }
}

/// Recover `session` after its app-server died while `request`'s turn ran. `lost` is how the
/// turn ended; it is the run's end when recovery does not apply.
pub(crate) async fn after_crash(
    config: &DriverConfig,
    plan: &LaunchPlan,
    session: &mut Session,
    state: &mut RunState,
    request: &TurnRequest,
    lost: Stop,
    log: &mut EventLog,
) -> Result<Recovered, Stop> {
    if !can_recover(config, session, state) {
        return Err(lost);
    }
    state.recoveries += 1;
    let thread_id = session.thread_id.clone();
    let saved_turn = state.live_turn.take();
    let permissions = announce(plan, state, &thread_id, saved_turn.as_deref(), &lost, log)?;
    let (client, resumed) = reopen(config, plan, &thread_id, permissions, log).await?;
    *session = Session {
        client,
        thread_id: thread_id.clone(),
        model: session::model_of(&resumed),
        skills: None,
    };
    let after = read(config, &mut session.client, &thread_id, "after resuming").await?;
    let turns = after["thread"]["turns"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let reconciliation = reconcile(saved_turn.as_deref(), &turns);
    settle(config, plan, session, state, request, reconciliation, log).await
}

/// The recovery's start, in the run's events: a warning naming the lost turn, and the
/// relaunch (`session.relaunched`) resuming the saved thread. Returns the launch plan's thread
/// permissions, which the resume asks for again.
fn announce(
    plan: &LaunchPlan,
    state: &RunState,
    thread_id: &str,
    saved_turn: Option<&str>,
    lost: &Stop,
    log: &mut EventLog,
) -> Result<Option<String>, Stop> {
    let why = lost.0.reason.clone().unwrap_or_default();
    note(
        log,
        Level::Warn,
        format!(
            "the app-server went away during turn {} ({why}); recovering thread {thread_id} (recovery {} of {MAX_RECOVERIES})",
            saved_turn.unwrap_or("(not yet started)"),
            state.recoveries
        ),
    )?;
    let summary = plan.summary();
    emit(
        log,
        Body::SessionRelaunched(SessionRelaunched {
            identity: summary.identity,
            policy: summary.policy,
            argv: summary.argv,
            thread_permissions: summary.thread_permissions.clone(),
            resume_thread: Some(thread_id.to_string()),
        }),
    )?;
    Ok(summary.thread_permissions)
}

/// A new app-server, initialized; the saved thread read back (its identity and working
/// directory checked) and resumed on it. Returns the client and the resume's answer.
async fn reopen(
    config: &DriverConfig,
    plan: &LaunchPlan,
    thread_id: &str,
    permissions: Option<String>,
    log: &mut EventLog,
) -> Result<(RpcClient, Value), Stop> {
    let mut client = match session::start_initialized(config, plan).await {
        Ok(client) => client,
        Err(OpenFailure::Stop(s)) => return Err(s),
        Err(OpenFailure::Rejected(e)) => return Err(failed(e.message)),
        Err(OpenFailure::Transient(reason)) => return Err(failed(reason)),
        Err(OpenFailure::Transport(e)) => return Err(transport_stop(&e)),
    };
    let workspace = &config.run.launch.workspace;
    let before = read(config, &mut client, thread_id, "before resuming").await?;
    let read_id = before["thread"]["id"].as_str().unwrap_or("(none)");
    if read_id != thread_id {
        return Err(failed(format!(
            "thread/read of the saved thread {thread_id} answered for thread {read_id}"
        )));
    }
    let cwd = before["thread"]["cwd"].as_str().unwrap_or("(none)");
    if !same_dir(cwd, workspace) {
        return Err(failed(format!(
            "the saved thread {thread_id} works in {cwd}, not in the run's workspace {}",
            workspace.display()
        )));
    }
    let resumed = resume(config, plan, &mut client, thread_id, permissions, log).await?;
    Ok((client, resumed))
}

/// What the run does next by how the saved live turn was reconciled on the resumed thread.
async fn settle(
    config: &DriverConfig,
    plan: &LaunchPlan,
    session: &mut Session,
    state: &mut RunState,
    request: &TurnRequest,
    reconciliation: Reconciliation,
    log: &mut EventLog,
) -> Result<Recovered, Stop> {
    let thread_id = session.thread_id.clone();
    match reconciliation {
        Reconciliation::Kept(turn_id) => {
            note(
                log,
                Level::Info,
                format!("turn {turn_id} is still in progress on the resumed thread: following it"),
            )?;
            state.live_turn = Some(turn_id.clone());
            let outcome = turn::follow(config, plan, session, state, &turn_id, request, log).await?;
            Ok(Recovered::Outcome(outcome))
        }
        Reconciliation::Ended {
            turn_id, status, ..
        } if status == "interrupted" => {
            note(
                log,
                Level::Info,
                format!("the crash ended turn {turn_id} (`interrupted`): carrying on in a new turn"),
            )?;
            Ok(Recovered::Again(TurnRequest {
                text: CONTINUE_PROMPT.to_string(),
                params: request.params.clone(),
            }))
        }
        Reconciliation::Ended {
            turn_id,
            status,
            error,
        } => {
            note(
                log,
                Level::Info,
                format!("turn {turn_id} ended `{status}` before the crash was noticed"),
            )?;
            Ok(Recovered::Outcome(TurnOutcome {
                turn_id,
                status,
                error,
                ..TurnOutcome::default()
            }))
        }
        Reconciliation::NoLiveTurn => Ok(Recovered::Again(request.clone())),
        Reconciliation::Missing(turn_id) => Err(failed(format!(
            "the resumed thread {thread_id} has no turn {turn_id}, the turn that was running: the session cannot be reconciled"
        ))),
        Reconciliation::OtherActive { saved, other } => Err(failed(format!(
            "turn {other} is in progress on the resumed thread {thread_id}, not the saved turn {}: the session cannot be reconciled",
            saved.as_deref().unwrap_or("(none)")
        ))),
    }
}

/// `thread/resume` of exactly `thread_id` on the new app-server, recorded as the session's
/// open request and start; the answer's result.
async fn resume(
    config: &DriverConfig,
    plan: &LaunchPlan,
    client: &mut RpcClient,
    thread_id: &str,
    permissions: Option<String>,
    log: &mut EventLog,
) -> Result<Value, Stop> {
    emit(
        log,
        Body::SessionOpenRequested(SessionOpenRequested {
            permissions,
            cwd: config.run.launch.workspace.to_string_lossy().into_owned(),
            experimental_api: true,
        }),
    )?;
    let opening = Opening::Resume {
        thread_id: thread_id.to_string(),
    };
    let params = opening.params(plan, &config.run.task);
    let result = match client
        .request("thread/resume", params, config.run.timeouts.request)
        .await
        .map_err(|e| transport_stop(&e))?
    {
        Ok(result) => result,
        Err(error) => {
            emit(
                log,
                Body::SessionRejected(SessionRejected {
                    code: error.code,
                    message: error.message.clone(),
                    attempt: 1,
                }),
            )?;
            return Err(stop(
                Ending::FailedPermanently,
                true,
                "provider_resume_rejected",
                &error.message,
            ));
        }
    };
    let resumed_id = result["thread"]["id"].as_str().unwrap_or("(none)");
    if resumed_id != thread_id {
        return Err(failed(format!(
            "thread/resume of thread {thread_id} answered with another thread, {resumed_id}: a resume that lands elsewhere has lost the conversation"
        )));
    }
    emit(log, session::session_started(thread_id, &result))?;
    if config.run.task.context.is_some() {
        session::check_no_instruction_sources(&result)?;
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(id: &str, status: &str) -> Value {
        json!({"id": id, "status": status, "items": [], "error": null})
    }

    #[test]
    fn only_the_saved_live_turn_counts() {
        let kept = [turn("t0", "completed"), turn("t1", "inProgress")];
        assert_eq!(
            reconcile(Some("t1"), &kept),
            Reconciliation::Kept("t1".into())
        );
        let ended = [turn("t0", "completed"), turn("t1", "interrupted")];
        assert_eq!(
            reconcile(Some("t1"), &ended),
            Reconciliation::Ended {
                turn_id: "t1".into(),
                status: "interrupted".into(),
                error: None
            }
        );
        let mut failed = turn("t1", "failed");
        failed["error"] = json!({"message": "boom"});
        assert!(matches!(
            reconcile(Some("t1"), &[failed]),
            Reconciliation::Ended { error: Some(e), .. } if e == "boom"
        ));
        assert_eq!(
            reconcile(Some("t1"), &[turn("t0", "completed")]),
            Reconciliation::Missing("t1".into())
        );
        assert_eq!(
            reconcile(
                Some("t1"),
                &[turn("t1", "interrupted"), turn("t2", "inProgress")]
            ),
            Reconciliation::OtherActive {
                saved: Some("t1".into()),
                other: "t2".into()
            }
        );
        assert_eq!(
            reconcile(None, &[turn("t0", "completed")]),
            Reconciliation::NoLiveTurn
        );
        assert!(matches!(
            reconcile(None, &[turn("t9", "inProgress")]),
            Reconciliation::OtherActive { saved: None, .. }
        ));
    }

    #[test]
    fn working_directories_compare_as_folders() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert!(same_dir(&d.display().to_string(), d));
        assert!(same_dir(&format!("{}/.", d.display()), d));
        assert!(!same_dir("/elsewhere-entirely", d));
    }
}
