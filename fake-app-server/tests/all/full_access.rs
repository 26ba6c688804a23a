//! What needs no approval: without a sandbox nothing escalates, and under approval policy
//! `never` nothing is asked, by the client or by the automatic reviewer (Codex 0.169, measured
//! with `harness explore`).

use crate::common;

use common::cases::{decide, Case};
use serde_json::{json, Value};

/// Neither the client nor the automatic reviewer was asked anything.
fn assert_nobody_asked(case: &Case, label: &str) {
    let seen: Vec<String> = case
        .messages()
        .iter()
        .filter_map(|m| m["method"].as_str().map(str::to_string))
        .collect();
    assert!(
        !seen
            .iter()
            .any(|m| m.contains("requestApproval") || m.contains("autoApprovalReview")),
        "{label}: {seen:?}"
    );
}

/// The `:danger-full-access` permission profile, of turn/start here, runs an escalated command
/// at once: no approval request, no automatic review (corpus
/// `full-access-profile-escalation-auto-review`; the fake asked, or reviewed and declined).
#[test]
fn an_escalation_under_the_full_access_profile_runs_at_once() {
    for reviewer in ["user", "auto_review"] {
        let mut case = Case::start(
            "command-approval",
            "fullread",
            json!({"permissions": ":danger-full-access", "approvalsReviewer": reviewer}),
        );
        case.until_turn_completed(&mut decide("decline"));
        assert_nobody_asked(&case, reviewer);
        let command = case
            .messages()
            .into_iter()
            .find(|m| {
                m["method"] == "item/completed" && m["params"]["item"]["type"] == "commandExecution"
            })
            .expect("the command's item");
        assert_eq!(
            command["params"]["item"]["status"], "completed",
            "{reviewer}"
        );
        let action = command["params"]["item"]["commandActions"][0]["command"]
            .as_str()
            .unwrap_or_default();
        assert!(
            action.starts_with("printf probe"),
            "{reviewer}: the model's command, not the shell line: {action}"
        );
    }
}

/// Under approval policy `never` a `request_permissions` call is reviewed by nobody, even with
/// the automatic reviewer: the model is told nothing was granted (corpus
/// `auto-review-permissions-approval-policy-never`).
#[test]
fn a_permissions_request_under_never_is_not_reviewed() {
    let mut case = Case::start_with(
        "permissions-approval",
        "fullread",
        json!({"approvalPolicy": "never", "approvalsReviewer": "auto_review"}),
        &["--enable", "request_permissions_tool"],
    );
    case.until_turn_completed(&mut |_: &Value| None);
    assert_nobody_asked(&case, "never");
    assert_eq!(
        case.tool_outputs()[0],
        r#"{"permissions":{"network":null,"file_system":null},"scope":"turn"}"#
    );
}
