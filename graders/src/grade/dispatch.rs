//! Which grader judges a `(suite, case)`: one row per case, in one table ([`GRADERS`]), from
//! which the list of the cases this crate grades ([`super::CASES`]) is read.

use super::{
    ask_question, escalated_write, launch_identity, launch_policy, legal_line_bytes,
    message_marker, plan_revise_accept, plan_write_refused, protocol, runner_contract,
    startup_rejection, transport_faults, unknown_case, GradeError, Grader, UNKNOWN_SERVER_REQUEST,
};
use crate::events::{Capability, Ending, Mode};
use escalated_write::{Conforming, EscalatedWrite};
use launch_policy::LaunchPolicy;
use protocol as P;
use runner_contract as R;
use startup_rejection::StartupRejection;
use transport_faults::TransportFault;

/// A suite, one of its cases, and how to build the case's grader.
type Row = (&'static str, &'static str, fn() -> Box<dyn Grader>);

/// Every `(suite, case)` this crate grades, a suite's cases together (the order the errors list
/// them in).
pub(super) const GRADERS: &[Row] = &[
    (
        "codex-planning-read-only",
        "plan-write-refused",
        plan_write_refused,
    ),
    (
        "codex-planning-read-only",
        "plan-write-refused-no-network",
        plan_write_refused,
    ),
    (
        "codex-planning-read-only",
        "escalated-write-refused",
        || Box::new(EscalatedWrite::new(Conforming::Refusal)),
    ),
    (
        "codex-planning-read-only",
        "escalated-write-allowed",
        || Box::new(EscalatedWrite::new(Conforming::AllowedWrite)),
    ),
    ("core-compatibility", "message-marker", || {
        Box::<message_marker::MessageMarker>::default()
    }),
    ("core-compatibility", "plan-revise-accept", || {
        Box::<plan_revise_accept::PlanReviseAccept>::default()
    }),
    ("core-compatibility", "ask-question", || {
        Box::<ask_question::AskQuestion>::default()
    }),
    ("external-sandbox-launch", "standard-launch", || {
        Box::new(LaunchPolicy::new(Mode::Standard))
    }),
    ("external-sandbox-launch", "ask-launch", || {
        Box::new(LaunchPolicy::new(Mode::Ask))
    }),
    ("external-sandbox-launch", "planning-launch", || {
        Box::new(LaunchPolicy::new(Mode::Planning))
    }),
    ("startup-rejection", "deterministic-rejection", || {
        Box::new(StartupRejection::deterministic())
    }),
    ("startup-rejection", "transient-startup-failure", || {
        Box::new(StartupRejection::transient())
    }),
    ("transport-faults", "crash-mid-turn", transport_lost),
    ("transport-faults", "hang", || {
        Box::new(TransportFault::new(Ending::TimedOut))
    }),
    ("transport-faults", "garbage-line", transport_lost),
    ("transport-faults", "oversized-line", transport_lost),
    ("launch-identity", "resume-after-profile-change", || {
        Box::<launch_identity::LaunchIdentity>::default()
    }),
    ("protocol-server-requests", "command-approval", || {
        server_request("item/commandExecution/requestApproval")
    }),
    ("protocol-server-requests", "file-change-approval", || {
        server_request("item/fileChange/requestApproval")
    }),
    ("protocol-server-requests", "permissions-approval", || {
        server_request("item/permissions/requestApproval")
    }),
    ("protocol-server-requests", "user-input", || {
        server_request("item/tool/requestUserInput")
    }),
    ("protocol-server-requests", "dynamic-tool-call", || {
        Box::new(P::ServerRequestAnswer::new(
            "item/tool/call",
            &[Capability::DynamicTools],
        ))
    }),
    ("protocol-server-requests", "mcp-elicitation", || {
        server_request("mcpServer/elicitation/request")
    }),
    ("protocol-server-requests", "auth-token-refresh", || {
        Box::new(P::ServerRequestAnswer::new(
            "account/chatgptAuthTokens/refresh",
            &[Capability::ChatgptTokens],
        ))
    }),
    ("protocol-server-requests", "attestation", || {
        server_request("attestation/generate")
    }),
    ("protocol-server-requests", "current-time", || {
        server_request("currentTime/read")
    }),
    (
        "protocol-server-requests",
        "legacy-apply-patch-approval",
        || server_request("applyPatchApproval"),
    ),
    (
        "protocol-server-requests",
        "legacy-exec-command-approval",
        || server_request("execCommandApproval"),
    ),
    ("protocol-server-requests", "unknown-request", || {
        Box::new(P::ServerRequestAnswer::unknown(UNKNOWN_SERVER_REQUEST))
    }),
    (
        "protocol-safe-default",
        "command-escalation-refused",
        || Box::new(P::SafeDefault::new("item/commandExecution/requestApproval")),
    ),
    ("protocol-safe-default", "file-change-refused", || {
        Box::new(P::SafeDefault::new("item/fileChange/requestApproval"))
    }),
    ("protocol-turn-outcomes", "retryable-error", || {
        Box::new(P::TurnOutcome::new(P::TurnOutcomeCase::RetryableError))
    }),
    ("protocol-turn-outcomes", "failed-turn", || {
        Box::new(P::TurnOutcome::new(P::TurnOutcomeCase::FailedTurn))
    }),
    ("protocol-turn-outcomes", "interrupted-turn", || {
        Box::new(P::TurnOutcome::new(P::TurnOutcomeCase::InterruptedTurn))
    }),
    ("protocol-turn-outcomes", "failed-turn-no-error", || {
        Box::new(P::TurnOutcome::new(P::TurnOutcomeCase::FailedTurnNoError))
    }),
    ("protocol-binding", "foreign-thread-events", || {
        Box::new(P::Binding::new(P::BindingCase::ForeignThreadEvents))
    }),
    ("protocol-binding", "foreign-turn-events", || {
        Box::new(P::Binding::new(P::BindingCase::ForeignTurnEvents))
    }),
    ("protocol-binding", "events-before-answer", || {
        Box::new(P::Binding::new(P::BindingCase::EventsBeforeAnswer))
    }),
    ("protocol-binding", "post-turn-events", || {
        Box::new(P::Binding::new(P::BindingCase::PostTurnEvents))
    }),
    ("protocol-binding", "server-started-turn", || {
        Box::new(P::Binding::new(P::BindingCase::ServerStartedTurn))
    }),
    ("protocol-binding", "stale-request-after-turn", || {
        Box::new(P::Binding::new(P::BindingCase::StaleRequestAfterTurn))
    }),
    ("protocol-forward-compat", "every-notification", || {
        Box::new(P::ForwardCompat::new(
            P::ForwardCompatCase::EveryNotification,
        ))
    }),
    ("protocol-forward-compat", "unknown-notification", || {
        Box::new(P::ForwardCompat::new(
            P::ForwardCompatCase::UnknownNotification,
        ))
    }),
    ("protocol-forward-compat", "unknown-item-type", || {
        Box::new(P::ForwardCompat::new(P::ForwardCompatCase::UnknownItemType))
    }),
    ("protocol-forward-compat", "unknown-enum-values", || {
        Box::new(P::ForwardCompat::new(
            P::ForwardCompatCase::UnknownEnumValues,
        ))
    }),
    ("protocol-forward-compat", "unknown-fields", || {
        Box::new(P::ForwardCompat::new(P::ForwardCompatCase::UnknownFields))
    }),
    ("protocol-size", "line-64k", || line_size("line-64k")),
    ("protocol-size", "line-1m", || line_size("line-1m")),
    ("protocol-size", "line-2m", || line_size("line-2m")),
    ("protocol-size", "delta-burst", || {
        Box::new(P::Size::new(P::SizeCase::DeltaBurst))
    }),
    ("protocol-size", "stderr-flood", || {
        Box::new(P::Size::new(P::SizeCase::StderrFlood))
    }),
    ("protocol-control", "interrupt", || {
        Box::new(P::Interrupt::new())
    }),
    ("protocol-control", "steer", || Box::new(P::Steer::new())),
    ("protocol-control", "initialize-error", || {
        Box::new(P::ClassifiedFailure::new(P::FailureCase::InitializeError))
    }),
    ("protocol-control", "turn-start-error", || {
        Box::new(P::ClassifiedFailure::new(P::FailureCase::TurnStartError))
    }),
    ("protocol-control", "resume-error", || {
        Box::new(P::ClassifiedFailure::new(P::FailureCase::ResumeError))
    }),
    ("protocol-control", "no-answer", || {
        Box::new(P::ClassifiedFailure::new(P::FailureCase::NoAnswer))
    }),
    ("protocol-control", "crash-resume", || {
        Box::new(P::CrashResume::new())
    }),
    ("protocol-handshake", "handshake", || {
        Box::new(P::Handshake::new())
    }),
    ("protocol-credentials", "secrets-not-forwarded", || {
        Box::new(P::SecretsNotForwarded::new())
    }),
    ("protocol-task-binding", "workspace-cwd", || {
        Box::new(P::TaskBinding::new(P::Choice::Workspace))
    }),
    ("protocol-task-binding", "mode-planning", || {
        Box::new(P::TaskBinding::new(P::Choice::Mode(Mode::Planning)))
    }),
    ("protocol-task-binding", "mode-standard", || {
        Box::new(P::TaskBinding::new(P::Choice::Mode(Mode::Standard)))
    }),
    ("protocol-task-binding", "mode-ask", || {
        Box::new(P::TaskBinding::new(P::Choice::Mode(Mode::Ask)))
    }),
    ("protocol-task-binding", "approvals-never", approvals_bound),
    (
        "protocol-task-binding",
        "approvals-auto-review",
        approvals_bound,
    ),
    ("protocol-task-binding", "approvals-user", approvals_bound),
    ("protocol-task-binding", "model", || {
        Box::new(P::TaskBinding::new(P::Choice::Model))
    }),
    ("skills", "explicit-skill", || {
        Box::new(R::Skills::new(R::SkillsCase::Explicit))
    }),
    ("skills", "skillless", || {
        Box::new(R::Skills::new(R::SkillsCase::Skillless))
    }),
    ("unsafe-workspaces", "workspace-root", unsafe_workspace),
    (
        "unsafe-workspaces",
        "workspace-contains-home",
        unsafe_workspace,
    ),
    (
        "unsafe-workspaces",
        "workspace-in-codex-home",
        unsafe_workspace,
    ),
    ("app-server-environment", "allowlisted-environment", || {
        Box::new(R::AllowlistedEnvironment::new())
    }),
    ("codex-home-isolation", "home-secrets-sealed", || {
        Box::new(R::HomeSecretsSealed::new())
    }),
    ("result-idempotence", "identical-retry-acknowledged", || {
        Box::new(R::IdempotentResult::new())
    }),
    (
        "resume-reconciliation",
        "reconciled-after-crash",
        resume_reconciliation,
    ),
    (
        "resume-reconciliation",
        "saved-turn-missing",
        resume_reconciliation,
    ),
    (
        "resume-reconciliation",
        "other-turn-active",
        resume_reconciliation,
    ),
];

/// The `(suite, case)` pairs of [`GRADERS`], as [`super::CASES`] publishes them.
pub(super) const CASE_NAMES: [(&str, &str); GRADERS.len()] = {
    let mut names = [("", ""); GRADERS.len()];
    let mut row = 0;
    while row < GRADERS.len() {
        names[row] = (GRADERS[row].0, GRADERS[row].1);
        row += 1;
    }
    names
};

/// The grader of `suite`'s `case`, or which of the two is unknown.
pub(super) fn grader_for(suite: &str, case: &str) -> Result<Box<dyn Grader>, GradeError> {
    GRADERS
        .iter()
        .find(|(s, c, _)| *s == suite && *c == case)
        .map(|(_, _, grader)| grader())
        .ok_or_else(|| unknown_case(suite, case))
}

/// `codex-planning-read-only`: a write refused under the planning profile.
fn plan_write_refused() -> Box<dyn Grader> {
    Box::<plan_write_refused::PlanWriteRefused>::default()
}

/// `transport-faults`: the driver ends with its transport lost.
fn transport_lost() -> Box<dyn Grader> {
    Box::new(TransportFault::new(Ending::TransportLost))
}

/// `protocol-task-binding`: the task's approvals reach the driver's requests.
fn approvals_bound() -> Box<dyn Grader> {
    Box::new(P::TaskBinding::new(P::Choice::Approvals))
}

/// `unsafe-workspaces`: a workspace the driver must refuse.
fn unsafe_workspace() -> Box<dyn Grader> {
    Box::new(R::UnsafeWorkspace::new())
}

/// `resume-reconciliation`: what the driver reconciles after a crash.
fn resume_reconciliation() -> Box<dyn Grader> {
    Box::new(R::ResumeReconciliation::new())
}

/// `protocol-server-requests`: a request the driver answers whatever it declared.
fn server_request(method: &'static str) -> Box<dyn Grader> {
    Box::new(P::ServerRequestAnswer::new(method, &[]))
}

/// `protocol-size`: a legal line of the case's size.
fn line_size(case: &str) -> Box<dyn Grader> {
    Box::new(P::Size::new(P::SizeCase::Line(
        legal_line_bytes("protocol-size", case).unwrap_or_default(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pair found twice would hide its second grader; a suite's rows apart would list the suite
    /// twice in the unknown-suite error.
    #[test]
    fn each_pair_is_one_row_and_a_suites_rows_stand_together() {
        let mut seen_suites: Vec<&str> = Vec::new();
        for (row, (suite, case, _)) in GRADERS.iter().enumerate() {
            let first = GRADERS.iter().position(|(s, c, _)| s == suite && c == case);
            assert_eq!(first, Some(row), "{suite}/{case} has two rows");
            if seen_suites.last() != Some(suite) {
                assert!(!seen_suites.contains(suite), "{suite}'s rows are apart");
                seen_suites.push(suite);
            }
        }
        assert_eq!(CASE_NAMES.len(), GRADERS.len());
    }
}
