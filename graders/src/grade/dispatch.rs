//! Which grader judges a `(suite, case)`: by the suite's family (the Codex-behaviour and
//! launch suites, the protocol suites, the runner-contract suites), then by case.

use super::{
    ask_question, escalated_write, launch_identity, launch_policy, legal_line_bytes,
    message_marker, plan_revise_accept, plan_write_refused, protocol, runner_contract,
    startup_rejection, transport_faults, unknown_case, GradeError, Grader, UNKNOWN_SERVER_REQUEST,
};
use crate::events::{Ending, Mode};

/// The grader of `suite`'s `case`, or which of the two is unknown.
pub(super) fn grader_for(suite: &str, case: &str) -> Result<Box<dyn Grader>, GradeError> {
    match suite {
        "protocol-server-requests" => protocol_server_request(case),
        _ if suite.starts_with("protocol-") => protocol_grader(suite, case),
        "skills"
        | "unsafe-workspaces"
        | "app-server-environment"
        | "codex-home-isolation"
        | "result-idempotence"
        | "resume-reconciliation" => runner_contract_grader(suite, case),
        _ => codex_behaviour_grader(suite, case),
    }
}

/// The suites of Codex's own behaviour under a driver: sandbox refusals, compatibility, launch
/// policy, startup rejection, transport faults, launch identity.
fn codex_behaviour_grader(suite: &str, case: &str) -> Result<Box<dyn Grader>, GradeError> {
    use launch_policy::LaunchPolicy;
    use startup_rejection::StartupRejection;
    use transport_faults::TransportFault;
    Ok(match (suite, case) {
        ("codex-planning-read-only", "plan-write-refused")
        | ("codex-planning-read-only", "plan-write-refused-no-network") => {
            Box::<plan_write_refused::PlanWriteRefused>::default()
        }
        ("codex-planning-read-only", "escalated-write-refused") => Box::new(
            escalated_write::EscalatedWrite::new(escalated_write::Conforming::Refusal),
        ),
        ("codex-planning-read-only", "escalated-write-allowed") => Box::new(
            escalated_write::EscalatedWrite::new(escalated_write::Conforming::AllowedWrite),
        ),
        ("core-compatibility", "message-marker") => Box::<message_marker::MessageMarker>::default(),
        ("core-compatibility", "plan-revise-accept") => {
            Box::<plan_revise_accept::PlanReviseAccept>::default()
        }
        ("core-compatibility", "ask-question") => Box::<ask_question::AskQuestion>::default(),
        ("external-sandbox-launch", "standard-launch") => {
            Box::new(LaunchPolicy::new(Mode::Standard))
        }
        ("external-sandbox-launch", "ask-launch") => Box::new(LaunchPolicy::new(Mode::Ask)),
        ("external-sandbox-launch", "planning-launch") => {
            Box::new(LaunchPolicy::new(Mode::Planning))
        }
        ("startup-rejection", "deterministic-rejection") => {
            Box::new(StartupRejection::deterministic())
        }
        ("startup-rejection", "transient-startup-failure") => {
            Box::new(StartupRejection::transient())
        }
        ("transport-faults", "hang") => Box::new(TransportFault::new(Ending::TimedOut)),
        ("transport-faults", "crash-mid-turn" | "garbage-line" | "oversized-line") => {
            Box::new(TransportFault::new(Ending::TransportLost))
        }
        ("launch-identity", "resume-after-profile-change") => {
            Box::<launch_identity::LaunchIdentity>::default()
        }
        _ => return Err(unknown_case(suite, case)),
    })
}

/// The protocol suites, but `protocol-server-requests` ([`protocol_server_request`]).
fn protocol_grader(suite: &str, case: &str) -> Result<Box<dyn Grader>, GradeError> {
    use protocol as P;
    Ok(match (suite, case) {
        ("protocol-safe-default", "command-escalation-refused") => {
            Box::new(P::SafeDefault::new("item/commandExecution/requestApproval"))
        }
        ("protocol-safe-default", "file-change-refused") => {
            Box::new(P::SafeDefault::new("item/fileChange/requestApproval"))
        }
        ("protocol-turn-outcomes", "retryable-error") => {
            Box::new(P::TurnOutcome::new(P::TurnOutcomeCase::RetryableError))
        }
        ("protocol-turn-outcomes", "failed-turn") => {
            Box::new(P::TurnOutcome::new(P::TurnOutcomeCase::FailedTurn))
        }
        ("protocol-turn-outcomes", "interrupted-turn") => {
            Box::new(P::TurnOutcome::new(P::TurnOutcomeCase::InterruptedTurn))
        }
        ("protocol-turn-outcomes", "failed-turn-no-error") => {
            Box::new(P::TurnOutcome::new(P::TurnOutcomeCase::FailedTurnNoError))
        }
        ("protocol-binding", "foreign-thread-events") => {
            Box::new(P::Binding::new(P::BindingCase::ForeignThreadEvents))
        }
        ("protocol-binding", "foreign-turn-events") => {
            Box::new(P::Binding::new(P::BindingCase::ForeignTurnEvents))
        }
        ("protocol-binding", "events-before-answer") => {
            Box::new(P::Binding::new(P::BindingCase::EventsBeforeAnswer))
        }
        ("protocol-binding", "post-turn-events") => {
            Box::new(P::Binding::new(P::BindingCase::PostTurnEvents))
        }
        ("protocol-binding", "server-started-turn") => {
            Box::new(P::Binding::new(P::BindingCase::ServerStartedTurn))
        }
        ("protocol-binding", "stale-request-after-turn") => {
            Box::new(P::Binding::new(P::BindingCase::StaleRequestAfterTurn))
        }
        ("protocol-forward-compat", "every-notification") => Box::new(P::ForwardCompat::new(
            P::ForwardCompatCase::EveryNotification,
        )),
        ("protocol-forward-compat", "unknown-notification") => Box::new(P::ForwardCompat::new(
            P::ForwardCompatCase::UnknownNotification,
        )),
        ("protocol-forward-compat", "unknown-item-type") => {
            Box::new(P::ForwardCompat::new(P::ForwardCompatCase::UnknownItemType))
        }
        ("protocol-forward-compat", "unknown-enum-values") => Box::new(P::ForwardCompat::new(
            P::ForwardCompatCase::UnknownEnumValues,
        )),
        ("protocol-forward-compat", "unknown-fields") => {
            Box::new(P::ForwardCompat::new(P::ForwardCompatCase::UnknownFields))
        }
        ("protocol-size", line @ ("line-64k" | "line-1m" | "line-2m")) => Box::new(P::Size::new(
            P::SizeCase::Line(legal_line_bytes(suite, line).unwrap_or_default()),
        )),
        ("protocol-size", "delta-burst") => Box::new(P::Size::new(P::SizeCase::DeltaBurst)),
        ("protocol-size", "stderr-flood") => Box::new(P::Size::new(P::SizeCase::StderrFlood)),
        ("protocol-control", "interrupt") => Box::new(P::Interrupt::new()),
        ("protocol-control", "steer") => Box::new(P::Steer::new()),
        ("protocol-control", "initialize-error") => {
            Box::new(P::ClassifiedFailure::new(P::FailureCase::InitializeError))
        }
        ("protocol-control", "turn-start-error") => {
            Box::new(P::ClassifiedFailure::new(P::FailureCase::TurnStartError))
        }
        ("protocol-control", "resume-error") => {
            Box::new(P::ClassifiedFailure::new(P::FailureCase::ResumeError))
        }
        ("protocol-control", "no-answer") => {
            Box::new(P::ClassifiedFailure::new(P::FailureCase::NoAnswer))
        }
        ("protocol-control", "crash-resume") => Box::new(P::CrashResume::new()),
        ("protocol-handshake", "handshake") => Box::new(P::Handshake::new()),
        ("protocol-credentials", "secrets-not-forwarded") => {
            Box::new(P::SecretsNotForwarded::new())
        }
        ("protocol-task-binding", "workspace-cwd") => {
            Box::new(P::TaskBinding::new(P::Choice::Workspace))
        }
        ("protocol-task-binding", "mode-planning") => {
            Box::new(P::TaskBinding::new(P::Choice::Mode(Mode::Planning)))
        }
        ("protocol-task-binding", "mode-standard") => {
            Box::new(P::TaskBinding::new(P::Choice::Mode(Mode::Standard)))
        }
        ("protocol-task-binding", "mode-ask") => {
            Box::new(P::TaskBinding::new(P::Choice::Mode(Mode::Ask)))
        }
        (
            "protocol-task-binding",
            "approvals-never" | "approvals-auto-review" | "approvals-user",
        ) => Box::new(P::TaskBinding::new(P::Choice::Approvals)),
        ("protocol-task-binding", "model") => Box::new(P::TaskBinding::new(P::Choice::Model)),
        _ => return Err(unknown_case(suite, case)),
    })
}

/// The runner-contract suites.
fn runner_contract_grader(suite: &str, case: &str) -> Result<Box<dyn Grader>, GradeError> {
    use runner_contract as R;
    Ok(match (suite, case) {
        ("skills", "explicit-skill") => Box::new(R::Skills::new(R::SkillsCase::Explicit)),
        ("skills", "skillless") => Box::new(R::Skills::new(R::SkillsCase::Skillless)),
        (
            "unsafe-workspaces",
            "workspace-root" | "workspace-contains-home" | "workspace-in-codex-home",
        ) => Box::new(R::UnsafeWorkspace::new()),
        ("app-server-environment", "allowlisted-environment") => {
            Box::new(R::AllowlistedEnvironment::new())
        }
        ("codex-home-isolation", "home-secrets-sealed") => Box::new(R::HomeSecretsSealed::new()),
        ("result-idempotence", "identical-retry-acknowledged") => {
            Box::new(R::IdempotentResult::new())
        }
        (
            "resume-reconciliation",
            "reconciled-after-crash" | "saved-turn-missing" | "other-turn-active",
        ) => Box::new(R::ResumeReconciliation::new()),
        _ => return Err(unknown_case(suite, case)),
    })
}

/// `protocol-server-requests/<case>`: the server request method each case sends.
fn protocol_server_request(case: &str) -> Result<Box<dyn Grader>, GradeError> {
    use protocol::{Needs, ServerRequestAnswer};
    let method = match case {
        "command-approval" => "item/commandExecution/requestApproval",
        "file-change-approval" => "item/fileChange/requestApproval",
        "permissions-approval" => "item/permissions/requestApproval",
        "user-input" => "item/tool/requestUserInput",
        "dynamic-tool-call" => {
            return Ok(Box::new(ServerRequestAnswer::new(
                "item/tool/call",
                &[Needs::DynamicTools],
            )))
        }
        "mcp-elicitation" => "mcpServer/elicitation/request",
        "auth-token-refresh" => {
            return Ok(Box::new(ServerRequestAnswer::new(
                "account/chatgptAuthTokens/refresh",
                &[Needs::ChatgptTokens],
            )))
        }
        "attestation" => "attestation/generate",
        "current-time" => "currentTime/read",
        "legacy-apply-patch-approval" => "applyPatchApproval",
        "legacy-exec-command-approval" => "execCommandApproval",
        "unknown-request" => {
            return Ok(Box::new(ServerRequestAnswer::unknown(
                UNKNOWN_SERVER_REQUEST,
            )))
        }
        _ => return Err(unknown_case("protocol-server-requests", case)),
    };
    Ok(Box::new(ServerRequestAnswer::new(method, &[])))
}
