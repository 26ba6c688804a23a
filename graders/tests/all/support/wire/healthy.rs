//! A healthy run of every protocol case (what a correct driver puts on the wire), the answers
//! a correct driver gives each server request, and the transcripts tests break them with.

use super::*;

/// A valid answer of the driver to each server request of the release (an error where a driver
/// cannot do what is asked: attest itself).
pub fn valid_answer(method: &str) -> Value {
    match method {
        "item/commandExecution/requestApproval" | "item/fileChange/requestApproval" => {
            json!({"result": {"decision": "decline"}})
        }
        "item/permissions/requestApproval" => json!({"result": {"permissions": {}}}),
        "item/tool/requestUserInput" => json!({"result": {"answers": {}}}),
        "item/tool/call" => json!({"result": {"success": false, "contentItems": []}}),
        "mcpServer/elicitation/request" => json!({"result": {"action": "decline"}}),
        "account/chatgptAuthTokens/refresh" => {
            json!({"result": {"accessToken": "a", "chatgptAccountId": "b"}})
        }
        "currentTime/read" => json!({"result": {"currentTimeAt": 1_700_000_000}}),
        "applyPatchApproval" | "execCommandApproval" => json!({"result": {"decision": "abort"}}),
        _ => json!({"error": {"code": -32601, "message": "method not supported"}}),
    }
}

/// The method each `protocol-server-requests` case sends.
pub fn request_method(case: &str) -> &'static str {
    match case {
        "command-approval" => "item/commandExecution/requestApproval",
        "file-change-approval" => "item/fileChange/requestApproval",
        "permissions-approval" => "item/permissions/requestApproval",
        "user-input" => "item/tool/requestUserInput",
        "dynamic-tool-call" => "item/tool/call",
        "mcp-elicitation" => "mcpServer/elicitation/request",
        "auth-token-refresh" => "account/chatgptAuthTokens/refresh",
        "attestation" => "attestation/generate",
        "current-time" => "currentTime/read",
        "legacy-apply-patch-approval" => "applyPatchApproval",
        "legacy-exec-command-approval" => "execCommandApproval",
        "unknown-request" => graders::grade::UNKNOWN_SERVER_REQUEST,
        other => panic!("no such case {other}"),
    }
}

/// The server request `id` of `method` mid-turn, answered with `answer` (`{result}` or
/// `{error}`) after `latency_ms`, then the turn completes and the driver ends.
pub fn answered(method: &str, answer: Option<Value>, latency_ms: u64) -> Transcript {
    let t = Transcript::session()
        .server_request(7, method)
        .wait(latency_ms);
    let t = match answer {
        Some(mut answer) => {
            answer["id"] = json!(7);
            t.send(answer)
        }
        None => t,
    };
    t.finish()
}

fn server_requests(case: &str) -> Run {
    let method = request_method(case);
    let declarations = Declarations {
        dynamic_tools: case == "dynamic-tool-call",
        chatgpt_tokens: case == "auth-token-refresh",
        ..outcome()
    };
    Run::new(
        "protocol-server-requests",
        case,
        answered(method, Some(valid_answer(method)), 5),
    )
    .declaring(declarations)
}

fn notifications(t: Transcript, methods: &[Value]) -> Transcript {
    methods.iter().fold(t, |t, m| t.recv(m.clone()))
}

/// A healthy run of `suite/case`: what a correct driver does. Every protocol case has one, and
/// each passes.
pub fn healthy(suite: &str, case: &str) -> Run {
    let run = |t: Transcript| Run::new(suite, case, t).declaring(outcome());
    match (suite, case) {
        ("protocol-server-requests", case) => server_requests(case),
        ("protocol-safe-default", "command-escalation-refused") => run(answered(
            "item/commandExecution/requestApproval",
            Some(json!({"result": {"decision": "decline"}})),
            5,
        ))
        .with(Source::Harness, workspace(&[])),
        ("protocol-safe-default", "file-change-refused") => run(answered(
            "item/fileChange/requestApproval",
            Some(json!({"result": {"decision": "cancel"}})),
            5,
        ))
        .with(Source::Harness, workspace(&[])),
        ("protocol-turn-outcomes", "retryable-error") => run(Transcript::session()
            .recv(json!({"method": "error", "params": {"threadId": THREAD, "turnId": TURN,
                "willRetry": true, "error": {"message": "Reconnecting... 1/5"}}}))
            .finish()),
        ("protocol-turn-outcomes", "failed-turn") => run(Transcript::session()
            .recv(json!({"method": "error", "params": {"threadId": THREAD, "turnId": TURN,
                "willRetry": false, "error": {"message": "stream disconnected"}}}))
            .complete_turn(THREAD, TURN, "failed")
            .close())
        .exits(1),
        ("protocol-turn-outcomes", "interrupted-turn") => run(Transcript::session()
            .complete_turn(THREAD, TURN, "interrupted")
            .close())
        .exits(1),
        ("protocol-turn-outcomes", "failed-turn-no-error") => run(Transcript::session()
            .complete_turn(THREAD, TURN, "failed")
            .close())
        .exits(1),
        ("protocol-binding", "foreign-thread-events") => run(foreign("thr-9", "turn-9").finish()),
        ("protocol-binding", "foreign-turn-events") => run(foreign(THREAD, "turn-8").finish()),
        ("protocol-binding", "events-before-answer") => run(Transcript::new()
            .handshake()
            .open_thread(THREAD)
            .request(TURN_START_ID, "turn/start", json!({"threadId": THREAD, "input": []}))
            .turn_started(THREAD, TURN)
            .complete_turn(THREAD, TURN, "completed")
            .result(TURN_START_ID, json!({"turn": {"id": TURN}}))
            .close()),
        ("protocol-binding", "post-turn-events") => run(Transcript::session()
            .complete_turn(THREAD, TURN, "completed")
            .item(THREAD, TURN, json!({"type": "agentMessage", "id": "m9", "text": "late"}))
            .recv(json!({"method": "thread/status/changed", "params": {"threadId": THREAD, "status": {"type": "idle"}}}))
            .close()),
        ("protocol-binding", "server-started-turn") => run(Transcript::session()
            .complete_turn(THREAD, TURN, "completed")
            .turn_started(THREAD, "turn-77")
            .complete_turn(THREAD, "turn-77", "completed")
            .close()),
        ("protocol-binding", "stale-request-after-turn") => run(Transcript::session()
            .complete_turn(THREAD, TURN, "completed")
            .server_request(50, "item/commandExecution/requestApproval")
            .answer(50, json!({"decision": "decline"}))
            .close()),
        ("protocol-forward-compat", "every-notification") => {
            let release = graders::protocol::release(RELEASE).unwrap();
            let all: Vec<Value> = release
                .notifications()
                .map(|m| json!({"method": m, "params": {"threadId": "thr-9"}}))
                .collect();
            run(notifications(Transcript::session(), &all).finish())
        }
        ("protocol-forward-compat", "unknown-notification") => run(Transcript::session()
            .recv(json!({"method": "harness/unknownNotification", "params": {"threadId": THREAD}}))
            .finish()),
        ("protocol-forward-compat", "unknown-item-type") => run(Transcript::session()
            .recv(json!({"method": "item/started", "params": {"threadId": THREAD, "turnId": TURN,
                "item": {"type": "harnessUnknownItem", "id": "u1"}}}))
            .finish()),
        ("protocol-forward-compat", "unknown-enum-values") => run(Transcript::session()
            .recv(json!({"method": "thread/status/changed", "params": {"threadId": THREAD,
                "status": {"type": "harnessUnknownStatus"}}}))
            .finish()),
        ("protocol-forward-compat", "unknown-fields") => run(Transcript::session()
            .recv(json!({"method": "thread/status/changed", "params": {"threadId": THREAD,
                "status": {"type": "idle"}, "harnessExtra": {"x": 1}}, "harnessTop": true}))
            .finish()),
        ("protocol-size", "line-64k") => run(Transcript::session().recv(delta(64 << 10)).finish()),
        ("protocol-size", "line-1m") => run(Transcript::session().oversized((1 << 20) + 90).finish()),
        ("protocol-size", "line-2m") => run(Transcript::session().oversized((2 << 20) + 90).finish()),
        ("protocol-size", "delta-burst") => {
            let burst: Vec<Value> = (0..100_000).map(|_| delta(1)).collect();
            run(notifications(Transcript::session(), &burst).finish())
        }
        ("protocol-size", "stderr-flood") => run(Transcript::session().finish()),
        ("protocol-control", "interrupt") => run(Transcript::session()
            .request(20, "turn/interrupt", json!({"threadId": THREAD, "turnId": TURN}))
            .result(20, json!({}))
            .complete_turn(THREAD, TURN, "interrupted")
            .close())
        .declaring(Declarations {
            interrupt: Some(InterruptSignal::Sigint),
            ..outcome()
        })
        .exits(130),
        ("protocol-control", "steer") => run(Transcript::session()
            .request(21, "turn/steer", json!({"threadId": THREAD, "expectedTurnId": TURN, "input": []}))
            .result(21, json!({"turnId": TURN}))
            .finish())
        .declaring(Declarations {
            steer: Some(SteerChannel::StdinLine),
            ..outcome()
        }),
        ("protocol-control", "initialize-error") => run(Transcript::new()
            .request(INITIALIZE_ID, "initialize", json!({}))
            .error(INITIALIZE_ID, -32600, "unsupported client")
            .close())
        .exits(1),
        ("protocol-control", "turn-start-error") => run(Transcript::new()
            .handshake()
            .open_thread(THREAD)
            .request(TURN_START_ID, "turn/start", json!({"threadId": THREAD, "input": []}))
            .error(TURN_START_ID, -32603, "model not available")
            .close())
        .exits(1),
        ("protocol-control", "resume-error") => run(Transcript::new()
            .handshake()
            .request(THREAD_START_ID, "thread/resume", json!({"threadId": THREAD}))
            .error(THREAD_START_ID, -32603, "no rollout found for thread id thr-1")
            .close())
        .declaring(Declarations {
            resume: Some(ResumeHow::Relaunch),
            ..outcome()
        })
        .exits(1),
        ("protocol-control", "no-answer") => run(Transcript::new()
            .handshake()
            .request(THREAD_START_ID, "thread/start", json!({"cwd": "/w"}))
            .wait(10_000)
            .close())
        .exits(1),
        ("protocol-control", "crash-resume") => run(crashed()
            .relaunch()
            .handshake()
            .request(THREAD_START_ID, "thread/resume", json!({"threadId": THREAD}))
            .result(THREAD_START_ID, json!({"thread": {"id": THREAD}, "sandbox": {"type": "readOnly"}}))
            .start_turn(TURN_START_ID, THREAD, "turn-2")
            .complete_turn(THREAD, "turn-2", "completed")
            .close())
        .declaring(Declarations {
            resume: Some(ResumeHow::Relaunch),
            ..outcome()
        }),
        ("protocol-handshake", "handshake") => run(Transcript::session().finish()),
        ("protocol-credentials", "secrets-not-forwarded") => run(Transcript::session().finish())
            .with(Source::Model, tool_call("call-env", "env"))
            .with(
                Source::Model,
                tool_output(
                    "call-env",
                    &codex_exec_output(0, "PATH=/usr/bin\nHOME=/home/codex\nLANG=C.UTF-8\n"),
                ),
            ),
        ("protocol-task-binding", "workspace-cwd") => run(Transcript::session().finish()),
        ("protocol-task-binding", "mode-planning") => {
            run(Transcript::session().finish()).in_mode(Mode::Planning)
        }
        ("protocol-task-binding", "mode-standard") => run(Transcript::session().finish()),
        ("protocol-task-binding", "mode-ask") => {
            run(Transcript::session().finish()).in_mode(Mode::Ask)
        }
        ("protocol-task-binding", "approvals-never") => {
            run(thread_setting("approvalPolicy", "never")).with_task(Some(task_in_workspace(Some("never"))))
        }
        ("protocol-task-binding", "approvals-auto-review") => {
            run(thread_setting("approvalsReviewer", "auto_review"))
                .with_task(Some(task_in_workspace(Some("auto-review"))))
        }
        ("protocol-task-binding", "approvals-user") => run(Transcript::session().finish())
            .with_task(Some(task_in_workspace(Some("user-accept")))),
        ("protocol-task-binding", "model") => run(thread_setting("model", "mock-model")).with_task(
            Some(TaskChoices {
                model: Some("mock-model".into()),
                ..task_in_workspace(None)
            }),
        ),
        other => panic!("no healthy run for {other:?}"),
    }
}

/// The driver's session on a thread started in the workspace with `key: value`, which the
/// app-server's answer reports back.
fn thread_setting(key: &str, value: &str) -> Transcript {
    Transcript::new()
        .handshake()
        .open_thread_with(json!({"cwd": WORKSPACE, key: value}), json!({key: value}))
        .start_turn(TURN_START_ID, THREAD, TURN)
        .finish()
}

/// A legal `item/agentMessage/delta` whose delta is `bytes` long.
pub fn delta(bytes: usize) -> Value {
    json!({"method": "item/agentMessage/delta", "params": {"threadId": THREAD, "turnId": TURN,
        "itemId": "m1", "delta": "x".repeat(bytes)}})
}

/// A full turn lifecycle of `thread`/`turn` in the middle of the driver's turn.
pub fn foreign(thread: &str, turn: &str) -> Transcript {
    Transcript::session()
        .turn_started(thread, turn)
        .item(
            thread,
            turn,
            json!({"type": "agentMessage", "id": "m-f", "text": "not yours"}),
        )
        .complete_turn(thread, turn, "completed")
}

/// The driver's session, then its app-server dies mid-turn.
pub fn crashed() -> Transcript {
    Transcript::session().crash()
}

/// The healthy run of `suite/case` with another transcript: the driver's behaviour changed.
pub fn case(suite: &str, case: &str, transcript: Transcript) -> Run {
    Run {
        transcript,
        ..healthy(suite, case)
    }
}
