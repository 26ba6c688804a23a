//! Every message the fake app-server emits, across every built-in scenario (plus one approval
//! scenario), validates against the JSON Schema the real Codex it plays generates at test time:
//! one trial per release a fake runner of the matrix plays (the pin, and each `plays`). A failure
//! names the scenario, the message and the schema path. The forward-compatibility scenarios'
//! deliberate unknowns (`harness/unknown…` methods, `harnessUnknown…` types and values) must
//! instead break the schema; a builtin sending a server request the release removed is skipped
//! for that release, loudly, after checking that the fake refused it.
//!
//! Needs those real Codex versions (to generate the schemas): without one the trial is reported
//! as ignored with the reason; under `CI=true` it fails instead.

use crate::common;

use common::codex_schema::{self, CodexSchema};
use common::prereq;
use fake_app_server::line_reader::forward_lines;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);
/// The fake writes a scenario's messages within milliseconds of their cause; one that has said
/// nothing for this long is withholding something on purpose (a request it never answers, a turn
/// that never completes), so the wait for it ends. Five scenarios do, for each release: waiting
/// out `WAIT` on each cost the test 150 s of its 166 s.
const QUIET: Duration = Duration::from_secs(3);

fn response_schema(method: &str) -> Option<&'static str> {
    Some(match method {
        "initialize" => "v1/InitializeResponse.json",
        "thread/start" => "v2/ThreadStartResponse.json",
        "thread/resume" => "v2/ThreadResumeResponse.json",
        "thread/read" => "v2/ThreadReadResponse.json",
        "turn/start" => "v2/TurnStartResponse.json",
        "turn/steer" => "v2/TurnSteerResponse.json",
        "turn/interrupt" => "v2/TurnInterruptResponse.json",
        "command/exec" => "v2/CommandExecResponse.json",
        "permissionProfile/list" => "v2/PermissionProfileListResponse.json",
        "account/read" => "v2/GetAccountResponse.json",
        "account/login/start" => "v2/LoginAccountResponse.json",
        "config/read" => "v2/ConfigReadResponse.json",
        "model/list" => "v2/ModelListResponse.json",
        "skills/list" => "v2/SkillsListResponse.json",
        "collaborationMode/list" => "v2/CollaborationModeListResponse.json",
        "thread/settings/update" => "v2/ThreadSettingsUpdateResponse.json",
        _ => return None,
    })
}

/// A scripted client: sends requests, answers server requests, records every line out.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Every line the fake wrote.
    emitted: Vec<String>,
    /// Request id → method, to pick the response schema.
    methods: BTreeMap<String, String>,
    next_id: u64,
    tool_answers: usize,
}

impl Session {
    fn spawn(scenario: &str, lab: &Path, plays: &str) -> Session {
        let ws = lab.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("AGENTS.md"), "# Agents\nBe terse.\n").unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_harness"))
            .args(["fake-app-server", "app-server", "--scenario", scenario])
            .args(["-c", r#"default_permissions="restricted""#])
            .args(["-c", r#"permissions.restricted={filesystem={":root"="none",":minimal"="read",":workspace_roots"={"."="read"}},network={enabled=false}}"#])
            .args(["-c", r#"permissions.fullread={filesystem={":root"="read"},network={enabled=true}}"#])
            .env("CODEX_HOME", lab.join("home"))
            .env("FAKE_APP_SERVER_CODEX_VERSION", plays)
            // Scenarios whose file name says so run the simulated sandbox (environment facts).
            .env(
                "FAKE_APP_SERVER_SANDBOX",
                if scenario.contains("simulated") { "simulated" } else { "auto" },
            )
            .current_dir(&ws)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning harness fake-app-server");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        forward_lines(stdout, move |line| {
            tx.send(line.trim_end().to_string()).is_ok()
        });
        Session {
            stdin: child.stdin.take(),
            child,
            lines: rx,
            emitted: Vec::new(),
            methods: BTreeMap::new(),
            next_id: 1,
            tool_answers: 0,
        }
    }

    fn send(&mut self, message: &Value) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = writeln!(stdin, "{message}");
            let _ = stdin.flush();
        }
    }

    /// Read until `stop` matches a JSON line (answering server requests); false on EOF, on `QUIET`
    /// of silence or at `WAIT`.
    fn pump(&mut self, stop: impl Fn(&Value) -> bool) -> bool {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = self.lines.recv_timeout(left.min(QUIET)) else {
                return false;
            };
            self.emitted.push(line.clone());
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message.get("id").is_some() && message.get("method").is_some() {
                self.answer_server_request(&message);
            }
            if stop(&message) {
                return true;
            }
        }
    }

    fn answer_server_request(&mut self, request: &Value) {
        let answer = match request["method"].as_str() {
            Some("item/tool/call") => {
                self.tool_answers += 1;
                json!({"id": request["id"], "result": {"contentItems": [{"type": "inputText", "text": "acknowledged"}], "success": true}})
            }
            Some("item/commandExecution/requestApproval") => {
                json!({"id": request["id"], "result": {"decision": "decline"}})
            }
            _ => json!({"id": request["id"], "error": {"code": -32601, "message": "unexpected"}}),
        };
        self.send(&answer);
    }

    fn request(&mut self, method: &str, params: Value) -> Option<Value> {
        let id = self.next_id;
        self.next_id += 1;
        self.methods
            .insert(json!(id).to_string(), method.to_string());
        self.send(&json!({"id": id, "method": method, "params": params}));
        let mut found = None;
        let ok = self.pump(|m| m.get("id") == Some(&json!(id)) && m.get("method").is_none());
        if ok {
            found = self
                .emitted
                .last()
                .and_then(|l| serde_json::from_str(l).ok());
        }
        found
    }

    fn finish(&mut self) {
        self.stdin.take();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            match self.lines.recv_timeout(Duration::from_millis(50)) {
                Ok(line) => self.emitted.push(line),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                Err(_) => {}
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Drive one scenario through every method the fake implements.
fn drive(scenario: &str, lab: &Path, plays: &str) -> Session {
    let mut session = Session::spawn(scenario, lab, plays);
    let ws = lab.join("ws").display().to_string();
    session.request("initialize", json!({"clientInfo": {"name": "fidelity", "version": "0.0.1"}, "capabilities": {"experimentalApi": true}}));
    session.send(&json!({"method": "initialized"}));
    session.request("permissionProfile/list", json!({"cwd": ws}));
    session.request("account/read", json!({}));
    session.request("config/read", json!({"includeLayers": false}));
    session.request("config/read", json!({"includeLayers": true, "cwd": ws}));
    session.request("model/list", json!({}));
    session.request("skills/list", json!({"cwds": [ws]}));
    session.request("collaborationMode/list", json!({}));
    session.request(
        "account/login/start",
        json!({"type": "apiKey", "apiKey": "sk-fidelity"}),
    );
    session.request("command/exec", json!({"command": ["sh", "-c", "printf x > probe.txt"], "cwd": ws, "permissionProfile": "fullread"}));
    let tools = json!([
        {"type": "function", "name": "paperclip_finish", "description": "Finish.", "inputSchema": {"type": "object"}},
        {"type": "function", "name": "paperclip_block", "description": "Block.", "inputSchema": {"type": "object"}}
    ]);
    let reviewer = if scenario.contains("auto-review") {
        "auto_review"
    } else {
        "user"
    };
    let Some(started) = session.request(
        "thread/start",
        json!({"cwd": ws, "permissions": "restricted", "dynamicTools": tools, "model": "mock-model", "approvalsReviewer": reviewer, "config": {"projects": {ws.clone(): {"trust_level": "trusted"}}}}),
    ) else {
        return session;
    };
    let Some(thread) = started["result"]["thread"]["id"]
        .as_str()
        .map(str::to_string)
    else {
        return session; // startup-rejected
    };
    let plan_mode = json!({"mode": "plan", "settings": {"model": "gpt-6.1-sol", "reasoning_effort": null, "developer_instructions": null}});
    session.request(
        "thread/settings/update",
        json!({"threadId": thread, "collaborationMode": plan_mode, "approvalsReviewer": reviewer}),
    );
    for turn in 0..3 {
        let mut params = json!({"threadId": thread, "input": [{"type": "text", "text": format!("turn {turn} MARKER-fidelity")}], "permissions": "restricted"});
        if turn == 0 {
            params["collaborationMode"] = plan_mode.clone();
        }
        let Some(answer) = session.request("turn/start", params) else {
            return session;
        };
        let turn_id = answer["result"]["turn"]["id"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if scenario.ends_with("hang") {
            // Observe the message before the hang, then stop waiting.
            session.pump(|m| {
                m["method"] == "item/completed" && m["params"]["item"]["type"] == "agentMessage"
            });
            session.request("turn/steer", json!({"threadId": thread, "input": [{"type": "text", "text": "still there?"}], "expectedTurnId": turn_id}));
            session.request(
                "turn/interrupt",
                json!({"threadId": thread, "turnId": turn_id}),
            );
            return session;
        }
        if !session.pump(|m| m["method"] == "turn/completed") {
            return session; // crashed
        }
    }
    session.request(
        "thread/read",
        json!({"threadId": thread, "includeTurns": true}),
    );
    session.request(
        "thread/resume",
        json!({"threadId": thread, "permissions": "fullread"}),
    );
    session.request(
        "turn/steer",
        json!({"threadId": thread, "input": [], "expectedTurnId": "none"}),
    );
    session
}

fn validate(
    session: &Session,
    scenario: &str,
    schemas: &mut CodexSchema,
    failures: &mut Vec<String>,
) -> (usize, usize) {
    let mut checked = 0;
    let mut off_schema = 0;
    let context = format!("scenario `{scenario}`");
    for line in &session.emitted {
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            // Only the garbage-line fault (and a crash's cut line) may write non-JSON.
            assert!(
                scenario.contains("garbage-line") || scenario.contains("crash"),
                "scenario `{scenario}` wrote a line that is not JSON: {}",
                &line[..line.len().min(200)]
            );
            continue;
        };
        checked += 1;
        if is_off_schema(&message) {
            off_schema += 1;
            // A deliberate unknown of a forward-compatibility scenario: it must break the real
            // schema (or it tests nothing), and only such a scenario may send one.
            let mut broken = Vec::new();
            validate_message(&message, session, &context, schemas, &mut broken);
            if broken.is_empty() {
                failures.push(format!(
                    "{context}: the deliberately off-schema message {message} validates against the real schema"
                ));
            }
            if !off_schema_scenario(scenario) {
                failures.push(format!(
                    "{context}: off-schema message {message} from a scenario that is not off-schema"
                ));
            }
            continue;
        }
        validate_message(&message, session, &context, schemas, failures);
    }
    (checked, off_schema)
}

/// The markers of the forward-compatibility scenarios' deliberate unknowns: methods under
/// `harness/unknown…`, item types and enum values `harnessUnknown…`.
fn is_off_schema(message: &Value) -> bool {
    let text = message.to_string();
    text.contains("harness/unknown") || text.contains("harnessUnknown")
}

/// Whether the scenario sends, on purpose, messages no release's schema allows (the fake's own
/// declaration of its forward-compatibility builtins).
fn off_schema_scenario(scenario: &str) -> bool {
    scenario
        .strip_prefix("builtin:")
        .and_then(|name| fake_app_server::scenario::Scenario::builtin(name).ok())
        .is_some_and(|s| s.off_schema())
}

/// The server requests a builtin scenario sends that the release's real schema does not list.
fn requests_not_in_release(scenario: &str, schemas: &CodexSchema) -> Vec<String> {
    let Some(loaded) = scenario
        .strip_prefix("builtin:")
        .map(|name| fake_app_server::scenario::Scenario::builtin(name).expect("a builtin loads"))
    else {
        return Vec::new();
    };
    loaded
        .server_requests()
        .into_iter()
        .filter(|method| schemas.server_request_response(method).is_err())
        .map(str::to_string)
        .collect()
}

fn validate_message(
    message: &Value,
    session: &Session,
    context: &str,
    schemas: &mut CodexSchema,
    failures: &mut Vec<String>,
) {
    match (message.get("method").is_some(), message.get("id").is_some()) {
        (true, false) => {
            let bare = json!({"method": message["method"], "params": message["params"]});
            schemas.check("ServerNotification.json", &bare, context, message, failures);
        }
        (true, true) => {
            schemas.check_by_method("ServerRequest.json", message, context, message, failures)
        }
        (false, true) => {
            if let Some(error) = message.get("error") {
                schemas.check("JSONRPCErrorError.json", error, context, message, failures);
                return;
            }
            let method = session
                .methods
                .get(&message["id"].to_string())
                .cloned()
                .unwrap_or_default();
            match response_schema(&method) {
                Some(schema) => {
                    schemas.check(schema, &message["result"], context, message, failures)
                }
                None => failures.push(format!("{context}: response to unknown request {message}")),
            }
        }
        (false, false) => failures.push(format!("{context}: not a JSON-RPC message: {message}")),
    }
}

pub fn trials() -> Vec<libtest_mimic::Trial> {
    let trials = codex_schema::fake_releases()
        .into_iter()
        .map(|plays| {
            prereq::trial(
                format!("every_message_of_every_builtin_scenario_validates_against_the_real_schema_needs_real_codex::{plays}"),
                prereq::version_missing(&plays),
                move || {
                    every_message_of_every_builtin_scenario_validates_against_the_real_schema(&plays);
                    Ok(())
                },
            )
        })
        .collect();
    trials
}

fn every_message_of_every_builtin_scenario_validates_against_the_real_schema(plays: &str) {
    let scratch = tempfile::tempdir().unwrap();
    let mut schemas = codex_schema::generate_version(plays, &scratch.path().join("schema"));
    // The validator is not vacuous: a turn with an unknown status and a thread/start result
    // without its thread must both be rejected.
    let mut self_check = Vec::new();
    let bad_turn = json!({"method": "turn/completed", "params": {"threadId": "t", "turn": {"id": "x", "items": [], "status": "bogus"}}});
    schemas.check(
        "ServerNotification.json",
        &bad_turn,
        "self-check",
        &bad_turn,
        &mut self_check,
    );
    let bad_result = json!({"model": "m"});
    schemas.check(
        "v2/ThreadStartResponse.json",
        &bad_result,
        "self-check",
        &bad_result,
        &mut self_check,
    );
    assert!(
        self_check.len() >= 2,
        "the schema validator accepted invalid messages: {self_check:?}"
    );
    let approval = fake_app_server::scenario::ScenarioBuilder::new("approval-decline")
        .turn(vec![
            fake_app_server::scenario::builder::steps::escalated_shell(
                "printf probe > x.txt",
                "Allow?",
            ),
        ])
        .turn(vec![
            fake_app_server::scenario::model::ModelStep::PlanUpdate {
                explanation: Some("checklist".into()),
                steps: vec![fake_app_server::scenario::model::PlanStepSpec {
                    step: "write".into(),
                    status: "inProgress".into(),
                }],
            },
        ]);
    let approval_file = scratch.path().join("approval.toml");
    std::fs::write(&approval_file, approval.to_toml().unwrap()).unwrap();
    // The automatic reviewer: one escalation allowed, one denied (played with
    // `approvalsReviewer: auto_review`, which the file name selects in `drive`).
    let reviewed = fake_app_server::scenario::ScenarioBuilder::new("auto-review").turn(vec![
        fake_app_server::scenario::builder::steps::reviewed_shell(
            "printf a > a.txt",
            "Allow?",
            true,
        ),
        fake_app_server::scenario::builder::steps::reviewed_shell(
            "printf b > b.txt",
            "Allow?",
            false,
        ),
    ]);
    let reviewed_file = scratch.path().join("auto-review.toml");
    std::fs::write(&reviewed_file, reviewed.to_toml().unwrap()).unwrap();
    let refused = fake_app_server::scenario::ScenarioBuilder::from_builtin("plan-write-refused")
        .unwrap()
        .environment(fake_app_server::scenario::EnvironmentFacts {
            loopback_refused: true,
            ..Default::default()
        });
    let refused_file = scratch.path().join("loopback-refused-simulated.toml");
    std::fs::write(&refused_file, refused.to_toml().unwrap()).unwrap();
    let mut scenarios: Vec<String> = fake_app_server::scenario::BUILTIN_NAMES
        .iter()
        .map(|n| format!("builtin:{n}"))
        .collect();
    scenarios.push(approval_file.display().to_string());
    scenarios.push(reviewed_file.display().to_string());
    scenarios.push(refused_file.display().to_string());
    let mut failures = Vec::new();
    let mut methods_seen = std::collections::BTreeSet::new();
    for (index, scenario) in scenarios.iter().enumerate() {
        let lab = scratch.path().join(format!("lab-{index}"));
        let unplayable = requests_not_in_release(scenario, &schemas);
        let mut session = drive(scenario, &lab, plays);
        session.finish();
        let (checked, off_schema) = validate(&session, scenario, &mut schemas, &mut failures);
        if !unplayable.is_empty() {
            // A server request the release removed (`currentTime/read` after 0.169): the fake
            // playing it must refuse the scenario at load, so there is nothing to validate.
            assert_eq!(
                checked, 0,
                "scenario `{scenario}` sends {unplayable:?}, which Codex {plays}'s ServerRequest.json does not list, yet the fake playing {plays} played it"
            );
            eprintln!(
                "SKIPPED for Codex {plays}: scenario `{scenario}` sends {unplayable:?}, which this release's ServerRequest.json does not list (the fake refused it at load, as it must)"
            );
            continue;
        }
        assert!(
            checked >= 3,
            "scenario `{scenario}` produced only {checked} messages"
        );
        assert!(
            !off_schema_scenario(scenario) || off_schema > 0,
            "scenario `{scenario}` is off-schema but sent no deliberately unknown message"
        );
        for line in &session.emitted {
            if let Ok(m) = serde_json::from_str::<Value>(line) {
                if let Some(method) = m["method"].as_str() {
                    methods_seen.insert(method.to_string());
                }
            }
        }
    }
    for expected in [
        "thread/started",
        "turn/started",
        "turn/completed",
        "item/started",
        "item/completed",
        "item/tool/call",
        "item/commandExecution/requestApproval",
        "serverRequest/resolved",
        "turn/plan/updated",
        "thread/status/changed",
        "remoteControl/status/changed",
        "configWarning",
        "error",
        "item/plan/delta",
        "item/agentMessage/delta",
        "warning",
        "thread/tokenUsage/updated",
        "thread/settings/updated",
        "account/login/completed",
        "account/updated",
        "item/autoApprovalReview/started",
        "item/autoApprovalReview/completed",
        "guardianWarning",
        "thread/goal/cleared",
    ] {
        assert!(
            methods_seen.contains(expected),
            "no scenario exercised `{expected}`: {methods_seen:?}"
        );
    }
    assert!(
        failures.is_empty(),
        "{} schema violations:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
