//! How a scenario is played here: the fake app-server started on a built-in or a built
//! scenario, a thread and its turns driven over stdio, and what the model and the client saw.

use super::common::*;
use fake_app_server::scenario::ScenarioBuilder;
use serde_json::{json, Value};

pub(super) struct Run {
    pub(super) client: Client,
    pub(super) lab: Lab,
    pub(super) model_log: std::path::PathBuf,
}

pub(super) fn start(scenario: &str, sandbox: &str) -> Run {
    let lab = Lab::new();
    let model_log = lab.path("model-log.jsonl");
    let mut args = vec![
        "app-server",
        "--scenario",
        scenario,
        "--sandbox",
        sandbox,
        "--model-log",
        model_log.to_str().unwrap(),
    ];
    args.extend(profile_args());
    let client = Client::spawn(
        &args
            .iter()
            .map(|s| s.to_string())
            .collect::<Vec<_>>()
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
        &lab.home(),
    );
    Run {
        client,
        lab,
        model_log,
    }
}

pub(super) fn start_built(builder: ScenarioBuilder, sandbox: &str) -> Run {
    let lab = Lab::new();
    let file = lab.path("scenario.toml");
    std::fs::write(&file, builder.to_toml().unwrap()).unwrap();
    let model_log = lab.path("model-log.jsonl");
    let mut args = vec![
        "app-server".to_string(),
        "--scenario".into(),
        file.display().to_string(),
        "--sandbox".into(),
        sandbox.into(),
        "--model-log".into(),
        model_log.display().to_string(),
    ];
    args.extend(profile_args().iter().map(|s| s.to_string()));
    let client = Client::spawn(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        &lab.home(),
    );
    Run {
        client,
        lab,
        model_log,
    }
}

impl Run {
    pub(super) fn thread(&mut self, permissions: &str) -> String {
        let ws = self.lab.ws_str();
        let answer = self.client.request(
            "thread/start",
            json!({"cwd": ws, "permissions": permissions, "dynamicTools": finish_tool()}),
        );
        answer["result"]["thread"]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("thread/start failed: {answer}"))
            .to_string()
    }

    /// Run one turn, answering every dynamic tool call with success; returns the notifications.
    pub(super) fn turn(&mut self, thread: &str, text: &str, extra: Value) -> Vec<Value> {
        let mut params = json!({"threadId": thread, "input": [{"type": "text", "text": text}]});
        if let Value::Object(map) = extra {
            for (k, v) in map {
                params[k] = v;
            }
        }
        let answer = self.client.request("turn/start", params);
        assert_eq!(answer["result"]["turn"]["status"], "inProgress", "{answer}");
        let mut seen = Vec::new();
        loop {
            let message = self.client.wait_for("turn traffic", |_| true);
            if message.get("id").is_some() && message["method"] == "item/tool/call" {
                let id = message["id"].clone();
                self.client.send(&json!({"id": id, "result": {"contentItems": [{"type": "inputText", "text": "acknowledged"}], "success": true}}));
            }
            let done = message["method"] == "turn/completed";
            seen.push(message);
            if done {
                return seen;
            }
        }
    }

    /// The model's tool calls and the outputs it got, in order.
    pub(super) fn model_log(&self) -> Vec<Value> {
        read_jsonl(&self.model_log)
            .into_iter()
            .filter(|entry| entry["type"] != "user-input")
            .collect()
    }

    /// The user messages the model read, in order.
    pub(super) fn user_inputs(&self) -> Vec<String> {
        read_jsonl(&self.model_log)
            .into_iter()
            .filter(|entry| entry["type"] == "user-input")
            .map(|entry| entry["text"].as_str().unwrap_or_default().to_string())
            .collect()
    }
}

pub(super) fn items_of(messages: &[Value], kind: &str) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "item/completed" && m["params"]["item"]["type"] == kind)
        .map(|m| m["params"]["item"].clone())
        .collect()
}

pub(super) fn plan_first_line(messages: &[Value]) -> String {
    let plans = items_of(messages, "plan");
    assert_eq!(plans.len(), 1, "{messages:#?}");
    plans[0]["text"]
        .as_str()
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string()
}

pub(super) fn plan_mode() -> Value {
    json!({"collaborationMode": {"mode": "plan", "settings": {"model": "m", "reasoning_effort": null, "developer_instructions": null}}})
}
