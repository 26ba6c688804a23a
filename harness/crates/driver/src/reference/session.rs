//! Opening a session: start the app-server, `initialize` (with `experimentalApi`),
//! `initialized`, `thread/start` (or `thread/resume` of a saved thread) with the launch plan's
//! parameters — and classifying how that can fail (a definite rejection, a transient failure worth a fresh attempt, a transport fault).

use super::{emit, DriverConfig, Stop};
use crate::event_log::EventLog;
use crate::launch::{LaunchPlan, Target};
use crate::rpc::{self, RpcClient, RpcError, TransportError};
use crate::task::{ContextBoundary, Task};
use graders::events::{Body, SandboxFacts, SessionOpenRequested, SessionRejected, SessionStarted};
use sandbox::launcher::ProcessSpec;
use serde_json::{json, Value};

/// An open session.
pub(crate) struct Session {
    pub(crate) client: RpcClient,
    pub(crate) thread_id: String,
    /// The model the thread reported (fills the collaboration mode's `settings.model`).
    pub(crate) model: String,
    /// The skills its app-server lists (`skills/list`), once asked.
    pub(crate) skills: Option<Vec<super::skills::ListedSkill>>,
}

/// Why an attempt to open a session failed.
#[derive(Debug)]
pub(crate) enum OpenFailure {
    /// A definite refusal: end the run at once, never retry in the same run.
    Rejected(RpcError),
    /// Worth a fresh attempt with a fresh app-server.
    Transient(String),
    /// The transport broke in a way a fresh process would not fix, or a wait expired.
    Transport(TransportError),
    /// The run cannot continue (event log, spawn failure).
    Stop(Stop),
}

/// Texts of errors that are permission, authentication or invalid-request failures.
const DEFINITE_MARKERS: &[&str] = &[
    "permission",
    "not permitted",
    "unauthorized",
    "authenticat",
    "authoriz",
    "forbidden",
    "invalid request",
    "401",
    "403",
];

/// JSON-RPC "Invalid Request".
const INVALID_REQUEST: i64 = -32600;

/// Whether a start-up error is definite: any error on an external-sandbox target, or a
/// permission/authentication/invalid-request error anywhere.
pub(crate) fn is_definite_rejection(target: Target, error: &RpcError) -> bool {
    if target == Target::ExternalSandbox || error.code == INVALID_REQUEST {
        return true;
    }
    let message = error.message.to_lowercase();
    DEFINITE_MARKERS.iter().any(|m| message.contains(m))
}

pub(crate) fn process_spec(config: &DriverConfig, plan: &LaunchPlan) -> ProcessSpec {
    let program = &config.run.app_server;
    let mut args = program.leading_args.clone();
    args.extend(plan.argv.iter().cloned());
    args.extend(program.extra_args.iter().cloned());
    ProcessSpec {
        program: program.program.clone(),
        args,
        // The install folder is the harness telling the driver where the real Codex lives
        // (behind the tap); the app-server has no use for it.
        env: program
            .env
            .iter()
            .filter(|(k, _)| k != crate::launch::profiles::INSTALL_DIR_VAR)
            .cloned()
            .collect(),
        cwd: config.run.launch.workspace.clone(),
    }
}

/// How a session gets its thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Opening {
    /// `thread/start` with the plan's thread parameters; `persist` asks for a non-ephemeral
    /// thread explicitly (a later launch resumes it).
    Start { persist: bool },
    /// `thread/resume` of a saved thread, with the plan's `cwd`, `permissions` and approval
    /// policy (the dynamic tools were saved with the thread).
    Resume { thread_id: String },
}

impl Opening {
    fn method(&self) -> &'static str {
        match self {
            Opening::Start { .. } => "thread/start",
            Opening::Resume { .. } => "thread/resume",
        }
    }

    /// The request's params; the task's context boundary adds its thread configuration, and
    /// the task's model its `model`, on `thread/start` and `thread/resume` alike.
    pub(crate) fn params(&self, plan: &LaunchPlan, task: &Task) -> Value {
        let mut params = match self {
            Opening::Start { persist } => {
                let mut params = plan.thread_params.clone();
                if *persist {
                    params["ephemeral"] = json!(false);
                }
                params
            }
            Opening::Resume { thread_id } => {
                let thread = &plan.thread_params;
                json!({
                    "threadId": thread_id,
                    "cwd": thread["cwd"],
                    "permissions": thread["permissions"],
                    "approvalPolicy": thread["approvalPolicy"],
                    // The history is not needed, and full hydration is deprecated.
                    "excludeTurns": true,
                })
            }
        };
        if let Some(context) = &task.context {
            params["config"] = context_config(context);
        }
        if let Some(model) = &task.model {
            params["model"] = json!(model);
        }
        params
    }
}

/// The thread configuration of the context boundary: skill instructions as the run asks, and
/// no project instruction files (Codex 0.169 then reports no instruction source, measured).
pub(crate) fn context_config(context: &ContextBoundary) -> Value {
    json!({
        "skills": {"include_instructions": context.include_skill_instructions},
        "project_doc_max_bytes": 0,
    })
}

/// A fresh app-server, past the handshake: `initialize` (with `experimentalApi`), then
/// `initialized`.
pub(crate) async fn start_initialized(
    config: &DriverConfig,
    plan: &LaunchPlan,
) -> Result<RpcClient, OpenFailure> {
    let t = &config.run.timeouts;
    let spec = process_spec(config, plan);
    let mut client = RpcClient::spawn_recorded(
        config.launcher.as_ref(),
        &spec,
        &config.stderr_log,
        config.transcript.as_deref(),
        rpc::Limits::default(),
    )
    .map_err(|e| OpenFailure::Transient(format!("could not start the app-server: {e:#}")))?;
    let init = json!({
        "clientInfo": {"name": "paperclip-reference-driver", "title": null, "version": env!("CARGO_PKG_VERSION")},
        "capabilities": {"experimentalApi": true},
    });
    match client.request("initialize", init, t.request).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return Err(classify_rpc_error(config, e)),
        Err(e) => return Err(classify_transport(e, "initialize")),
    }
    client
        .notify("initialized", None)
        .await
        .map_err(|e| classify_transport(e, "initialized"))?;
    Ok(client)
}

/// One attempt: a fresh app-server, initialize, then `thread/start` or `thread/resume`.
pub(crate) async fn open(
    config: &DriverConfig,
    plan: &LaunchPlan,
    opening: &Opening,
    attempt: u32,
    log: &mut EventLog,
) -> Result<Session, OpenFailure> {
    let t = &config.run.timeouts;
    let mut client = start_initialized(config, plan).await?;
    let permissions = plan.thread_params["permissions"].as_str().map(String::from);
    emit(
        log,
        Body::SessionOpenRequested(SessionOpenRequested {
            permissions: permissions.clone(),
            cwd: config.run.launch.workspace.to_string_lossy().into_owned(),
            experimental_api: true,
        }),
    )
    .map_err(OpenFailure::Stop)?;
    let method = opening.method();
    let result = match client
        .request(method, opening.params(plan, &config.run.task), t.request)
        .await
    {
        Ok(Ok(result)) => result,
        Ok(Err(error)) => {
            emit(
                log,
                Body::SessionRejected(SessionRejected {
                    code: error.code,
                    message: error.message.clone(),
                    attempt,
                }),
            )
            .map_err(OpenFailure::Stop)?;
            return Err(classify_rpc_error(config, error));
        }
        Err(e) => return Err(classify_transport(e, method)),
    };
    let Some(thread_id) = result["thread"]["id"].as_str().map(String::from) else {
        return Err(OpenFailure::Transport(TransportError::Malformed {
            error: rpc::MalformedMessage::NotObject,
            excerpt: format!(
                "{method} result without thread.id: {}",
                rpc::excerpt(&result.to_string(), 200)
            ),
        }));
    };
    emit(log, session_started(&thread_id, &result)).map_err(OpenFailure::Stop)?;
    if config.run.task.context.is_some() {
        check_no_instruction_sources(&result).map_err(OpenFailure::Stop)?;
    }
    Ok(Session {
        client,
        thread_id,
        model: model_of(&result),
        skills: None,
    })
}

/// `session.started` of `thread_id`, from its `thread/start` / `thread/resume` answer.
pub(crate) fn session_started(thread_id: &str, result: &Value) -> Body {
    Body::SessionStarted(SessionStarted {
        thread_id: thread_id.to_string(),
        sandbox: sandbox_facts(result),
        approval_policy: result
            .get("approvalPolicy")
            .cloned()
            .filter(|v| !v.is_null()),
        approvals_reviewer: result["approvalsReviewer"].as_str().map(String::from),
    })
}

/// The model a `thread/start` / `thread/resume` answer reports.
pub(crate) fn model_of(result: &Value) -> String {
    result["model"]
        .as_str()
        .or_else(|| result["thread"]["model"].as_str())
        .unwrap_or("default")
        .to_string()
}

/// Under the context boundary the thread must report no instruction source: anything listed
/// reached the model besides the task's own text.
pub(crate) fn check_no_instruction_sources(result: &Value) -> Result<(), Stop> {
    let sources = sandbox_facts(result).instruction_sources;
    if sources.is_empty() {
        return Ok(());
    }
    Err(super::stop(
        graders::events::Ending::FailedPermanently,
        false,
        "context_boundary_violated",
        &format!(
            "the thread reports instruction sources {sources:?}; the run's context boundary allows none"
        ),
    ))
}

fn classify_rpc_error(config: &DriverConfig, error: RpcError) -> OpenFailure {
    if is_definite_rejection(config.run.launch.target, &error) {
        OpenFailure::Rejected(error)
    } else {
        OpenFailure::Transient(error.to_string())
    }
}

/// The process going away during start-up is transient; a wait expiring or garbage is not.
fn classify_transport(error: TransportError, during: &str) -> OpenFailure {
    match error {
        TransportError::Closed(detail) => {
            OpenFailure::Transient(format!("the app-server exited during `{during}`: {detail}"))
        }
        other => OpenFailure::Transport(other),
    }
}

pub(crate) fn sandbox_facts(result: &Value) -> SandboxFacts {
    SandboxFacts {
        sandbox: result.get("sandbox").cloned().filter(|v| !v.is_null()),
        active_profile: result["activePermissionProfile"]["id"]
            .as_str()
            .map(String::from),
        instruction_sources: result["instructionSources"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(code: i64, message: &str) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    #[test]
    fn definite_rejections() {
        let bwrap = err(-32603, "error creating thread: failed to load AGENTS.md instructions for environment `local`: fs sandbox helper failed with status exit status: 1: bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted");
        assert!(is_definite_rejection(Target::Local, &bwrap));
        let auth = err(
            -32603,
            "error creating thread: Fatal error: unexpected status 401 Unauthorized",
        );
        assert!(is_definite_rejection(Target::Ssh, &auth));
        assert!(is_definite_rejection(
            Target::Local,
            &err(
                -32600,
                "thread/start.permissions requires experimentalApi capability"
            )
        ));
        let flaky = err(-32603, "error creating thread: temporarily unavailable");
        assert!(!is_definite_rejection(Target::Local, &flaky));
        assert!(is_definite_rejection(Target::ExternalSandbox, &flaky));
    }
}
