//! The release the fake plays (`--codex-version`, `FAKE_APP_SERVER_CODEX_VERSION`) is what a
//! driver sees: the version it prints and reports, the methods it knows, the model it defaults
//! to, and how it makes a plan item's id. Each persona's data are checked against its real
//! Codex in harness/tests/needs_root_runc_codex/codex_protocol_lists.rs.

use crate::common;

use common::{fake_command, finish_tool, profile_args, Client, Lab};
use serde_json::{json, Value};

fn version_line(args: &[&str], env: Option<&str>) -> String {
    let mut command = fake_command();
    command.args(args).arg("--version");
    if let Some(version) = env {
        command.env("FAKE_APP_SERVER_CODEX_VERSION", version);
    }
    let output = command.output().unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

#[test]
fn the_version_is_the_played_release_by_flag_or_environment() {
    assert_eq!(version_line(&[], None), "codex-cli 0.169.0");
    assert_eq!(
        version_line(&["--codex-version", "0.171.0"], None),
        "codex-cli 0.171.0"
    );
    assert_eq!(version_line(&[], Some("0.171.0")), "codex-cli 0.171.0");
}

#[test]
fn a_release_without_a_persona_is_a_startup_error_naming_the_ones_there_are() {
    let output = fake_command()
        .args(["--codex-version", "0.170.0", "app-server"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(
            "Error: fake-app-server has no persona for Codex 0.170.0; it plays 0.169.0, 0.171.0"
        ),
        "{stderr}"
    );
}

/// One planning turn of `plan-write-refused` (simulated sandbox) under `release`: the
/// thread/start result, the plan items, the answers to a 0.171-only method and to model/list.
fn play(release: &str) -> (Value, String, Vec<Value>, Value, Value) {
    let lab = Lab::new();
    let mut args = vec![
        "--codex-version",
        release,
        "app-server",
        "--scenario",
        "builtin:plan-write-refused",
        "--sandbox",
        "simulated",
    ];
    args.extend(profile_args());
    let mut client = Client::spawn(&args, &lab.home());
    client.initialize(true);
    let started = client.request(
        "thread/start",
        json!({"cwd": lab.ws_str(), "permissions": "restricted", "dynamicTools": finish_tool()}),
    );
    let thread = started["result"]["thread"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let turn = client.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "plan"}],
               "collaborationMode": {"mode": "plan", "settings": {"model": "m", "reasoning_effort": null, "developer_instructions": null}}}),
    );
    let turn_id = turn["result"]["turn"]["id"].as_str().unwrap().to_string();
    let mut plans = Vec::new();
    loop {
        let message = client.wait_for("turn traffic", |_| true);
        if message.get("id").is_some() && message["method"] == "item/tool/call" {
            let id = message["id"].clone();
            client.send(&json!({"id": id, "result": {"contentItems": [{"type": "inputText", "text": "ok"}], "success": true}}));
        }
        if message["method"] == "item/completed" && message["params"]["item"]["type"] == "plan" {
            plans.push(message["params"]["item"].clone());
        }
        if message["method"] == "turn/completed" {
            break;
        }
    }
    let search = client.request("thread/search/stream", json!({}));
    let models = client.request("model/list", json!({}));
    client.close_stdin();
    (started["result"].clone(), turn_id, plans, search, models)
}

#[test]
fn a_plan_item_id_search_and_the_catalogue_follow_the_release() {
    let (started, turn, plans, search, models) = play("0.169.0");
    assert_eq!(started["thread"]["cliVersion"], "0.169.0");
    assert!(!plans.is_empty());
    for plan in &plans {
        assert_eq!(plan["id"], format!("{turn}-plan"));
    }
    assert!(
        search["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Invalid request: unknown variant `thread/search/stream`"),
        "{search}"
    );
    assert_eq!(models["result"]["data"][0]["id"], "gpt-6.1-sol");

    let (started, turn, plans, search, models) = play("0.171.0");
    assert_eq!(started["thread"]["cliVersion"], "0.171.0");
    assert!(!plans.is_empty());
    for plan in &plans {
        let id = plan["id"].as_str().unwrap();
        assert!(!id.starts_with(&turn), "{id}");
        assert!(uuid::Uuid::parse_str(id).is_ok(), "{id}");
    }
    // A method 0.171 knows is not an unknown variant there (the fake does not serve it).
    assert!(
        !search["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("unknown variant"),
        "{search}"
    );
    assert_eq!(models["result"]["data"][0]["id"], "gpt-6.2-sol");
}
