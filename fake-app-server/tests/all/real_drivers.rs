//! What published drivers (the Python SDK `openai-codex`, `codex-acp`) need from the fake, with
//! the answers Codex 0.169.0 gives them (measured; see the module docs of `server::settings`).

use crate::common;

use common::*;
use serde_json::{json, Value};

const MOCK_PROVIDER: [&str; 6] = [
    "-c",
    r#"model_provider="mock""#,
    "-c",
    r#"model="mock-model""#,
    "-c",
    r#"model_providers.mock={name="mock",base_url="http://127.0.0.1:9/v1",wire_api="responses"}"#,
];

fn spawn(lab: &Lab, extra: &[&str]) -> Client {
    let mut args = vec![
        "app-server",
        "--listen",
        "stdio://",
        "--sandbox",
        "simulated",
    ];
    args.extend_from_slice(extra);
    let mut client = Client::spawn(&args, &lab.home());
    client.initialize(true);
    client
}

#[test]
fn the_sdk_command_line_and_version_are_accepted() {
    let lab = Lab::new();
    let mut client = spawn(&lab, &[]);
    let answer = client.request("account/read", json!({}));
    assert_eq!(answer["result"]["requiresOpenaiAuth"], true, "{answer}");
    client.close_stdin();
    assert!(client.wait_exit(WAIT).unwrap().success());
    let out = fake_command().args(["--version"]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "codex-cli 0.169.0\n");
    // A URL Codex does not know is its usage error; one it knows but the fake does not serve
    // is the fake's start-up error.
    let out = fake_command()
        .args(["app-server", "--listen", "http://127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("unsupported --listen URL `http://127.0.0.1:1`"));
    let out = fake_command()
        .args(["app-server", "--listen", "ws://127.0.0.1:1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "Error: fake-app-server serves only `--listen stdio://` (asked for `ws://127.0.0.1:1`)\n"
    );
}

#[test]
fn a_custom_provider_needs_no_openai_login_lists_the_bundled_catalog_and_echoes_its_model() {
    let lab = Lab::new();
    let mut client = spawn(&lab, &MOCK_PROVIDER);
    let account = client.request("account/read", json!({}));
    assert_eq!(account["result"]["requiresOpenaiAuth"], false, "{account}");
    let models = client.request("model/list", json!({}));
    let data = models["result"]["data"].as_array().unwrap();
    // As Codex 0.169 (recorded): the bundled catalog, the configured model not in it.
    assert_eq!(data.len(), 9, "{models}");
    assert_eq!(data[0]["id"], "gpt-6.1-sol");
    assert_eq!(data[0]["isDefault"], true);
    assert!(data.iter().all(|m| m["id"] != "mock-model"), "{models}");
    assert_eq!(models["result"]["nextCursor"], Value::Null);
    let login = client.request(
        "account/login/start",
        json!({"type": "apiKey", "apiKey": "sk-x"}),
    );
    assert_eq!(login["result"], json!({"type": "apiKey"}));
    let completed = client.notification("account/login/completed");
    assert_eq!(completed["params"]["success"], true);
    let config = client.request("config/read", json!({"includeLayers": false}));
    assert_eq!(config["result"]["config"]["model_provider"], "mock");
    // The effective config holds Codex 0.169's defaults for what no layer sets (recorded: 107
    // keys with these flags), and the defaults of a custom provider's entry.
    let effective = config["result"]["config"].as_object().unwrap();
    assert_eq!(effective.len(), 107, "{config}");
    assert_eq!(effective["project_doc_max_bytes"], 32768);
    assert_eq!(effective["history"]["persistence"], "save-all");
    assert_eq!(effective["sandbox_mode"], Value::Null);
    let mock = &effective["model_providers"]["mock"];
    assert_eq!(mock["requires_openai_auth"], false);
    assert_eq!(mock["env_key"], Value::Null);
    assert_eq!(mock["name"], "mock");
    assert!(config["result"].get("layers").is_none());
    assert_eq!(
        config["result"]["origins"]["model"]["name"],
        json!({"type": "sessionFlags"})
    );
    let config = client.request(
        "config/read",
        json!({"includeLayers": true, "cwd": lab.ws_str()}),
    );
    let layers = config["result"]["layers"].as_array().unwrap();
    let kinds: Vec<&Value> = layers.iter().map(|l| &l["name"]["type"]).collect();
    assert_eq!(
        kinds,
        [&json!("sessionFlags"), &json!("user"), &json!("system")]
    );
    // An empty layer's version is the digest of `{}`, as Codex reports it.
    assert_eq!(
        layers[1]["version"],
        "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    );
    let started = client.request(
        "thread/start",
        json!({"cwd": lab.ws_str(), "model": "other-model", "approvalsReviewer": "auto_review",
               "config": {"projects": {lab.ws_str(): {"trust_level": "trusted"}}}}),
    );
    let result = &started["result"];
    assert_eq!(result["model"], "other-model", "{started}");
    assert_eq!(result["thread"]["model"], "other-model");
    assert_eq!(result["approvalsReviewer"], "auto_review");
    assert_eq!(result["sandbox"]["type"], "workspaceWrite");
    assert_eq!(result["activePermissionProfile"]["id"], ":workspace");
    let thread = result["thread"]["id"].as_str().unwrap().to_string();
    let update = client.request(
        "thread/settings/update",
        json!({"threadId": thread, "collaborationMode": {"mode": "plan", "settings": {"model": "other-model", "reasoning_effort": null, "developer_instructions": null}}}),
    );
    assert_eq!(update["result"], json!({}));
    let updated = client.notification("thread/settings/updated");
    let settings = &updated["params"]["threadSettings"];
    assert_eq!(settings["collaborationMode"]["mode"], "plan");
    assert_eq!(settings["approvalsReviewer"], "auto_review");
    let skills = client.request("skills/list", json!({}));
    // Codex 0.169's system skills (recorded), listed below the fake's CODEX_HOME.
    let listed = skills["result"]["data"][0]["skills"].as_array().unwrap();
    let names: Vec<&str> = listed.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "imagegen",
            "openai-docs",
            "review-agent",
            "skill-creator",
            "skill-installer"
        ]
    );
    for skill in listed {
        assert_eq!(skill["scope"], "system");
        let path = skill["path"].as_str().unwrap();
        assert!(
            path.ends_with(&format!(
                "/skills/.system/{}/SKILL.md",
                skill["name"].as_str().unwrap()
            )) && !path.contains("{codex_home}"),
            "{path}"
        );
    }
    let modes = client.request("collaborationMode/list", json!({}));
    assert_eq!(modes["result"]["data"][0]["mode"], "plan");
}

#[test]
fn a_scenario_answers_any_method_even_one_the_fake_does_not_implement_and_with_null() {
    let lab = Lab::new();
    let scenario = lab.path("answers.toml");
    std::fs::write(
        &scenario,
        "[methods.\"thread/name/set\"]\nresult_json = \"null\"\n\n[methods.\"plugin/list\"]\nresult = { data = [] }\n",
    )
    .unwrap();
    let scenario = scenario.display().to_string();
    let mut client = spawn(&lab, &["--scenario", &scenario]);
    let answer = client.request("thread/name/set", json!({"threadId": "x", "name": "n"}));
    assert_eq!(answer.get("result"), Some(&Value::Null), "{answer}");
    let answer = client.request("plugin/list", json!({}));
    assert_eq!(answer["result"], json!({"data": []}), "{answer}");
}

#[test]
fn a_misspelled_method_in_a_scenario_stops_the_start() {
    let lab = Lab::new();
    let scenario = lab.path("typo.toml");
    std::fs::write(&scenario, "[methods.\"thread/strat\"]\nhang = true\n").unwrap();
    let out = fake_command()
        .args(["app-server", "--scenario"])
        .arg(&scenario)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "`thread/strat` is not a method Codex 0.169.0 knows (did you mean `thread/start`?)"
        ),
        "{stderr}"
    );
}

fn reviewed_scenario(lab: &Lab, allow: bool) -> String {
    use fake_app_server::scenario::builder::steps;
    let scenario = fake_app_server::scenario::ScenarioBuilder::new("auto-review").turn(vec![
        steps::reviewed_shell("printf probe > probe.txt", "Write the probe?", allow),
        steps::message("done"),
    ]);
    let path = lab.path(if allow { "allow.toml" } else { "deny.toml" });
    std::fs::write(&path, scenario.to_toml().unwrap()).unwrap();
    path.display().to_string()
}

/// Under `approvalsReviewer: auto_review` the scripted review decides; the client is never asked.
fn run_reviewed(allow: bool) -> (Vec<Value>, bool) {
    let lab = Lab::new();
    let scenario = reviewed_scenario(&lab, allow);
    let seen = run_under_reviewer(&lab, &scenario, None);
    (seen, lab.ws().join("probe.txt").exists())
}

/// One turn of `scenario` in a read-only thread under `approvalsReviewer: auto_review`, with
/// `request_permissions_tool` on and the thread's own `config` if given: every line the fake
/// sent.
fn run_under_reviewer(lab: &Lab, scenario: &str, config: Option<Value>) -> Vec<Value> {
    let mut client = spawn(
        lab,
        &[
            "--scenario",
            scenario,
            "-c",
            "features.request_permissions_tool=true",
        ],
    );
    let mut params = json!({"cwd": lab.ws_str(), "sandbox": "read-only", "approvalPolicy": "on-request", "approvalsReviewer": "auto_review"});
    if let Some(config) = config {
        params["config"] = config;
    }
    let started = client.request("thread/start", params);
    assert_eq!(
        started["result"]["approvalsReviewer"], "auto_review",
        "{started}"
    );
    let thread = started["result"]["thread"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    client.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "write"}]}),
    );
    client.notification("turn/completed");
    client
        .seen
        .iter()
        .filter_map(|l| match l {
            Line::Json(v) => Some(v.clone()),
            _ => None,
        })
        .collect()
}

/// Codex 0.169's reviewer also takes its own tools' escalations (measured with the real binary
/// and the Python SDK, whose default is auto_review): a patch the sandbox may not write and a
/// `request_permissions` call are reviewed — with no script for them, denied — and the client
/// is never asked.
#[rstest::rstest]
#[case::patch("builtin:file-change-approval", "applyPatch")]
#[case::permissions("builtin:permissions-approval", "requestPermissions")]
fn the_automatic_reviewer_denies_codex_tools_without_asking_the_client(
    #[case] scenario: &str,
    #[case] action: &str,
) {
    let lab = Lab::new();
    let seen = run_under_reviewer(&lab, scenario, None);
    assert_client_never_asked(&seen);
    let completed = review_completed(&seen);
    assert_eq!(completed["params"]["review"]["status"], "denied");
    assert_eq!(completed["params"]["action"]["type"], action);
    if action == "applyPatch" {
        assert!(seen.iter().any(|m| m["method"] == "item/completed"
            && m["params"]["item"]["type"] == "fileChange"
            && m["params"]["item"]["status"] == "declined"));
        let written: Vec<_> = std::fs::read_dir(lab.ws())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with("file-change-probe"))
            .collect();
        assert!(written.is_empty(), "a denied patch wrote {written:?}");
    }
}

/// No line the fake sent was a request to the client (a method with an id).
fn assert_client_never_asked(seen: &[Value]) {
    assert!(
        seen.iter()
            .all(|m| !(m.get("method").is_some() && m.get("id").is_some())),
        "the client was asked: {seen:#?}"
    );
}

/// The run's `item/autoApprovalReview/completed`.
fn review_completed(seen: &[Value]) -> &Value {
    seen.iter()
        .find(|m| m["method"] == "item/autoApprovalReview/completed")
        .unwrap_or_else(|| panic!("no review: {seen:#?}"))
}

fn methods(seen: &[Value]) -> Vec<&str> {
    seen.iter().filter_map(|m| m["method"].as_str()).collect()
}

#[test]
fn the_automatic_reviewer_denies_without_asking_the_client() {
    let (seen, written) = run_reviewed(false);
    assert!(!written, "a denied escalation wrote the probe");
    assert_client_never_asked(&seen);
    let methods = methods(&seen);
    for expected in [
        "item/autoApprovalReview/started",
        "guardianWarning",
        "item/autoApprovalReview/completed",
    ] {
        assert!(methods.contains(&expected), "no {expected}: {methods:?}");
    }
    let completed = review_completed(&seen);
    assert_eq!(completed["params"]["review"]["status"], "denied");
    assert!(seen
        .iter()
        .any(|m| m["method"] == "item/completed" && m["params"]["item"]["status"] == "declined"));
}

#[test]
fn the_automatic_reviewer_allows_without_asking_the_client() {
    let (seen, written) = run_reviewed(true);
    assert!(written, "an allowed escalation did not run");
    assert_client_never_asked(&seen);
    let completed = review_completed(&seen);
    assert_eq!(completed["params"]["review"]["status"], "approved");
    let warning = seen
        .iter()
        .find(|m| m["method"] == "guardianWarning")
        .unwrap();
    assert!(warning["params"]["message"]
        .as_str()
        .unwrap()
        .starts_with("Automatic approval review approved (risk: low, authorization: high): "));
}

/// The agent message texts of one turn on `thread`.
fn turn_messages(client: &mut Client, thread: &str, extra: Value) -> Vec<String> {
    let mut params = json!({"threadId": thread, "input": [{"type": "text", "text": "go"}]});
    for (key, value) in extra.as_object().unwrap() {
        params[key] = value.clone();
    }
    client.seen.clear();
    client.request("turn/start", params);
    client.wait_for("turn/completed", |m| {
        m["method"] == "turn/completed" && m["params"]["threadId"] == thread
    });
    client
        .seen
        .iter()
        .filter_map(|l| match l {
            Line::Json(m)
                if m["method"] == "item/completed"
                    && m["params"]["item"]["type"] == "agentMessage" =>
            {
                m["params"]["item"]["text"].as_str().map(str::to_string)
            }
            _ => None,
        })
        .collect()
}

#[test]
fn only_the_threads_a_scenario_names_play_its_turns() {
    let lab = Lab::new();
    let scenario = lab.path("threads.toml");
    std::fs::write(
        &scenario,
        "[threads]\nstart_index = [1]\n\n[[turns]]\nsteps = [{ step = \"message\", text = \"scripted\" }]\n",
    )
    .unwrap();
    let scenario = scenario.display().to_string();
    let mut client = spawn(&lab, &["--scenario", &scenario]);
    let start = |client: &mut Client| {
        let started = client.request(
            "thread/start",
            json!({"cwd": lab.ws_str(), "ephemeral": true}),
        );
        started["result"]["thread"]["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let first = start(&mut client);
    let second = start(&mut client);
    assert_eq!(turn_messages(&mut client, &first, json!({})), ["Done."]);
    assert_eq!(turn_messages(&mut client, &second, json!({})), ["scripted"]);
}

#[test]
fn a_side_turn_with_an_output_schema_gets_a_plain_reply_by_default() {
    let lab = Lab::new();
    let scenario = lab.path("side.toml");
    std::fs::write(
        &scenario,
        "[[turns]]\nsteps = [{ step = \"message\", text = \"scripted\" }]\n",
    )
    .unwrap();
    let scenario = scenario.display().to_string();
    let mut client = spawn(&lab, &["--scenario", &scenario]);
    let started = client.request(
        "thread/start",
        json!({"cwd": lab.ws_str(), "ephemeral": true}),
    );
    let side = started["result"]["thread"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let schema =
        json!({"outputSchema": {"type": "object", "properties": {"title": {"type": "string"}}}});
    assert_eq!(turn_messages(&mut client, &side, schema), ["Done."]);
    let started = client.request("thread/start", json!({"cwd": lab.ws_str()}));
    let main = started["result"]["thread"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(turn_messages(&mut client, &main, json!({})), ["scripted"]);
}

/// A `features` table in `thread/start`'s `config` replaces the configuration's (measured with
/// 0.169 and codex-acp, which starts its threads with `features.cwd_relative_turn_diffs =
/// false`): the `request_permissions_tool` of `-c` is lost for that thread, so the model's call
/// is not offered and nothing is reviewed.
#[test]
fn a_threads_features_table_replaces_the_configurations() {
    let lab = Lab::new();
    let config = json!({"features": {"cwd_relative_turn_diffs": false}});
    let seen = run_under_reviewer(&lab, "builtin:permissions-approval", Some(config));
    let methods = methods(&seen);
    assert!(
        !methods.contains(&"item/autoApprovalReview/started") && !methods.contains(&"warning"),
        "{methods:?}"
    );
}
