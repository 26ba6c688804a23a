//! The repro's facts as a run-event stream, graded by the real grader (no verdict is decided
//! here).

use crate::event_log::EventLog;
use crate::launch::LaunchPlan;
use crate::rpc::RpcError;
use anyhow::Result;
use graders::events::{
    Body, CellId, CommandExecution, Ending, Item, ItemEvent, ProbeFile, RunEnded, RunStarted,
    SandboxFacts, SessionOpenRequested, SessionRejected, SessionStarted, Source, WorkspaceEvidence,
};
use graders::verdict::Verdict;
use serde_json::Value;
use std::path::Path;

pub const SUITE: &str = "codex-planning-read-only";
pub const CASE: &str = "plan-write-refused";

pub struct AttemptFacts<'a> {
    pub runner: &'a str,
    pub environment: &'a str,
    pub plan: &'a LaunchPlan,
    pub thread_start: &'a Result<Value, RpcError>,
    pub exec: Option<&'a Result<Value, RpcError>>,
    pub workspace: &'a Path,
}

/// Record the attempt as events and grade them.
pub fn grade_attempt(facts: &AttemptFacts<'_>) -> Result<Verdict> {
    let mut log = EventLog::in_memory("harness-repro");
    let cell = CellId::new(SUITE, facts.runner, facts.environment, CASE);
    log.emit(
        Source::Harness,
        Body::RunStarted(RunStarted {
            cell,
            driver: "harness-repro".into(),
            launch: facts.plan.summary(),
        }),
    )?;
    log.emit(
        Source::Driver,
        Body::SessionOpenRequested(SessionOpenRequested {
            permissions: facts.plan.thread_params["permissions"]
                .as_str()
                .map(String::from),
            cwd: facts.workspace.display().to_string(),
            experimental_api: true,
        }),
    )?;
    match facts.thread_start {
        Ok(result) => {
            log.emit(
                Source::Driver,
                Body::SessionStarted(SessionStarted {
                    thread_id: result["thread"]["id"].as_str().unwrap_or("").to_string(),
                    sandbox: SandboxFacts {
                        sandbox: result.get("sandbox").cloned(),
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
                    },
                }),
            )?;
        }
        Err(err) => {
            log.emit(
                Source::Driver,
                Body::SessionRejected(SessionRejected {
                    code: err.code,
                    message: err.message.clone(),
                    attempt: 1,
                }),
            )?;
        }
    }
    if let Some(Ok(result)) = facts.exec {
        let stdout = result["stdout"].as_str().unwrap_or("").to_string();
        let stderr = result["stderr"].as_str().unwrap_or("").to_string();
        log.emit(
            Source::Driver,
            Body::ItemCompleted(ItemEvent {
                turn_id: None,
                item: Item::CommandExecution(CommandExecution {
                    id: "repro-command-exec".into(),
                    command: format!("sh -c '{}'", super::PROBE_SCRIPT),
                    cwd: Some(facts.workspace.display().to_string()),
                    status: "completed".into(),
                    exit_code: result["exitCode"].as_i64(),
                    aggregated_output: Some(format!("{stdout}{stderr}")),
                    stdout: Some(stdout),
                    stderr: Some(stderr),
                    sandbox: facts.plan.turn_params.permissions.clone(),
                }),
            }),
        )?;
    }
    log.emit(
        Source::Harness,
        Body::WorkspaceEvidence(WorkspaceEvidence {
            pattern: "plan-write-probe-*".into(),
            probes: probe_files(facts.workspace)?,
        }),
    )?;
    let session_opened = facts.thread_start.is_ok();
    log.end(RunEnded {
        ending: if session_opened {
            Ending::Succeeded
        } else {
            Ending::FailedPermanently
        },
        retry_offered: false,
        error_code: None,
        reason: facts
            .thread_start
            .as_ref()
            .err()
            .map(|err| err.message.clone()),
    })?;
    Ok(graders::grade::grade(SUITE, CASE, log.events())?)
}

fn probe_files(workspace: &Path) -> Result<Vec<ProbeFile>> {
    use sha2::Digest;
    let mut probes = Vec::new();
    for entry in std::fs::read_dir(workspace)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("plan-write-probe-") {
            let bytes = std::fs::read(entry.path())?;
            probes.push(ProbeFile {
                path: name,
                exists: true,
                size: Some(bytes.len() as u64),
                sha256: Some(hex::encode(sha2::Sha256::digest(&bytes))),
            });
        }
    }
    Ok(probes)
}
