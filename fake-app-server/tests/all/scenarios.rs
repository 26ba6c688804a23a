//! Built-in and built scenarios, played through the real stdio protocol.

use crate::common;

use common::*;
use fake_app_server::scenario::builder::steps;
use fake_app_server::scenario::{EnvironmentFacts, ScenarioBuilder};
use serde_json::{json, Value};

mod play;
use play::*;

#[test]
fn plan_write_refused_under_real_bwrap_needs_bwrap() {
    require_bwrap();
    let mut run = start("builtin:plan-write-refused", "real");
    run.client.initialize(true);
    let thread = run.thread("restricted");
    let planning = run.turn(&thread, "Plan the probe write.", plan_mode());
    assert_eq!(plan_first_line(&planning), "WRITE_REFUSED");
    let commands = items_of(&planning, "commandExecution");
    assert_eq!(commands.len(), 1);
    assert!(commands[0]["aggregatedOutput"]
        .as_str()
        .unwrap()
        .contains("Read-only file system"));
    assert_eq!(commands[0]["exitCode"], 0);
    let finishing = run.turn(&thread, "Approved.", json!({}));
    let tools = items_of(&finishing, "dynamicToolCall");
    assert_eq!(tools[0]["tool"], "paperclip_finish");
    assert_eq!(tools[0]["arguments"]["status"], "done");
    let probes: Vec<_> = std::fs::read_dir(run.lab.ws())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("plan-write-probe-")
        })
        .collect();
    assert!(probes.is_empty(), "the sandbox let the probe write through");
    let log = run.model_log();
    assert_eq!(log[0]["name"], "exec_command");
    let output = log[1]["output"].as_str().unwrap();
    assert!(
        output.starts_with("Chunk ID: ")
            && output.contains("\nProcess exited with code 0\n")
            && output.contains("Read-only file system"),
        "{output}"
    );
}

#[test]
fn network_off_profile_runs_under_unshare_net_needs_bwrap() {
    require_bwrap();
    let mut run = start_built(
        ScenarioBuilder::new("net")
            .turn(vec![steps::shell("cat /proc/net/dev | tail -n +3 | wc -l")]),
        "real",
    );
    run.client.initialize(true);
    let thread = run.thread("fullread-nonet");
    let messages = run.turn(&thread, "count interfaces", json!({}));
    let commands = items_of(&messages, "commandExecution");
    // A login shell may print profile noise first; the last line is the interface count.
    let output = commands[0]["aggregatedOutput"].as_str().unwrap();
    assert!(
        output.ends_with("\n1\n") || output == "1\n",
        "only loopback inside --unshare-net: {output}"
    );
}

#[test]
fn loopback_refused_fails_thread_start_and_hides_the_command_item() {
    let builder = ScenarioBuilder::from_builtin("plan-write-refused")
        .unwrap()
        .environment(EnvironmentFacts {
            loopback_refused: true,
            ..EnvironmentFacts::default()
        });
    let mut run = start_built(builder, "simulated");
    run.client.send(&json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}, "capabilities": {"experimentalApi": true}}}));
    let warning = run.client.notification("configWarning");
    assert_eq!(
        warning["params"]["summary"],
        "Codex's Linux sandbox uses bubblewrap and needs access to create user namespaces."
    );
    let ws = run.lab.ws_str();
    let answer = run.client.request(
        "thread/start",
        json!({"cwd": ws, "permissions": "restricted"}),
    );
    assert_eq!(
        answer["error"],
        json!({"code": -32603, "message": "error creating thread: failed to load AGENTS.md instructions for environment `local`: fs sandbox helper failed with status exit status: 1: bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted"})
    );
    // Full reads skip the helper: the thread starts, but network-off commands cannot.
    let thread = run.thread("fullread-nonet");
    let planning = run.turn(&thread, "plan", plan_mode());
    assert!(
        items_of(&planning, "commandExecution").is_empty(),
        "Codex emits no item for a sandbox denial (G1)"
    );
    assert_eq!(plan_first_line(&planning), "SANDBOX_FAILED");
    let output = run.model_log()[1]["output"].as_str().unwrap().to_string();
    assert!(output.ends_with("Process exited with code 1\nOriginal token count: 16\nOutput:\nbwrap: loopback: Failed RTM_NEWADDR: Operation not permitted\n"), "{output}");
    let exec = run.client.request(
        "command/exec",
        json!({"command": ["cat", "AGENTS.md"], "cwd": ws, "permissionProfile": "fullread"}),
    );
    assert_eq!(
        exec["result"],
        json!({"exitCode": 0, "stdout": "# Project agents\nAlways be terse.\n", "stderr": ""})
    );
}

#[test]
fn uid_map_refused_breaks_every_sandboxed_command() {
    let builder = ScenarioBuilder::new("uidmap").environment(EnvironmentFacts {
        uid_map_refused: true,
        ..EnvironmentFacts::default()
    });
    let mut run = start_built(builder, "simulated");
    run.client.initialize(true);
    let ws = run.lab.ws_str();
    let answer = run.client.request(
        "thread/start",
        json!({"cwd": ws, "permissions": "fullread"}),
    );
    assert!(answer.get("result").is_some());
    let exec = run.client.request("command/exec", json!({"command": ["sh", "-c", "printf x > probe.txt"], "cwd": ws, "permissionProfile": "fullread"}));
    assert_eq!(
        exec["result"],
        json!({"exitCode": 1, "stdout": "", "stderr": "bwrap: setting up uid map: Permission denied\n"})
    );
    let exec = run.client.request("command/exec", json!({"command": ["sh", "-c", "echo rc=0"], "cwd": ws, "sandboxPolicy": {"type": "externalSandbox"}}));
    assert_eq!(exec["result"]["stdout"], "rc=0\n");
}

#[test]
fn simulated_read_only_sandbox_refuses_writes() {
    let mut run = start("builtin:plan-write-refused", "simulated");
    run.client.initialize(true);
    let thread = run.thread("fullread");
    let planning = run.turn(&thread, "plan", plan_mode());
    assert_eq!(plan_first_line(&planning), "WRITE_REFUSED");
    let ws = run.lab.ws_str();
    let exec = run.client.request(
        "command/exec",
        json!({"command": ["sh", "-c", "printf x > probe.txt"], "cwd": ws}),
    );
    assert_eq!(exec["result"]["exitCode"], 2);
    assert!(
        exec["result"]["stderr"]
            .as_str()
            .unwrap()
            .contains("probe.txt: Read-only file system"),
        "{exec}"
    );
    assert!(!run.lab.ws().join("probe.txt").exists());
}

#[test]
fn external_sandbox_turn_writes_for_real() {
    let mut run = start("builtin:plan-write-refused", "simulated");
    run.client.initialize(true);
    let thread = run.thread("fullread");
    let mut extra = plan_mode();
    extra["sandboxPolicy"] = json!({"type": "externalSandbox", "networkAccess": "enabled"});
    let planning = run.turn(&thread, "plan", extra);
    assert_eq!(plan_first_line(&planning), "WRITE_SUCCEEDED");
    let probe = run.lab.ws().join(format!(
        "plan-write-probe-{}.txt",
        fake_app_server::ids::probe_id_for(&thread)
    ));
    assert_eq!(std::fs::read_to_string(probe).unwrap(), "probe");
}

#[test]
fn plan_revise_accept_plays_three_turns() {
    let mut run = start("builtin:plan-revise-accept", "simulated");
    run.client.initialize(true);
    let thread = run.thread("restricted");
    let v1 = run.turn(&thread, "plan", plan_mode());
    assert_eq!(plan_first_line(&v1), "# Plan v1");
    let v2 = run.turn(&thread, "Please add a test step.", plan_mode());
    assert_eq!(plan_first_line(&v2), "# Plan v2");
    let done = run.turn(&thread, "Approved.", json!({}));
    assert_eq!(
        items_of(&done, "dynamicToolCall")[0]["tool"],
        "paperclip_finish"
    );
}

#[test]
fn ask_question_blocks_on_the_user() {
    let mut run = start("builtin:ask-question", "simulated");
    run.client.initialize(true);
    let thread = run.thread("restricted");
    let messages = run.turn(&thread, "do it", json!({}));
    let agent = items_of(&messages, "agentMessage");
    assert!(agent[0]["text"].as_str().unwrap().ends_with('?'));
    let block = &items_of(&messages, "dynamicToolCall")[0];
    assert_eq!(block["tool"], "paperclip_block");
    assert_eq!(block["arguments"]["owner"], "user");
    assert!(block["arguments"]["action"]
        .as_str()
        .unwrap()
        .starts_with("answer"));
}

#[test]
fn message_marker_echoes_the_token() {
    let mut run = start("builtin:message-marker", "simulated");
    run.client.initialize(true);
    let thread = run.thread("restricted");
    let messages = run.turn(&thread, "Please echo MARKER-7f3a9 back.", json!({}));
    assert_eq!(
        items_of(&messages, "agentMessage")[0]["text"],
        "MARKER-7f3a9"
    );
    let completed = messages.last().unwrap();
    assert_eq!(
        completed["params"]["turn"]["items"][0]["text"],
        "MARKER-7f3a9"
    );
}

#[test]
fn turn_failed_reports_an_error_then_a_failed_turn() {
    let mut run = start("builtin:turn-failed", "simulated");
    run.client.initialize(true);
    let thread = run.thread("restricted");
    let messages = run.turn(&thread, "go", json!({}));
    let error = messages.iter().find(|m| m["method"] == "error").unwrap();
    assert_eq!(
        error["params"]["error"]["message"],
        "stream disconnected before completion: mock failure for testing"
    );
    assert_eq!(error["params"]["willRetry"], false);
    assert_eq!(
        messages.last().unwrap()["params"]["turn"]["status"],
        "failed"
    );
}

#[test]
fn unregistered_dynamic_tool_is_unsupported() {
    let mut run = start("builtin:message-marker", "simulated");
    run.client.initialize(true);
    let ws = run.lab.ws_str();
    let answer = run.client.request(
        "thread/start",
        json!({"cwd": ws, "permissions": "restricted"}),
    );
    let thread = answer["result"]["thread"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let messages = run.turn(&thread, "MARKER-1", json!({}));
    assert!(items_of(&messages, "dynamicToolCall").is_empty());
    let log = run.model_log();
    assert_eq!(
        log.last().unwrap()["output"],
        "unsupported call: paperclip_finish"
    );
}

#[test]
fn escalation_accept_decline_cancel() {
    let builder = ScenarioBuilder::new("escalate")
        .turn(vec![steps::escalated_shell(
            "printf probe > escalated.txt && echo WRITE_SUCCEEDED",
            "Allow writing?",
        )])
        .turn(vec![
            steps::escalated_shell("printf probe > declined.txt", "Allow?"),
            steps::message("after decline"),
        ])
        .turn(vec![
            steps::escalated_shell("printf probe > cancelled.txt", "Allow?"),
            steps::message("never"),
        ]);
    let mut run = start_built(builder, "simulated");
    run.client.initialize(true);
    let thread = run.thread("fullread");
    for (decision, status, file) in [
        ("accept", "completed", "escalated.txt"),
        ("decline", "completed", "declined.txt"),
        ("cancel", "interrupted", "cancelled.txt"),
    ] {
        run.client.request(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "go"}]}),
        );
        let request = run
            .client
            .server_request("item/commandExecution/requestApproval");
        assert_eq!(
            request["params"]["reason"],
            "Allow writing?".replace(
                " writing",
                if decision == "accept" { " writing" } else { "" }
            )
        );
        run.client
            .send(&json!({"id": request["id"], "result": {"decision": decision}}));
        let resolved = run.client.notification("serverRequest/resolved");
        assert_eq!(resolved["params"]["requestId"], request["id"]);
        let done = run.client.notification("turn/completed");
        assert_eq!(done["params"]["turn"]["status"], status, "{decision}");
        assert_eq!(
            run.lab.ws().join(file).exists(),
            decision == "accept",
            "{decision}"
        );
    }
    let outputs: Vec<String> = run
        .model_log()
        .iter()
        .filter(|e| e["type"] == "tool-output")
        .map(|e| e["output"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(outputs.len(), 2, "cancel sends nothing back to the model");
    assert!(outputs[0].contains("Output:\nWRITE_SUCCEEDED\n"));
    assert_eq!(
        outputs[1],
        "exec_command failed: CreateProcess { message: \"Rejected(\\\"rejected by user\\\")\" }"
    );
}

#[test]
fn interrupt_and_steer_a_waiting_turn() {
    let builder = ScenarioBuilder::new("wait").turn(vec![steps::tool(
        "paperclip_block",
        json!({"owner": "user", "action": "answer"}),
    )]);
    let mut run = start_built(builder, "simulated");
    run.client.initialize(true);
    let thread = run.thread("fullread");
    let answer = run.client.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "go"}]}),
    );
    let turn_id = answer["result"]["turn"]["id"].as_str().unwrap().to_string();
    run.client.server_request("item/tool/call");
    let steer = run.client.request("turn/steer", json!({"threadId": thread, "input": [{"type": "text", "text": "more"}], "expectedTurnId": "wrong"}));
    assert_eq!(
        steer["error"]["message"],
        format!("expected active turn id `wrong` but found `{turn_id}`")
    );
    let steer = run.client.request("turn/steer", json!({"threadId": thread, "input": [{"type": "text", "text": "more"}], "expectedTurnId": turn_id}));
    assert_eq!(steer["result"], json!({"turnId": turn_id}));
    let interrupt = run.client.request(
        "turn/interrupt",
        json!({"threadId": thread, "turnId": "wrong"}),
    );
    assert_eq!(
        interrupt["error"]["message"],
        format!("expected active turn id wrong but found {turn_id}")
    );
    let before = run.client.seen.len();
    let interrupt = run.client.request(
        "turn/interrupt",
        json!({"threadId": thread, "turnId": turn_id}),
    );
    assert_eq!(interrupt["result"], json!({}));
    // The turn may end before the interrupt's answer is written.
    let done = run.client.notification_since(before, "turn/completed");
    assert_eq!(done["params"]["turn"]["status"], "interrupted");
}

#[test]
fn resume_in_a_new_process_with_another_profile() {
    let mut run = start("builtin:healthy", "simulated");
    run.client.initialize(true);
    let thread = run.thread("restricted");
    run.turn(&thread, "first", json!({}));
    run.client.close_stdin();
    run.client.wait_exit(WAIT).unwrap();
    let mut args = vec!["--sandbox", "simulated"];
    args.extend(profile_args());
    let mut client = Client::spawn(&args, &run.lab.home());
    client.initialize(true);
    let resumed = client.request(
        "thread/resume",
        json!({"threadId": thread, "permissions": "fullread"}),
    );
    let result = &resumed["result"];
    assert_eq!(result["activePermissionProfile"]["id"], "fullread");
    assert_eq!(
        result["sandbox"],
        json!({"type": "readOnly", "networkAccess": true})
    );
    assert_eq!(result["thread"]["turns"].as_array().unwrap().len(), 1);
    let read = client.request(
        "thread/read",
        json!({"threadId": thread, "includeTurns": true}),
    );
    assert_eq!(read["result"]["thread"]["turns"][0]["status"], "completed");
    // The thread lives where Codex 0.169 keeps a rollout:
    // `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-YYYY-MM-DDTHH-MM-SS-<id>.jsonl`.
    let path = std::path::PathBuf::from(result["thread"]["path"].as_str().unwrap());
    assert!(path.is_file(), "{}", path.display());
    let name = path.file_name().unwrap().to_str().unwrap();
    assert!(
        name.starts_with("rollout-") && name.ends_with(&format!("-{thread}.jsonl")),
        "{name}"
    );
    let day = path.parent().unwrap();
    let sessions = day.parent().unwrap().parent().unwrap().parent().unwrap();
    assert_eq!(sessions.file_name().unwrap(), "sessions");
    assert_eq!(
        &name["rollout-".len().."rollout-".len() + 10],
        day.strip_prefix(sessions)
            .unwrap()
            .to_str()
            .unwrap()
            .replace('/', "-")
    );
}

/// Outside plan mode Codex 0.169 turns no `<proposed_plan>` block into a `plan` item: the
/// agent message keeps the block, tags included (measured with the Python SDK's read-only run).
#[test]
fn a_plan_step_outside_plan_mode_is_an_agent_message_with_the_block() {
    let builder = ScenarioBuilder::new("plan-outside-plan-mode")
        .turn(vec![steps::plan("# Plan\n1. Write the probe.")]);
    let mut run = start_built(builder, "simulated");
    run.client.initialize(true);
    let thread = run.thread("restricted");
    let default_mode = run.turn(&thread, "plan without plan mode", json!({}));
    assert!(
        items_of(&default_mode, "plan").is_empty(),
        "{default_mode:#?}"
    );
    let messages = items_of(&default_mode, "agentMessage");
    assert_eq!(messages.len(), 1, "{default_mode:#?}");
    assert_eq!(
        messages[0]["text"],
        "<proposed_plan>\n# Plan\n1. Write the probe.\n</proposed_plan>\n"
    );
    let deltas = default_mode
        .iter()
        .filter(|m| m["method"] == "item/agentMessage/delta")
        .count();
    assert_eq!(deltas, 4, "one delta per streamed line");
}

/// `{write_outcome}` after an escalation the approval policy `never` refused: the model was told
/// it cannot escalate, so the outcome is `WRITE_REJECTED` (what the mock model API derives from
/// the same text in front of the real Codex).
#[test]
fn an_escalation_refused_under_never_is_write_rejected() {
    let builder = ScenarioBuilder::new("escalated-never").turn(vec![
        steps::escalated_shell("printf probe > plan-write-probe-{probe_id}.txt", "Write?"),
        steps::message("{write_outcome}"),
    ]);
    let mut run = start_built(builder, "simulated");
    run.client.initialize(true);
    let thread = run.thread("restricted");
    let turn = run.turn(&thread, "write", json!({"approvalPolicy": "never"}));
    let messages = items_of(&turn, "agentMessage");
    assert_eq!(messages.len(), 1, "{turn:#?}");
    assert_eq!(messages[0]["text"], "WRITE_REJECTED");
    assert!(items_of(&turn, "commandExecution").is_empty(), "{turn:#?}");
}

/// As Codex 0.169 (measured): every `thread/tokenUsage/updated` is followed by
/// `account/rateLimits/updated` (all unknown against a custom provider), and a completed turn of
/// a durable thread is reported unread (`thread/readState/changed`) before the thread goes idle;
/// `thread/read` reports the same receipt.
#[test]
fn usage_brings_rate_limits_and_a_completed_turn_is_unread() {
    let mut run = start("builtin:message-marker", "simulated");
    run.client.initialize(true);
    let thread = run.thread("restricted");
    let turn = run.turn(&thread, "Reply with MARKER-1.", json!({}));
    let methods: Vec<&str> = turn.iter().filter_map(|m| m["method"].as_str()).collect();
    let usages = methods
        .iter()
        .enumerate()
        .filter(|(_, m)| **m == "thread/tokenUsage/updated");
    for (at, _) in usages {
        assert_eq!(methods[at + 1], "account/rateLimits/updated", "{methods:?}");
    }
    let tail = &methods[methods.len() - 3..];
    assert_eq!(
        tail,
        [
            "thread/readState/changed",
            "thread/status/changed",
            "turn/completed"
        ]
    );
    let changed = turn
        .iter()
        .find(|m| m["method"] == "thread/readState/changed")
        .unwrap();
    let turn_id = turn.last().unwrap()["params"]["turn"]["id"].clone();
    assert_eq!(
        changed["params"]["readState"]["firstUnread"],
        json!({"type": "turn", "turnId": turn_id})
    );
    let read = run
        .client
        .request("thread/read", json!({"threadId": thread}));
    assert_eq!(read["result"]["readState"], changed["params"]["readState"]);
}

/// A second `turn/start` during a turn is steered into it (Codex 0.169, measured offline): it
/// answers the running turn's id; with the model's next request Codex shows the new input as a
/// userMessage item of that turn and the model reads both inputs, so it plays the script of
/// its new position (the mock model API counts the user messages of the history) in the same
/// turn; the next `turn/start` plays the script after that.
#[test]
fn a_turn_start_during_a_turn_is_steered_into_it() {
    let builder = ScenarioBuilder::new("steer")
        .turn(vec![
            steps::message("on it {user_marker}"),
            steps::shell("sleep 1; echo slept"),
            steps::message("first {user_marker}"),
        ])
        .turn(vec![steps::message("steered {user_marker}")])
        .turn(vec![steps::message("third {user_marker}")]);
    let mut run = start_built(builder, "simulated");
    run.client.initialize(true);
    let thread = run.thread("fullread");
    let first = run.client.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "go MARKER-ONE"}]}),
    );
    let turn_id = first["result"]["turn"]["id"].as_str().unwrap().to_string();
    // The model's first message is out: its command runs now, in the same response.
    run.client.wait_for("the first agent message", |v| {
        v["method"] == "item/completed" && v["params"]["item"]["type"] == "agentMessage"
    });
    let before = run.client.seen.len();
    let second = run.client.request(
        "turn/start",
        json!({"threadId": thread, "input": [{"type": "text", "text": "also MARKER-TWO"}]}),
    );
    assert_eq!(second["result"]["turn"]["id"], turn_id.as_str(), "{second}");
    let done = run.client.notification_since(before, "turn/completed");
    assert_eq!(done["params"]["turn"]["id"], turn_id.as_str());
    assert_eq!(done["params"]["turn"]["status"], "completed");
    let completed: Vec<Value> = run
        .client
        .seen
        .iter()
        .filter_map(|line| match line {
            Line::Json(v) if v["method"] == "item/completed" => Some(v["params"].clone()),
            _ => None,
        })
        .collect();
    assert!(completed.iter().all(|p| p["turnId"] == turn_id.as_str()));
    let kinds: Vec<&str> = completed
        .iter()
        .map(|p| p["item"]["type"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        kinds,
        [
            "userMessage",
            "agentMessage",
            "commandExecution",
            "userMessage",
            "agentMessage"
        ]
    );
    assert_eq!(completed[1]["item"]["text"], "on it MARKER-ONE");
    assert_eq!(
        completed[3]["item"]["content"][0]["text"],
        "also MARKER-TWO"
    );
    // The model read both inputs: it plays the next turn's script, not "first …".
    assert_eq!(completed[4]["item"]["text"], "steered MARKER-TWO");
    assert_eq!(run.user_inputs(), ["go MARKER-ONE", "also MARKER-TWO"]);
    let log = run.model_log();
    assert_eq!(log[0]["name"], "exec_command", "{log:?}");
    let output = log[1]["output"].as_str().unwrap();
    assert!(output.ends_with("slept\n"), "{output}");
    let third = run.turn(&thread, "then MARKER-THREE", json!({}));
    let message = items_of(&third, "agentMessage");
    assert_eq!(message[0]["text"], "third MARKER-THREE");
}
