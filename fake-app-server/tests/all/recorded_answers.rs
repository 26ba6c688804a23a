//! What the fake does as the real release does, from data recorded from that release
//! (`harness drift`). Its `thread/start`, `turn/start` and `thread/resume` answers are built from the
//! answers recorded from the real release (`personas/VERSION/thread_answers.json`, recorded by
//! `harness drift`): every field the release sends, with its default value where the fake's
//! state does not say otherwise. The fake once answered `serviceTier: null` to a `thread/start`
//! asking `serviceTier: null`, where Codex 0.169 answers `"default"` (a driver whose models
//! reject `null` passed on the fake and failed on every real cell).

use crate::common;

use common::{Client, Lab};
use serde_json::{json, Value};
use std::collections::BTreeSet;

fn recorded(release: &str) -> Value {
    let path = format!(
        "{}/personas/{release}/thread_answers.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn keys(value: &Value) -> BTreeSet<String> {
    value.as_object().unwrap().keys().cloned().collect()
}

fn client(release: &str, lab: &Lab) -> Client {
    let mut client = Client::spawn(&["--codex-version", release, "app-server"], &lab.home());
    client.initialize(true);
    client
}

#[test]
fn service_tier_is_answered_as_the_release_answers_it() {
    for release in ["0.169.0", "0.171.0"] {
        let table = recorded(release)["serviceTier"].clone();
        let lab = Lab::new();
        let mut client = client(release, &lab);
        for entry in table.as_array().unwrap() {
            let mut params = json!({"cwd": lab.ws_str()});
            if let Some(asked) = entry.get("asked") {
                params["serviceTier"] = asked.clone();
            }
            let answer = client.request("thread/start", params.clone());
            assert_eq!(
                answer["result"]["serviceTier"], entry["answered"],
                "{release}: thread/start {params}"
            );
        }
        let asked_null = client.request(
            "thread/start",
            json!({"cwd": lab.ws_str(), "serviceTier": null}),
        );
        assert_eq!(asked_null["result"]["serviceTier"], "default", "{release}");
    }
}

#[test]
fn thread_and_turn_answers_have_the_recorded_fields() {
    for release in ["0.169.0", "0.171.0"] {
        let recorded = recorded(release);
        let lab = Lab::new();
        let mut client = client(release, &lab);
        let (thread, started) = client.start_thread(&lab.ws_str());
        assert_eq!(
            keys(&started["result"]),
            keys(&recorded["thread/start"]),
            "{release}: thread/start"
        );
        assert_eq!(
            keys(&started["result"]["thread"]),
            keys(&recorded["thread/start"]["thread"]),
            "{release}: thread/start thread"
        );
        for field in ["multiAgentMode", "disabledPluginIds", "reasoningEffort"] {
            assert_eq!(
                started["result"][field], recorded["thread/start"][field],
                "{release}: {field}"
            );
        }
        let turn = client.request(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "hi"}]}),
        );
        assert_eq!(
            keys(&turn["result"]["turn"]),
            keys(&recorded["turn/start"]["turn"]),
            "{release}: turn/start"
        );
        client.wait_for("the turn's end", |m| m["method"] == "turn/completed");
        let resumed = client.request("thread/resume", json!({"threadId": thread}));
        assert_eq!(
            keys(&resumed["result"]),
            keys(&recorded["thread/resume"]),
            "{release}: thread/resume {resumed}"
        );
    }
}

/// The notification methods one turn on a non-ephemeral thread sends, up to `turn/completed`.
fn turn_notifications(capabilities: Value) -> Vec<String> {
    let lab = Lab::new();
    let mut client = Client::spawn(&["app-server"], &lab.home());
    client.initialize_with(capabilities);
    let (thread, _) = client.start_thread(&lab.ws_str());
    client.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "hi"}]}),
    );
    let mut methods = Vec::new();
    loop {
        let message = client.wait_for("turn traffic", |m| m.get("method").is_some());
        let method = message["method"].as_str().unwrap().to_string();
        methods.push(method.clone());
        if method == "turn/completed" {
            return methods;
        }
    }
}

/// Codex 0.169 sends `thread/readState/changed` only to a client that declared
/// `capabilities.experimentalApi` (measured; `personas/VERSION/experimental_notifications.txt`,
/// recorded by `harness drift`); the fake once sent it to every client.
#[test]
fn experimental_notifications_go_only_to_a_client_that_declared_the_experimental_api() {
    let experimental = turn_notifications(json!({"experimentalApi": true}));
    assert!(
        experimental.iter().any(|m| m == "thread/readState/changed"),
        "{experimental:?}"
    );
    let stable = turn_notifications(json!({"experimentalApi": false}));
    assert!(
        !stable.iter().any(|m| m == "thread/readState/changed"),
        "{stable:?}"
    );
    let without: Vec<&String> = experimental
        .iter()
        .filter(|m| *m != "thread/readState/changed")
        .collect();
    assert_eq!(without, stable.iter().collect::<Vec<_>>());
}

/// Codex 0.169 sends no notification whose method the client named in
/// `capabilities.optOutNotificationMethods` (InitializeCapabilities: "exact notification method
/// names that should be suppressed for this connection"; observed with `harness explore
/// --replay`: the real Codex's turn went on without them); the fake once sent them all.
#[test]
fn notifications_a_client_opted_out_of_are_not_sent() {
    let opted_out = ["item/completed", "turn/started"];
    let every = turn_notifications(json!({"experimentalApi": true}));
    assert!(
        opted_out.iter().all(|m| every.iter().any(|n| n == m)),
        "{every:?}"
    );
    let quiet = turn_notifications(
        json!({"experimentalApi": true, "optOutNotificationMethods": opted_out}),
    );
    let expected: Vec<&String> = every
        .iter()
        .filter(|m| !opted_out.contains(&m.as_str()))
        .collect();
    assert_eq!(quiet.iter().collect::<Vec<_>>(), expected);
}

/// Codex 0.169 accepts the legacy feature names in `app-server --disable web_search` (and
/// `connectors`, `collab`, `memory_tool`, …: found in the binary by `harness drift`,
/// `personas/VERSION/feature_aliases.txt`); the fake exited "Unknown feature flag". An unknown
/// name is still refused.
#[test]
fn legacy_feature_names_the_release_accepts_are_accepted() {
    for release in ["0.169.0", "0.171.0"] {
        let run = |feature: &str| {
            common::fake_command()
                .args([
                    "--codex-version",
                    release,
                    "app-server",
                    "--disable",
                    feature,
                ])
                .arg("--print-startup-config")
                .output()
                .unwrap()
        };
        // The names of the binary's legacy alias table, which no text pattern finds (their
        // texts run together in the binary): `harness drift` reads the table the known alias
        // sits in (`drift::features::table_neighbours`), and probes each name.
        for name in [
            "web_search",
            "connectors",
            "collab",
            "memory_tool",
            "experimental_use_unified_exec_tool",
            "enable_experimental_windows_sandbox",
        ] {
            for flag in ["--disable", "--enable"] {
                let legacy = common::fake_command()
                    .args(["--codex-version", release, "app-server", flag, name])
                    .arg("--print-startup-config")
                    .output()
                    .unwrap();
                assert!(
                    legacy.status.success(),
                    "{release} {flag} {name}: {legacy:?}"
                );
            }
        }
        let unknown = run("no_such_feature");
        assert_eq!(unknown.status.code(), Some(1), "{release}: {unknown:?}");
        assert!(
            String::from_utf8_lossy(&unknown.stderr).contains("Unknown feature flag"),
            "{unknown:?}"
        );
    }
}
