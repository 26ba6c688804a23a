//! The reference driver told what the protocol-control cases need, as the matrix tells it: a
//! SIGINT interrupts its running turn, a line on its stdin steers it, and a task that asks for
//! it (`resume_on_crash`) recovers after the app-server dies — each run as `harness drive`
//! through the wire tap against the fake's builtin and graded from the wire.

use crate::common;

use common::tapped::{self, Deliver};
use driver::task::Task;
use graders::events::{Body, Mode};
use graders::verdict::VerdictKind;

fn task(prompt: &str) -> Task {
    Task::new(Mode::Standard, prompt)
}

fn recovering(prompt: &str) -> Task {
    let mut task = task(prompt);
    task.resume_on_crash = true;
    task
}

#[tokio::test]
async fn sigint_sends_turn_interrupt_with_the_live_ids_keeps_the_session_and_ends_interrupted() {
    let run = tapped::run(
        "builtin:interrupt",
        task("Run the long job."),
        Deliver::Sigint,
    )
    .await;
    run.assert_verdict("protocol-control", "interrupt", VerdictKind::Pass);
    assert_eq!(
        run.exit_code,
        Some(1),
        "an interrupted run is not a success"
    );
    assert!(
        run.driver_events.contains("\"error_code\":\"interrupted\""),
        "{}",
        run.driver_events
    );
    assert_eq!(
        run.requests("turn/interrupt").len(),
        1,
        "one interrupt, as a request"
    );
}

#[tokio::test]
async fn a_stdin_line_becomes_turn_steer_with_the_expected_turn_id() {
    let line = "Also mention the changelog.";
    let run = tapped::run(
        "builtin:steer",
        task("Run the long job."),
        Deliver::StdinLine(line.into()),
    )
    .await;
    run.assert_verdict("protocol-control", "steer", VerdictKind::Pass);
    assert_eq!(run.exit_code, Some(0), "a steered turn completes");
    let steers = run.requests("turn/steer");
    assert_eq!(steers.len(), 1);
    assert_eq!(steers[0]["params"]["input"][0]["text"], line);
    let turn_id = run
        .events
        .iter()
        .find_map(|e| match &e.body {
            Body::TurnStarted(t) => Some(t.turn_id.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(steers[0]["params"]["expectedTurnId"], turn_id.as_str());
}

#[tokio::test]
async fn after_a_crash_the_driver_reads_resumes_the_exact_thread_reads_again_and_goes_on() {
    let run = tapped::run(
        "builtin:crash-resume",
        recovering("Summarise the README."),
        Deliver::Nothing,
    )
    .await;
    run.assert_verdict("protocol-control", "crash-resume", VerdictKind::Pass);
    assert_eq!(run.exit_code, Some(0));
    let methods: Vec<String> = run
        .sent()
        .iter()
        .filter(|m| m.get("id").is_some())
        .filter_map(|m| m["method"].as_str().map(String::from))
        .collect();
    let after_crash: Vec<&str> = methods
        .iter()
        .skip_while(|m| *m != "turn/start")
        .skip(1)
        .map(String::as_str)
        .collect();
    assert_eq!(
        after_crash,
        [
            "initialize",
            "thread/read",
            "thread/resume",
            "thread/read",
            "turn/start"
        ],
        "{methods:?}"
    );
    assert!(
        !run.events
            .iter()
            .any(|e| matches!(&e.body, Body::Diagnostic(d) if d.message.starts_with("finding"))),
        "the driver's own account agrees with the wire"
    );
}

#[tokio::test]
async fn a_resume_refused_or_landing_on_another_thread_fails_recovery() {
    for (scenario, code) in [
        ("builtin:resume-error", "provider_resume_rejected"),
        ("builtin:crash-resume-forked", "recovery_failed"),
    ] {
        let run = tapped::run(
            scenario,
            recovering("Summarise the README."),
            Deliver::Nothing,
        )
        .await;
        let verdict = run.grade(
            "protocol-control",
            if scenario.ends_with("forked") {
                "crash-resume"
            } else {
                "resume-error"
            },
        );
        assert_eq!(
            verdict.verdict,
            VerdictKind::Pass,
            "{scenario}: {}",
            verdict.reason
        );
        assert_eq!(run.exit_code, Some(1), "{scenario}");
        assert!(
            run.driver_events
                .contains(&format!("\"error_code\":\"{code}\"")),
            "{scenario}: {}",
            run.driver_events
        );
        assert!(
            !run.sent()
                .iter()
                .skip_while(|m| m["method"] != "thread/resume")
                .any(|m| m["method"] == "turn/start"),
            "{scenario}: no turn after a failed recovery"
        );
    }
}

#[tokio::test]
async fn without_resume_on_crash_a_crash_still_ends_the_run_transport_lost() {
    let run = tapped::run(
        "builtin:crash-resume",
        task("Summarise the README."),
        Deliver::Nothing,
    )
    .await;
    assert_eq!(run.exit_code, Some(1));
    assert!(
        run.driver_events.contains("\"ending\":\"transport-lost\""),
        "{}",
        run.driver_events
    );
    assert!(!run.sent().iter().any(|m| m["method"] == "thread/resume"));
}
