//! Transport faults from scenarios: every one bounded, every one observable.

use crate::common;

use common::*;
use fake_app_server::scenario::builder::steps;
use fake_app_server::scenario::{
    MethodBehaviour, NotificationFault, ScenarioBuilder, TurnFaultKind,
};
use serde_json::json;
use std::time::{Duration, Instant};

fn spawn(builder_or_builtin: Result<ScenarioBuilder, &str>, lab: &Lab) -> Client {
    let spec = match builder_or_builtin {
        Ok(builder) => {
            let file = lab.path("scenario.toml");
            std::fs::write(&file, builder.to_toml().unwrap()).unwrap();
            file.display().to_string()
        }
        Err(builtin) => format!("builtin:{builtin}"),
    };
    Client::spawn(
        &["--scenario", &spec, "--sandbox", "simulated"],
        &lab.home(),
    )
}

fn start_turn(client: &mut Client, lab: &Lab) {
    let started = client.request(
        "thread/start",
        json!({"cwd": lab.ws_str(), "dynamicTools": finish_tool()}),
    );
    let thread = started["result"]["thread"]["id"].clone();
    client.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "go"}]}),
    );
}

fn answer_tools_until_completed(client: &mut Client) -> serde_json::Value {
    loop {
        let message = client.wait_for("turn traffic", |_| true);
        if message["method"] == "item/tool/call" {
            client.send(&json!({"id": message["id"], "result": {"contentItems": [{"type": "inputText", "text": "ok"}], "success": true}}));
        }
        if message["method"] == "turn/completed" {
            return message;
        }
    }
}

#[test]
fn crash_mid_turn_exits_101_after_the_first_message() {
    let lab = Lab::new();
    let mut client = spawn(Err("crash-mid-turn"), &lab);
    client.initialize(true);
    start_turn(&mut client, &lab);
    let status = client.wait_exit(WAIT).expect("the fake exits");
    assert_eq!(status.code(), Some(101));
    let texts: Vec<String> = client
        .seen
        .iter()
        .filter_map(|l| match l {
            Line::Json(v) if v["method"] == "item/completed" => {
                v["params"]["item"]["text"].as_str().map(str::to_string)
            }
            _ => None,
        })
        .collect();
    // Drain what is left in the pipe.
    while let Some(Line::Json(v)) = client.next_line(Duration::from_millis(100)) {
        assert_ne!(v["method"], "turn/completed");
    }
    let _ = texts;
    assert!(client
        .seen
        .iter()
        .any(|l| matches!(l, Line::Json(v) if v["params"]["item"]["text"] == "Working on it.")));
}

#[test]
fn hang_is_silent_then_bounded() {
    let lab = Lab::new();
    let builder = ScenarioBuilder::new("hang")
        .hang_ms(400)
        .turn(vec![steps::message("a"), steps::message("b")])
        .fault(TurnFaultKind::Hang, Some(0));
    let mut client = spawn(Ok(builder), &lab);
    client.initialize(true);
    start_turn(&mut client, &lab);
    let begun = Instant::now();
    let status = client.wait_exit(WAIT).expect("a hang never lasts forever");
    assert!(begun.elapsed() >= Duration::from_millis(300));
    assert_eq!(status.code(), Some(101));
    while client.next_line(Duration::from_millis(100)).is_some() {}
    assert!(!client
        .seen
        .iter()
        .any(|l| matches!(l, Line::Json(v) if v["method"] == "turn/completed")));
}

#[test]
fn garbage_line_then_the_turn_completes() {
    let lab = Lab::new();
    let mut client = spawn(Err("garbage-line"), &lab);
    client.initialize(true);
    start_turn(&mut client, &lab);
    let completed = answer_tools_until_completed(&mut client);
    assert_eq!(completed["params"]["turn"]["status"], "completed");
    assert!(client
        .seen
        .iter()
        .any(|l| matches!(l, Line::Raw(text) if text.contains("garbage-line fault"))));
}

#[test]
fn oversized_line_then_the_turn_completes() {
    let lab = Lab::new();
    let mut client = spawn(Err("oversized-line"), &lab);
    client.initialize(true);
    start_turn(&mut client, &lab);
    let completed = answer_tools_until_completed(&mut client);
    assert_eq!(completed["params"]["turn"]["status"], "completed");
    // Ordinary messages stream small deltas too; the fault is the one oversized delta.
    let big = client
        .seen
        .iter()
        .filter_map(|l| match l {
            Line::Json(v) if v["method"] == "item/agentMessage/delta" => {
                Some(v["params"]["delta"].as_str().unwrap().len())
            }
            _ => None,
        })
        .max();
    assert_eq!(big, Some(8 * 1024 * 1024));
}

#[test]
fn method_faults_error_times_delay_hang_and_shapes() {
    let lab = Lab::new();
    let builder = ScenarioBuilder::new("methods")
        .method(
            "thread/start",
            MethodBehaviour {
                times: Some(1),
                error: Some(fake_app_server::scenario::RpcErrorSpec {
                    code: -32603,
                    message: "transient".into(),
                }),
                ..MethodBehaviour::default()
            },
        )
        .method(
            "account/read",
            MethodBehaviour {
                hang: true,
                ..MethodBehaviour::default()
            },
        )
        .method(
            "permissionProfile/list",
            MethodBehaviour {
                delay_ms: Some(150),
                split_writes: Some(3),
                oversized_bytes: Some(100_000),
                ..MethodBehaviour::default()
            },
        );
    let mut client = spawn(Ok(builder), &lab);
    client.initialize(true);
    let first = client.request("thread/start", json!({"cwd": lab.ws_str()}));
    assert_eq!(
        first["error"],
        json!({"code": -32603, "message": "transient"})
    );
    let second = client.request("thread/start", json!({"cwd": lab.ws_str()}));
    assert!(
        second.get("result").is_some(),
        "times = 1 lets the second call through"
    );
    // account/read never answers, the delayed list answers later: answers come out of order.
    client.send(&json!({"id": 100, "method": "account/read", "params": {}}));
    client.send(&json!({"id": 101, "method": "permissionProfile/list", "params": {}}));
    client.send(&json!({"id": 102, "method": "thread/read", "params": {"threadId": "01a22bc7-f8e2-7173-b7a0-56e223784188"}}));
    let next = client.wait_for("an answer", |v| v.get("id").is_some());
    assert_eq!(next["id"], 102);
    let list = client.wait_for("delayed list", |v| v["id"] == 101);
    assert_eq!(list["result"]["data"][0]["id"], ":read-only");
    assert!(
        client.next_line(Duration::from_millis(300)).is_none(),
        "account/read hangs"
    );
}

#[test]
fn crash_after_bytes_and_malformed_answers() {
    let lab = Lab::new();
    let builder = ScenarioBuilder::new("crash")
        .method(
            "account/read",
            MethodBehaviour {
                malformed: true,
                ..MethodBehaviour::default()
            },
        )
        .method(
            "thread/start",
            MethodBehaviour {
                crash_after_bytes: Some(10),
                ..MethodBehaviour::default()
            },
        );
    let mut client = spawn(Ok(builder), &lab);
    client.initialize(true);
    client.notification("remoteControl/status/changed");
    client.send(&json!({"id": 7, "method": "account/read", "params": {}}));
    let line = client.next_line(WAIT).unwrap();
    assert!(
        matches!(&line, Line::Raw(text) if text.starts_with("{\"id\":7")),
        "{line:?}"
    );
    client.send(&json!({"id": 8, "method": "thread/start", "params": {}}));
    assert_eq!(client.wait_exit(WAIT).unwrap().code(), Some(101));
    let rest = client.next_line(Duration::from_secs(2));
    assert!(
        matches!(&rest, Some(Line::Raw(text)) if text.len() == 10),
        "{rest:?}"
    );
}

#[test]
fn notification_faults_duplicate_reorder_drop() {
    let lab = Lab::new();
    let builder = ScenarioBuilder::new("notes")
        .notification(
            "turn/started",
            NotificationFault {
                out_of_order: true,
                ..NotificationFault::default()
            },
        )
        .notification(
            "item/completed",
            NotificationFault {
                duplicate: true,
                ..NotificationFault::default()
            },
        )
        .notification(
            "thread/started",
            NotificationFault {
                drop: true,
                ..NotificationFault::default()
            },
        )
        .turn(vec![steps::message("hello")]);
    let mut client = spawn(Ok(builder), &lab);
    client.initialize(true);
    start_turn(&mut client, &lab);
    client.notification("turn/completed");
    let methods: Vec<String> = client
        .seen
        .iter()
        .filter_map(|l| match l {
            Line::Json(v) => v["method"].as_str().map(str::to_string),
            _ => None,
        })
        .collect();
    assert!(!methods.contains(&"thread/started".to_string()));
    let status = methods
        .iter()
        .position(|m| m == "thread/status/changed")
        .unwrap();
    let started = methods.iter().position(|m| m == "turn/started").unwrap();
    let first_item = methods.iter().position(|m| m == "item/started").unwrap();
    assert!(
        started > first_item && started > status,
        "turn/started was held back: {methods:?}"
    );
    assert_eq!(
        methods.iter().filter(|m| *m == "item/completed").count(),
        4,
        "{methods:?}"
    );
}
