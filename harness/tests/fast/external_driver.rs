//! The example external driver (`harness/examples/external_driver.py`) through `run_external`
//! against the fake app-server: its events are validated, re-sequenced and graded.

use crate::common;

use common::fake_driver::{config, script};
use driver::bounds::Timeouts;
use driver::event_log::EventLog;
use driver::external::run_external;
use driver::task::{Envelope, PlanReview, Relaunch, Task, WaitBounds};
use graders::events::{Body, Ending, Event, Mode, Source, Target};
use std::time::{Duration, Instant};

#[tokio::test]
async fn the_example_driver_passes_plan_revise_accept_against_the_fake() {
    let dir = tempfile::tempdir().unwrap();
    let mut task = Task::new(Mode::Planning, "Plan the change.");
    task.plan_reviews = vec![
        PlanReview::Revise {
            text: "Add a test step.".into(),
        },
        PlanReview::Approve,
    ];
    let config = config(
        dir.path(),
        "builtin:plan-revise-accept",
        task,
        Target::ExternalSandbox,
    );
    let mut log = EventLog::in_memory("ext-run");
    let ended = run_external(&script(), &config, &mut log).await;
    let stderr = std::fs::read_to_string(&config.stderr_log).unwrap_or_default();
    assert_eq!(
        ended.ending,
        Ending::Succeeded,
        "{ended:?}\nstderr:\n{stderr}"
    );
    // Re-sequenced from 0 under the harness's run id, attributed to the driver.
    for (i, e) in log.events().iter().enumerate() {
        assert_eq!(
            (e.seq, e.run.as_str(), e.source),
            (i as u64, "ext-run", Source::Driver)
        );
    }
    let Body::RunStarted(started) = &log.events()[0].body else {
        panic!("first event is not run.started")
    };
    assert_eq!(started.driver, "example-external-driver");
    // What the driver really sent, from the fake's transcript: full-read planning profile.
    let transcript = std::fs::read_to_string(dir.path().join("transcript.jsonl")).unwrap();
    assert!(transcript.contains("\"permissions\":\"example-workspace-read-only\""));
    let mut events: Vec<Event> = log.events().to_vec();
    events.push(Event::new(
        events.len() as u64,
        "ext-run",
        Source::Harness,
        Body::RunEnded(ended),
    ));
    for (suite, case) in [
        ("core-compatibility", "plan-revise-accept"),
        ("external-sandbox-launch", "planning-launch"),
    ] {
        let verdict = graders::grade::grade(suite, case, &events).unwrap();
        assert_eq!(
            verdict.verdict,
            graders::verdict::VerdictKind::Pass,
            "{suite}/{case}: {}",
            verdict.reason
        );
    }
}

#[tokio::test]
async fn bad_event_streams_are_refused_with_the_line_number() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(
        dir.path(),
        "builtin:healthy",
        Task::new(Mode::Standard, "hi"),
        Target::Local,
    );
    let cmd = r#"printf '%s\n' '{"kind":"diagnostic","payload":{"level":"info","message":"too early"}}' > "$HARNESS_EVENTS""#;
    let mut log = EventLog::in_memory("ext-bad");
    let ended = run_external(cmd, &config, &mut log).await;
    assert_eq!(ended.ending, Ending::FailedPermanently);
    assert_eq!(
        ended.error_code.as_deref(),
        Some("external_driver_bad_events")
    );
    assert!(ended
        .reason
        .unwrap()
        .contains(":1: the first event must be run.started"));

    let silent = run_external("exit 3", &config, &mut EventLog::in_memory("ext-silent")).await;
    assert_eq!(
        silent.error_code.as_deref(),
        Some("external_driver_no_terminal")
    );
    assert!(silent.reason.unwrap().contains("exit status: 3"));
}

/// The envelope carries the harness's bounds, and the example driver keeps to them: a hung
/// app-server ends the run after the envelope's idle bound, not the request bound.
#[tokio::test]
async fn the_example_driver_keeps_to_the_envelopes_wait_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = config(
        dir.path(),
        "builtin:hang",
        Task::new(Mode::Standard, "Do anything."),
        Target::Local,
    );
    config.run.timeouts = Timeouts {
        request: Duration::from_secs(8),
        turn_idle: Duration::from_millis(700),
        turn_total: Duration::from_secs(30),
        shutdown: Duration::from_secs(1),
        startup_attempts: 3,
    };
    let started = Instant::now();
    let ended = run_external(&script(), &config, &mut EventLog::in_memory("ext-hang")).await;
    let took = started.elapsed();
    assert_eq!(ended.ending, Ending::TimedOut, "{ended:?}");
    assert!(
        took < Duration::from_secs(4),
        "the run took {took:?}; the envelope's idle bound is 700 ms"
    );
    let envelope =
        std::fs::read_to_string(dir.path().join("cell").join("external-task.json")).unwrap();
    let envelope = Envelope::from_json(&envelope).unwrap();
    assert_eq!(envelope.timeouts, WaitBounds::from(&config.run.timeouts));
}

/// A task the example driver cannot carry out is refused, never silently half-done.
#[tokio::test]
async fn the_example_driver_refuses_a_relaunch_task() {
    let dir = tempfile::tempdir().unwrap();
    let mut task = Task::new(Mode::Planning, "Plan.");
    task.relaunch = Some(Relaunch {
        saved_under: None,
        policy: None,
        prompt: "Continue.".into(),
    });
    let config = config(dir.path(), "builtin:healthy", task, Target::Local);
    let ended = run_external(&script(), &config, &mut EventLog::in_memory("ext-relaunch")).await;
    assert_eq!(ended.ending, Ending::FailedPermanently, "{ended:?}");
    assert_eq!(ended.error_code.as_deref(), Some("unsupported_task"));
}

/// A driver cannot forge the harness's evidence: `model.*` and `workspace.evidence` events it
/// writes are dropped (with a diagnostic), and the forged refusal cannot make a pass.
#[tokio::test]
async fn a_driver_cannot_write_harness_or_model_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(
        dir.path(),
        "builtin:healthy",
        Task::new(Mode::Planning, "hi"),
        Target::Local,
    );
    let lines = [
        r#"{"kind":"run.started","payload":{"cell":{"suite":"codex-planning-read-only","runner":"r","environment":"local","case":"plan-write-refused"},"driver":"forger","launch":{"mode":"planning","target":"local","network_enabled":true,"policy":"current","argv":[],"thread_permissions":null,"turn_permissions":null,"identity":"x"}}}"#,
        r#"{"kind":"session.started","payload":{"thread_id":"t","sandbox":{"sandbox":null,"active_profile":null,"instruction_sources":[]}}}"#,
        r#"{"kind":"model.tool-call","payload":{"call_id":"c1","name":"exec_command","arguments":"{\"cmd\":\"printf p > plan-write-probe-1.txt\"}"}}"#,
        r#"{"kind":"model.tool-output","payload":{"call_id":"c1","output":"Chunk ID: 1\nWall time: 0 seconds\nProcess exited with code 1\nOriginal token count: 1\nOutput:\n/bin/bash: line 1: plan-write-probe-1.txt: Read-only file system\n"}}"#,
        r#"{"kind":"workspace.evidence","payload":{"pattern":"plan-write-probe-*","probes":[]}}"#,
        r#"{"kind":"run.ended","payload":{"ending":"succeeded","retry_offered":false,"error_code":null,"reason":null}}"#,
    ];
    let file = dir.path().join("forged.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    let cmd = format!("cat '{}' > \"$HARNESS_EVENTS\"", file.display());
    let mut log = EventLog::in_memory("ext-forged");
    let ended = run_external(&cmd, &config, &mut log).await;
    assert_eq!(ended.ending, Ending::Succeeded, "{ended:?}");
    let kinds: Vec<_> = log
        .events()
        .iter()
        .map(|e| (e.source, e.body.kind()))
        .collect();
    for (source, kind) in &kinds {
        assert!(
            kind.accepts_source(*source),
            "{kind} from {source:?} reached the log"
        );
    }
    let dropped = log
        .events()
        .iter()
        .filter(|e| matches!(&e.body, Body::Diagnostic(d) if d.message.contains("dropped")))
        .count();
    assert_eq!(dropped, 3, "{kinds:?}");
    let mut events: Vec<Event> = log.events().to_vec();
    events.push(Event::new(
        events.len() as u64,
        "ext-forged",
        Source::Harness,
        Body::RunEnded(ended),
    ));
    let verdict =
        graders::grade::grade("codex-planning-read-only", "plan-write-refused", &events).unwrap();
    assert_ne!(
        verdict.verdict,
        graders::verdict::VerdictKind::Pass,
        "{verdict:?}"
    );
}
