//! The automatic reviewer (`approvalsReviewer: "auto_review"`), played by the fake and by the
//! mock model API in front of the real Codex: for an escalated write the script allows and one
//! it denies, both servers send the client no approval request, report the review with the
//! same notifications, and leave the workspace the same way.
//!
//! Needs the pinned real Codex (and bubblewrap, for its sandbox): without them the test is
//! reported as ignored with the reason; under `CI=true` it fails instead.

use crate::common;

use codex::mock_api::{MockConfig, MockModelApi, MockScript};
use codex::{provision, runner};
use common::prereq;
use fake_app_server::line_reader::forward_lines;
use fake_app_server::scenario::builder::steps;
use fake_app_server::scenario::ScenarioBuilder;
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

/// Bound on one whole turn.
const TURN_BOUND: Duration = Duration::from_secs(60);

pub fn trials() -> Vec<libtest_mimic::Trial> {
    let missing = || prereq::environment_missing("local").or_else(prereq::codex_missing);
    let trials = vec![
        prereq::trial(
            "auto_review_allow_matches_between_fake_and_real_codex_needs_real_codex",
            missing(),
            || {
                compare(true);
                Ok(())
            },
        ),
        prereq::trial(
            "auto_review_deny_matches_between_fake_and_real_codex_needs_real_codex",
            missing(),
            || {
                compare(false);
                Ok(())
            },
        ),
    ];
    trials
}

fn scenario(allow: bool) -> ScenarioBuilder {
    ScenarioBuilder::new("auto-review").turn(vec![
        steps::reviewed_shell(
            "printf probe > plan-write-probe-{probe_id}.txt",
            "Write the probe file?",
            allow,
        ),
        steps::message("done"),
    ])
}

struct Server {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<Value>,
    next_id: u64,
}

impl Server {
    fn spawn(mut command: Command) -> Server {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning the app-server");
        let (tx, rx) = std::sync::mpsc::channel();
        forward_lines(child.stdout.take().unwrap(), move |line| {
            tx.send(line.trim_end().to_string()).is_ok()
        });
        Server {
            child,
            lines: rx,
            seen: Vec::new(),
            next_id: 1,
        }
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Read until `stop` (bounded); every server request is answered with an error, so a
    /// request the client should never get cannot block the turn either.
    fn until(&mut self, what: &str, stop: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + TURN_BOUND;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).unwrap_or_else(|_| {
                panic!("no {what} within {TURN_BOUND:?}; seen {:#?}", self.seen)
            });
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            self.seen.push(message.clone());
            if message.get("id").is_some() && message.get("method").is_some() {
                self.send(&json!({"id": message["id"], "error": {"code": -32601, "message": "this client answers no server request"}}));
            }
            if stop(&message) {
                return message;
            }
        }
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"id": id, "method": method, "params": params}));
        self.until(method, |m| {
            m["id"] == json!(id) && m.get("method").is_none()
        })
    }

    fn run_turn(&mut self, workspace: &Path) {
        self.request(
            "initialize",
            json!({"clientInfo": {"name": "auto-review-fidelity", "version": "0.0.1"}, "capabilities": {"experimentalApi": true}}),
        );
        self.send(&json!({"method": "initialized"}));
        let started = self.request(
            "thread/start",
            json!({"cwd": workspace, "sandbox": "read-only", "approvalPolicy": "on-request", "approvalsReviewer": "auto_review"}),
        );
        assert_eq!(
            started["result"]["approvalsReviewer"], "auto_review",
            "{started}"
        );
        let thread = started["result"]["thread"]["id"].clone();
        self.request(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "write the probe"}]}),
        );
        self.until("turn/completed", |m| m["method"] == "turn/completed");
    }

    fn finish(mut self) -> Vec<Value> {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.seen
    }
}

/// What the client saw of the review: the review notifications (status, decision source,
/// action type), requests sent to the client, and the command item's final status.
fn review_view(seen: &[Value]) -> Vec<String> {
    seen.iter()
        .filter_map(|m| {
            let method = m["method"].as_str()?;
            let params = &m["params"];
            match method {
                "item/autoApprovalReview/started" | "item/autoApprovalReview/completed" => {
                    Some(format!(
                        "{method} status={} action={} source={} decision={}",
                        params["review"]["status"],
                        params["action"]["type"],
                        params["action"]["source"],
                        params["decisionSource"]
                    ))
                }
                "guardianWarning" => Some(format!("{method} {}", params["message"])),
                "item/started" | "item/completed"
                    if params["item"]["type"] == "commandExecution" =>
                {
                    let item = &params["item"];
                    let actions = item["commandActions"].to_string();
                    Some(format!(
                        "{method} command status={} source={} exit={} actions={}",
                        item["status"],
                        item["source"],
                        item["exitCode"],
                        actions.replace(probe_id(item), "<probe>")
                    ))
                }
                _ if m.get("id").is_some() => Some(format!("server request {method}")),
                _ => None,
            }
        })
        .collect()
}

/// The probe file's id in a command item (it differs per thread by construction).
fn probe_id(item: &Value) -> &str {
    let command = item["command"].as_str().unwrap_or_default();
    command
        .split("plan-write-probe-")
        .nth(1)
        .and_then(|rest| rest.split('.').next())
        .unwrap_or("<none>")
}

fn probes(workspace: &Path) -> usize {
    std::fs::read_dir(workspace)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("plan-write-probe-")
        })
        .count()
}

fn workspace(root: &Path) -> PathBuf {
    let ws = root.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    ws
}

fn real(allow: bool, root: &Path) -> (Vec<Value>, usize, Vec<String>) {
    let ws = workspace(root);
    let install = provision::resolve(provision::PINNED).expect("the pinned Codex");
    let home = root.join("home");
    let codex_home = home.join(".codex");
    let tmp = root.join("tmp");
    for dir in [&codex_home, &tmp] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let script = MockScript::from_scenario(&scenario(allow).build().unwrap()).unwrap();
    let mock = runtime
        .block_on(MockModelApi::start_with(MockConfig {
            script,
            model_log: root.join("model-log.jsonl"),
            request_log: None,
        }))
        .unwrap();
    let mut command = Command::new(&install.binary);
    command
        .arg("app-server")
        .args(runner::provider_args(&mock.base_url()))
        .env_clear()
        .envs(runner::allowlisted_env(&home, &codex_home, &tmp))
        .current_dir(&ws);
    let mut server = Server::spawn(command);
    server.run_turn(&ws);
    let seen = server.finish();
    let answers: Vec<String> = mock.requests().iter().map(|r| r.answer.clone()).collect();
    runtime.block_on(mock.shutdown());
    sandbox::reap::after_cell(None, root);
    (seen, probes(&ws), answers)
}

fn fake(allow: bool, root: &Path) -> (Vec<Value>, usize) {
    let ws = workspace(root);
    let file = root.join("scenario.toml");
    std::fs::write(&file, scenario(allow).to_toml().unwrap()).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_harness"));
    command
        .args(["fake-app-server", "app-server", "--scenario"])
        .arg(&file)
        .env("CODEX_HOME", root.join("home"))
        .current_dir(&ws);
    let mut server = Server::spawn(command);
    server.run_turn(&ws);
    (server.finish(), probes(&ws))
}

fn compare(allow: bool) {
    let scratch = tempfile::tempdir().unwrap();
    let (real_seen, real_probes, answers) = real(allow, &scratch.path().join("real"));
    let (fake_seen, fake_probes) = fake(allow, &scratch.path().join("fake"));
    let wanted = if allow { "review-allow" } else { "review-deny" };
    assert!(
        answers.iter().any(|a| a == wanted),
        "the real Codex never asked the mock model for a review (answers {answers:?}); seen {real_seen:#?}"
    );
    if std::env::var_os("AUTO_REVIEW_DUMP").is_some() {
        for m in &real_seen {
            eprintln!("REAL {m}");
        }
        for m in &fake_seen {
            eprintln!("FAKE {m}");
        }
    }
    let real_view = review_view(&real_seen);
    let fake_view = review_view(&fake_seen);
    assert!(
        real_view.iter().all(|l| !l.starts_with("server request")),
        "the real Codex asked the client: {real_view:?}"
    );
    assert_eq!(
        real_probes,
        usize::from(allow),
        "real Codex probe files; seen {real_seen:#?}"
    );
    assert_eq!(fake_probes, real_probes, "probe files: fake vs real");
    assert_eq!(
        fake_view, real_view,
        "review as the client saw it: fake (left) vs real (right)\nreal: {real_seen:#?}"
    );
}
