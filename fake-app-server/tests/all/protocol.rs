//! The fake answers the protocol like Codex 0.169.0 (texts measured with the real binary).

use crate::common;

use assert_cmd::assert::OutputAssertExt;

use common::*;
use serde_json::{json, Value};
use std::time::Duration;

fn error_message(answer: &Value) -> &str {
    answer["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("not an error: {answer}"))
}

#[test]
fn unknown_method_missing_params_and_garbage_lines() {
    let lab = Lab::new();
    let mut client = Client::spawn(&["app-server", "--sandbox", "simulated"], &lab.home());
    client.send_line("this is not json");
    client.initialize(true);
    let answer = client.request("no/such/method", json!({}));
    assert_eq!(answer["error"]["code"], -32600);
    assert!(error_message(&answer).starts_with(
        "Invalid request: unknown variant `no/such/method`, expected one of `initialize`, "
    ));
    client.send(&json!({"id": 50, "method": "thread/start"}));
    let answer = client.wait_for("missing params", |v| v["id"] == 50);
    assert_eq!(
        error_message(&answer),
        "Invalid request: missing field `params`"
    );
    let answer = client.request("thread/start", json!({"cwd": 5}));
    assert_eq!(
        error_message(&answer),
        "Invalid request: invalid type: integer `5`, expected a string"
    );
    let answer = client.request(
        "initialize",
        json!({"clientInfo": {"name": "x", "version": "1"}}),
    );
    assert_eq!(error_message(&answer), "Already initialized");
    client.close_stdin();
    assert!(client.wait_exit(WAIT).unwrap().success());
    let stderr = client.stderr_text();
    assert!(
        stderr.contains("Failed to deserialize JSONRPCMessage: expected ident at line 1 column 2"),
        "{stderr}"
    );
    // The garbage line got no answer: every JSON line out is a response to an id we sent or a notification.
    assert!(client.seen.iter().all(|l| matches!(l, Line::Json(_))));
}

#[test]
fn requests_before_initialize_and_the_experimental_gate() {
    let lab = Lab::new();
    let mut client = Client::spawn(&["--sandbox", "simulated"], &lab.home());
    let answer = client.request("thread/start", json!({}));
    assert_eq!(error_message(&answer), "Not initialized");
    client.initialize(false);
    let answer = client.request("thread/start", json!({"permissions": ":read-only"}));
    assert_eq!(
        error_message(&answer),
        "thread/start.permissions requires experimentalApi capability"
    );
    let answer = client.request("thread/start", json!({"dynamicTools": []}));
    assert_eq!(
        error_message(&answer),
        "thread/start.dynamicTools requires experimentalApi capability"
    );
    let answer = client.request(
        "command/exec",
        json!({"command": ["true"], "permissionProfile": "x"}),
    );
    assert_eq!(
        error_message(&answer),
        "command/exec.permissionProfile requires experimentalApi capability"
    );
    let answer = client.request(
        "thread/start",
        json!({"cwd": lab.ws_str(), "sandbox": "read-only", "ephemeral": true}),
    );
    assert_eq!(answer["result"]["activePermissionProfile"], Value::Null);
    assert_eq!(
        answer["result"]["sandbox"],
        json!({"type": "readOnly", "networkAccess": false})
    );
    let thread_id = answer["result"]["thread"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let answer = client.request(
        "turn/start",
        json!({"threadId": thread_id, "input": [], "collaborationMode": {"mode": "plan", "settings": {"model": "m"}}}),
    );
    assert_eq!(
        error_message(&answer),
        "turn/start.collaborationMode requires experimentalApi capability"
    );
}

/// Every method and request field the release has only in its experimental schema is refused
/// to a client that did not declare `experimentalApi` (the persona's `experimental_gate.txt`,
/// recorded by `harness drift`), the first of several in the release's own order; `null` is not
/// set, nor a plain boolean's `false`. The fake gated a hand-picked few and answered the rest (found by
/// `harness explore`: `thread/start.multiAgentMode`, `collaborationMode/list`, …).
#[test]
fn the_experimental_gate_is_the_releases_whole_gate() {
    let lab = Lab::new();
    let mut client = Client::spawn(&["--sandbox", "simulated"], &lab.home());
    client.initialize(false);
    let refused = |client: &mut Client, method: &str, params: Value| {
        error_message(&client.request(method, params)).to_string()
    };
    assert_eq!(
        refused(&mut client, "collaborationMode/list", json!({})),
        "collaborationMode/list requires experimentalApi capability"
    );
    assert_eq!(
        refused(
            &mut client,
            "thread/start",
            json!({"multiAgentMode": "none"})
        ),
        "thread/start.multiAgentMode requires experimentalApi capability"
    );
    // Several: the release names `runtimeWorkspaceRoots` before `historyMode`.
    assert_eq!(
        refused(
            &mut client,
            "thread/start",
            json!({"historyMode": "legacy", "runtimeWorkspaceRoots": []})
        ),
        "thread/start.runtimeWorkspaceRoots requires experimentalApi capability"
    );
    let unset = client.request(
        "thread/start",
        json!({"experimentalRawEvents": false, "projectId": null}),
    );
    assert!(unset["result"]["thread"]["id"].is_string(), "{unset}");
    // Measured with 0.169 (`harness explore`): a nullable boolean sent `false` is set, a plain
    // one only when `true`; `[]` is set; every `cyberAccessProgram` is; `collaborationMode` is
    // checked before `multiAgentMode` and `cyberAccessProgram`.
    for (params, field) in [
        (json!({"daybreakEnabled": false}), "daybreakEnabled"),
        (
            json!({"experimentalRawEvents": true}),
            "experimentalRawEvents",
        ),
        (
            json!({"allowProviderModelFallback": true}),
            "allowProviderModelFallback",
        ),
        (json!({"dynamicTools": []}), "dynamicTools"),
    ] {
        assert_eq!(
            refused(&mut client, "thread/start", params),
            format!("thread/start.{field} requires experimentalApi capability")
        );
    }
    let fallback = client.request("thread/start", json!({"allowProviderModelFallback": false}));
    assert!(fallback["result"]["thread"]["id"].is_string(), "{fallback}");
    let thread = unset["result"]["thread"]["id"].clone();
    let plan = json!({"mode": "plan", "settings": {"model": "gpt-5.5"}});
    for (params, field) in [
        (
            json!({"cyberAccessProgram": "standard"}),
            "cyberAccessProgram",
        ),
        (
            json!({"cyberAccessProgram": "daybreakBlue", "collaborationMode": plan}),
            "collaborationMode",
        ),
        (
            json!({"multiAgentMode": "explicitRequestOnly", "collaborationMode": plan}),
            "collaborationMode",
        ),
    ] {
        let mut params = params;
        params["threadId"] = thread.clone();
        params["input"] = json!([{"type": "text", "text": "x"}]);
        assert_eq!(
            refused(&mut client, "turn/start", params),
            format!("turn/start.{field} requires experimentalApi capability")
        );
    }
    // A client that declared it is not gated.
    let mut declared = Client::spawn(&["--sandbox", "simulated"], &lab.home());
    declared.initialize(true);
    let modes = declared.request("collaborationMode/list", json!({}));
    assert!(modes.get("result").is_some(), "{modes}");
}

#[test]
fn thread_start_results_per_profile_and_permission_errors() {
    let lab = Lab::new();
    let mut args = vec!["--sandbox", "simulated"];
    args.extend(profile_args());
    let mut client = Client::spawn(&args, &lab.home());
    client.initialize(true);
    let list = client.request("permissionProfile/list", json!({"cwd": lab.ws_str()}));
    let ids: Vec<&str> = list["result"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            ":read-only",
            ":workspace",
            ":danger-full-access",
            "fullread",
            "fullread-nonet",
            "restricted"
        ]
    );
    for (profile, sandbox) in [
        (
            "restricted",
            json!({"type": "readOnly", "networkAccess": false}),
        ),
        (
            "fullread",
            json!({"type": "readOnly", "networkAccess": true}),
        ),
        (":danger-full-access", json!({"type": "dangerFullAccess"})),
    ] {
        let answer = client.request(
            "thread/start",
            json!({"cwd": lab.ws_str(), "permissions": profile, "ephemeral": true}),
        );
        let result = &answer["result"];
        assert_eq!(result["sandbox"], sandbox, "{profile}");
        assert_eq!(
            result["activePermissionProfile"],
            json!({"id": profile, "extends": null})
        );
        assert_eq!(
            result["instructionSources"],
            json!([format!("{}/AGENTS.md", lab.ws_str())])
        );
        assert_eq!(result["approvalPolicy"], "on-request");
        let started = client.notification("thread/started");
        assert_eq!(started["params"]["thread"]["id"], result["thread"]["id"]);
    }
    let answer = client.request("thread/start", json!({"permissions": "nope"}));
    assert_eq!(
        error_message(&answer),
        "failed to load configuration: default_permissions refers to undefined profile `nope`"
    );
    let answer = client.request(
        "thread/start",
        json!({"permissions": ":read-only", "sandbox": "read-only"}),
    );
    assert_eq!(
        error_message(&answer),
        "`permissions` cannot be combined with `sandbox`"
    );
    let answer = client.request("command/exec", json!({"command": [], "cwd": lab.ws_str()}));
    assert_eq!(error_message(&answer), "command must not be empty");
    let answer = client.request("command/exec", json!({"command": ["true"], "permissionProfile": ":read-only", "sandboxPolicy": {"type": "readOnly"}}));
    assert_eq!(
        error_message(&answer),
        "`permissionProfile` cannot be combined with `sandboxPolicy`"
    );
    let answer = client.request(
        "command/exec",
        json!({"command": ["true"], "permissionProfile": "no-such-profile"}),
    );
    assert_eq!(error_message(&answer), "invalid permission profile: default_permissions refers to undefined profile `no-such-profile`");
    let answer = client.request("command/exec", json!({"command": ["true"], "sandboxPolicy": {"type": "readOnly", "access": {"type": "fullAccess"}}}));
    assert_eq!(error_message(&answer), "Invalid request: readOnly.access is no longer supported; use permissionProfile for restricted reads");
}

#[test]
fn thread_and_turn_errors_for_unknown_ids() {
    let lab = Lab::new();
    let mut client = Client::spawn(&["--sandbox", "simulated"], &lab.home());
    client.initialize(true);
    let missing = "01a22bc7-f8e2-7173-b7a0-56e223784188";
    let answer = client.request("turn/start", json!({"threadId": missing, "input": []}));
    assert_eq!(
        error_message(&answer),
        format!("thread not found: {missing}")
    );
    let answer = client.request("turn/start", json!({"threadId": "nope", "input": []}));
    assert_eq!(
        error_message(&answer),
        "invalid thread id: invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found `n` at 1"
    );
    let answer = client.request("thread/read", json!({"threadId": missing}));
    assert_eq!(
        error_message(&answer),
        format!("thread not loaded: {missing}")
    );
    let answer = client.request("thread/resume", json!({"threadId": missing}));
    assert_eq!(
        error_message(&answer),
        format!("no rollout found for thread id {missing}")
    );
}

/// Codex 0.169 writes a thread's rollout when its first turn starts: before that (and for an
/// ephemeral thread, or an id it never saw) `thread/resume` finds nothing, and a malformed id is
/// a "session id" there (all measured with the real binary, offline).
#[test]
fn resume_finds_a_rollout_only_once_a_turn_started() {
    let lab = Lab::new();
    let mut client = Client::spawn(&["app-server", "--sandbox", "simulated"], &lab.home());
    client.initialize(true);
    let (thread, started) = client.start_thread(&lab.ws_str());
    let path = std::path::PathBuf::from(started["result"]["thread"]["path"].as_str().unwrap());
    assert!(
        !path.exists(),
        "no rollout before the first turn: {}",
        path.display()
    );
    let answer = client.request("thread/resume", json!({"threadId": thread}));
    assert_eq!(answer["error"]["code"], -32600, "{answer}");
    assert_eq!(
        error_message(&answer),
        format!("no rollout found for thread id {thread}")
    );
    let answer = client.request(
        "thread/read",
        json!({"threadId": thread, "includeTurns": true}),
    );
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    assert_eq!(error_message(&answer), "list_turns is not supported yet");
    let answer = client.request("thread/resume", json!({"threadId": "not-a-uuid"}));
    assert_eq!(
        error_message(&answer),
        "invalid session id: invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found `n` at 1"
    );
    let ephemeral = client.request(
        "thread/start",
        json!({"cwd": lab.ws_str(), "ephemeral": true}),
    );
    let ephemeral = ephemeral["result"]["thread"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let answer = client.request("thread/resume", json!({"threadId": ephemeral}));
    assert_eq!(
        error_message(&answer),
        format!("no rollout found for thread id {ephemeral}")
    );
    client.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "hi"}]}),
    );
    client.notification("turn/completed");
    assert!(
        path.is_file(),
        "the first turn writes the rollout: {}",
        path.display()
    );
    let resumed = client.request("thread/resume", json!({"threadId": thread}));
    assert_eq!(
        resumed["result"]["thread"]["id"],
        thread.as_str(),
        "{resumed}"
    );
}

#[test]
fn startup_errors_match_codex() {
    let assert = fake_command()
        .args([
            "app-server",
            "-c",
            r#"default_permissions="p""#,
            "-c",
            r#"permissions.p.filesystem.":root"="none""#,
        ])
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(
        stderr.contains(
            "Error: filesystem path `\":root\"` must be absolute, use `~/...`, or start with `:`"
        ),
        "{stderr}"
    );
    let assert = fake_command()
        .args(["-c", r#"permissions.p={filesystem={":root"="read"}}"#])
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(stderr.contains(
        "Error: config defines `[permissions]` profiles but does not set `default_permissions`"
    ));
    fake_command().arg("--bogus-flag").assert().code(2);
}

#[test]
fn unknown_scenario_key_names_key_file_and_line() {
    let lab = Lab::new();
    let file = lab.path("bad.toml");
    std::fs::write(
        &file,
        "name = \"bad\"\n[methods.\"thread/start\"]\ndelay_ms = 5\nsurprise = true\n",
    )
    .unwrap();
    let assert = fake_command()
        .args(["--scenario", file.to_str().unwrap()])
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
    assert!(
        stderr.contains("surprise") && stderr.contains("bad.toml") && stderr.contains("line 4"),
        "{stderr}"
    );
    let assert = fake_command()
        .args(["--scenario", "builtin:nope"])
        .assert()
        .code(1);
    assert!(String::from_utf8_lossy(&assert.get_output().stderr)
        .contains("unknown built-in scenario `nope`"));
}

#[test]
fn scenario_from_environment_variable() {
    let lab = Lab::new();
    let mut command = fake_command();
    command
        .env("FAKE_APP_SERVER_SCENARIO", "builtin:startup-rejected")
        .env("FAKE_APP_SERVER_SANDBOX", "simulated")
        .env("CODEX_HOME", lab.home())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut client = Client::spawn_command(command);
    client.initialize(true);
    let answer = client.request("thread/start", json!({"cwd": lab.ws_str()}));
    assert_eq!(answer["error"]["code"], -32603);
    assert!(error_message(&answer).starts_with("error creating thread: "));
    // No thread/started follows a failed thread/start.
    assert!(client.next_line(Duration::from_millis(200)).is_none());
}

#[test]
fn transcript_records_every_message_both_ways() {
    let lab = Lab::new();
    let transcript = lab.path("t/transcript.jsonl");
    let mut client = Client::spawn(
        &[
            "--sandbox",
            "simulated",
            "--transcript",
            transcript.to_str().unwrap(),
        ],
        &lab.home(),
    );
    client.send_line("garbage in");
    client.initialize(true);
    let started = client.request(
        "thread/start",
        json!({"cwd": lab.ws_str(), "permissions": ":read-only", "ephemeral": true}),
    );
    let thread_id = started["result"]["thread"]["id"].clone();
    client.request("turn/start", json!({"threadId": thread_id, "input": [{"type": "text", "text": "hi"}], "permissions": ":read-only"}));
    client.notification("turn/completed");
    client.close_stdin();
    client.wait_exit(WAIT).unwrap();
    let entries = read_jsonl(&transcript);
    assert_eq!(entries[0]["direction"], "in");
    assert_eq!(entries[0]["raw"], "garbage in");
    let sent: Vec<&Value> = entries
        .iter()
        .filter(|e| e["direction"] == "in")
        .filter_map(|e| e.get("message"))
        .collect();
    let turn_start = sent.iter().find(|m| m["method"] == "turn/start").unwrap();
    let thread_start = sent.iter().find(|m| m["method"] == "thread/start").unwrap();
    assert_eq!(
        turn_start["params"]["permissions"],
        thread_start["params"]["permissions"]
    );
    let out_methods: Vec<&str> = entries
        .iter()
        .filter(|e| e["direction"] == "out")
        .filter_map(|e| e["message"]["method"].as_str())
        .collect();
    assert!(
        out_methods.contains(&"turn/completed") && out_methods.contains(&"thread/started"),
        "{out_methods:?}"
    );
    assert!(entries
        .iter()
        .all(|e| e["time"].as_u64().unwrap() > 1_600_000_000_000));
}

/// `--enable`/`--disable` are `-c features.NAME=true|false` applied after every `-c`; given
/// after `app-server` they replace those given before it (Codex 0.169, measured with
/// `config/read`, which shows them in the session-flags layer).
#[test]
fn feature_flags_are_session_flags() {
    let lab = Lab::new();
    let mut client = Client::spawn(
        &[
            "--enable",
            "memories",
            "app-server",
            "--sandbox",
            "simulated",
            "--disable",
            "apps",
            "-c",
            "features.apps=true",
            "--enable",
            "goals",
        ],
        &lab.home(),
    );
    client.initialize(true);
    let config = client.request("config/read", json!({"includeLayers": true}));
    let result = &config["result"];
    let layer = &result["layers"][0];
    assert_eq!(layer["name"]["type"], "sessionFlags", "{config}");
    assert_eq!(
        layer["config"]["features"],
        json!({"apps": false, "goals": true})
    );
    let features = &result["config"]["features"];
    assert_eq!(features["goals"], true);
    assert_eq!(features["apps"], false);
    assert_eq!(
        features["memories"], false,
        "replaced by the later --enable"
    );
    assert!(features["network_proxy"].is_null() && features.get("network_proxy").is_some());
    assert_eq!(
        result["origins"]["features.goals"]["name"]["type"],
        "sessionFlags"
    );
}

/// The legacy reviewer name is kept as the current one: Codex 0.169 answers and reports
/// `auto_review` for `guardian_subagent` (found by `harness explore`; the fake echoed it, and
/// its reviewer, which runs for `auto_review` only, never ran).
#[test]
fn the_legacy_reviewer_name_is_auto_review() {
    let lab = Lab::new();
    let mut client = Client::spawn(&["--sandbox", "simulated"], &lab.home());
    client.initialize(true);
    let answer = client.request(
        "thread/start",
        json!({"cwd": lab.ws_str(), "approvalsReviewer": "guardian_subagent"}),
    );
    assert_eq!(
        answer["result"]["approvalsReviewer"], "auto_review",
        "{answer}"
    );
}
