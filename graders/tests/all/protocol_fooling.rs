//! Every protocol case: a correct driver's run passes, and nothing else can make it pass —
//! not the same evidence written by another source, not a stream without the wire's protocol
//! record, not a session that never opened.

use crate::support::wire::healthy;
use crate::support::*;
use graders::events::{Body, Source};
use graders::grade::CASES;
use graders::verdict::VerdictKind;

fn protocol_cases() -> impl Iterator<Item = (&'static str, &'static str)> {
    CASES
        .iter()
        .copied()
        .filter(|(suite, _)| suite.starts_with("protocol-"))
}

#[test]
fn a_correct_driver_passes_every_protocol_case() {
    let mut failed = Vec::new();
    for (suite, case) in protocol_cases() {
        let verdict = healthy(suite, case).grade();
        if !verdict.is_pass() {
            failed.push(format!(
                "{suite}/{case}: {} {}",
                verdict.verdict, verdict.reason
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert_eq!(protocol_cases().count(), 51, "the design's catalogue");
}

/// A legitimate choice is never red: the same correct runs on ephemeral threads (the Python SDKs
/// open their session's thread so) pass too; only a thread opened beside the driver's first
/// is a side thread.
#[test]
fn a_correct_driver_on_ephemeral_threads_passes_every_protocol_case() {
    let mut failed = Vec::new();
    for (suite, case) in protocol_cases() {
        let verdict = healthy(suite, case)
            .transcript(|t| t.ephemeral_threads())
            .grade();
        if !verdict.is_pass() {
            failed.push(format!(
                "{suite}/{case}: {} {}",
                verdict.verdict, verdict.reason
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// The stream with every driver event written by `forger` instead.
fn forged(stream: &Stream, forger: Source) -> Stream {
    stream
        .events
        .iter()
        .fold(Stream::new(), |s, e| match e.source {
            Source::Driver => s.push(forger, e.body.clone()),
            other => s.push(other, e.body.clone()),
        })
}

#[test]
fn the_wire_evidence_written_by_another_source_never_passes() {
    for (suite, case) in protocol_cases() {
        let stream = healthy(suite, case).stream();
        for forger in [Source::Model, Source::Harness] {
            let verdict = grade_both(suite, case, &forged(&stream, forger));
            assert_ne!(
                verdict.verdict,
                VerdictKind::Pass,
                "{suite}/{case} passed on the wire's events written by the {forger:?}: {verdict:?}"
            );
        }
    }
}

#[test]
fn a_stream_without_the_protocol_record_is_incomplete() {
    for (suite, case) in protocol_cases() {
        let mut stream = healthy(suite, case).stream();
        for event in &mut stream.events {
            if let Body::RunStarted(started) = &mut event.body {
                started.protocol = None;
            }
        }
        let verdict = grade_both(suite, case, &stream);
        assert_eq!(
            verdict.verdict,
            VerdictKind::Incomplete,
            "{suite}/{case}: {verdict:?}"
        );
        assert!(
            verdict.reason.contains("protocol record"),
            "{}",
            verdict.reason
        );
    }
}

#[test]
fn a_stream_whose_translator_hit_its_bound_is_incomplete() {
    for (suite, case) in protocol_cases() {
        let stream = healthy(suite, case).stream();
        let (last, head) = stream.events.split_last().unwrap();
        let bounded = head
            .iter()
            .fold(Stream::new(), |s, e| s.push(e.source, e.body.clone()))
            .driver(Body::NotRecorded(graders::events::NotRecorded {
                what: "protocol.client-request".into(),
                count: 3,
            }))
            .push(last.source, last.body.clone());
        let verdict = grade_both(suite, case, &bounded);
        assert_eq!(
            verdict.verdict,
            VerdictKind::Incomplete,
            "{suite}/{case}: {verdict:?}"
        );
    }
}

#[test]
fn a_protocol_case_whose_session_never_opened_is_startup_rejected_or_not_judged() {
    use crate::support::wire::{Run, Transcript, THREAD_START_ID};
    use serde_json::json;
    let rejection =
        "error creating thread: bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted";
    for (suite, case) in protocol_cases() {
        let run = Run {
            transcript: Transcript::new()
                .handshake()
                .request(THREAD_START_ID, "thread/start", json!({"cwd": "/w"}))
                .error(THREAD_START_ID, -32603, rejection)
                .close(),
            end: graders::wire::DriverEnd::Exited { code: 1 },
            ..healthy(suite, case)
        };
        let verdict = run.grade();
        assert_ne!(
            verdict.verdict,
            VerdictKind::Pass,
            "{suite}/{case}: {verdict:?}"
        );
        let needs_no_session = matches!(
            case,
            "initialize-error" | "no-answer" | "resume-error" | "handshake"
        );
        if !needs_no_session {
            assert!(
                matches!(verdict.verdict, VerdictKind::StartupRejected | VerdictKind::Incomplete),
                "{suite}/{case}: a session that never opened judges nothing that needed it: {verdict:?}"
            );
        }
    }
}
