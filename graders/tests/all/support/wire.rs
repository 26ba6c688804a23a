//! Transcripts in the tap's format (`graders::wire::transcript`), built line by line, and a
//! healthy run of every protocol case: what a correct driver puts on the wire. Tests grade
//! them through the real translator (`graders::wire::translate`), then break them the way real
//! drivers do.

use super::{codex_exec_output, grade_both, tool_call, tool_output, workspace, Stream};
use graders::events::*;
use graders::verdict::{Verdict, VerdictKind};
use graders::wire::{self, Context, DriverEnd};
use serde_json::{json, Value};

pub const RELEASE: &str = "0.169.0";
pub const THREAD: &str = "thr-1";
pub const TURN: &str = "turn-1";
/// Request ids of the handshake helpers.
pub const INITIALIZE_ID: u64 = 1;
pub const THREAD_START_ID: u64 = 2;
pub const TURN_START_ID: u64 = 3;
/// The side thread of [`Transcript::title_thread`] and its `thread/start` request id.
pub const TITLE_THREAD: &str = "thr-title";
pub const TITLE_THREAD_START_ID: u64 = 90;

#[derive(Debug, Clone)]
pub struct Transcript {
    lines: Vec<String>,
    pub time: u64,
    launch: u64,
}

impl Default for Transcript {
    fn default() -> Self {
        Self::new()
    }
}

impl Transcript {
    /// A transcript with its first launch recorded.
    pub fn new() -> Self {
        Self {
            lines: Vec::new(),
            time: 1_000,
            launch: 0,
        }
        .relaunch()
    }

    fn push(mut self, mut line: Value) -> Self {
        self.time += 1;
        line["time"] = json!(self.time);
        line["launch"] = json!(self.launch);
        self.lines.push(line.to_string());
        self
    }

    /// The next launch of the app-server.
    pub fn relaunch(self) -> Self {
        self.relaunch_with(&["PATH"])
    }

    /// The next launch of the app-server, started with an environment of these names.
    pub fn relaunch_with(self, env_names: &[&str]) -> Self {
        self.launch_as(&["app-server"], env_names, WORKSPACE)
    }

    /// The next launch of the app-server, started with `argv` in the folder `cwd`.
    pub fn launch_as(mut self, argv: &[&str], env_names: &[&str], cwd: &str) -> Self {
        self.launch += 1;
        self.push(
            json!({"kind": "launch", "argv": argv, "env_names": env_names,
            "cwd": cwd, "added_args": []}),
        )
    }

    /// A transcript whose first launch is `codex app-server` started in the folder `cwd`.
    pub fn started_in(cwd: &str) -> Self {
        Self::nothing().launch_as(&["app-server"], &["PATH"], cwd)
    }

    /// A transcript with no launch at all: the driver never ran `codex`.
    pub fn nothing() -> Self {
        Self {
            lines: Vec::new(),
            time: 1_000,
            launch: 0,
        }
    }

    /// A line from the driver.
    pub fn send(self, message: Value) -> Self {
        self.push(json!({"direction": "in", "message": message}))
    }

    /// A line from the app-server.
    pub fn recv(self, message: Value) -> Self {
        self.push(json!({"direction": "out", "message": message}))
    }

    /// A line too long for the tap to keep.
    pub fn oversized(self, bytes: u64) -> Self {
        self.push(json!({"direction": "out", "note": "oversized line", "bytes": bytes}))
    }

    /// The first `bytes` of an app-server line whose end never came (the recording ended inside
    /// it): a `partial` line.
    pub fn cut_off(self, bytes: usize) -> Self {
        let mut line = r#"{"method":"item/agentMessage/delta","params":{"delta":""#.to_string();
        line.push_str(&"x".repeat(bytes.saturating_sub(line.len())));
        self.push(json!({"direction": "out", "raw": line, "partial": true}))
    }

    /// The harness killed the app-server: the driver let go of its `codex`.
    pub fn killed_by_harness(self) -> Self {
        self.push(
            json!({"kind": "exit", "status": null, "signal": 9, "error": null,
            "killed_by_harness": "the tap's connection closed before the app-server's exit"}),
        )
    }

    pub fn wait(mut self, ms: u64) -> Self {
        self.time += ms;
        self
    }

    pub fn stdin_closed(self) -> Self {
        self.push(json!({"kind": "stdin-closed"}))
    }

    pub fn exit(self, status: i64) -> Self {
        self.push(json!({"kind": "exit", "status": status, "signal": null, "error": null}))
    }

    /// The driver sends its `codex` `signal`, which the tap passes on (the recorder's record).
    pub fn driver_signal(self, signal: i64) -> Self {
        self.push(json!({"kind": "driver-signal", "signal": signal}))
    }

    /// The app-server ends by `signal`.
    pub fn exit_by_signal(self, signal: i64) -> Self {
        self.push(json!({"kind": "exit", "status": null, "signal": signal, "error": null}))
    }

    /// The app-server dies on its own.
    pub fn crash(self) -> Self {
        self.push(json!({"kind": "exit", "status": null, "signal": 9, "error": null}))
    }

    /// The driver closes stdin and the app-server exits 0.
    pub fn close(self) -> Self {
        self.stdin_closed().exit(0)
    }

    pub fn request(self, id: u64, method: &str, params: Value) -> Self {
        self.send(json!({"id": id, "method": method, "params": params}))
    }

    pub fn result(self, id: u64, result: Value) -> Self {
        self.recv(json!({"id": id, "result": result}))
    }

    pub fn error(self, id: u64, code: i64, message: &str) -> Self {
        self.recv(json!({"id": id, "error": {"code": code, "message": message}}))
    }

    /// `initialize`, its answer, `initialized`.
    pub fn handshake(self) -> Self {
        self.request(
            INITIALIZE_ID,
            "initialize",
            json!({"clientInfo": {"name": "t"}}),
        )
        .result(INITIALIZE_ID, json!({"userAgent": "codex"}))
        .send(json!({"method": "initialized"}))
    }

    /// `thread/start` with `params`, answered for [`THREAD`] with a read-only sandbox and the
    /// `reported` settings.
    pub fn open_thread_with(self, params: Value, reported: Value) -> Self {
        let mut result = json!({"thread": {"id": THREAD, "cwd": WORKSPACE}, "sandbox": {"type": "readOnly"}, "approvalPolicy": "on-request"});
        for (key, value) in reported.as_object().into_iter().flatten() {
            result[key] = value.clone();
        }
        self.request(THREAD_START_ID, "thread/start", params)
            .result(THREAD_START_ID, result)
    }

    pub fn open_thread(self, thread: &str) -> Self {
        self.request(THREAD_START_ID, "thread/start", json!({"cwd": "/w"}))
            .result(
                THREAD_START_ID,
                json!({"thread": {"id": thread}, "sandbox": {"type": "readOnly"}, "approvalPolicy": "on-request"}),
            )
    }

    pub fn start_turn(self, id: u64, thread: &str, turn: &str) -> Self {
        self.request(
            id,
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "go"}]}),
        )
        .result(id, json!({"turn": {"id": turn}}))
        .turn_started(thread, turn)
    }

    pub fn turn_started(self, thread: &str, turn: &str) -> Self {
        self.recv(
            json!({"method": "turn/started", "params": {"threadId": thread,
            "turn": {"id": turn, "items": [], "status": "inProgress"}}}),
        )
    }

    pub fn complete_turn(self, thread: &str, turn: &str, status: &str) -> Self {
        let error = (status == "failed").then(|| json!({"message": "the model stream failed"}));
        self.recv(
            json!({"method": "turn/completed", "params": {"threadId": thread,
            "turn": {"id": turn, "items": [], "status": status, "error": error}}}),
        )
    }

    pub fn item(self, thread: &str, turn: &str, item: Value) -> Self {
        self.recv(
            json!({"method": "item/completed", "params": {"threadId": thread, "turnId": turn,
            "completedAtMs": 1_700_000_000_000u64, "item": item}}),
        )
    }

    /// A server request of `method` about the driver's turn.
    pub fn server_request(self, id: u64, method: &str) -> Self {
        self.recv(
            json!({"id": id, "method": method, "params": {"threadId": THREAD,
            "turnId": TURN, "itemId": "item-1", "reason": "write the probe"}}),
        )
    }

    pub fn answer(self, id: u64, result: Value) -> Self {
        self.send(json!({"id": id, "result": result}))
    }

    pub fn answer_error(self, id: u64, code: i64, message: &str) -> Self {
        self.send(json!({"id": id, "error": {"code": code, "message": message}}))
    }

    /// Handshake, thread, and the driver's turn started.
    pub fn session() -> Self {
        Self::new()
            .handshake()
            .open_thread(THREAD)
            .start_turn(TURN_START_ID, THREAD, TURN)
    }

    /// The same session with every thread the driver starts ephemeral (`thread/start
    /// {ephemeral: true}`: a thread Codex does not persist), a choice the protocol leaves to it.
    pub fn ephemeral_threads(mut self) -> Self {
        for line in &mut self.lines {
            let mut value: Value = serde_json::from_str(line).expect("a transcript line");
            if value["direction"] == "in" && value["message"]["method"] == "thread/start" {
                value["message"]["params"]["ephemeral"] = json!(true);
                *line = value.to_string();
            }
        }
        self
    }

    /// What codex-acp does after its turn: it opens an ephemeral thread to title the session
    /// and starts a turn on it, and it may end before that turn completes.
    pub fn title_thread(self) -> Self {
        self.request(
            TITLE_THREAD_START_ID,
            "thread/start",
            json!({"cwd": "/w", "ephemeral": true}),
        )
        .result(
            TITLE_THREAD_START_ID,
            json!({"thread": {"id": TITLE_THREAD}, "sandbox": {"type": "readOnly"}, "approvalPolicy": "on-request"}),
        )
        .start_turn(TITLE_THREAD_START_ID + 1, TITLE_THREAD, "turn-title")
    }

    /// The driver's turn completes and the driver ends.
    pub fn finish(self) -> Self {
        self.complete_turn(THREAD, TURN, "completed").close()
    }

    pub fn text(&self) -> String {
        if self.lines.is_empty() {
            return String::new();
        }
        self.lines.join("\n") + "\n"
    }
}

/// Codex 0.169's one notification for experimental clients only (measured by `harness drift`).
pub const EXPERIMENTAL_ONLY: &str = "thread/readState/changed";

pub fn outcome() -> Declarations {
    Declarations {
        outcome: Some(OutcomeDeclaration::ExitStatus),
        ..Declarations::default()
    }
}

pub fn context(
    suite: &str,
    case: &str,
    mode: Mode,
    declarations: Declarations,
    release: Option<&str>,
    canaries: Option<PlantedCanaries>,
    experimental_only_notifications: Vec<String>,
) -> Context {
    Context {
        cell: CellId::new(suite, "my-runner-fake", "local", case),
        driver: "my-runner".into(),
        mode,
        target: Target::Local,
        network_enabled: false,
        policy: PolicyGeneration::Current,
        protocol: ProtocolSetup {
            release: release.map(str::to_string),
            declarations,
            canaries,
            experimental_only_notifications,
            task: None,
        },
    }
}

/// One run: what crossed the wire, what the cell knew, how the driver ended, and what the
/// harness added.
#[derive(Debug, Clone)]
pub struct Run {
    pub suite: String,
    pub case: String,
    pub mode: Mode,
    pub transcript: Transcript,
    pub declarations: Declarations,
    pub release: Option<String>,
    pub end: DriverEnd,
    pub extras: Vec<(Source, Body)>,
    /// What the harness recorded planting in the driver's environment (every protocol cell).
    pub canaries: Option<PlantedCanaries>,
    /// What the release sends only to experimental clients (the persona's measured list).
    pub experimental_only: Vec<String>,
    /// The task's choices the harness recorded (`run.started.protocol.task`).
    pub task: Option<TaskChoices>,
}

/// The workspace every transcript here runs in.
pub const WORKSPACE: &str = "/w";

/// The task of a run in [`WORKSPACE`], naming `approvals` when given.
pub fn task_in_workspace(approvals: Option<&str>) -> TaskChoices {
    TaskChoices {
        workspace: vec![WORKSPACE.into()],
        approvals: approvals.map(str::to_string),
        model: None,
    }
}

/// The record of the canaries a harness plants (names and a digest, never the values).
pub fn planted() -> PlantedCanaries {
    PlantedCanaries {
        names: vec!["GITHUB_TOKEN".into(), "OPENAI_API_KEY".into()],
        digest: format!("sha256:{}", "0".repeat(64)),
    }
}

impl Run {
    pub fn new(suite: &str, case: &str, transcript: Transcript) -> Self {
        Self {
            suite: suite.into(),
            case: case.into(),
            mode: Mode::Standard,
            transcript,
            declarations: Declarations::default(),
            release: Some(RELEASE.into()),
            end: DriverEnd::Exited { code: 0 },
            extras: Vec::new(),
            canaries: Some(planted()),
            experimental_only: vec![EXPERIMENTAL_ONLY.into()],
            task: Some(task_in_workspace(None)),
        }
    }

    pub fn in_mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    pub fn with_task(mut self, task: Option<TaskChoices>) -> Self {
        self.task = task;
        self
    }

    pub fn declaring(mut self, declarations: Declarations) -> Self {
        self.declarations = declarations;
        self
    }

    pub fn exits(mut self, code: i32) -> Self {
        self.end = DriverEnd::Exited { code };
        self
    }

    pub fn killed_at_bound(mut self) -> Self {
        self.end = DriverEnd::KilledAtBound {
            reason: "the run's bound of 30 s passed".into(),
        };
        self
    }

    pub fn with(mut self, source: Source, body: Body) -> Self {
        self.extras.push((source, body));
        self
    }

    pub fn transcript(mut self, change: impl FnOnce(Transcript) -> Transcript) -> Self {
        self.transcript = change(self.transcript);
        self
    }

    /// The run's event stream: the translator's events (written as the harness writes them:
    /// source `driver`), the harness's extras, and the terminal.
    pub fn stream(&self) -> Stream {
        let t = self.translated();
        let mut stream = Stream::new();
        for body in t.events {
            stream = stream.driver(body);
        }
        for (source, body) in &self.extras {
            stream = stream.push(*source, body.clone());
        }
        stream.harness(Body::RunEnded(t.terminal))
    }

    /// The run's terminal, as the wire and the driver's end show it.
    pub fn terminal(&self) -> graders::events::RunEnded {
        self.translated().terminal
    }

    /// The transcript translated as the harness translates it.
    fn translated(&self) -> wire::Translation {
        let ctx = context(
            &self.suite,
            &self.case,
            self.mode,
            self.declarations.clone(),
            self.release.as_deref(),
            self.canaries.clone(),
            self.experimental_only.clone(),
        );
        let ctx = Context {
            protocol: ProtocolSetup {
                task: self.task.clone(),
                ..ctx.protocol
            },
            ..ctx
        };
        let text = self.transcript.text();
        wire::translate(text.as_bytes(), &ctx, &self.end).expect("a readable transcript")
    }

    pub fn grade(&self) -> Verdict {
        grade_both(&self.suite, &self.case, &self.stream())
    }
}

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

/// `verdict` is `kind`, decided by the named check.
pub fn check(verdict: &Verdict, kind: VerdictKind, check: &str) {
    assert_eq!(verdict.verdict, kind, "{verdict:?}");
    assert!(
        verdict.reason.contains(&format!("`{check}`")),
        "expected check `{check}`: {}",
        verdict.reason
    );
}
