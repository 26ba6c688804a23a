//! Thread settings as Codex 0.169 reports them (measured with the real binary, offline):
//! `thread/settings/updated` goes out when a `turn/start` or a `thread/settings/update` changes
//! what a client sees of the settings, and only then; before the `turn/start` answer.

use crate::common;

use common::{Client, Lab, Line};
use serde_json::{json, Value};

/// The notification validates against the release's generated `ServerNotification.json`
/// (recorded in graders/protocol/).
fn assert_schema_valid(message: &Value) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../graders/protocol/0.169.0/ServerNotification.json"
    );
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft7)
        .build(&schema)
        .unwrap();
    let errors: Vec<String> = validator
        .iter_errors(message)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}\n{message:#}");
}

/// The `thread/settings/updated` notifications among `lines`.
fn settings_updates(lines: &[Line]) -> Vec<Value> {
    lines
        .iter()
        .filter_map(|line| match line {
            Line::Json(v) if v["method"] == "thread/settings/updated" => Some(v.clone()),
            _ => None,
        })
        .collect()
}

/// A fake with the simulated sandbox and a client that declared `experimentalApi`.
fn experimental_client() -> (Lab, Client) {
    let lab = Lab::new();
    let mut client = Client::spawn(&["app-server", "--sandbox", "simulated"], &lab.home());
    client.initialize(true);
    (lab, client)
}

fn mode(name: &str, effort: Value) -> Value {
    json!({"mode": name, "settings": {"model": "mock-model", "reasoning_effort": effort, "developer_instructions": null}})
}

#[test]
fn a_new_collaboration_mode_is_reported_before_the_turn_start_answer() {
    let lab = Lab::new();
    let mut client = Client::spawn(
        &[
            "app-server",
            "--sandbox",
            "simulated",
            "-c",
            "model=\"mock-model\"",
        ],
        &lab.home(),
    );
    client.initialize(true);
    let (thread, _) = client.start_thread(&lab.ws_str());

    let before = client.seen.len();
    let answer = client.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "plan"}], "collaborationMode": mode("plan", json!("low"))}),
    );
    assert!(answer["result"]["turn"]["id"].is_string(), "{answer}");
    let updates = settings_updates(&client.seen[before..]);
    assert_eq!(
        updates.len(),
        1,
        "one update before the answer: {:#?}",
        &client.seen[before..]
    );
    let update = &updates[0];
    assert_schema_valid(update);
    let settings = &update["params"]["threadSettings"];
    assert_eq!(update["params"]["threadId"], thread.as_str());
    assert_eq!(settings["collaborationMode"]["mode"], "plan");
    assert_eq!(
        settings["collaborationMode"]["settings"]["reasoning_effort"],
        "low"
    );
    assert_eq!(settings["effort"], "low");
    assert_eq!(settings["multiAgentMode"], "explicitRequestOnly");
    assert_eq!(settings["personality"], Value::Null);
    // Sent without its own instructions, the mode reports the release's built-in ones.
    let instructions = settings["collaborationMode"]["settings"]["developer_instructions"]
        .as_str()
        .unwrap();
    assert!(
        instructions.starts_with("# Plan Mode (Conversational)\n"),
        "{instructions}"
    );
    client.notification("turn/completed");

    // The same mode again changes nothing: no notification.
    let before = client.seen.len();
    client.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "again"}], "collaborationMode": mode("plan", json!("low"))}),
    );
    client.notification("turn/completed");
    assert!(
        settings_updates(&client.seen[before..]).is_empty(),
        "{:#?}",
        &client.seen[before..]
    );

    // thread/settings/update: `{}`, then the notification only when something changed.
    let before = client.seen.len();
    let same = client.request(
        "thread/settings/update",
        json!({"threadId": thread, "collaborationMode": mode("plan", json!("low"))}),
    );
    assert_eq!(same["result"], json!({}));
    let changed = client.request(
        "thread/settings/update",
        json!({"threadId": thread, "approvalPolicy": "never"}),
    );
    assert_eq!(changed["result"], json!({}));
    let update = client.notification("thread/settings/updated");
    let updates = settings_updates(&client.seen[before..]);
    assert_eq!(
        updates.len(),
        1,
        "only the change is reported: {:#?}",
        &client.seen[before..]
    );
    assert_schema_valid(&update);
    assert_eq!(
        update["params"]["threadSettings"]["approvalPolicy"],
        "never"
    );

    // Back to the default mode: its built-in instructions.
    client.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "default"}], "collaborationMode": mode("default", Value::Null)}),
    );
    let updates = settings_updates(&client.seen);
    let last = &updates.last().unwrap()["params"]["threadSettings"];
    assert_eq!(last["collaborationMode"]["mode"], "default");
    assert!(
        last["collaborationMode"]["settings"]["developer_instructions"]
            .as_str()
            .unwrap()
            .starts_with("# Collaboration Mode: Default\n")
    );
    assert_eq!(last["effort"], Value::Null);
}

#[test]
fn settings_update_checks_the_thread_id_and_the_handshake() {
    let lab = Lab::new();
    let mut client = Client::spawn(&["app-server", "--sandbox", "simulated"], &lab.home());
    let early = client.request(
        "thread/settings/update",
        json!({"threadId": "01a22bc7-f8e2-7173-b7a0-56e223784188"}),
    );
    assert_eq!(early["error"]["message"], "Not initialized");
    client.initialize(true);
    let missing = "01a22bc7-f8e2-7173-b7a0-56e223784188";
    let answer = client.request(
        "thread/settings/update",
        json!({"threadId": missing, "model": "x"}),
    );
    assert_eq!(
        answer["error"]["message"],
        format!("thread not found: {missing}")
    );
    let answer = client.request(
        "thread/settings/update",
        json!({"threadId": "zz", "model": "x"}),
    );
    assert_eq!(
        answer["error"]["message"],
        "invalid thread id: invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found `z` at 1"
    );
}

/// Found by `harness explore` (corpus: `thread-start-history-mode`,
/// `thread-start-daybreak-ephemeral`): the fake answered `historyMode: "paginated"` and
/// `daybreakEnabled: null` whatever the client asked, and started an ephemeral thread with a
/// Daybreak choice that Codex 0.169 refuses.
#[test]
fn thread_start_echoes_the_history_mode_and_daybreak_choice() {
    let (lab, mut client) = experimental_client();
    let asked = client.request(
        "thread/start",
        json!({"cwd": lab.ws_str(), "historyMode": "legacy", "daybreakEnabled": false}),
    );
    let thread = &asked["result"]["thread"];
    assert_eq!(thread["historyMode"], "legacy", "{asked}");
    assert_eq!(thread["daybreakEnabled"], false, "{asked}");
    let started = client.notification("thread/started");
    assert_eq!(started["params"]["thread"]["historyMode"], "legacy");
    assert_eq!(started["params"]["thread"]["daybreakEnabled"], false);

    let unasked = client.request("thread/start", json!({"cwd": lab.ws_str()}));
    assert_eq!(unasked["result"]["thread"]["historyMode"], "paginated");
    assert_eq!(unasked["result"]["thread"]["daybreakEnabled"], Value::Null);

    let ephemeral = client.request(
        "thread/start",
        json!({"cwd": lab.ws_str(), "ephemeral": true, "daybreakEnabled": false}),
    );
    assert_eq!(ephemeral["error"]["code"], -32600, "{ephemeral}");
    assert_eq!(
        ephemeral["error"]["message"],
        "daybreakEnabled is not supported for ephemeral threads"
    );
}

/// Found by `harness explore` (corpus: `thread-start-personality`): the fake reported
/// `personality: null` in `thread/settings/updated` after a `thread/start` that named one.
#[test]
fn the_personality_thread_start_was_given_is_reported_in_the_settings() {
    let (lab, mut client) = experimental_client();
    let started = client.request(
        "thread/start",
        json!({"cwd": lab.ws_str(), "personality": "friendly"}),
    );
    let thread = started["result"]["thread"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let before = client.seen.len();
    client.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "hi"}], "effort": "high"}),
    );
    let updates = settings_updates(&client.seen[before..]);
    assert_eq!(updates.len(), 1, "{:#?}", &client.seen[before..]);
    assert_schema_valid(&updates[0]);
    assert_eq!(
        updates[0]["params"]["threadSettings"]["personality"],
        "friendly"
    );
    assert_eq!(updates[0]["params"]["threadSettings"]["effort"], "high");
}

/// Found by `harness explore` (corpus `thread-read-before-a-turn`): before its first turn a
/// thread has no rollout and Codex 0.169 reads it with `readState: null`; the fake gave a
/// read receipt.
#[test]
fn a_thread_read_before_its_first_turn_has_no_read_state() {
    let (lab, mut client) = experimental_client();
    let (thread, _) = client.start_thread(&lab.ws_str());
    let read = client.request("thread/read", json!({"threadId": thread}));
    assert_eq!(read["result"]["readState"], Value::Null, "{read}");
    assert_eq!(read["result"]["thread"]["id"], thread.as_str());
}
