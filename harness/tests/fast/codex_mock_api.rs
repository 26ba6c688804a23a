//! The mock model API over real HTTP on loopback (no Codex needed).

use codex::mock_api::{probe_id_for, FailureKind, MockConfig, MockModelApi, MockScript};
use fake_app_server::model_log::ModelLogEntry;
use fake_app_server::scenario::Scenario;
use serde_json::{json, Value};

fn user(text: &str) -> Value {
    json!({"type":"message","role":"user","content":[{"type":"input_text","text":text}]})
}

fn first_input(prompt: &str) -> Vec<Value> {
    vec![
        json!({"type":"message","role":"developer","content":[{"type":"input_text","text":"base"}]}),
        user("# AGENTS.md instructions for /ws\n\n<INSTRUCTIONS>\nbe terse\n</INSTRUCTIONS>"),
        user("<environment_context>\n  <cwd>/ws</cwd>\n</environment_context>"),
        user(prompt),
    ]
}

/// Parse an SSE body into (event, data) pairs.
fn events(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|frame| !frame.trim().is_empty())
        .map(|frame| {
            let mut event = String::new();
            let mut data = Value::Null;
            for line in frame.lines() {
                if let Some(rest) = line.strip_prefix("event: ") {
                    event = rest.to_string();
                } else if let Some(rest) = line.strip_prefix("data: ") {
                    data = serde_json::from_str(rest).expect("data is JSON");
                }
            }
            (event, data)
        })
        .collect()
}

async fn post(
    client: &reqwest::Client,
    mock: &MockModelApi,
    thread: &str,
    input: &[Value],
) -> (u16, String, Option<String>) {
    let response = client
        .post(format!("{}/responses", mock.base_url()))
        .header("session-id", thread)
        .header("content-type", "application/json")
        .body(json!({"model":"mock-model","stream":true,"input":input}).to_string())
        .send()
        .await
        .expect("request");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string());
    (status, response.text().await.unwrap(), content_type)
}

fn done_items(body: &str) -> Vec<Value> {
    events(body)
        .into_iter()
        .filter(|(event, _)| event == "response.output_item.done")
        .map(|(_, data)| data["item"].clone())
        .collect()
}

fn read_log(path: &std::path::Path) -> Vec<ModelLogEntry> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test]
async fn plays_plan_write_refused_turn_by_turn_and_logs_what_the_model_saw() {
    let dir = tempfile::tempdir().unwrap();
    let script =
        MockScript::from_scenario(&Scenario::builtin("plan-write-refused").unwrap()).unwrap();
    let mock = MockModelApi::start_with(MockConfig {
        script,
        model_log: dir.path().join("model.jsonl"),
        request_log: Some(dir.path().join("requests.jsonl")),
    })
    .await
    .unwrap();
    let client = reqwest::Client::new();
    let thread = "01a22ba7-afd3-7000-8000-000000000001";
    let probe = probe_id_for(thread);

    // Turn 0, response 0: the write probe.
    let mut input = first_input("Plan the change. Write the probe first.");
    let (status, body, content_type) = post(&client, &mock, thread, &input).await;
    assert_eq!(status, 200);
    assert_eq!(content_type.as_deref(), Some("text/event-stream"));
    let ev = events(&body);
    assert_eq!(ev.first().unwrap().0, "response.created");
    assert_eq!(ev.last().unwrap().0, "response.completed");
    let items = done_items(&body);
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["name"], "exec_command");
    let args: Value = serde_json::from_str(items[0]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(
        args["cmd"],
        format!("printf probe > plan-write-probe-{probe}.txt || echo WRITE_REFUSED")
    );
    let call_id = items[0]["call_id"].as_str().unwrap().to_string();

    // Turn 0, response 1: Codex returns the refused write; the plan records it.
    input.push(items[0].clone());
    input.push(json!({"type":"function_call_output","call_id":call_id,
        "output":"Chunk ID: 4438be\nWall time: 0.0001 seconds\nProcess exited with code 0\nOriginal token count: 20\nOutput:\n/bin/bash: line 1: plan-write-probe-1.txt: Read-only file system\nWRITE_REFUSED\n"}));
    let (_, body, _) = post(&client, &mock, thread, &input).await;
    let items = done_items(&body);
    assert_eq!(items.len(), 1);
    let text = items[0]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("<proposed_plan>\nWRITE_REFUSED\n"),
        "{text}"
    );
    assert!(
        text.contains(&format!("plan-write-probe-{probe}.txt")),
        "{text}"
    );

    // Turn 1 (the driver approved): message + paperclip_finish; the old output is not re-logged.
    input.push(items[0].clone());
    input.push(user("Plan approved. Go ahead."));
    let (_, body, _) = post(&client, &mock, thread, &input).await;
    let items = done_items(&body);
    assert_eq!(items[0]["type"], "message");
    assert_eq!(items[1]["name"], "paperclip_finish");
    let finish_id = items[1]["call_id"].as_str().unwrap().to_string();
    input.push(items[1].clone());
    input.push(json!({"type":"function_call_output","call_id":finish_id,
        "output":[{"type":"input_text","text":"line one"},{"type":"input_text","text":"line two"}]}));
    let (_, body, _) = post(&client, &mock, thread, &input).await;
    assert!(
        done_items(&body).is_empty(),
        "closing response has no items"
    );
    assert_eq!(events(&body).last().unwrap().0, "response.completed");

    let log = read_log(&dir.path().join("model.jsonl"));
    // What the user said reaches the log too, once per turn, before that turn's calls.
    let said: Vec<&str> = log
        .iter()
        .filter_map(|entry| match entry {
            ModelLogEntry::UserInput { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        said,
        [
            "Plan the change. Write the probe first.",
            "Plan approved. Go ahead."
        ],
        "{log:?}"
    );
    assert!(
        matches!(&log[0], ModelLogEntry::UserInput { .. }),
        "{log:?}"
    );
    let log: Vec<&ModelLogEntry> = log
        .iter()
        .filter(|entry| !matches!(entry, ModelLogEntry::UserInput { .. }))
        .collect();
    assert_eq!(log.len(), 4, "{log:?}");
    assert!(matches!(log[0], ModelLogEntry::ToolCall { name, .. } if name == "exec_command"));
    assert!(
        matches!(log[1], ModelLogEntry::ToolOutput { call_id: id, output } if *id == call_id && output.contains("Read-only file system"))
    );
    assert!(matches!(log[2], ModelLogEntry::ToolCall { name, .. } if name == "paperclip_finish"));
    assert!(
        matches!(log[3], ModelLogEntry::ToolOutput { output, .. } if output == "line one\nline two")
    );

    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(requests[2].position.unwrap().turn, 1);
    assert_eq!(requests[0].header("session-id"), Some(thread));
    let recorded = std::fs::read_to_string(dir.path().join("requests.jsonl")).unwrap();
    assert_eq!(recorded.lines().count(), 4);
    mock.shutdown().await;
}

#[tokio::test]
async fn websocket_upgrades_get_426_other_routes_404_and_oversized_bodies_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mock = MockModelApi::start(Vec::new(), &dir.path().join("model.jsonl"))
        .await
        .unwrap();
    let client = reqwest::Client::new();
    let upgrade = client
        .get(format!("{}/responses", mock.base_url()))
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .send()
        .await
        .unwrap();
    assert_eq!(upgrade.status().as_u16(), 426);
    let models = client
        .get(format!("{}/models", mock.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(models.status().as_u16(), 404);
    let huge = "x".repeat(codex::mock_api::MAX_BODY_BYTES + 1);
    let oversized = client
        .post(format!("{}/responses", mock.base_url()))
        .body(huge)
        .send()
        .await
        .unwrap();
    assert_eq!(oversized.status().as_u16(), 413);
    let not_json = client
        .post(format!("{}/responses", mock.base_url()))
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status().as_u16(), 400);
    let answers: Vec<String> = mock.requests().into_iter().map(|r| r.answer).collect();
    assert_eq!(answers, ["426", "404", "http-400"]);
}

#[tokio::test]
async fn scripted_failures_http_500_and_a_closed_stream() {
    let dir = tempfile::tempdir().unwrap();
    let script = MockScript::new(vec![Default::default(), Default::default()])
        .failing_turn(0, FailureKind::HttpStatus { status: 500 })
        .failing_turn(1, FailureKind::StreamClosedEarly);
    let mock = MockModelApi::start_with(MockConfig {
        script,
        model_log: dir.path().join("model.jsonl"),
        request_log: None,
    })
    .await
    .unwrap();
    let client = reqwest::Client::new();
    let mut input = first_input("first");
    let (status, _, _) = post(&client, &mock, "t", &input).await;
    assert_eq!(status, 500);
    input.push(user("second"));
    let (status, body, _) = post(&client, &mock, "t", &input).await;
    assert_eq!(status, 200);
    assert!(!body.contains("response.completed"), "{body}");
}
