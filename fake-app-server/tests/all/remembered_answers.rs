//! What the fake remembers of an answer to an approval, as Codex 0.169 does (measured with
//! `harness explore --replay`, corpus scenarios `*-remembered-*`): a command or files accepted
//! for the session are not asked again in that thread, an exec-policy amendment becomes a rule
//! kept in `$CODEX_HOME`, a network amendment runs the command as an accept does.

use crate::common;

use common::cases::{decide, result, spawn, start_thread, Case};
use common::Lab;
use serde_json::{json, Value};

/// The commands (or the first change's file) the client was asked about, in order.
fn asked(case: &Case, method: &str) -> Vec<String> {
    case.messages()
        .iter()
        .filter(|m| m["method"] == method && m.get("id").is_some())
        .map(|m| {
            m["params"]["command"]
                .as_str()
                .unwrap_or(m["params"]["itemId"].as_str().unwrap_or_default())
                .to_string()
        })
        .collect()
}

/// The commands that ran, in order (their completed items).
fn ran(case: &Case) -> Vec<String> {
    case.messages()
        .iter()
        .filter(|m| m["method"] == "item/completed")
        .filter(|m| m["params"]["item"]["type"] == "commandExecution")
        .filter(|m| m["params"]["item"]["status"] == "completed")
        .map(|m| m["params"]["item"]["command"].as_str().unwrap().to_string())
        .collect()
}

const PROBE: &str = "/bin/bash -lc 'echo remembered-probe'";
const MATCHING: &str = "/bin/bash -lc 'echo remembered-probe matching'";
const COMMAND_APPROVAL: &str = "item/commandExecution/requestApproval";

/// Answers every server request with `answer`.
fn always(answer: Value) -> impl FnMut(&Value) -> Option<Value> {
    move |request| result(request, answer.clone())
}

fn amend(request: &Value) -> Option<Value> {
    let amendment = request["params"]["proposedExecpolicyAmendment"].clone();
    result(
        request,
        json!({"decision": {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": amendment}}}),
    )
}

#[test]
fn a_command_accepted_for_the_session_runs_again_unasked_another_is_asked() {
    let mut case = Case::start("command-approval-remembered", "fullread", json!({}));
    case.until_turn_completed(&mut decide("acceptForSession"));
    assert_eq!(asked(&case, COMMAND_APPROVAL), [PROBE, MATCHING]);
    assert_eq!(ran(&case), [PROBE, PROBE, MATCHING]);
    let mut plain = Case::start("command-approval-remembered", "fullread", json!({}));
    plain.until_turn_completed(&mut decide("accept"));
    assert_eq!(asked(&plain, COMMAND_APPROVAL), [PROBE, PROBE, MATCHING]);
}

#[test]
fn an_amendment_becomes_a_rule_that_a_later_launch_in_the_home_keeps() {
    let mut case = Case::start("command-approval-remembered", "fullread", json!({}));
    case.until_turn_completed(&mut amend);
    assert_eq!(asked(&case, COMMAND_APPROVAL), [PROBE]);
    assert_eq!(ran(&case), [PROBE, PROBE, MATCHING]);
    let rules = std::fs::read_to_string(case.lab.home().join("rules/default.rules")).unwrap();
    assert_eq!(
        rules,
        "prefix_rule(pattern=[\"echo\", \"remembered-probe\"], decision=\"allow\")\n"
    );
    // A later launch with that home: nothing asked.
    let lab = Lab::new();
    std::fs::create_dir_all(lab.home().join("rules")).unwrap();
    std::fs::write(lab.home().join("rules/default.rules"), rules).unwrap();
    let (mut client, model_log, lab) = spawn("command-approval-remembered", lab, &[]);
    client.initialize(true);
    let thread = start_thread(&mut client, &lab, "fullread");
    let mut later = Case {
        client,
        lab,
        model_log,
        thread,
        turn: String::new(),
    };
    later.send_turn(json!({}));
    later.until_turn_completed(&mut decide("decline"));
    assert!(asked(&later, COMMAND_APPROVAL).is_empty());
    assert_eq!(ran(&later), [PROBE, PROBE, MATCHING]);
}

#[test]
fn a_network_amendment_runs_the_command_and_remembers_nothing() {
    let mut case = Case::start("command-approval-remembered", "fullread", json!({}));
    let allow = json!({"host": "example.com", "action": "allow"});
    let decision = json!({"applyNetworkPolicyAmendment": {"network_policy_amendment": allow}});
    case.until_turn_completed(&mut always(json!({ "decision": decision })));
    assert_eq!(asked(&case, COMMAND_APPROVAL), [PROBE, PROBE, MATCHING]);
    assert_eq!(ran(&case), [PROBE, PROBE, MATCHING]);
}

#[test]
fn files_accepted_for_the_session_are_changed_again_unasked() {
    let method = "item/fileChange/requestApproval";
    let mut case = Case::start("file-change-approval-remembered", "fullread", json!({}));
    case.until_turn_completed(&mut decide("acceptForSession"));
    assert_eq!(asked(&case, method).len(), 2, "{:#?}", case.messages());
    // The first file added then deleted, the other one added.
    assert_eq!(case.probes("remembered-").len(), 1);
    assert_eq!(case.probes("remembered-other-").len(), 1);
    let mut plain = Case::start("file-change-approval-remembered", "fullread", json!({}));
    plain.until_turn_completed(&mut decide("accept"));
    assert_eq!(asked(&plain, method).len(), 3);
}

#[test]
fn a_session_grant_of_permissions_does_not_spare_the_next_request() {
    let mut case = Case::start_with(
        "permissions-approval-remembered",
        "fullread",
        json!({}),
        &["--enable", "request_permissions_tool"],
    );
    case.until_turn_completed(&mut always(
        json!({"permissions": {"network": {"enabled": true}}, "scope": "session"}),
    ));
    assert_eq!(asked(&case, "item/permissions/requestApproval").len(), 2);
}
