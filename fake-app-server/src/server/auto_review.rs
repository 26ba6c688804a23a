//! The automatic approval reviewer (`approvalsReviewer: "auto_review"`): instead of asking the
//! client, Codex 0.169 asks the model for a review of the escalation and reports it with
//! `item/autoApprovalReview/started`, a `guardianWarning` with the verdict, and `…/completed`. The
//! client gets no approval request. The review itself is scripted per step
//! ([`crate::scenario::model::Review`]); the mock model API answers the real Codex's review
//! request with the same review.

use crate::protocol::shapes;
use crate::scenario::model::Review;
use serde_json::{json, Value};

/// What the review is about.
pub(super) struct ReviewTarget<'a> {
    pub thread_id: &'a str,
    pub turn_id: &'a str,
    pub review_id: &'a str,
    pub item_id: &'a str,
    /// The reviewed action as Codex 0.169 names it (measured): [`command_action`],
    /// [`apply_patch_action`] or [`permissions_action`].
    pub action: Value,
    pub started: u64,
}

/// An escalated shell command.
pub(super) fn command_action(command: &str, cwd: &str) -> Value {
    json!({"type": "command", "command": shapes::shell_display(command), "cwd": cwd, "source": "unifiedExec"})
}

/// A patch the sandbox may not write: the files it touches, by absolute path.
pub(super) fn apply_patch_action(cwd: &str, files: &[String]) -> Value {
    json!({"type": "applyPatch", "cwd": cwd, "files": files})
}

/// A `request_permissions` call: its reason and the permissions asked for, as the request to
/// a client would carry them.
pub(super) fn permissions_action(reason: Option<&str>, permissions: Value) -> Value {
    json!({"type": "requestPermissions", "reason": reason, "permissions": permissions})
}

pub(super) fn started(target: &ReviewTarget) -> Value {
    shapes::notification(
        "item/autoApprovalReview/started",
        json!({
            "threadId": target.thread_id, "turnId": target.turn_id, "reviewId": target.review_id,
            "targetItemId": target.item_id, "startedAtMs": target.started, "action": target.action,
            "review": {"status": "inProgress", "riskLevel": null, "userAuthorization": null, "rationale": null},
        }),
    )
}

pub(super) fn completed(target: &ReviewTarget, review: &Review, completed_at: u64) -> Value {
    let (risk, authorization) = review.levels();
    shapes::notification(
        "item/autoApprovalReview/completed",
        json!({
            "threadId": target.thread_id, "turnId": target.turn_id, "reviewId": target.review_id,
            "targetItemId": target.item_id, "startedAtMs": target.started,
            "completedAtMs": completed_at, "decisionSource": "agent", "action": target.action,
            "review": {
                "status": if review.allows() { "approved" } else { "denied" },
                "riskLevel": risk, "userAuthorization": authorization, "rationale": review.rationale,
            },
        }),
    )
}

/// The `guardianWarning` Codex sends with every verdict, allowing or denying.
pub(super) fn verdict_warning(thread_id: &str, review: &Review) -> Value {
    let (risk, authorization) = review.levels();
    let verdict = if review.allows() {
        "approved"
    } else {
        "denied"
    };
    shapes::notification(
        "guardianWarning",
        json!({"threadId": thread_id, "message": format!("Automatic approval review {verdict} (risk: {risk}, authorization: {authorization}): {}", review.rationale)}),
    )
}

/// A command item waiting for (or refused by) the reviewer lists its action as the whole shell
/// command line, as Codex 0.169 does (measured); a command that ran lists the model's command.
pub(super) fn with_display_action(mut item: Value, cmd: &str) -> Value {
    item["commandActions"] = json!([{"type": "unknown", "command": shapes::shell_display(cmd)}]);
    item
}

/// What the model gets back from a denied escalation: Codex 0.169's denial text around the
/// reviewer's rationale (recorded from the real Codex), as a rejection
/// ([`crate::model_log_writer::rejected_output`]).
pub(super) fn denied_output(review: &Review) -> String {
    crate::model_log_writer::rejected_output(&denial(review))
}

/// Codex 0.169's denial text around the reviewer's rationale: what the model gets back, as is,
/// from a denied patch (measured); a command's comes wrapped ([`denied_output`]).
pub(super) fn denial(review: &Review) -> String {
    format!(
        "This action was rejected due to unacceptable risk.\nReason: {}\nThe agent must not attempt to achieve the same outcome via workaround, indirect execution, or policy circumvention. Proceed only with a materially safer alternative, or if the user explicitly approves the action after being informed of the risk. Otherwise, stop and request user input.",
        review.rationale
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The text the real Codex 0.169 told the model for an unscripted (denied) review, from a
    /// recorded model log.
    #[test]
    fn a_denial_reads_as_the_real_codex_writes_it() {
        let recorded = r#"exec_command failed: CreateProcess { message: "Rejected(\"This action was rejected due to unacceptable risk.\\nReason: No review was scripted for this escalation; denied.\\nThe agent must not attempt to achieve the same outcome via workaround, indirect execution, or policy circumvention. Proceed only with a materially safer alternative, or if the user explicitly approves the action after being informed of the risk. Otherwise, stop and request user input.\")" }"#;
        assert_eq!(denied_output(&Review::unscripted()), recorded);
    }
}
