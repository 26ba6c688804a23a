//! `protocol-forward-compat`, `protocol-size`, `protocol-handshake` and
//! `protocol-credentials`: what the driver does with what it does not know, with long lines and
//! bursts, with the handshake, and with its own secrets.

use crate::support::wire::*;
use crate::support::*;
use graders::events::{Declarations, Ending, PlantedCanaries, Source};
use graders::verdict::VerdictKind::{Fail, Incomplete, NotApplicable, Pass};
use serde_json::json;

// --- forward compatibility

#[test]
fn a_driver_that_dies_on_what_it_does_not_know_fails() {
    for c in [
        "unknown-notification",
        "unknown-item-type",
        "unknown-enum-values",
        "unknown-fields",
    ] {
        let verdict = healthy("protocol-forward-compat", c).exits(1).grade();
        check(&verdict, Fail, "exit-status");
    }
    let verdict = case(
        "protocol-forward-compat",
        "unknown-item-type",
        Transcript::session()
            .recv(
                json!({"method": "item/started", "params": {"threadId": THREAD, "turnId": TURN,
                "item": {"type": "harnessUnknownItem", "id": "u1"}}}),
            )
            .stdin_closed()
            .complete_turn(THREAD, TURN, "completed")
            .exit(0),
    )
    .exits(1)
    .grade();
    check(&verdict, Fail, "session-continued");
    insta::assert_json_snapshot!("forward-compat.unknown-item-type.aborted", verdict);
}

#[test]
fn forward_compat_cases_without_their_evidence_show_nothing() {
    for c in [
        "every-notification",
        "unknown-notification",
        "unknown-item-type",
        "unknown-enum-values",
        "unknown-fields",
    ] {
        let verdict = case("protocol-forward-compat", c, Transcript::session().finish()).grade();
        assert_eq!(verdict.verdict, Incomplete, "{c}: {verdict:?}");
    }
    let unknown_release = Run {
        release: None,
        ..healthy("protocol-forward-compat", "every-notification")
    };
    assert_eq!(unknown_release.grade().verdict, Incomplete);
}

/// What a release sends only to experimental clients, or what a client opted out of, is not
/// owed to a client whose `initialize` did not ask for it (found by the legitimate population:
/// a driver without `experimentalApi` was graded `incomplete` for the `thread/readState/changed`
/// Codex 0.169 never sends it).
#[test]
fn every_notification_owes_a_driver_only_what_its_initialize_asked_for() {
    let release = graders::protocol::release(RELEASE).unwrap();
    let run = |capabilities: serde_json::Value, left_out: &[&str]| {
        let transcript = Transcript::new()
            .request(
                INITIALIZE_ID,
                "initialize",
                json!({"clientInfo": {"name": "t"}, "capabilities": capabilities}),
            )
            .result(INITIALIZE_ID, json!({"userAgent": "codex"}))
            .send(json!({"method": "initialized"}))
            .open_thread(THREAD)
            .start_turn(TURN_START_ID, THREAD, TURN);
        let transcript = release
            .notifications()
            .filter(|m| !left_out.contains(m))
            .fold(transcript, |t, m| {
                t.recv(json!({"method": m, "params": {"threadId": "thr-9"}}))
            });
        Run::new(
            "protocol-forward-compat",
            "every-notification",
            transcript.finish(),
        )
        .declaring(outcome())
        .grade()
    };
    let plain = run(json!({"experimentalApi": false}), &[EXPERIMENTAL_ONLY]);
    assert_eq!(plain.verdict, Pass, "{plain:?}");
    assert!(
        plain.reason.contains("not owed to this driver"),
        "{plain:?}"
    );
    let experimental = run(json!({"experimentalApi": true}), &[EXPERIMENTAL_ONLY]);
    assert_eq!(
        experimental.verdict, Incomplete,
        "owed, and missing: {experimental:?}"
    );
    assert!(
        experimental.reason.contains(EXPERIMENTAL_ONLY),
        "{experimental:?}"
    );
    let quiet = ["thread/tokenUsage/updated", "item/agentMessage/delta"];
    let opted_out = run(
        json!({"experimentalApi": true, "optOutNotificationMethods": quiet}),
        &quiet,
    );
    assert_eq!(opted_out.verdict, Pass, "{opted_out:?}");
    let missing_anyway = run(json!({"experimentalApi": true}), &quiet);
    assert_eq!(missing_anyway.verdict, Incomplete, "{missing_anyway:?}");
}

// --- size

#[test]
fn a_long_legal_line_that_kills_the_driver_fails() {
    let verdict = case(
        "protocol-size",
        "line-64k",
        Transcript::session()
            .recv(delta(64 << 10))
            .stdin_closed()
            .exit(0),
    )
    .exits(1)
    .grade();
    check(&verdict, Fail, "session-continued");
    insta::assert_json_snapshot!("size.line-64k.reader-died", verdict);
}

#[test]
fn a_long_line_cut_off_when_the_driver_let_go_is_a_lost_transport_not_missing_evidence() {
    // The driver's reader died on the line: the relay stalled, so the harness read only the
    // first 512 KiB of it before the driver let go of its `codex` and the app-server was killed.
    let cut = || {
        case(
            "protocol-size",
            "line-1m",
            Transcript::session()
                .cut_off(512 << 10)
                .stdin_closed()
                .killed_by_harness(),
        )
        .exits(1)
    };
    let verdict = cut().grade();
    check(&verdict, Fail, "session-continued");
    assert!(
        verdict.reason.contains("transport-lost")
            && verdict.reason.contains("at least 524288 bytes"),
        "{verdict:?}"
    );
    let bounded_at = |bytes: u64| {
        cut()
            .declaring(Declarations {
                max_line_bytes: Some(bytes),
                ..outcome()
            })
            .grade()
    };
    let bounded = bounded_at(64 << 10);
    assert_eq!(
        bounded.verdict, Pass,
        "a cut line past the declared bound, then a non-zero exit: a classified failure: {bounded:?}"
    );
    let below = bounded_at(1 << 20);
    check(&below, Fail, "session-continued");
    // A driver that died before any long line was sent is still a failure, never `pass`, and
    // a session that went on without the line still shows nothing.
    let early = case(
        "protocol-size",
        "line-1m",
        Transcript::session().stdin_closed().exit(0),
    )
    .exits(1)
    .grade();
    assert_eq!(early.verdict, Fail, "{early:?}");
    let short = case("protocol-size", "line-1m", Transcript::session().finish()).grade();
    assert_eq!(short.verdict, Incomplete, "{short:?}");
}

#[test]
fn above_the_declared_bound_a_classified_failure_is_allowed_below_it_not() {
    let failing = || {
        case(
            "protocol-size",
            "line-2m",
            Transcript::session()
                .oversized((2 << 20) + 90)
                .stdin_closed()
                .exit(0),
        )
        .exits(2)
    };
    let bounded = failing()
        .declaring(Declarations {
            max_line_bytes: Some(1 << 20),
            ..outcome()
        })
        .grade();
    assert_eq!(bounded.verdict, Pass, "{bounded:?}");
    let unbounded = failing().grade();
    check(&unbounded, Fail, "session-continued");
    let hung = failing()
        .declaring(Declarations {
            max_line_bytes: Some(1 << 20),
            ..outcome()
        })
        .killed_at_bound()
        .grade();
    assert_ne!(
        hung.verdict, Pass,
        "a hang is never a classified failure: {hung:?}"
    );
}

#[test]
fn a_burst_the_driver_cannot_drain_fails_and_a_short_one_shows_nothing() {
    let hung = healthy("protocol-size", "delta-burst")
        .killed_at_bound()
        .grade();
    check(&hung, Fail, "ended-on-its-own");
    let short = case(
        "protocol-size",
        "delta-burst",
        (0..10)
            .fold(Transcript::session(), |t, _| t.recv(delta(1)))
            .finish(),
    )
    .grade();
    assert_eq!(short.verdict, Incomplete, "{short:?}");
    // A driver that dies in the middle of the burst (its app-server killed when it let go, the
    // turn never completed) fails: the burst was cut short by the driver, not by the server.
    let died = case(
        "protocol-size",
        "delta-burst",
        (0..10)
            .fold(Transcript::session(), |t, _| t.recv(delta(1)))
            .killed_by_harness(),
    )
    .exits(1)
    .grade();
    check(&died, Fail, "session-continued");
}

/// A driver whose own wait ran out stops its `codex` with SIGTERM instead of closing its stdin:
/// the app-server's death by that signal is the driver's doing (the recorder notes the signal
/// it passed on), so the run ended timed-out; the same death with no signal of the driver's is
/// the app-server going away on its own.
#[test]
fn a_driver_that_stops_its_codex_with_a_signal_timed_out_and_lost_no_transport() {
    let signalled = case(
        "protocol-turn-outcomes",
        "failed-turn",
        Transcript::session().driver_signal(15).exit_by_signal(15),
    )
    .exits(1)
    .terminal();
    assert_eq!(signalled.ending, Ending::TimedOut, "{signalled:?}");
    let crashed = case(
        "protocol-turn-outcomes",
        "failed-turn",
        Transcript::session().exit_by_signal(15),
    )
    .exits(1)
    .terminal();
    assert_eq!(crashed.ending, Ending::TransportLost, "{crashed:?}");
}

// --- handshake

#[test]
fn skipping_initialized_fails_initialized_sent() {
    let verdict = case(
        "protocol-handshake",
        "handshake",
        Transcript::new()
            .request(INITIALIZE_ID, "initialize", json!({}))
            .result(INITIALIZE_ID, json!({}))
            .open_thread(THREAD)
            .start_turn(TURN_START_ID, THREAD, TURN)
            .finish(),
    )
    .grade();
    check(&verdict, Fail, "initialized-sent");
    insta::assert_json_snapshot!("handshake.no-initialized", verdict);
}

#[test]
fn a_request_before_initialized_or_before_initialize_fails() {
    let early = case(
        "protocol-handshake",
        "handshake",
        Transcript::new()
            .request(INITIALIZE_ID, "initialize", json!({}))
            .result(INITIALIZE_ID, json!({}))
            .open_thread(THREAD)
            .send(json!({"method": "initialized"}))
            .start_turn(TURN_START_ID, THREAD, TURN)
            .finish(),
    )
    .grade();
    check(&early, Fail, "initialized-before-requests");
    let first = case(
        "protocol-handshake",
        "handshake",
        Transcript::new()
            .open_thread(THREAD)
            .handshake()
            .start_turn(TURN_START_ID, THREAD, TURN)
            .finish(),
    )
    .grade();
    check(&first, Fail, "initialize-first");
    let relaunch_without_handshake = case(
        "protocol-handshake",
        "handshake",
        Transcript::session()
            .finish()
            .relaunch()
            .open_thread(THREAD)
            .close(),
    )
    .grade();
    check(&relaunch_without_handshake, Fail, "initialize-first");
}

// --- credentials

fn env_output(listing: &str) -> Run {
    healthy("protocol-credentials", "secrets-not-forwarded")
        .transcript(|t| t)
        .with_outputs(listing)
}

trait WithOutputs {
    fn with_outputs(self, listing: &str) -> Self;
}

impl WithOutputs for Run {
    fn with_outputs(mut self, listing: &str) -> Self {
        self.extras = vec![
            (Source::Model, tool_call("call-env", "env")),
            (
                Source::Model,
                tool_output("call-env", &codex_exec_output(0, listing)),
            ),
        ];
        self
    }
}

#[test]
fn a_canary_in_what_the_model_saw_fails() {
    let verdict =
        env_output("PATH=/usr/bin\nGITHUB_TOKEN=ccf-canary-5f3a9e\nHOME=/home/codex\n").grade();
    check(&verdict, Fail, "secrets-not-forwarded");
    assert!(
        !verdict.reason.contains("5f3a9e"),
        "the value is cut: {}",
        verdict.reason
    );
    insta::assert_json_snapshot!("credentials.canary-in-env", verdict);
}

#[test]
fn a_canary_in_a_command_item_on_the_wire_fails() {
    let verdict = case(
        "protocol-credentials",
        "secrets-not-forwarded",
        Transcript::session()
            .item(THREAD, TURN, json!({"type": "commandExecution", "id": "c1",
                "command": "/bin/bash -lc env", "status": "completed", "exitCode": 0,
                "aggregatedOutput": "PATH=/usr/bin\nAWS_SECRET_ACCESS_KEY=ccf-canary-77\nLANG=C\n"}))
            .finish(),
    )
    .grade();
    check(&verdict, Fail, "secrets-not-forwarded");
}

#[test]
fn without_the_env_output_nothing_is_shown() {
    let run = Run {
        extras: Vec::new(),
        ..healthy("protocol-credentials", "secrets-not-forwarded")
    };
    let verdict = run.grade();
    assert_eq!(verdict.verdict, Incomplete, "{verdict:?}");
    let not_env = env_output("hello\n").grade();
    assert_eq!(
        not_env.verdict, Incomplete,
        "an env that listed nothing: {not_env:?}"
    );
    let forged = Run {
        extras: vec![
            (Source::Driver, tool_call("call-env", "env")),
            (
                Source::Driver,
                tool_output(
                    "call-env",
                    &codex_exec_output(0, "PATH=/a\nHOME=/b\nLANG=C\n"),
                ),
            ),
        ],
        ..healthy("protocol-credentials", "secrets-not-forwarded")
    };
    assert_eq!(
        forged.grade().verdict,
        Incomplete,
        "model events only from the model log"
    );
}

/// The model's `env`, asked for by the app-server before it runs (Codex 0.169 under
/// approvalPolicy `untrusted`) and answered with `answer`: a declined item when refused.
fn env_asked_first(mut answer: serde_json::Value, status: &str) -> Run {
    answer["id"] = json!(7);
    let transcript = Transcript::session()
        .recv(json!({"id": 7, "method": "item/commandExecution/requestApproval", "params": {
            "threadId": THREAD, "turnId": TURN, "itemId": "call-env", "command": "/bin/bash -lc env"}}))
        .send(answer)
        .item(THREAD, TURN, json!({"type": "commandExecution", "id": "call-env",
            "command": "/bin/bash -lc env", "status": status}))
        .finish();
    Run {
        extras: vec![(Source::Model, tool_call("call-env", "env"))],
        ..case("protocol-credentials", "secrets-not-forwarded", transcript)
    }
}

#[test]
fn an_env_the_driver_refused_to_run_is_not_applicable() {
    for refusal in [
        json!({"result": {"decision": "decline"}}),
        json!({"result": {"decision": "cancel"}}),
        json!({"error": {"code": -32000, "message": "the user did not approve"}}),
    ] {
        let verdict = env_asked_first(refusal.clone(), "declined").grade();
        assert_eq!(verdict.verdict, NotApplicable, "{refusal}: {verdict:?}");
        assert!(verdict.reason.contains("refused"), "{}", verdict.reason);
    }
    // Granted, yet nothing listed: the run still shows nothing.
    let granted = env_asked_first(json!({"result": {"decision": "accept"}}), "failed").grade();
    assert_eq!(granted.verdict, Incomplete, "{granted:?}");
}

#[test]
fn without_planted_canaries_a_clean_listing_shows_nothing() {
    let verdict = Run {
        canaries: None,
        ..healthy("protocol-credentials", "secrets-not-forwarded")
    }
    .grade();
    assert_eq!(verdict.verdict, Incomplete, "{verdict:?}");
    assert!(verdict.reason.contains("no canary"), "{}", verdict.reason);
    let none_named = Run {
        canaries: Some(PlantedCanaries {
            names: Vec::new(),
            digest: planted().digest,
        }),
        ..healthy("protocol-credentials", "secrets-not-forwarded")
    }
    .grade();
    assert_eq!(none_named.verdict, Incomplete, "{none_named:?}");
    let passed = healthy("protocol-credentials", "secrets-not-forwarded").grade();
    assert_eq!(passed.verdict, Pass, "{passed:?}");
    assert!(
        passed.reason.contains("GITHUB_TOKEN, OPENAI_API_KEY"),
        "{}",
        passed.reason
    );
}

#[test]
fn the_fixtures_own_messages_are_schema_valid_so_only_the_cases_oddities_count() {
    let stream = Run::new(
        "protocol-handshake",
        "handshake",
        foreign("thr-9", "turn-9").finish(),
    )
    .stream();
    let summary = stream
        .events
        .iter()
        .find_map(|e| match &e.body {
            graders::events::Body::ServerNotifications(s) => Some(s.clone()),
            _ => None,
        })
        .unwrap();
    for m in &summary.methods {
        assert_eq!((m.invalid, m.extra_fields), (0, 0), "{m:?}");
        assert_eq!(m.known, Some(true), "{m:?}");
    }
}
