//! Event streams → verdicts for the suites other than the planning write probe.

use crate::support::*;
use graders::events::{Body, Declarations, Ending, Mode, Outcome, ProtocolSetup};
use graders::verdict::VerdictKind::{self, *};
use rstest::rstest;

const PERM: Option<&str> = Some("runner-read-only");

fn session(mode: Mode, collab: Option<&str>, input: &str) -> Stream {
    Stream::new()
        .driver(run_started(mode, PERM))
        .driver(session_open(PERM))
        .driver(session_started("thread-1"))
        .driver(turn_submitted(0, PERM, collab, input))
}

// --- core-compatibility / message-marker

fn marker_echoed() -> Stream {
    session(
        Mode::Standard,
        None,
        "Reply with MARKER-7f3a2 and nothing else.",
    )
    .driver(agent_message("MARKER-7f3a2"))
    .harness(succeeded())
}

fn marker_missing() -> Stream {
    session(
        Mode::Standard,
        None,
        "Reply with MARKER-7f3a2 and nothing else.",
    )
    .driver(agent_message("MARKER-7f3a"))
    .harness(succeeded())
}

fn marker_not_in_prompt() -> Stream {
    session(Mode::Standard, None, "Say hello.")
        .driver(agent_message("hello"))
        .harness(succeeded())
}

fn marker_echoed_but_run_failed() -> Stream {
    session(Mode::Standard, None, "Reply with MARKER-7f3a2.")
        .driver(agent_message("MARKER-7f3a2"))
        .harness(ended(
            Ending::TransportLost,
            true,
            None,
            Some("app-server exited"),
        ))
}

// --- core-compatibility / plan-revise-accept

fn plan_revise_accept(skip_revise: bool, outcome: Outcome) -> Stream {
    let mut s = session(Mode::Planning, Some("plan"), "Plan the change.")
        .driver(plan_item("# Plan A"))
        .driver(plan_approval("plan-1"));
    if !skip_revise {
        s = s
            .driver(decision("plan-1", "revise"))
            .driver(turn_submitted(1, PERM, Some("plan"), "Also cover tests."))
            .driver(plan_item("# Plan B"))
            .driver(plan_approval("plan-2"));
    }
    s.driver(decision(
        if skip_revise { "plan-1" } else { "plan-2" },
        "accept",
    ))
    .driver(result(outcome, None, None))
    .harness(succeeded())
}

fn revise_on_a_command_approval() -> Stream {
    // A `revise`/`accept` for something that is not a plan approval must not count.
    session(Mode::Planning, Some("plan"), "Plan the change.")
        .driver(plan_item("# Plan A"))
        .driver(decision("cmd-0", "revise"))
        .driver(plan_item("# Plan B"))
        .driver(decision("cmd-1", "accept"))
        .driver(result(Outcome::Done, None, None))
        .harness(succeeded())
}

// --- core-compatibility / ask-question

fn ask(outcome: Outcome, owner: Option<&str>, action: Option<&str>, probe: bool) -> Stream {
    session(Mode::Ask, None, "Which database should I use?")
        .driver(result(outcome, owner, action))
        .harness(workspace(if probe {
            &[("plan-write-probe-1.txt", true)]
        } else {
            &[]
        }))
        .harness(succeeded())
}

// --- external-sandbox-launch

fn launch_run(mode: Mode, turn_perm: Option<&str>, collab: Option<&str>) -> Stream {
    Stream::new()
        .driver(run_started(mode, PERM))
        .driver(session_open(PERM))
        .driver(session_started("thread-1"))
        .driver(turn_submitted(0, turn_perm, collab, "go"))
        .harness(succeeded())
}

fn planning_with_write_profile() -> Stream {
    let mut launch = launch(Mode::Planning, PERM);
    launch.argv[3] = r#"permissions.runner-read-only={filesystem={":root"="read",":workspace_roots"={"."="write"}}}"#.into();
    Stream::new()
        .driver(graders::events::Body::RunStarted(
            graders::events::RunStarted {
                cell: graders::events::CellId::new(
                    "external-sandbox-launch",
                    "runner-fake",
                    "daytona",
                    "planning-launch",
                ),
                driver: "reference".into(),
                launch,
                protocol: None,
            },
        ))
        .driver(session_open(PERM))
        .driver(session_started("thread-1"))
        .driver(turn_submitted(0, PERM, Some("plan"), "go"))
        .harness(succeeded())
}

// --- startup-rejection

const REJECTION: &str = "error creating thread: failed to load AGENTS.md instructions for environment `local`: fs sandbox helper failed with status exit status: 1: bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted";

fn rejected(attempts: u32, ending: Ending, retry: bool, code: Option<&str>) -> Stream {
    let mut s = Stream::new().driver(run_started(Mode::Planning, PERM));
    for attempt in 1..=attempts {
        s = s
            .driver(session_open(PERM))
            .driver(session_rejected(REJECTION, attempt));
    }
    s.harness(ended(ending, retry, code, Some("thread/start rejected")))
}

// --- transport-faults

fn fault(ending: Ending, reason: Option<&str>) -> Stream {
    session(Mode::Standard, None, "go").harness(ended(ending, true, None, reason))
}

#[rstest]
#[case::marker_echoed(
    "core-compatibility",
    "message-marker",
    "echoed",
    marker_echoed(),
    Pass
)]
#[case::marker_missing(
    "core-compatibility",
    "message-marker",
    "missing",
    marker_missing(),
    Fail
)]
#[case::marker_not_in_prompt(
    "core-compatibility",
    "message-marker",
    "not-in-prompt",
    marker_not_in_prompt(),
    Incomplete
)]
#[case::marker_run_failed(
    "core-compatibility",
    "message-marker",
    "run-failed",
    marker_echoed_but_run_failed(),
    Fail
)]
#[case::pra_pass(
    "core-compatibility",
    "plan-revise-accept",
    "revised-then-accepted",
    plan_revise_accept(false, Outcome::Done),
    Pass
)]
#[case::pra_no_revise(
    "core-compatibility",
    "plan-revise-accept",
    "accepted-without-revise",
    plan_revise_accept(true, Outcome::Done),
    Fail
)]
#[case::pra_not_done(
    "core-compatibility",
    "plan-revise-accept",
    "result-blocked",
    plan_revise_accept(false, Outcome::Blocked),
    Fail
)]
#[case::pra_not_plan_approval(
    "core-compatibility",
    "plan-revise-accept",
    "decisions-not-for-plans",
    revise_on_a_command_approval(),
    Fail
)]
#[case::ask_blocked(
    "core-compatibility",
    "ask-question",
    "blocked-with-owner",
    ask(Outcome::Blocked, Some("user"), Some("choose a database"), false),
    Pass
)]
#[case::ask_review(
    "core-compatibility",
    "ask-question",
    "needs-review-with-owner",
    ask(Outcome::NeedsReview, Some("reviewer"), Some("review the plan"), false),
    Pass
)]
#[case::ask_no_owner(
    "core-compatibility",
    "ask-question",
    "blocked-without-owner",
    ask(Outcome::Blocked, None, Some("choose"), false),
    Fail
)]
#[case::ask_done(
    "core-compatibility",
    "ask-question",
    "done",
    ask(Outcome::Done, Some("user"), Some("x"), false),
    Fail
)]
#[case::ask_wrote(
    "core-compatibility",
    "ask-question",
    "wrote-probe",
    ask(Outcome::Blocked, Some("user"), Some("choose"), true),
    Fail
)]
#[case::standard_ok(
    "external-sandbox-launch",
    "standard-launch",
    "stable",
    launch_run(Mode::Standard, PERM, None),
    Pass
)]
#[case::ask_ok(
    "external-sandbox-launch",
    "ask-launch",
    "stable",
    launch_run(Mode::Ask, PERM, None),
    Pass
)]
#[case::planning_ok(
    "external-sandbox-launch",
    "planning-launch",
    "stable",
    launch_run(Mode::Planning, PERM, Some("plan")),
    Pass
)]
#[case::turn_perm_changed(
    "external-sandbox-launch",
    "standard-launch",
    "turn-permissions-differ",
    launch_run(Mode::Standard, Some("runner-workspace"), None),
    Fail
)]
#[case::plan_mode_on_standard(
    "external-sandbox-launch",
    "standard-launch",
    "plan-mode-on-standard",
    launch_run(Mode::Standard, PERM, Some("plan")),
    Fail
)]
#[case::planning_without_plan_mode(
    "external-sandbox-launch",
    "planning-launch",
    "no-plan-mode",
    launch_run(Mode::Planning, PERM, None),
    Fail
)]
#[case::wrong_mode(
    "external-sandbox-launch",
    "planning-launch",
    "wrong-mode",
    launch_run(Mode::Standard, PERM, None),
    Fail
)]
#[case::planning_write_profile(
    "external-sandbox-launch",
    "planning-launch",
    "write-profile",
    planning_with_write_profile(),
    Fail
)]
#[case::det_ok(
    "startup-rejection",
    "deterministic-rejection",
    "failed-permanently",
    rejected(1, Ending::FailedPermanently, true, Some("provider_startup_rejected")),
    Pass
)]
#[case::det_retried(
    "startup-rejection",
    "deterministic-rejection",
    "retried",
    rejected(2, Ending::FailedPermanently, true, Some("provider_startup_rejected")),
    Fail
)]
#[case::det_no_retry_offer(
    "startup-rejection",
    "deterministic-rejection",
    "no-retry-offered",
    rejected(1, Ending::FailedPermanently, false, Some("provider_startup_rejected")),
    Fail
)]
#[case::det_hold(
    "startup-rejection",
    "deterministic-rejection",
    "timed-out-hold",
    rejected(1, Ending::TimedOut, true, None),
    Fail
)]
#[case::det_code(
    "startup-rejection",
    "deterministic-rejection",
    "wrong-error-code",
    rejected(1, Ending::FailedPermanently, true, Some("internal")),
    Fail
)]
#[case::tr_ok(
    "startup-rejection",
    "transient-startup-failure",
    "retries-exhausted",
    rejected(3, Ending::RetriesExhausted, true, Some("retry_exhausted")),
    Pass
)]
#[case::tr_loop(
    "startup-rejection",
    "transient-startup-failure",
    "retry-loop",
    rejected(9, Ending::RetriesExhausted, true, None),
    Fail
)]
#[case::tr_no_retry(
    "startup-rejection",
    "transient-startup-failure",
    "never-retried",
    rejected(1, Ending::RetriesExhausted, true, None),
    Fail
)]
#[case::crash_ok(
    "transport-faults",
    "crash-mid-turn",
    "transport-lost",
    fault(Ending::TransportLost, Some("app-server exited with signal 9")),
    Pass
)]
#[case::crash_succeeded(
    "transport-faults",
    "crash-mid-turn",
    "says-succeeded",
    fault(Ending::Succeeded, None),
    Fail
)]
#[case::crash_no_reason(
    "transport-faults",
    "garbage-line",
    "no-reason",
    fault(Ending::TransportLost, Some(" ")),
    Fail
)]
#[case::hang_ok(
    "transport-faults",
    "hang",
    "timed-out",
    fault(Ending::TimedOut, Some("no turn/completed within 30s")),
    Pass
)]
#[case::hang_wrong(
    "transport-faults",
    "hang",
    "transport-lost",
    fault(Ending::TransportLost, Some("closed")),
    Fail
)]
#[case::oversized_ok(
    "transport-faults",
    "oversized-line",
    "transport-lost",
    fault(Ending::TransportLost, Some("line over 16 MiB")),
    Pass
)]
fn verdicts(
    #[case] suite: &str,
    #[case] case: &str,
    #[case] name: &str,
    #[case] stream: Stream,
    #[case] expected: VerdictKind,
) {
    let verdict = grade_both(suite, case, &stream);
    assert_eq!(
        verdict.verdict, expected,
        "{suite}/{case}/{name}: {}",
        verdict.reason
    );
    assert!(!verdict.evidence.is_empty());
    insta::assert_json_snapshot!(format!("{case}.{name}"), verdict);
}

#[test]
fn a_never_opened_session_is_startup_rejected_for_core_cases() {
    let s = Stream::new()
        .driver(run_started(Mode::Standard, PERM))
        .driver(session_open(PERM))
        .driver(session_rejected(REJECTION, 1))
        .harness(ended(
            Ending::FailedPermanently,
            true,
            Some("provider_startup_rejected"),
            None,
        ));
    for case in ["message-marker", "plan-revise-accept", "ask-question"] {
        let v = grade_both("core-compatibility", case, &s);
        assert_eq!(v.verdict, StartupRejected, "{case}");
        assert!(v.reason.contains("RTM_NEWADDR"));
    }
}

#[test]
fn every_case_grades_an_invalid_stream_incomplete() {
    let truncated = marker_echoed().jsonl();
    let truncated = &truncated[..truncated.len() - 5];
    for (suite, case) in graders::grade::CASES {
        let v = graders::grade::grade_reader(suite, case, truncated.as_bytes()).unwrap();
        assert_eq!(v.verdict, Incomplete, "{suite}/{case}");
    }
}

/// The stream's `run.started` with a protocol record: a driver graded from the wire (writing no
/// run events of its own), or one that also writes its own.
fn with_protocol_record(stream: Stream, own_events: bool) -> Stream {
    let mut stream = stream;
    for event in &mut stream.events {
        if let Body::RunStarted(run) = &mut event.body {
            run.protocol = Some(ProtocolSetup {
                declarations: Declarations {
                    own_events,
                    ..Declarations::default()
                },
                ..ProtocolSetup::default()
            });
        }
    }
    stream
}

/// A Retry offer is nothing a driver can say on the wire: a wire driver that ends at once as a
/// permanent provider rejection passes without one (the old rule failed it `retry-offered`),
/// while a driver that writes its own events must still offer it, and every other check holds.
#[rstest]
#[case::wire_no_offer("deterministic-rejection", 1, Ending::FailedPermanently, false, Pass)]
#[case::own_events_no_offer("deterministic-rejection", 1, Ending::FailedPermanently, true, Fail)]
#[case::wire_exhausted("transient-startup-failure", 3, Ending::RetriesExhausted, false, Pass)]
#[case::wire_retried_a_permanent_one(
    "deterministic-rejection",
    2,
    Ending::FailedPermanently,
    false,
    Fail
)]
fn a_retry_offer_is_asked_only_where_the_stream_can_show_one(
    #[case] case: &str,
    #[case] attempts: u32,
    #[case] ending: Ending,
    #[case] own_events: bool,
    #[case] expected: VerdictKind,
) {
    let code = if attempts == 1 {
        "provider_startup_rejected"
    } else {
        "retry_exhausted"
    };
    let stream = with_protocol_record(rejected(attempts, ending, false, Some(code)), own_events);
    let verdict = grade_both("startup-rejection", case, &stream);
    assert_eq!(verdict.verdict, expected, "{verdict:?}");
    if expected == Pass {
        assert!(
            verdict.reason.contains("the wire cannot show one"),
            "{}",
            verdict.reason
        );
    }
}

/// The real Codex refuses a start on its own only where its fs helper cannot run (the legacy
/// planning profile in daytona): a driver whose start it accepted had no rejection to handle,
/// and its run is held to what follows an accepted start (the old rule failed it
/// `session-never-opens`). A session after a rejection is still a retry.
#[test]
fn an_accepted_start_is_held_to_the_run_it_gets() {
    let accepted = |end: Body| {
        Stream::new()
            .driver(run_started(Mode::Planning, None))
            .driver(session_open(None))
            .driver(session_started("thread-1"))
            .harness(end)
    };
    let verdict = grade_both(
        "startup-rejection",
        "deterministic-rejection",
        &accepted(succeeded()),
    );
    assert_eq!(verdict.verdict, Pass, "{verdict:?}");
    let failed = ended(
        Ending::FailedPermanently,
        false,
        Some("driver_failed"),
        None,
    );
    let verdict = grade_both(
        "startup-rejection",
        "deterministic-rejection",
        &accepted(failed),
    );
    assert_eq!(verdict.verdict, Fail, "{verdict:?}");
    let after_rejection = Stream::new()
        .driver(run_started(Mode::Planning, PERM))
        .driver(session_open(PERM))
        .driver(session_rejected(REJECTION, 1))
        .driver(session_open(PERM))
        .driver(session_started("thread-1"))
        .harness(succeeded());
    let verdict = grade_both(
        "startup-rejection",
        "deterministic-rejection",
        &after_rejection,
    );
    assert_eq!(verdict.verdict, Fail, "{verdict:?}");
    assert!(
        verdict.reason.contains("session-never-opens"),
        "{}",
        verdict.reason
    );
}
