//! Playing a protocol case's built-in scenario against a tiny scripted client: a session with a
//! thread and a turn, a pump that answers server requests by a policy, and a check of every
//! message against the release's committed schema (graders/protocol/<VERSION>/).

use super::{finish_tool, profile_args, read_jsonl, Client, Lab, Line, WAIT};
use fake_app_server::protocol::release_schema;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Instant;

/// How the client answers a server request: `Some(answer message)` or `None` to stay silent.
pub type Policy<'a> = &'a mut dyn FnMut(&Value) -> Option<Value>;

/// A result answer to `request`.
pub fn result(request: &Value, result: Value) -> Option<Value> {
    Some(json!({"id": request["id"], "result": result}))
}

/// A JSON-RPC error answer to `request`.
pub fn error(request: &Value) -> Option<Value> {
    Some(
        json!({"id": request["id"], "error": {"code": -32601, "message": "not supported by this client"}}),
    )
}

/// Answers every approval-like request with `decision` (and everything else with an error).
pub fn decide(decision: &'static str) -> impl FnMut(&Value) -> Option<Value> {
    move |request| match request["method"].as_str() {
        Some("item/commandExecution/requestApproval" | "item/fileChange/requestApproval") => {
            result(request, json!({"decision": decision}))
        }
        _ => error(request),
    }
}

pub struct Case {
    pub client: Client,
    pub lab: Lab,
    pub model_log: PathBuf,
    pub thread: String,
    pub turn: String,
}

/// Spawn the fake on `builtin:NAME` (simulated sandbox, the tests' profiles, `extra` args).
pub fn spawn(name: &str, lab: Lab, extra: &[&str]) -> (Client, PathBuf, Lab) {
    let model_log = lab.path("model-log.jsonl");
    let scenario = format!("builtin:{name}");
    let mut args = vec![
        "app-server",
        "--scenario",
        &scenario,
        "--sandbox",
        "simulated",
        "--model-log",
        model_log.to_str().unwrap(),
    ];
    args.extend(profile_args());
    args.extend(extra);
    let mut command = super::fake_command();
    command
        .args(&args)
        .env("CODEX_HOME", lab.home())
        .current_dir(lab.ws())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    (Client::spawn_command(command), model_log, lab)
}

impl Case {
    /// Initialize, start a thread (`permissions`, the finish tools registered) and send the
    /// first `turn/start` with `turn_extra` params, without waiting for its answer.
    pub fn start(name: &str, permissions: &str, turn_extra: Value) -> Case {
        Case::start_with(name, permissions, turn_extra, &[])
    }

    /// [`Case::start`], the fake launched with `args` too.
    pub fn start_with(name: &str, permissions: &str, turn_extra: Value, args: &[&str]) -> Case {
        let (mut client, model_log, lab) = spawn(name, Lab::new(), args);
        client.initialize(true);
        let thread = start_thread(&mut client, &lab, permissions);
        let mut case = Case::on_thread(client, lab, model_log, thread);
        case.send_turn(turn_extra);
        case
    }

    /// A case on a thread the client already started (no turn yet).
    pub fn on_thread(client: Client, lab: Lab, model_log: PathBuf, thread: String) -> Case {
        Case {
            client,
            lab,
            model_log,
            thread,
            turn: String::new(),
        }
    }

    /// Send `turn/start` on the thread (its answer is read by the pump).
    pub fn send_turn(&mut self, extra: Value) -> u64 {
        let mut params =
            json!({"threadId": self.thread, "input": [{"type": "text", "text": "Do the task."}]});
        if let Value::Object(map) = extra {
            for (k, v) in map {
                params[k] = v;
            }
        }
        self.client.send_request("turn/start", params)
    }

    /// Read messages, answering server requests by `policy`, until one matches `stop`; learns
    /// the driver's turn id from `turn/started` or the `turn/start` answer.
    pub fn pump(
        &mut self,
        what: &str,
        policy: Policy,
        stop: impl Fn(&Case, &Value) -> bool,
    ) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = match self.client.next_line(left) {
                Some(Line::Json(message)) => message,
                Some(Line::Raw(raw)) => panic!("the fake wrote a line that is not JSON: {raw}"),
                None => panic!(
                    "timed out waiting for {what}; seen: {:#?}",
                    self.client.seen
                ),
            };
            if self.turn.is_empty() {
                let started = message["method"] == "turn/started"
                    && message["params"]["threadId"] == json!(self.thread);
                if started {
                    self.turn = message["params"]["turn"]["id"]
                        .as_str()
                        .unwrap()
                        .to_string();
                } else if let Some(id) = message["result"]["turn"]["id"].as_str() {
                    self.turn = id.to_string();
                }
            }
            if message.get("method").is_some() && message.get("id").is_some() {
                if let Some(answer) = policy(&message) {
                    self.client.send(&answer);
                }
            }
            if stop(self, &message) {
                return message;
            }
        }
    }

    /// Pump until the driver's own turn completes.
    pub fn until_turn_completed(&mut self, policy: Policy) -> Value {
        self.pump("the driver's turn/completed", policy, |case, m| {
            m["method"] == "turn/completed"
                && m["params"]["threadId"] == json!(case.thread)
                && !case.turn.is_empty()
                && m["params"]["turn"]["id"] == json!(case.turn)
        })
    }

    /// Every JSON message received so far.
    pub fn messages(&self) -> Vec<Value> {
        messages(&self.client)
    }

    pub fn model_log(&self) -> Vec<Value> {
        read_jsonl(&self.model_log)
    }

    /// The model's tool outputs, in order.
    pub fn tool_outputs(&self) -> Vec<String> {
        self.model_log()
            .iter()
            .filter_map(|e| e["output"].as_str().map(str::to_string))
            .collect()
    }

    /// Files in the workspace whose name starts with `prefix`.
    pub fn probes(&self, prefix: &str) -> Vec<String> {
        std::fs::read_dir(self.lab.ws())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(prefix))
            .collect()
    }
}

pub fn start_thread(client: &mut Client, lab: &Lab, permissions: &str) -> String {
    let answer = client.request(
        "thread/start",
        json!({"cwd": lab.ws_str(), "permissions": permissions, "dynamicTools": finish_tool()}),
    );
    answer["result"]["thread"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("thread/start failed: {answer}"))
        .to_string()
}

pub fn messages(client: &Client) -> Vec<Value> {
    client
        .seen
        .iter()
        .filter_map(|line| match line {
            Line::Json(v) => Some(v.clone()),
            Line::Raw(_) => None,
        })
        .collect()
}

pub fn methods_of(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| m["method"].as_str().map(str::to_string))
        .collect()
}

/// The release's committed schemas, compiled.
pub struct Schemas {
    notifications: jsonschema::Validator,
    requests: jsonschema::Validator,
}

impl Schemas {
    pub fn of(version: &str) -> Schemas {
        let release = release_schema::for_version(version).expect("a carried release");
        let compile = |document: &Value| {
            jsonschema::validator_for(document).expect("the committed schema compiles")
        };
        Schemas {
            notifications: compile(release.notifications_document()),
            requests: compile(release.requests_document()),
        }
    }

    /// Schema violations among `messages`' notifications and server requests (the answers to
    /// the client's requests are the fidelity test's business); `excused` skips the messages a
    /// scenario sends off-schema on purpose.
    pub fn violations(&self, messages: &[Value], excused: impl Fn(&Value) -> bool) -> Vec<String> {
        let mut failures = Vec::new();
        for message in messages.iter().filter(|m| !excused(m)) {
            let Some(method) = message.get("method") else {
                continue;
            };
            let bare = json!({"method": method, "params": message["params"]});
            let (validator, instance) = match message.get("id") {
                Some(id) => (
                    &self.requests,
                    json!({"method": method, "id": id, "params": message["params"]}),
                ),
                None => (&self.notifications, bare),
            };
            for error in validator.iter_errors(&instance) {
                let shown = message.to_string();
                failures.push(format!(
                    "{}: {error} at {}",
                    &shown[..shown.len().min(400)],
                    error.instance_path
                ));
            }
        }
        failures
    }

    pub fn assert_valid(&self, messages: &[Value], excused: impl Fn(&Value) -> bool) {
        let failures = self.violations(messages, excused);
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}
