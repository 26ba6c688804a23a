//! `protocol-turn-outcomes`, `protocol-binding` and `protocol-control`: a driver's turn is its
//! own, its outcome is its exit status, and it can be interrupted, steered and recovered. Each
//! realistic bug fails a named check.

use crate::support::wire::*;
use graders::events::{Declarations, InterruptSignal, ResumeHow, SteerChannel};
use graders::verdict::VerdictKind::{Fail, Incomplete, Pass};
use serde_json::json;

// --- turn outcomes

#[test]
fn a_failed_turn_reported_as_success_fails_exit_status() {
    for c in ["failed-turn", "interrupted-turn", "failed-turn-no-error"] {
        let verdict = healthy("protocol-turn-outcomes", c).exits(0).grade();
        check(&verdict, Fail, "exit-status");
        if c == "failed-turn" {
            insta::assert_json_snapshot!("turn-outcomes.failed-turn.exit-0", verdict);
        }
    }
}

#[test]
fn an_error_the_server_retries_taken_as_terminal_fails_not_terminal() {
    let verdict = case(
        "protocol-turn-outcomes",
        "retryable-error",
        Transcript::session()
            .recv(
                json!({"method": "error", "params": {"threadId": THREAD, "turnId": TURN,
                "willRetry": true, "error": {"message": "Reconnecting... 1/5"}}}),
            )
            .stdin_closed()
            .complete_turn(THREAD, TURN, "completed")
            .exit(0),
    )
    .exits(1)
    .grade();
    check(&verdict, Fail, "not-terminal");
    insta::assert_json_snapshot!("turn-outcomes.retryable-error.ended-early", verdict);
}

#[test]
fn turn_outcomes_need_the_declared_outcome_and_a_hang_is_no_outcome() {
    let undeclared = healthy("protocol-turn-outcomes", "failed-turn")
        .declaring(Declarations::default())
        .grade();
    assert_eq!(undeclared.verdict, Incomplete, "{undeclared:?}");
    let hung = healthy("protocol-turn-outcomes", "failed-turn")
        .killed_at_bound()
        .grade();
    check(&hung, Fail, "ended-on-its-own");
    let nothing = case(
        "protocol-turn-outcomes",
        "interrupted-turn",
        Transcript::session().finish(),
    )
    .exits(1)
    .grade();
    assert_eq!(
        nothing.verdict, Incomplete,
        "the case's turn ending never came: {nothing:?}"
    );
}

// --- binding

/// A driver that ends its session as its own turn completes never meets the server's turn whole:
/// the case shows nothing, however the race with the server's start of that turn fell.
#[test]
fn a_driver_that_leaves_before_the_servers_turn_completes_is_not_judged() {
    for transcript in [
        Transcript::session()
            .complete_turn(THREAD, TURN, "completed")
            .stdin_closed()
            .exit(0),
        Transcript::session()
            .complete_turn(THREAD, TURN, "completed")
            .turn_started(THREAD, "turn-77")
            .stdin_closed()
            .complete_turn(THREAD, "turn-77", "completed")
            .exit(0),
    ] {
        let verdict = case("protocol-binding", "server-started-turn", transcript).grade();
        assert_eq!(verdict.verdict, Incomplete, "{verdict:?}");
    }
}

/// codex-acp titles its session on an ephemeral thread after its turn, and may end before that
/// turn completes: the case's turn is still the one on its session's thread.
#[test]
fn a_title_turn_on_an_ephemeral_thread_is_not_the_cases_turn() {
    let titled = |t: Transcript| {
        t.complete_turn(THREAD, TURN, "completed")
            .title_thread()
            .close()
    };
    for (c, transcript) in [
        ("foreign-turn-events", titled(foreign(THREAD, "turn-8"))),
        (
            "stale-request-after-turn",
            Transcript::session()
                .complete_turn(THREAD, TURN, "completed")
                .server_request(50, "item/commandExecution/requestApproval")
                .answer(50, json!({"decision": "decline"}))
                .title_thread()
                .close(),
        ),
    ] {
        let verdict = case("protocol-binding", c, transcript).grade();
        assert_eq!(verdict.verdict, Pass, "{c}: {verdict:?}");
    }
    // A turn on the session's thread that never completes is still the driver's own.
    let unfinished = case(
        "protocol-binding",
        "foreign-turn-events",
        foreign(THREAD, "turn-8").title_thread().close(),
    )
    .grade();
    assert_ne!(unfinished.verdict, Pass, "{unfinished:?}");
}

#[test]
fn ending_on_another_threads_turn_completed_fails_own_turn_awaited() {
    let verdict = case(
        "protocol-binding",
        "foreign-thread-events",
        foreign("thr-9", "turn-9")
            .stdin_closed()
            .complete_turn(THREAD, TURN, "completed")
            .exit(0),
    )
    .grade();
    check(&verdict, Fail, "own-turn-awaited");
    insta::assert_json_snapshot!("binding.foreign-thread-events.ended-on-foreign", verdict);
    let next_turn_early = case(
        "protocol-binding",
        "foreign-turn-events",
        foreign(THREAD, "turn-8")
            .request(4, "turn/start", json!({"threadId": THREAD, "input": []}))
            .finish(),
    )
    .grade();
    check(&next_turn_early, Fail, "own-turn-awaited");
}

#[test]
fn dropping_a_turn_completed_that_came_before_the_answer_fails_early_events_kept() {
    let verdict = case(
        "protocol-binding",
        "events-before-answer",
        Transcript::new()
            .handshake()
            .open_thread(THREAD)
            .request(
                TURN_START_ID,
                "turn/start",
                json!({"threadId": THREAD, "input": []}),
            )
            .turn_started(THREAD, TURN)
            .complete_turn(THREAD, TURN, "completed")
            .result(TURN_START_ID, json!({"turn": {"id": TURN}})),
    )
    .killed_at_bound()
    .grade();
    check(&verdict, Fail, "early-events-kept");
    insta::assert_json_snapshot!("binding.events-before-answer.dropped", verdict);
}

#[test]
fn a_driver_that_crashes_on_stray_or_server_started_events_fails() {
    for c in ["post-turn-events", "server-started-turn"] {
        let verdict = healthy("protocol-binding", c).exits(101).grade();
        check(&verdict, Fail, "exit-status");
    }
}

#[test]
fn binding_cases_whose_events_never_came_show_nothing() {
    for c in [
        "foreign-thread-events",
        "events-before-answer",
        "post-turn-events",
        "server-started-turn",
        "stale-request-after-turn",
    ] {
        let verdict = case("protocol-binding", c, Transcript::session().finish()).grade();
        assert_eq!(verdict.verdict, Incomplete, "{c}: {verdict:?}");
    }
}

// --- control

fn interrupting() -> Declarations {
    Declarations {
        interrupt: Some(InterruptSignal::Sigint),
        ..outcome()
    }
}

#[test]
fn an_interrupt_sent_as_a_notification_fails_interrupt_is_request() {
    let verdict = case(
        "protocol-control",
        "interrupt",
        Transcript::session()
            .send(
                json!({"method": "turn/interrupt", "params": {"threadId": THREAD, "turnId": TURN}}),
            )
            .wait(30_000),
    )
    .declaring(interrupting())
    .killed_at_bound()
    .grade();
    check(&verdict, Fail, "interrupt-is-request");
    insta::assert_json_snapshot!("control.interrupt.notification", verdict);
}

#[test]
fn an_interrupt_without_thread_id_fails_interrupt_ids() {
    let verdict = case(
        "protocol-control",
        "interrupt",
        Transcript::session()
            .request(20, "turn/interrupt", json!({"turnId": TURN}))
            .error(20, -32602, "missing field `threadId`")
            .close(),
    )
    .declaring(interrupting())
    .exits(1)
    .grade();
    check(&verdict, Fail, "interrupt-ids");
    insta::assert_json_snapshot!("control.interrupt.no-thread-id", verdict);
}

#[test]
fn no_interrupt_or_a_dropped_session_fails() {
    let never = case(
        "protocol-control",
        "interrupt",
        Transcript::session().finish(),
    )
    .declaring(interrupting())
    .grade();
    check(&never, Fail, "interrupt-sent");
    let dropped = case(
        "protocol-control",
        "interrupt",
        Transcript::session()
            .request(
                20,
                "turn/interrupt",
                json!({"threadId": THREAD, "turnId": TURN}),
            )
            .result(20, json!({}))
            .stdin_closed()
            .complete_turn(THREAD, TURN, "interrupted")
            .exit(0),
    )
    .declaring(interrupting())
    .grade();
    check(&dropped, Fail, "session-kept");
}

#[test]
fn a_steer_without_expected_turn_id_fails() {
    let steering = Declarations {
        steer: Some(SteerChannel::StdinLine),
        ..outcome()
    };
    let verdict = case(
        "protocol-control",
        "steer",
        Transcript::session()
            .request(21, "turn/steer", json!({"threadId": THREAD, "input": []}))
            .error(21, -32602, "missing field `expectedTurnId`")
            .finish(),
    )
    .declaring(steering)
    .grade();
    check(&verdict, Fail, "steer-expected-turn-id");
    insta::assert_json_snapshot!("control.steer.no-expected-turn-id", verdict);
}

#[test]
fn a_refused_start_reported_as_success_or_a_hang_fails() {
    for c in [
        "initialize-error",
        "turn-start-error",
        "resume-error",
        "no-answer",
    ] {
        let success = healthy("protocol-control", c).exits(0).grade();
        check(&success, Fail, "exit-status");
        let hang = healthy("protocol-control", c).killed_at_bound().grade();
        check(&hang, Fail, "ended-on-its-own");
    }
    let verdict = healthy("protocol-control", "no-answer")
        .killed_at_bound()
        .grade();
    insta::assert_json_snapshot!("control.no-answer.hung", verdict);
}

/// After the crash: a relaunch, and `thread/resume` of the driver's thread answered with
/// `answered_thread`.
fn resumed_as(answered_thread: &str) -> Transcript {
    crashed()
        .relaunch()
        .handshake()
        .request(
            THREAD_START_ID,
            "thread/resume",
            json!({"threadId": THREAD}),
        )
        .result(THREAD_START_ID, json!({"thread": {"id": answered_thread}}))
}

fn resuming() -> Declarations {
    Declarations {
        resume: Some(ResumeHow::Relaunch),
        ..outcome()
    }
}

#[test]
fn a_recovery_that_loses_the_thread_fails() {
    let no_relaunch = case("protocol-control", "crash-resume", crashed())
        .declaring(resuming())
        .exits(1)
        .grade();
    check(&no_relaunch, Fail, "relaunched");
    let new_thread = case(
        "protocol-control",
        "crash-resume",
        crashed()
            .relaunch()
            .handshake()
            .open_thread("thr-2")
            .finish(),
    )
    .declaring(resuming())
    .grade();
    check(&new_thread, Fail, "resumed-exact-thread");
    let forked_and_went_on = case(
        "protocol-control",
        "crash-resume",
        resumed_as("thr-forked")
            .start_turn(TURN_START_ID, "thr-forked", "turn-2")
            .complete_turn("thr-forked", "turn-2", "completed")
            .close(),
    )
    .declaring(resuming())
    .grade();
    check(&forked_and_went_on, Fail, "recovery-outcome");
    insta::assert_json_snapshot!("control.crash-resume.forked", forked_and_went_on);
    let forked_and_failed = case(
        "protocol-control",
        "crash-resume",
        resumed_as("thr-forked").close(),
    )
    .declaring(resuming())
    .exits(1)
    .grade();
    assert_eq!(forked_and_failed.verdict, Pass, "{forked_and_failed:?}");
}
