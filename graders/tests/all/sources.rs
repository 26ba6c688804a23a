//! Evidence counts only from the writer `docs/events.md` documents for its kind
//! (`Kind::documented_sources`): the driver's view of the session, its turns, items, approvals
//! and result; the model log's tool calls; the harness's workspace evidence and terminal. For
//! each grader outside the planning write probe (whose corpus is adversarial.rs), the genuine
//! stream passes and the same stream with its deciding evidence written by another source does
//! not.

use crate::support::*;
use graders::events::{Body, Mode, Outcome, Source};
use graders::verdict::VerdictKind;
use rstest::rstest;

const PERM: Option<&str> = Some("runner-read-only");

/// A stream whose deciding lines come from `by` (the rest from their documented writers).
fn session_then(
    mode: Mode,
    collab: Option<&str>,
    input: &str,
    by: Source,
    lines: Vec<Body>,
) -> Stream {
    let mut s = Stream::new()
        .driver(run_started(mode, PERM))
        .driver(session_open(PERM))
        .driver(session_started("thread-1"))
        .driver(turn_submitted(0, PERM, collab, input));
    for body in lines {
        s = s.push(by, body);
    }
    s
}

fn marker(by: Source) -> Stream {
    session_then(
        Mode::Standard,
        None,
        "Reply with MARKER-5ea1 and nothing else.",
        by,
        vec![agent_message("MARKER-5ea1")],
    )
    .harness(succeeded())
}

fn plan_revised_and_accepted(by: Source) -> Stream {
    session_then(
        Mode::Planning,
        Some("plan"),
        "Plan the change.",
        by,
        vec![
            plan_item("# Plan A"),
            plan_approval("plan-1"),
            decision("plan-1", "revise"),
            turn_submitted(1, PERM, Some("plan"), "Also cover tests."),
            plan_item("# Plan B"),
            plan_approval("plan-2"),
            decision("plan-2", "accept"),
            result(Outcome::Done, None, None),
        ],
    )
    .harness(succeeded())
}

fn question_blocked(by: Source) -> Stream {
    session_then(
        Mode::Ask,
        None,
        "Which database should I use?",
        by,
        vec![result(
            Outcome::Blocked,
            Some("user"),
            Some("choose a database"),
        )],
    )
    .harness(workspace(&[]))
    .harness(succeeded())
}

fn launched(by: Source) -> Stream {
    let s = Stream::new().push(by, run_started(Mode::Standard, PERM));
    s.driver(session_open(PERM))
        .driver(session_started("thread-1"))
        .driver(turn_submitted(0, PERM, None, "go"))
        .harness(succeeded())
}

#[rstest]
#[case::marker("core-compatibility", "message-marker", marker as fn(Source) -> Stream)]
#[case::plan_revise_accept("core-compatibility", "plan-revise-accept", plan_revised_and_accepted)]
#[case::ask_question("core-compatibility", "ask-question", question_blocked)]
#[case::launch_policy("external-sandbox-launch", "standard-launch", launched)]
fn only_the_documented_writer_counts(
    #[case] suite: &str,
    #[case] case: &str,
    #[case] stream: fn(Source) -> Stream,
) {
    let genuine = grade_both(suite, case, &stream(Source::Driver));
    assert_eq!(
        genuine.verdict,
        VerdictKind::Pass,
        "the control: {genuine:?}"
    );
    for forger in [Source::Model, Source::Harness] {
        let forged = grade_both(suite, case, &stream(forger));
        assert_ne!(
            forged.verdict,
            VerdictKind::Pass,
            "{suite}/{case} passed on evidence written by the {forger:?}: {forged:?}"
        );
    }
}
