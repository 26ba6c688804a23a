//! Each operator's table of cases beside the others, so what one operator leaves alone is read
//! against what the next rewrites.

use super::*;
use rstest::rstest;

fn request(method: &str, params: Value) -> ServerRequest {
    ServerRequest::of(method, Some(&params))
}

fn decline(id: u64) -> Value {
    json!({"id": id, "result": {"decision": "decline"}})
}

#[test]
fn every_operator_has_a_name_that_parses_back_and_a_bug() {
    for op in Operator::ALL {
        assert_eq!(op.name().parse::<Operator>(), Ok(op));
        assert!(!op.bug().is_empty());
    }
    let err = "approve-all".parse::<Operator>().unwrap_err();
    assert!(err.contains("approve-everything"), "{err}");
    assert!(!Operator::ExitZero.on_the_wire());
}

#[rstest]
#[case::offered_session_wide(
    "item/commandExecution/requestApproval",
    json!({"availableDecisions": ["accept", "acceptForSession", "decline"]}),
    json!({"decision": "acceptForSession"})
)]
#[case::offered_only_once(
    "item/commandExecution/requestApproval",
    json!({"availableDecisions": ["decline", "accept"]}),
    json!({"decision": "accept"})
)]
#[case::offered_an_amendment(
    "item/commandExecution/requestApproval",
    json!({"availableDecisions": ["decline", {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["ls"]}}]}),
    json!({"decision": {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["ls"]}}})
)]
#[case::nothing_listed(
    "item/fileChange/requestApproval",
    json!({"itemId": "i"}),
    json!({"decision": "acceptForSession"})
)]
#[case::legacy(
    "execCommandApproval",
    json!({"command": ["ls"]}),
    json!({"decision": "approved_for_session"})
)]
#[case::legacy_patch(
    "applyPatchApproval",
    json!({}),
    json!({"decision": "approved_for_session"})
)]
#[case::permissions_granted_as_asked(
    "item/permissions/requestApproval",
    json!({"permissions": {"network": {"enabled": true}}}),
    json!({"permissions": {"network": {"enabled": true}}, "scope": "session"})
)]
fn approve_everything_gives_the_most_permissive_decision_offered(
    #[case] method: &str,
    #[case] params: Value,
    #[case] result: Value,
) {
    let approved = approve_everything(&decline(7), &request(method, params)).unwrap();
    assert_eq!(approved, json!({"id": 7, "result": result}));
}

#[test]
fn approve_everything_leaves_other_answers_and_approvals_already_given() {
    let input = request("item/tool/requestUserInput", json!({}));
    assert_eq!(approve_everything(&decline(1), &input), None);
    let given = json!({"jsonrpc": "2.0", "id": 1, "result": {"decision": "acceptForSession"}});
    let approval = request("item/fileChange/requestApproval", json!({}));
    assert_eq!(approve_everything(&given, &approval), None);
    let refused = json!({"jsonrpc": "2.0", "id": "a", "error": {"code": -1, "message": "no"}});
    assert_eq!(
        approve_everything(&refused, &approval),
        Some(json!({"jsonrpc": "2.0", "id": "a", "result": {"decision": "acceptForSession"}})),
        "an error answer becomes an approval, keeping the envelope's jsonrpc"
    );
}

#[rstest]
#[case::a_result(decline(3))]
#[case::an_error(json!({"id": 3, "error": {"code": -32601, "message": "unsupported"}}))]
fn malformed_answers_carry_a_result_no_schema_accepts(#[case] answer: Value) {
    assert_eq!(
        malformed_answer(&answer),
        Some(json!({"id": 3, "result": {"decision": 42}}))
    );
}

#[rstest]
#[case::read_only(
    json!({"method": "thread/start", "id": 1, "params": {"cwd": "/w", "sandbox": "read-only"}}),
    Some(json!({"method": "thread/start", "id": 1, "params": {"cwd": "/w", "sandbox": "workspace-write"}}))
)]
#[case::workspace_write(
    json!({"method": "thread/start", "id": 1, "params": {"sandbox": "workspace-write"}}),
    Some(json!({"method": "thread/start", "id": 1, "params": {"sandbox": "danger-full-access"}}))
)]
#[case::full_access_already(
    json!({"method": "thread/start", "id": 1, "params": {"sandbox": "danger-full-access"}}),
    None
)]
#[case::no_sandbox_named(
    json!({"method": "thread/start", "id": 1, "params": {"cwd": "/w"}}),
    Some(json!({"method": "thread/start", "id": 1, "params": {"cwd": "/w", "sandbox": "danger-full-access"}}))
)]
#[case::a_permission_profile(
    json!({"method": "thread/start", "id": 1, "params": {"permissions": "locked"}}),
    Some(json!({"method": "thread/start", "id": 1, "params": {"sandbox": "danger-full-access"}}))
)]
#[case::turn_read_only(
    json!({"method": "turn/start", "id": 2, "params": {"sandboxPolicy": {"type": "readOnly"}}}),
    Some(json!({"method": "turn/start", "id": 2, "params": {"sandboxPolicy": {"type": "workspaceWrite", "networkAccess": true}}}))
)]
#[case::turn_workspace_write(
    json!({"method": "turn/start", "id": 2, "params": {"sandboxPolicy": {"type": "workspaceWrite", "writableRoots": []}}}),
    Some(json!({"method": "turn/start", "id": 2, "params": {"sandboxPolicy": {"type": "dangerFullAccess"}}}))
)]
#[case::turn_external_gets_network(
    json!({"method": "turn/start", "id": 2, "params": {"sandboxPolicy": {"type": "externalSandbox"}}}),
    Some(json!({"method": "turn/start", "id": 2, "params": {"sandboxPolicy": {"type": "externalSandbox", "networkAccess": "enabled"}}}))
)]
#[case::turn_profile(
    json!({"method": "turn/start", "id": 2, "params": {"permissions": "p"}}),
    Some(json!({"method": "turn/start", "id": 2, "params": {"sandboxPolicy": {"type": "dangerFullAccess"}}}))
)]
#[case::turn_keeping_the_threads(json!({"method": "turn/start", "id": 2, "params": {"threadId": "t"}}), None)]
#[case::another_request(json!({"method": "initialize", "id": 0, "params": {}}), None)]
fn widen_sandbox_asks_one_step_wider(#[case] sent: Value, #[case] became: Option<Value>) {
    assert_eq!(widen_sandbox(&sent), became);
}

#[rstest]
#[case::on_request(
    json!({"method": "turn/start", "id": 2, "params": {"approvalPolicy": "on-request"}}),
    Some(json!({"method": "turn/start", "id": 2, "params": {"approvalPolicy": "never"}}))
)]
#[case::none_named(
    json!({"method": "thread/start", "id": 1, "params": {"cwd": "/w"}}),
    Some(json!({"method": "thread/start", "id": 1, "params": {"cwd": "/w", "approvalPolicy": "never"}}))
)]
#[case::no_params(
    json!({"method": "thread/start", "id": 1}),
    Some(json!({"method": "thread/start", "id": 1, "params": {"approvalPolicy": "never"}}))
)]
#[case::never_already(json!({"method": "thread/start", "id": 1, "params": {"approvalPolicy": "never"}}), None)]
#[case::another_request(json!({"method": "thread/resume", "id": 1, "params": {}}), None)]
fn approval_never_sets_the_policy(#[case] sent: Value, #[case] became: Option<Value>) {
    assert_eq!(approval_never(&sent), became);
}

fn server_request(id: u64, method: &str, params: Value) -> Value {
    json!({"id": id, "method": method, "params": params})
}

#[rstest]
#[case::approve_everything(Operator::ApproveEverything, Sent::Replaced(json!({"id": 5, "result": {"decision": "accept"}})))]
#[case::drop_answers(Operator::DropAnswers, Sent::Dropped)]
#[case::malformed_answers(Operator::MalformedAnswers, Sent::Replaced(json!({"id": 5, "result": {"decision": 42}})))]
#[case::widen_sandbox(Operator::WidenSandbox, Sent::Unchanged)]
fn answers_are_rewritten_only_when_they_answer_a_pending_request(
    #[case] operator: Operator,
    #[case] answered: Sent,
) {
    let mut mutation = WireMutation::new(operator);
    assert_eq!(
        mutation.driver_sent(&decline(5)),
        Sent::Unchanged,
        "nothing asked yet"
    );
    let asked = server_request(
        5,
        "item/commandExecution/requestApproval",
        json!({"availableDecisions": ["accept", "decline"]}),
    );
    assert_eq!(mutation.server_sent(&asked), Received::Forward);
    assert_eq!(mutation.driver_sent(&decline(5)), answered);
    assert_eq!(
        mutation.driver_sent(&decline(5)),
        Sent::Unchanged,
        "answered once"
    );
}

#[test]
fn drop_initialized_drops_the_notification_only() {
    let mut mutation = WireMutation::new(Operator::DropInitialized);
    assert_eq!(
        mutation.driver_sent(&json!({"method": "initialized"})),
        Sent::Dropped
    );
    assert_eq!(
        mutation.driver_sent(&json!({"method": "initialize", "id": 0, "params": {}})),
        Sent::Unchanged
    );
}

#[test]
fn duplicate_requests_send_a_copy_whose_answer_is_swallowed() {
    let mut mutation = WireMutation::new(Operator::DuplicateRequests);
    let sent = json!({"method": "turn/start", "id": 4, "params": {"threadId": "t"}});
    let Sent::Twice(copy) = mutation.driver_sent(&sent) else {
        panic!("a request is sent twice");
    };
    assert_eq!(copy["id"], "harness-mutation-duplicate-1");
    assert_eq!(copy["params"], sent["params"]);
    assert_eq!(
        mutation.driver_sent(&json!({"method": "initialized"})),
        Sent::Unchanged,
        "a notification is no request"
    );
    let copy_answer = json!({"id": "harness-mutation-duplicate-1", "result": {}});
    assert_eq!(mutation.server_sent(&copy_answer), Received::Swallow);
    assert_eq!(
        mutation.server_sent(&json!({"id": 4, "result": {}})),
        Received::Forward
    );
    assert_eq!(
        mutation.server_sent(&copy_answer),
        Received::Forward,
        "swallowed once"
    );
}

#[test]
fn close_after_turn_start_closes_after_the_answer_that_started_a_turn() {
    let mut mutation = WireMutation::new(Operator::CloseAfterTurnStart);
    let turn = json!({"method": "turn/start", "id": 9, "params": {}});
    assert_eq!(mutation.driver_sent(&turn), Sent::Unchanged);
    assert_eq!(
        mutation.server_sent(&json!({"id": 8, "result": {}})),
        Received::Forward
    );
    assert_eq!(
        mutation.server_sent(&json!({"method": "turn/started", "params": {}})),
        Received::Forward
    );
    assert_eq!(
        mutation.server_sent(&json!({"id": 9, "result": {"turn": {}}})),
        Received::ForwardThenCut
    );
    let mut refused = WireMutation::new(Operator::CloseAfterTurnStart);
    refused.driver_sent(&turn);
    assert_eq!(
        refused.server_sent(&json!({"id": 9, "error": {"code": 1, "message": "no"}})),
        Received::Forward,
        "no turn started"
    );
}

#[test]
fn exit_zero_leaves_the_wire_alone() {
    let mut mutation = WireMutation::new(Operator::ExitZero);
    assert_eq!(
        mutation.driver_sent(&json!({"method": "initialized"})),
        Sent::Unchanged
    );
}
