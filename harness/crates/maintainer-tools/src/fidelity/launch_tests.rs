//! A driver that probes `codex --version` before it starts the app-server (the Rust SDK):
//! the probe launch closes its stdin, the app-server's launch is ended with the driver, and
//! the pair must still be compared through the app-server's launch, naming the answer that
//! differs — not reported the same up to the probe's close.

use super::*;
use graders::events::{Event, Source};
use graders::wire::transcript::Record;
use graders::wire::{Context, DriverEnd};
use serde_json::json;

const THREAD: &str = "01a2310e-f7aa-71a2-b7e9-e659bfd286b5";

/// The app-server's launch: `thread/start` answered with `service_tier`; `warns`: a `warning`
/// notification after it (what the driver sees differs).
fn transcript_lines(service_tier: Value, warns: bool) -> Vec<String> {
    let line = |launch: u64, direction: &str, message: Value| {
        json!({"direction": direction, "time": 1, "launch": launch, "message": message}).to_string()
    };
    vec![
        json!({"kind": "launch", "launch": 1, "time": 0, "argv": ["--version"], "env_names": ["PATH"]}).to_string(),
        json!({"kind": "stdin-closed", "launch": 1, "time": 1}).to_string(),
        json!({"kind": "exit", "launch": 1, "time": 2, "status": 0, "signal": null, "error": null}).to_string(),
        json!({"kind": "launch", "launch": 2, "time": 3, "argv": ["app-server"], "env_names": ["PATH"]}).to_string(),
        line(2, "in", json!({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "sdk", "version": "1"}}})),
        line(2, "out", json!({"id": 1, "result": {"userAgent": "sdk/0.169.0"}})),
        line(2, "in", json!({"method": "initialized"})),
        line(2, "in", json!({"id": 2, "method": "thread/start", "params": {"cwd": "/w"}})),
        line(2, "out", json!({"id": 2, "result": {"thread": {"id": THREAD}, "serviceTier": service_tier}})),
        line(2, "out", json!({"method": "thread/started", "params": {"thread": {"id": THREAD}}})),
    ]
    .into_iter()
    .chain(warns.then(|| {
        line(2, "out", json!({"method": "warning", "params": {"message": "m"}}))
    }))
    .chain([
        // The driver ends, killing the app-server without closing its stdin.
        json!({"kind": "exit", "launch": 2, "time": 9, "status": null, "signal": 9, "error": null, "killed_by_harness": "the cell ended"}).to_string(),
    ])
    .collect()
}

fn side_of(service_tier: Value, warns: bool, driver_code: i32, verdict: &str) -> SideOutcome {
    let text = transcript_lines(service_tier, warns).join("\n") + "\n";
    let records = graders::wire::transcript::read(text.as_bytes()).expect("the transcript reads");
    let ctx = Context {
        cell: graders::events::CellId::new("core-compatibility", "r", "local", "message-marker"),
        driver: "sdk".into(),
        mode: graders::events::Mode::Standard,
        target: graders::events::Target::Local,
        network_enabled: false,
        policy: graders::events::PolicyGeneration::Current,
        protocol: Default::default(),
    };
    let translation = graders::wire::translate(
        text.as_bytes(),
        &ctx,
        &DriverEnd::Exited { code: driver_code },
    )
    .expect("the transcript translates");
    let events: Vec<Event> = translation
        .events
        .into_iter()
        .enumerate()
        .map(|(seq, body)| Event::new(seq as u64, "r", Source::Driver, body))
        .collect();
    SideOutcome {
        cell: "c".into(),
        verdict: verdict.into(),
        graded: true,
        sequence: normalise(&events, "/w"),
        wall: std::time::Duration::ZERO,
        codex_span: None,
        cut: cut::driver_cut(&records, &events),
        ended_on_its_own: cut::ended_on_its_own(&events),
        id_shapes: Default::default(),
        sent: sent::driver_sent(&records, &[]),
        answers: answers::app_server_answers(&records, &[]),
    }
}

fn outcome(fake: SideOutcome, real: SideOutcome) -> PairOutcome {
    let (divergence, truncated) = compare(&fake, &real);
    PairOutcome {
        pair: "p".into(),
        scenario: "s".into(),
        divergence,
        truncated,
        id_changes: Vec::new(),
        sent_difference: sent_difference(&fake, &real, None),
        answer_difference: answers::difference(&fake.answers, &real.answers),
        fake,
        real,
    }
}

/// The old comparison stopped at the probe's close (its only close) and called the pair the
/// same: "same to the real cut (2 of 17–23)".
#[test]
fn a_version_probe_launch_does_not_end_the_comparison() {
    let fake = side_of(Value::Null, false, 0, "pass");
    let real = side_of(json!("default"), true, 0, "pass");
    let records: Vec<Record> = graders::wire::transcript::read(
        (transcript_lines(Value::Null, false).join("\n") + "\n").as_bytes(),
    )
    .unwrap();
    assert_eq!(records.iter().map(Record::launch).max(), Some(2));
    let (divergence, truncated) = compare(&fake, &real);
    assert_eq!(truncated, None, "not compared only up to the probe's close");
    let divergence = divergence.expect("the app-server's launch differs");
    assert!(
        divergence.describe().contains("warning"),
        "{}",
        divergence.describe()
    );
    let failure = outcome(fake, real).failure().expect("the pair differs");
    assert!(
        failure.starts_with(r#"thread/start result.serviceTier: "default" ≠ null"#),
        "{failure}"
    );
}

/// A driver that fails on one side names the answer it failed on, not its exit code.
#[test]
fn a_driver_failing_on_one_side_names_the_answer_not_its_exit_code() {
    let fake = side_of(Value::Null, false, 0, "pass");
    let real = side_of(json!("default"), false, 1, "fail");
    let failure = outcome(fake, real).failure().expect("the pair differs");
    assert!(
        failure.starts_with(r#"thread/start result.serviceTier: "default" ≠ null"#),
        "{failure}"
    );
    assert!(failure.contains("verdicts differ"), "{failure}");
    assert!(!failure.contains("code"), "{failure}");
}

#[test]
fn a_version_probe_launch_then_the_same_app_server_is_the_same() {
    let fake = side_of(json!("default"), false, 0, "pass");
    let real = side_of(json!("default"), false, 0, "pass");
    assert_eq!(outcome(fake, real).failure(), None);
}
