//! The protocol cases on the wire itself: forward-compatibility probes, big legal lines, delta
//! bursts and a stderr flood, played against a scripted client; and the protocol cases'
//! scenarios under the fake playing 0.171, against 0.171's schema.

use crate::common;

use common::cases::{spawn, start_thread, Case, Schemas};
use common::{Lab, Line};
use fake_app_server::output::EXTRA_FIELD;
use fake_app_server::protocol::release_schema;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

fn silent() -> impl FnMut(&Value) -> Option<Value> {
    |_| None
}

#[test]
fn every_notification_of_the_release_goes_by_for_another_thread() {
    let mut case = Case::start("every-notification", "fullread", json!({}));
    case.until_turn_completed(&mut silent());
    let messages = case.messages();
    let release = release_schema::for_version("0.169.0").unwrap();
    let expected = release.notification_methods();
    let foreign: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"].is_string() && m.get("id").is_none())
        .filter(|m| {
            m["params"]["threadId"].is_string() && m["params"]["threadId"] != json!(case.thread)
        })
        .collect();
    let mut sent: Vec<&str> = messages
        .iter()
        .filter_map(|m| m["method"].as_str())
        .collect();
    sent.sort_unstable();
    sent.dedup();
    for method in &expected {
        assert!(sent.contains(method), "`{method}` was not sent");
    }
    assert!(foreign.len() > 40, "{}", foreign.len());
    // The driver's own turn still completes last, after the foreign turn/completed.
    let foreign_completed = messages
        .iter()
        .position(|m| {
            m["method"] == "turn/completed" && m["params"]["threadId"] != json!(case.thread)
        })
        .expect("a generated turn/completed");
    let own_completed = messages
        .iter()
        .position(|m| {
            m["method"] == "turn/completed" && m["params"]["threadId"] == json!(case.thread)
        })
        .unwrap();
    assert!(foreign_completed < own_completed);
    Schemas::of("0.169.0").assert_valid(&messages, |_| false);
}

#[test]
fn unknown_methods_items_and_enum_values_are_sent_off_schema_and_only_those() {
    let schemas = Schemas::of("0.169.0");
    for (name, probe) in [
        ("unknown-notification", "harness/unknownNotification"),
        ("unknown-item-type", "harnessUnknownItem"),
        ("unknown-enum-values", "harnessUnknownValue"),
    ] {
        let mut case = Case::start(name, "fullread", json!({}));
        let done = case.until_turn_completed(&mut silent());
        assert_eq!(done["params"]["turn"]["status"], "completed", "{name}");
        let messages = case.messages();
        let is_probe = |m: &Value| m.to_string().contains(probe);
        let probes: Vec<&Value> = messages.iter().filter(|m| is_probe(m)).collect();
        assert!(!probes.is_empty(), "{name} sent no {probe}");
        for message in &probes {
            assert_eq!(
                schemas
                    .violations(&[(*message).clone()], |_| false)
                    .len()
                    .min(1),
                1,
                "{name}: {message} is schema-valid"
            );
        }
        schemas.assert_valid(&messages, is_probe);
    }
}

#[test]
fn unknown_fields_ride_on_every_message() {
    let mut case = Case::start("unknown-fields", "fullread", json!({}));
    case.until_turn_completed(&mut silent());
    let messages = case.messages();
    assert!(messages.len() > 10);
    for message in &messages {
        assert!(message.get(EXTRA_FIELD).is_some(), "{message}");
    }
    let item = messages
        .iter()
        .find(|m| m["method"] == "item/completed")
        .unwrap();
    assert!(item["params"]["item"].get(EXTRA_FIELD).is_some());
    assert!(item["params"].get(EXTRA_FIELD).is_some());
}

/// Every line the fake wrote, raw (to measure them).
fn raw_lines(client: &mut common::Client, until: impl Fn(&Value) -> bool) -> Vec<String> {
    let mut lines = Vec::new();
    loop {
        match client.next_line(common::WAIT) {
            Some(Line::Json(value)) => {
                lines.push(value.to_string());
                if until(&value) {
                    return lines;
                }
            }
            Some(Line::Raw(raw)) => panic!("not JSON: {}", &raw[..raw.len().min(200)]),
            None => panic!("timed out"),
        }
    }
}

#[test]
fn big_legal_lines_are_exactly_their_size_and_schema_valid() {
    let schemas = Schemas::of("0.169.0");
    for (name, size) in [
        ("line-64k", 65_536),
        ("line-1m", 1_048_576),
        ("line-2m", 2_097_152),
    ] {
        let (mut client, _, lab) = spawn(name, Lab::new(), &[]);
        client.initialize(true);
        let thread = start_thread(&mut client, &lab, "fullread");
        client.send_request("turn/start", json!({"threadId": thread, "input": []}));
        // The client re-serialises with sorted keys and no spaces, as the fake does: the same
        // length as the line written.
        let lines = raw_lines(&mut client, |m| m["method"] == "turn/completed");
        let longest = lines.iter().map(String::len).max().unwrap();
        assert_eq!(longest, size, "{name}");
        let messages: Vec<Value> = lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let delta = messages
            .iter()
            .filter(|m| m["method"] == "item/agentMessage/delta")
            .map(|m| m["params"]["delta"].as_str().unwrap().len())
            .max()
            .unwrap();
        assert!(
            delta > size - 1024,
            "{name}: the delta carries the bulk ({delta})"
        );
        assert!(
            !messages.iter().any(|m| m.to_string().contains("     ")),
            "{name}: padding"
        );
        schemas.assert_valid(&messages, |_| false);
    }
}

#[test]
fn a_burst_of_100_000_deltas_is_written_fast() {
    let (mut client, _, lab) = spawn("delta-burst", Lab::new(), &[]);
    client.initialize(true);
    let thread = start_thread(&mut client, &lab, "fullread");
    client.send_request("turn/start", json!({"threadId": thread, "input": []}));
    let began = Instant::now();
    let mut deltas = 0;
    let mut longest = 0;
    loop {
        match client.next_line(common::WAIT) {
            Some(Line::Json(m)) => {
                if m["method"] == "item/agentMessage/delta" {
                    deltas += 1;
                }
                if m["method"] == "item/completed" {
                    longest = longest.max(m.to_string().len());
                }
                if m["method"] == "turn/completed" {
                    break;
                }
            }
            other => panic!("{other:?}"),
        }
    }
    let took = began.elapsed();
    // Two scripted messages stream one delta each.
    assert_eq!(deltas, 100_000 + 2);
    assert!(longest < 32 * 1024, "{longest}");
    assert!(took < Duration::from_secs(20), "{took:?}");
}

/// The fake on `builtin:stderr-flood` with its stderr piped, its first turn started.
fn flood() -> (common::Client, Lab) {
    let lab = Lab::new();
    let mut args = vec![
        "app-server",
        "--scenario",
        "builtin:stderr-flood",
        "--sandbox",
        "simulated",
    ];
    args.extend(common::profile_args());
    let mut client = common::Client::spawn(&args, &lab.home());
    client.initialize(true);
    let thread = start_thread(&mut client, &lab, "fullread");
    client.send_request("turn/start", json!({"threadId": thread, "input": []}));
    (client, lab)
}

#[test]
fn a_stderr_flood_blocks_a_client_that_does_not_drain_it() {
    // Not drained: the fake's stderr pipe fills and the turn never completes.
    let (mut blocked, _lab) = flood();
    let deadline = Instant::now() + Duration::from_secs(3);
    while Instant::now() < deadline {
        if let Some(Line::Json(m)) = blocked.next_line(Duration::from_millis(100)) {
            assert_ne!(m["method"], "turn/completed", "the flood did not block");
        }
    }
    // Drained: 4 MiB arrive and the turn completes.
    let (mut drained, _lab) = flood();
    let mut stderr = drained.child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut bytes).unwrap();
        bytes.len()
    });
    let done = drained.notification("turn/completed");
    assert_eq!(done["params"]["turn"]["status"], "completed");
    drained.close_stdin();
    drained.wait_exit(common::WAIT);
    assert!(reader.join().unwrap() >= 4 * 1024 * 1024);
}

/// The protocol cases' scenarios (those the fake plays for 0.171) emit only what 0.171's schema
/// allows, besides their deliberate unknowns.
#[test]
fn the_cases_played_as_0_171_validate_against_its_schema() {
    let schemas = Schemas::of("0.171.0");
    for name in [
        "command-approval",
        "file-change-approval",
        "permissions-approval",
        "mcp-elicitation",
        "auth-token-refresh",
        "attestation",
        "legacy-apply-patch-approval",
        "legacy-exec-command-approval",
        "retryable-error",
        "failed-turn",
        "foreign-thread-events",
        "server-started-turn",
        "every-notification",
        "line-64k",
    ] {
        let (mut client, _, lab) = spawn(name, Lab::new(), &["--codex-version", "0.171.0"]);
        client.initialize(true);
        let thread = start_thread(&mut client, &lab, "fullread");
        client.send_request("turn/start", json!({"threadId": thread, "input": []}));
        loop {
            match client.next_line(common::WAIT) {
                Some(Line::Json(m)) => {
                    if m.get("id").is_some() && m.get("method").is_some() {
                        client.send(
                            &json!({"id": m["id"], "error": {"code": -32601, "message": "no"}}),
                        );
                    }
                    if m["method"] == "turn/completed" && m["params"]["threadId"] == json!(thread) {
                        break;
                    }
                }
                other => panic!("{name}: {other:?}"),
            }
        }
        let messages = common::cases::messages(&client);
        let failures = schemas.violations(&messages, |_| false);
        assert!(failures.is_empty(), "{name}:\n{}", failures.join("\n"));
    }
}

/// The fake's stand-ins for the real Codex's own faults: a cut model stream it retries
/// (`stream_drops`: one `error` with willRetry: true per cut, then the turn completes) and its
/// own log on stderr (`app_server_log`: a flood at the turn's start, which a client must drain).
#[test]
fn stream_drops_and_an_app_server_log_play_as_codex_shows_them() {
    let lab = Lab::new();
    let scenario = lab.path("own-faults.toml");
    std::fs::write(
        &scenario,
        "app_server_log = \"codex_api=trace\"\n[[turns]]\nstream_drops = 2\nsteps = [{ step = \"message\", text = \"{lines:3}\" }]\n",
    )
    .unwrap();
    let mut args = vec![
        "app-server",
        "--scenario",
        scenario.to_str().unwrap(),
        "--sandbox",
        "simulated",
    ];
    args.extend(common::profile_args());
    let mut client = common::Client::spawn(&args, &lab.home());
    let mut stderr = client.child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut bytes).unwrap();
        bytes.len()
    });
    client.initialize(true);
    let thread = start_thread(&mut client, &lab, "fullread");
    client.send_request("turn/start", json!({"threadId": thread, "input": []}));
    let done = client.notification("turn/completed");
    assert_eq!(done["params"]["turn"]["status"], "completed");
    let errors: Vec<&Value> = client
        .seen
        .iter()
        .filter_map(|line| match line {
            Line::Json(m) if m["method"] == "error" => Some(&m["params"]),
            _ => None,
        })
        .collect();
    let messages: Vec<&str> = errors
        .iter()
        .map(|e| e["error"]["message"].as_str().unwrap())
        .collect();
    assert_eq!(messages, ["Reconnecting... 1/5", "Reconnecting... 2/5"]);
    assert!(errors.iter().all(|e| e["willRetry"] == true));
    client.close_stdin();
    client.wait_exit(common::WAIT);
    assert!(reader.join().unwrap() >= 1 << 20);
}
