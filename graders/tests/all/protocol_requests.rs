//! `protocol-server-requests` and `protocol-safe-default`: the drivers' real bugs — never
//! answering, a shape the schema rejects, answering twice or an id never asked, accepting every
//! approval — each fail a named check; answers nobody could check are not a pass.

use crate::support::wire::*;
use crate::support::*;
use graders::verdict::VerdictKind::{Fail, Incomplete, NotApplicable, Pass};
use rstest::rstest;
use serde_json::{json, Value};

fn requests(c: &str, transcript: Transcript) -> Run {
    case("protocol-server-requests", c, transcript)
}

#[test]
fn a_driver_that_never_answers_a_server_request_fails_answered() {
    let verdict = requests(
        "user-input",
        answered("item/tool/requestUserInput", None, 0),
    )
    .grade();
    check(&verdict, Fail, "answered");
    insta::assert_json_snapshot!("server-requests.user-input.never-answered", verdict);
}

#[test]
fn a_decision_to_a_permissions_request_is_the_minimal_drivers_bug() {
    let verdict = requests(
        "permissions-approval",
        answered(
            "item/permissions/requestApproval",
            Some(json!({"result": {"decision": "decline"}})),
            3,
        ),
    )
    .grade();
    check(&verdict, Fail, "answer-shape");
    assert!(
        verdict
            .reason
            .contains("PermissionsRequestApprovalResponse.json"),
        "{}",
        verdict.reason
    );
    insta::assert_json_snapshot!(
        "server-requests.permissions-approval.decision-instead-of-permissions",
        verdict
    );
}

#[test]
fn an_empty_answer_to_a_dynamic_tool_call_fails_answer_shape() {
    let verdict = requests(
        "dynamic-tool-call",
        answered("item/tool/call", Some(json!({"result": {}})), 3),
    )
    .grade();
    check(&verdict, Fail, "answer-shape");
    insta::assert_json_snapshot!("server-requests.dynamic-tool-call.empty-result", verdict);
}

#[test]
fn a_declaration_gated_case_without_the_declaration_is_not_judged() {
    for case in ["dynamic-tool-call", "auth-token-refresh"] {
        let verdict = healthy("protocol-server-requests", case)
            .declaring(outcome())
            .grade();
        assert_eq!(verdict.verdict, Incomplete, "{case}: {verdict:?}");
        assert!(verdict.reason.contains("declares"), "{}", verdict.reason);
    }
}

#[test]
fn a_result_to_the_unknown_request_fails_and_an_error_passes() {
    let unknown = graders::grade::UNKNOWN_SERVER_REQUEST;
    let verdict = requests(
        "unknown-request",
        answered(unknown, Some(json!({"result": {}})), 3),
    )
    .grade();
    check(&verdict, Fail, "unknown-answered-with-error");
    insta::assert_json_snapshot!("server-requests.unknown-request.result", verdict);
    let error = requests(
        "unknown-request",
        answered(
            unknown,
            Some(json!({"error": {"code": -32601, "message": "method not found"}})),
            3,
        ),
    )
    .grade();
    assert_eq!(error.verdict, Pass, "{error:?}");
}

/// A driver that titles its session on an ephemeral thread after its turn (codex-acp) and ends
/// before that title turn completes: the case is judged on its session's turn.
#[test]
fn a_title_turn_after_the_cases_turn_does_not_change_the_verdict() {
    let unknown = graders::grade::UNKNOWN_SERVER_REQUEST;
    let titled = |answer: serde_json::Value| {
        Transcript::session()
            .server_request(7, unknown)
            .wait(3)
            .send(answer)
            .complete_turn(THREAD, TURN, "completed")
            .title_thread()
            .close()
    };
    let error = requests(
        "unknown-request",
        titled(json!({"id": 7, "error": {"code": -32601, "message": "method not found"}})),
    )
    .grade();
    assert_eq!(error.verdict, Pass, "{error:?}");
    let result = requests("unknown-request", titled(json!({"id": 7, "result": {}}))).grade();
    check(&result, Fail, "unknown-answered-with-error");
}

#[test]
fn an_error_answer_is_a_right_answer_to_any_request() {
    let verdict = requests(
        "command-approval",
        answered(
            "item/commandExecution/requestApproval",
            Some(json!({"error": {"code": -32601, "message": "approvals not supported"}})),
            3,
        ),
    )
    .grade();
    assert_eq!(verdict.verdict, Pass, "{verdict:?}");
}

#[rstest]
#[case::late(answered("item/commandExecution/requestApproval", Some(json!({"result": {"decision": "decline"}})), 12_000))]
#[case::twice(Transcript::session()
    .server_request(7, "item/commandExecution/requestApproval")
    .answer(7, json!({"decision": "decline"}))
    .answer(7, json!({"decision": "accept"}))
    .finish())]
#[case::an_id_never_asked_instead(Transcript::session()
    .server_request(7, "item/commandExecution/requestApproval")
    .answer(8, json!({"decision": "decline"}))
    .finish())]
#[case::an_id_never_asked_besides(Transcript::session()
    .server_request(7, "item/commandExecution/requestApproval")
    .answer(7, json!({"decision": "decline"}))
    .answer(99, json!({"decision": "decline"}))
    .finish())]
fn answers_late_twice_or_to_ids_never_asked_fail_answered(#[case] transcript: Transcript) {
    let verdict = requests("command-approval", transcript).grade();
    check(&verdict, Fail, "answered");
}

#[test]
fn an_answer_no_schema_checked_is_not_a_pass() {
    let run = Run {
        release: None,
        ..healthy("protocol-server-requests", "command-approval")
    };
    let verdict = run.grade();
    assert_eq!(verdict.verdict, Incomplete, "{verdict:?}");
    assert!(
        verdict.reason.contains("`answer-shape`"),
        "{}",
        verdict.reason
    );
    let other = Run {
        release: Some("0.1.0".into()),
        ..healthy("protocol-server-requests", "command-approval")
    };
    let verdict = other.grade();
    assert_eq!(verdict.verdict, Incomplete, "{verdict:?}");
    assert!(
        verdict.reason.contains("0.169.0"),
        "names the releases there are: {}",
        verdict.reason
    );
}

#[test]
fn a_request_the_app_server_never_sent_shows_nothing() {
    let verdict = requests("mcp-elicitation", Transcript::session().finish()).grade();
    assert_eq!(verdict.verdict, Incomplete, "{verdict:?}");
}

#[test]
fn a_right_answer_then_a_session_that_does_not_go_on_fails() {
    let hung = requests(
        "command-approval",
        Transcript::session()
            .server_request(7, "item/commandExecution/requestApproval")
            .answer(7, json!({"decision": "decline"}))
            .complete_turn(THREAD, TURN, "completed"),
    )
    .killed_at_bound()
    .grade();
    check(&hung, Fail, "ended-on-its-own");
    let crashed = healthy("protocol-server-requests", "command-approval")
        .exits(1)
        .grade();
    check(&crashed, Fail, "exit-status");
}

/// `cancel` is a refusal the schema documents as interrupting the turn, and the app-server may
/// end the turn on an error answer to an approval: a driver that refused so and then ends its
/// run as not successful went on exactly as it chose (found by the legitimate population: such
/// drivers were failed `session-continued` for their turn ending `interrupted`). A turn
/// interrupted after a `decline`, or a refusal followed by a claim of success, still fails.
#[rstest]
#[case("command-approval", "item/commandExecution/requestApproval", "cancel", json!("decline"))]
#[case("file-change-approval", "item/fileChange/requestApproval", "cancel", json!("decline"))]
#[case("legacy-exec-command-approval", "execCommandApproval", "abort", json!({"denied": {"rejection": "no"}}))]
fn an_answer_that_interrupts_the_turn_ends_it_as_the_driver_chose(
    #[case] c: &str,
    #[case] method: &str,
    #[case] decision: &str,
    #[case] goes_on: serde_json::Value,
) {
    let answered_with = |decision: serde_json::Value| {
        requests(
            c,
            Transcript::session()
                .server_request(7, method)
                .answer(7, json!({"decision": decision}))
                .complete_turn(THREAD, TURN, "interrupted")
                .close(),
        )
    };
    let cancelled = answered_with(json!(decision)).exits(1).grade();
    assert_eq!(cancelled.verdict, Pass, "{cancelled:?}");
    assert!(
        cancelled
            .reason
            .contains("ended `interrupted` as its answer asked"),
        "{cancelled:?}"
    );
    let claimed_success = answered_with(json!(decision)).exits(0).grade();
    check(&claimed_success, Fail, "exit-status");
    let declined = answered_with(goes_on).exits(1).grade();
    check(&declined, Fail, "session-continued");
    // A JSON-RPC error is a refusal too; the fake ends the turn on it as on `cancel`.
    let refused_with_error = requests(
        c,
        Transcript::session()
            .server_request(7, method)
            .answer_error(7, -32000, "the user did not approve")
            .complete_turn(THREAD, TURN, "interrupted")
            .close(),
    );
    let errored = refused_with_error.clone().exits(1).grade();
    assert_eq!(errored.verdict, Pass, "{errored:?}");
    check(&refused_with_error.exits(0).grade(), Fail, "exit-status");
}

fn safe(case: &str, method: &str, decision: &str) -> Run {
    Run {
        transcript: answered(method, Some(json!({"result": {"decision": decision}})), 3),
        ..healthy("protocol-safe-default", case)
    }
}

#[test]
fn accepting_every_approval_fails_the_safe_default() {
    let verdict = safe(
        "command-escalation-refused",
        "item/commandExecution/requestApproval",
        "accept",
    )
    .grade();
    check(&verdict, Fail, "escalation-not-granted");
    insta::assert_json_snapshot!(
        "safe-default.command-escalation-refused.accept-all",
        verdict
    );
    let files = safe(
        "file-change-refused",
        "item/fileChange/requestApproval",
        "acceptForSession",
    )
    .grade();
    check(&files, Fail, "escalation-not-granted");
}

#[test]
fn a_decline_taken_back_by_a_second_answer_fails() {
    let run = Run {
        transcript: Transcript::session()
            .server_request(7, "item/commandExecution/requestApproval")
            .answer(7, json!({"decision": "decline"}))
            .answer(7, json!({"decision": "accept"}))
            .finish(),
        ..healthy("protocol-safe-default", "command-escalation-refused")
    };
    check(&run.grade(), Fail, "answered");
    let elsewhere = Run {
        transcript: Transcript::session()
            .server_request(7, "item/commandExecution/requestApproval")
            .answer(8, json!({"decision": "decline"}))
            .finish(),
        ..healthy("protocol-safe-default", "command-escalation-refused")
    };
    check(&elsewhere.grade(), Fail, "answered");
}

#[test]
fn a_written_probe_fails_no_write_even_after_a_decline() {
    let mut run = healthy("protocol-safe-default", "command-escalation-refused");
    run.extras = vec![(
        graders::events::Source::Harness,
        workspace(&[("plan-write-probe-1.txt", true)]),
    )];
    check(&run.grade(), Fail, "no-write");
    run.extras.clear();
    assert_eq!(
        run.grade().verdict,
        Incomplete,
        "no workspace evidence: nothing shows no write"
    );
}

#[test]
fn a_refusal_ending_the_run_as_a_failure_still_passes_the_safe_default() {
    let run = Run {
        transcript: Transcript::session()
            .server_request(7, "item/commandExecution/requestApproval")
            .answer(7, json!({"decision": "decline"}))
            .close(),
        ..healthy("protocol-safe-default", "command-escalation-refused")
    }
    .exits(3);
    let verdict = run.grade();
    assert_eq!(verdict.verdict, Pass, "{verdict:?}");
    assert!(
        verdict.reason.contains("classified failure"),
        "{}",
        verdict.reason
    );
}

#[test]
fn a_stale_approval_answered_accept_fails() {
    let run = Run {
        transcript: Transcript::session()
            .complete_turn(THREAD, TURN, "completed")
            .server_request(50, "item/commandExecution/requestApproval")
            .answer(50, json!({"decision": "accept"}))
            .close(),
        ..healthy("protocol-binding", "stale-request-after-turn")
    };
    check(&run.grade(), Fail, "stale-not-accepted");
}

/// A session whose thread/start sends `params` (the app-server reporting `reported`) and whose
/// turn/start adds `turn_extra`; the driver's turn completes and it ends, no request sent.
fn no_request(params: Value, reported: Value, turn_extra: Value) -> Transcript {
    let mut turn = json!({"threadId": THREAD, "input": [{"type": "text", "text": "go"}]});
    for (key, value) in turn_extra.as_object().into_iter().flatten() {
        turn[key] = value.clone();
    }
    Transcript::new()
        .handshake()
        .open_thread_with(params, reported)
        .request(TURN_START_ID, "turn/start", turn)
        .result(TURN_START_ID, json!({"turn": {"id": TURN}}))
        .turn_started(THREAD, TURN)
        .finish()
}

fn no_request_under(policy: &str, turn_policy: Option<&str>) -> Transcript {
    let turn_extra = match turn_policy {
        Some(p) => json!({"approvalPolicy": p}),
        None => json!({}),
    };
    no_request(
        json!({"cwd": WORKSPACE, "approvalPolicy": policy}),
        json!({"approvalPolicy": policy}),
        turn_extra,
    )
}

/// The verdict of `case` on `transcript`, for a driver declaring its outcome.
fn declared(case: &str, transcript: Transcript) -> graders::verdict::Verdict {
    requests(case, transcript).declaring(outcome()).grade()
}

/// `not-applicable`, its reason naming `choice`.
fn not_applicable_for(case: &str, transcript: Transcript, choice: &str) {
    let verdict = declared(case, transcript);
    assert_eq!(verdict.verdict, NotApplicable, "{case}: {verdict:?}");
    assert!(verdict.reason.contains(choice), "{}", verdict.reason);
}

#[test]
fn an_approval_never_asked_under_approval_policy_never_is_not_applicable() {
    for case in [
        "command-approval",
        "file-change-approval",
        "permissions-approval",
    ] {
        not_applicable_for(
            case,
            no_request_under("never", None),
            "approvalPolicy `never`",
        );
        // Fail closed: another policy in force, or a request no policy keeps back.
        for (policy, turn_policy) in [("on-request", None), ("never", Some("on-request"))] {
            let verdict = declared(case, no_request_under(policy, turn_policy));
            assert_eq!(
                verdict.verdict, Incomplete,
                "{case} {policy} {turn_policy:?}"
            );
        }
    }
    let user_input = declared("user-input", no_request_under("never", None));
    assert_eq!(user_input.verdict, Incomplete, "{user_input:?}");
}

/// Observed with Codex 0.169: under approvalPolicy `never` Codex declines an MCP server's
/// elicitation itself and relays nothing, so a driver that chose `never` cannot be asked.
#[test]
fn an_mcp_elicitation_never_relayed_under_approval_policy_never_is_not_applicable() {
    not_applicable_for(
        "mcp-elicitation",
        no_request_under("never", None),
        "declines an MCP server's elicitation",
    );
    for (policy, turn_policy) in [("on-request", None), ("never", Some("on-request"))] {
        let verdict = declared("mcp-elicitation", no_request_under(policy, turn_policy));
        assert_eq!(verdict.verdict, Incomplete, "{policy} {turn_policy:?}");
    }
    // The unsandboxed rule is the approvals' only: an elicitation is not an escalation.
    let unsandboxed = declared("mcp-elicitation", no_request_unsandboxed(json!({})));
    assert_eq!(unsandboxed.verdict, Incomplete, "{unsandboxed:?}");
}

/// The app-server reports no sandbox (`dangerFullAccess`); the turn/start adds `turn_extra`.
fn no_request_unsandboxed(turn_extra: Value) -> Transcript {
    no_request(
        json!({"cwd": WORKSPACE, "sandbox": "danger-full-access"}),
        json!({"sandbox": {"type": "dangerFullAccess"}}),
        turn_extra,
    )
}

#[test]
fn an_approval_never_asked_without_a_sandbox_is_not_applicable() {
    for case in ["command-approval", "file-change-approval"] {
        not_applicable_for(case, no_request_unsandboxed(json!({})), "dangerFullAccess");
        let sandboxed = no_request_unsandboxed(json!({"sandboxPolicy": {"type": "readOnly"}}));
        let verdict = declared(case, sandboxed);
        assert_eq!(verdict.verdict, Incomplete, "{case}: {verdict:?}");
    }
    // Codex 0.169 still asks for permissions without a sandbox (measured).
    let permissions = declared("permissions-approval", no_request_unsandboxed(json!({})));
    assert_eq!(permissions.verdict, Incomplete, "{permissions:?}");
}
