//! `thread/start` `experimentalRawEvents: true`: the raw events Codex 0.169 sends, in the places
//! it sends them (recorded with `harness explore`, the corpus's `raw-events-*` scenarios).

use crate::common;

use common::cases::{decide, spawn, Case};
use common::Lab;
use serde_json::{json, Value};

/// A case on `builtin:NAME` whose thread asked for raw events (`raw: false`: did not).
fn raw_case(name: &str, raw: bool, args: &[&str]) -> Case {
    let (mut client, model_log, lab) = spawn(name, Lab::new(), args);
    client.initialize(true);
    let answer = client.request(
        "thread/start",
        json!({"cwd": lab.ws_str(), "sandbox": "read-only", "approvalPolicy": "on-request",
            "experimentalRawEvents": raw}),
    );
    let thread = answer["result"]["thread"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut case = Case::on_thread(client, lab, model_log, thread);
    case.send_turn(json!({}));
    case
}

/// Each message's method, an item's type after it, a raw item's type and role.
fn course(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| {
            let method = m["method"].as_str()?;
            let item = &m["params"]["item"];
            Some(match method {
                "rawResponseItem/completed" => {
                    format!("raw {} {}", item["type"], item["role"])
                }
                "item/started" | "item/completed" => format!("{method} {}", item["type"]),
                _ => method.to_string(),
            })
        })
        .filter(|m| {
            !m.starts_with("thread/")
                && !m.starts_with("account/")
                && !m.contains("outputDelta")
                && !m.contains("agentMessage/delta")
        })
        .collect()
}

#[test]
fn a_thread_with_raw_events_hears_the_models_items_where_codex_sends_them() {
    let mut case = raw_case("command-approval", true, &[]);
    case.until_turn_completed(&mut decide("accept"));
    let messages = case.messages();
    let course = course(&messages);
    let from = course.iter().position(|m| m == "turn/started").unwrap();
    assert_eq!(
        course[from..],
        [
            "turn/started",
            r#"raw "message" "developer""#,
            r#"raw "message" "user""#,
            r#"raw "message" "user""#,
            r#"item/started "userMessage""#,
            r#"item/completed "userMessage""#,
            r#"raw "function_call" null"#,
            "rawResponse/completed",
            r#"item/started "commandExecution""#,
            "item/commandExecution/requestApproval",
            "serverRequest/resolved",
            r#"item/completed "commandExecution""#,
            r#"raw "function_call_output" null"#,
            r#"item/started "agentMessage""#,
            r#"item/completed "agentMessage""#,
            r#"raw "message" "assistant""#,
            "rawResponse/completed",
            "turn/completed",
        ]
    );
    let raw: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "rawResponseItem/completed")
        .map(|m| &m["params"]["item"])
        .collect();
    assert_eq!(raw[2]["content"][0]["text"], "Do the task.");
    assert_eq!(raw[3]["name"], "exec_command");
    assert_eq!(raw[4]["call_id"], raw[3]["call_id"]);
    assert!(raw[4]["output"]
        .as_str()
        .unwrap()
        .contains("Process exited with code 0"));
    let ends: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "rawResponse/completed")
        .map(|m| &m["params"]["responseId"])
        .collect();
    assert!(ends[0].as_str().unwrap().ends_with("_0_0"), "{ends:?}");
    assert!(ends[1].as_str().unwrap().ends_with("_0_1"), "{ends:?}");
}

#[test]
fn a_thread_without_raw_events_hears_none() {
    let mut case = raw_case("command-approval", false, &[]);
    case.until_turn_completed(&mut decide("accept"));
    assert!(!course(&case.messages())
        .iter()
        .any(|m| m.starts_with("raw")));
}

/// Codex 0.169 tells the model only the permissions it asked for, `network` first (measured
/// with raw events: network asked, fileSystem granted, nothing told).
#[test]
fn permissions_granted_beyond_the_request_are_not_told() {
    let mut case = raw_case(
        "permissions-approval",
        true,
        &["--enable", "request_permissions_tool"],
    );
    case.until_turn_completed(&mut |request: &Value| {
        Some(json!({"id": request["id"], "result":
            {"permissions": {"fileSystem": {"write": ["/elsewhere"]}}, "scope": "turn"}}))
    });
    let told = r#"{"permissions":{"network":null,"file_system":null},"scope":"turn"}"#;
    assert_eq!(case.tool_outputs()[0], told);
    let raw_output = case
        .messages()
        .into_iter()
        .find(|m| m["params"]["item"]["type"] == "function_call_output")
        .expect("the call's raw output");
    assert_eq!(raw_output["params"]["item"]["output"], told);
}
