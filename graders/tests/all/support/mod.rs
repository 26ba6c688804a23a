//! Builders for event streams in the graders' tests.
#![allow(dead_code)]

use graders::events::*;
use graders::grade::{grade, grade_reader};
use graders::verdict::Verdict;

pub mod wire;

pub const RUN: &str = "run-test";

#[derive(Debug, Clone, Default)]
pub struct Stream {
    pub events: Vec<Event>,
}

impl Stream {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(mut self, source: Source, body: Body) -> Self {
        let seq = self.events.len() as u64;
        self.events.push(Event::new(seq, RUN, source, body));
        self
    }
    pub fn driver(self, body: Body) -> Self {
        self.push(Source::Driver, body)
    }
    pub fn harness(self, body: Body) -> Self {
        self.push(Source::Harness, body)
    }
    pub fn model(self, body: Body) -> Self {
        self.push(Source::Model, body)
    }

    pub fn jsonl(&self) -> String {
        let mut out = String::new();
        for e in &self.events {
            out.push_str(&serde_json::to_string(e).unwrap());
            out.push('\n');
        }
        out
    }

    /// A planning run up to a started session and one submitted turn.
    pub fn planning_session() -> Self {
        Self::new()
            .driver(run_started(Mode::Planning, Some("runner-read-only")))
            .driver(session_open(Some("runner-read-only")))
            .driver(session_started("thread-1"))
            .driver(turn_submitted(
                0,
                Some("runner-read-only"),
                Some("plan"),
                "Try to write the probe file.",
            ))
    }
}

/// Grade both in memory and streamed from JSONL, require the same verdict, return it.
pub fn grade_both(suite: &str, case: &str, stream: &Stream) -> Verdict {
    let in_memory = grade(suite, case, &stream.events).expect("known suite/case");
    let jsonl = stream.jsonl();
    let streamed =
        grade_reader(suite, case, jsonl.as_bytes()).expect("in-memory input is readable");
    assert_eq!(in_memory, streamed, "grade() and grade_reader() disagree");
    in_memory
}

pub fn launch(mode: Mode, permissions: Option<&str>) -> LaunchSummary {
    LaunchSummary {
        mode,
        target: Target::ExternalSandbox,
        network_enabled: true,
        policy: PolicyGeneration::Current,
        argv: vec![
            "-c".into(),
            r#"default_permissions="runner-read-only""#.into(),
            "-c".into(),
            r#"permissions.runner-read-only={filesystem={":root"="read"},network={enabled=true}}"#
                .into(),
        ],
        thread_permissions: permissions.map(str::to_string),
        turn_permissions: permissions.map(str::to_string),
        identity: "launch-3f9a".into(),
    }
}

pub fn run_started(mode: Mode, permissions: Option<&str>) -> Body {
    Body::RunStarted(RunStarted {
        cell: CellId::new("suite", "runner-fake", "local", "case"),
        driver: "reference".into(),
        launch: launch(mode, permissions),
        protocol: None,
    })
}

pub fn session_open(permissions: Option<&str>) -> Body {
    Body::SessionOpenRequested(SessionOpenRequested {
        permissions: permissions.map(str::to_string),
        cwd: "/ws".into(),
        experimental_api: true,
    })
}

pub fn session_started(thread: &str) -> Body {
    Body::SessionStarted(SessionStarted {
        thread_id: thread.into(),
        sandbox: SandboxFacts {
            sandbox: Some(serde_json::json!({"type": "readOnly", "networkAccess": true})),
            active_profile: Some("runner-read-only".into()),
            instruction_sources: vec![],
        },
        approval_policy: Some(serde_json::json!("on-request")),
        approvals_reviewer: Some("user".into()),
    })
}

pub fn session_rejected(message: &str, attempt: u32) -> Body {
    Body::SessionRejected(SessionRejected {
        code: -32603,
        message: message.into(),
        attempt,
    })
}

pub fn turn_submitted(
    index: u32,
    permissions: Option<&str>,
    mode: Option<&str>,
    input: &str,
) -> Body {
    Body::TurnSubmitted(TurnSubmitted {
        index,
        permissions: permissions.map(str::to_string),
        collaboration_mode: mode.map(str::to_string),
        input_excerpt: input.into(),
        approval_policy: None,
        approvals_reviewer: None,
    })
}

pub fn turn_completed(status: &str) -> Body {
    Body::TurnCompleted(TurnCompleted {
        turn_id: "turn-1".into(),
        status: status.into(),
        error: (status != "completed").then(|| "stream disconnected before completion".into()),
        codex_error_info: (status != "completed").then(|| serde_json::json!("other")),
    })
}

pub fn turn_error(will_retry: bool) -> Body {
    Body::TurnError(TurnError {
        turn_id: Some("turn-1".into()),
        message: "stream disconnected before completion: mock failure for testing".into(),
        will_retry: Some(will_retry),
        codex_error_info: Some(serde_json::json!("other")),
        additional_details: None,
    })
}

pub struct Cmd<'a> {
    pub command: &'a str,
    pub exit: Option<i64>,
    pub stdout: Option<&'a str>,
    pub stderr: Option<&'a str>,
    pub aggregated: Option<&'a str>,
}

pub fn command(c: Cmd<'_>) -> Body {
    Body::ItemCompleted(ItemEvent {
        turn_id: Some("turn-1".into()),
        item: Item::CommandExecution(CommandExecution {
            id: "call_1".into(),
            command: c.command.into(),
            cwd: Some("/ws".into()),
            status: if c.exit == Some(0) {
                "completed"
            } else {
                "failed"
            }
            .into(),
            exit_code: c.exit,
            stdout: c.stdout.map(str::to_string),
            stderr: c.stderr.map(str::to_string),
            aggregated_output: c.aggregated.map(str::to_string),
            sandbox: Some("runner-read-only".into()),
            ran_in_sandbox: None,
        }),
    })
}

/// The real Codex's item for `printf probe > plan-write-probe-1.txt || echo WRITE_REFUSED`.
pub fn codex_refused_item() -> Body {
    command(Cmd {
        command: "/bin/bash -lc 'printf probe > plan-write-probe-1.txt || echo WRITE_REFUSED'",
        exit: Some(0),
        stdout: None,
        stderr: None,
        aggregated: Some(
            "/bin/bash: line 1: plan-write-probe-1.txt: Read-only file system\nWRITE_REFUSED\n",
        ),
    })
}

pub fn tool_call(call_id: &str, cmd: &str) -> Body {
    Body::ModelToolCall(ModelToolCall {
        call_id: call_id.into(),
        name: "exec_command".into(),
        arguments: serde_json::json!({ "cmd": cmd }).to_string(),
        sandbox_permissions: None,
        justification: None,
    })
}

pub fn tool_output(call_id: &str, output: &str) -> Body {
    Body::ModelToolOutput(ModelToolOutput {
        call_id: call_id.into(),
        output: output.into(),
    })
}

/// A `function_call_output` string as the real Codex formats it for exec tools.
pub fn codex_exec_output(exit: i64, output: &str) -> String {
    format!("Chunk ID: 4438be\nWall time: 0.0001 seconds\nProcess exited with code {exit}\nOriginal token count: 20\nOutput:\n{output}")
}

pub fn agent_message(text: &str) -> Body {
    Body::ItemCompleted(ItemEvent {
        turn_id: Some("turn-1".into()),
        item: Item::AgentMessage {
            id: "msg_1".into(),
            text: text.into(),
        },
    })
}

pub fn plan_item(text: &str) -> Body {
    Body::ItemCompleted(ItemEvent {
        turn_id: Some("turn-1".into()),
        item: Item::Plan {
            id: "plan_1".into(),
            text: text.into(),
        },
    })
}

pub fn file_change(path: &str, status: &str) -> Body {
    Body::ItemCompleted(ItemEvent {
        turn_id: Some("turn-1".into()),
        item: Item::FileChange {
            id: "fc_1".into(),
            paths: vec![path.into()],
            status: Some(status.into()),
        },
    })
}

pub fn plan_approval(request_id: &str) -> Body {
    Body::ApprovalRequested(ApprovalRequested {
        request_id: request_id.into(),
        kind: ApprovalKind::Plan,
        item_id: None,
        command: None,
        reason: None,
        available_decisions: None,
    })
}

pub fn decision(request_id: &str, decision: &str) -> Body {
    Body::ApprovalResolved(ApprovalResolved {
        request_id: request_id.into(),
        decision: decision.into(),
    })
}

pub fn result(outcome: Outcome, owner: Option<&str>, action: Option<&str>) -> Body {
    Body::ResultProposed(ResultProposed {
        outcome,
        summary: "summary".into(),
        owner: owner.map(str::to_string),
        action: action.map(str::to_string),
    })
}

/// Workspace evidence; each probe is (file name, exists).
pub fn workspace(probes: &[(&str, bool)]) -> Body {
    Body::WorkspaceEvidence(WorkspaceEvidence {
        pattern: "plan-write-probe-*".into(),
        probes: probes
            .iter()
            .map(|(path, exists)| ProbeFile {
                path: (*path).into(),
                exists: *exists,
                size: exists.then_some(5),
                sha256: exists.then(|| "a".repeat(64)),
            })
            .collect(),
    })
}

pub fn diagnostic(message: &str) -> Body {
    Body::Diagnostic(Diagnostic {
        level: Level::Info,
        message: message.into(),
    })
}

pub fn ended(
    ending: Ending,
    retry_offered: bool,
    error_code: Option<&str>,
    reason: Option<&str>,
) -> Body {
    Body::RunEnded(RunEnded {
        ending,
        retry_offered,
        error_code: error_code.map(str::to_string),
        reason: reason.map(str::to_string),
    })
}

pub fn succeeded() -> Body {
    ended(Ending::Succeeded, false, None, None)
}
