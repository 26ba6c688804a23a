//! One test per cause class, each the reason of a red cell built from an evidence folder the
//! way the harness writes it; the reasons are insta snapshots.

use super::*;
use graders::events::{Body, CellId, Event, Mode, PolicyGeneration, RunEnded, Source, Target};
use graders::verdict::{Verdict, VerdictKind};
use graders::wire::{self, DriverEnd};
use serde_json::json;
use std::path::Path;
use std::time::Duration;
use suites::Expectation;

const CELL: &str = "protocol-forward-compat.runner-x.local.unknown-notification";

fn events(dir: &Path, driver: DriverEnded, ended: RunEnded) {
    let lines: Vec<String> = [Body::DriverEnded(driver), Body::RunEnded(ended)]
        .into_iter()
        .enumerate()
        .map(|(i, body)| {
            serde_json::to_string(&Event::at(1, i as u64 + 1, "run", Source::Harness, body))
                .unwrap()
        })
        .collect();
    std::fs::write(dir.join("events.jsonl"), lines.join("\n") + "\n").unwrap();
}

fn failed(reason: &str) -> RunEnded {
    RunEnded {
        ending: Ending::FailedPermanently,
        retry_offered: false,
        error_code: Some("driver_failed".into()),
        reason: Some(reason.into()),
    }
}

/// A session up to a running turn: `initialize`, `thread/start`, `turn/start` answered, the
/// turn started; `then` (app-server messages) at 10 000 ms, and the driver letting go at
/// `let_go` ms.
fn transcript(dir: &Path, then: &[Value], let_go: u64) -> Vec<String> {
    let message = |direction: &str, time: u64, message: Value| {
        json!({"direction": direction, "time": time, "launch": 1, "message": message}).to_string()
    };
    let mut lines = vec![
        json!({"kind":"launch","launch":1,"time":9000,"argv":["app-server"],"env_names":[],"cwd":"/w","added_args":[]}).to_string(),
        message("in", 9001, json!({"id":1,"method":"initialize","params":{}})),
        message("out", 9002, json!({"id":1,"result":{"userAgent":"codex"}})),
        message("in", 9003, json!({"id":2,"method":"thread/start","params":{"cwd":"/w"}})),
        message("out", 9004, json!({"id":2,"result":{"thread":{"id":"th1"}}})),
        message("in", 9005, json!({"id":3,"method":"turn/start","params":{"threadId":"th1","input":[]}})),
        message("out", 9006, json!({"id":3,"result":{"turn":{"id":"t1","status":"inProgress"}}})),
        message("out", 9007, json!({"method":"turn/started","params":{"threadId":"th1","turn":{"id":"t1","status":"inProgress"}}})),
    ];
    lines.extend(then.iter().map(|m| message("out", 10_000, m.clone())));
    lines.push(json!({"kind":"stdin-closed","launch":1,"time":let_go}).to_string());
    lines.push(
        json!({"kind":"exit","launch":1,"time":let_go + 5,"status":0,"signal":null,"error":null})
            .to_string(),
    );
    std::fs::write(dir.join("transcript.jsonl"), lines.join("\n") + "\n").unwrap();
    lines
}

fn red(dir: &Path, reason: &str) -> CellResult {
    CellResult {
        cell: CELL.parse::<CellId>().unwrap(),
        profile: Some(suites::spec::Profile::Protocol),
        expected: Expectation::pass(),
        outcome: CellOutcome::Graded {
            verdict: Verdict::new(VerdictKind::Fail, reason, vec![]),
            agreement: Expectation::pass().judge(VerdictKind::Fail),
        },
        duration: Duration::from_millis(600),
        evidence_dir: dir.to_path_buf(),
        earlier_attempts: Vec::new(),
    }
}

fn reason_of(result: &CellResult) -> &str {
    &result.verdict().unwrap().reason
}

#[test]
fn the_drivers_last_stderr_lines_lead_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    transcript(dir.path(), &[], 10_400);
    events(
        dir.path(),
        DriverEnded::Exited { code: 1 },
        failed("the driver exited with status 1"),
    );
    let noise = "debug: connecting\n".repeat(400);
    std::fs::write(
        dir.path().join("stderr.log"),
        format!("{noise}Traceback (most recent call last):\n  File \"sdk/client.py\", line 88, in start\npydantic.ValidationError: response payload failed validation against ThreadStartResponse; method=thread/start\n"),
    )
    .unwrap();
    let (explained, cause) = explain(
        red(
            dir.path(),
            "check `session-continued` failed: the run ended failed-permanently: the driver exited with status 1",
        ),
        None,
    );
    assert!(cause.is_some());
    insta::assert_snapshot!("cause_stderr", reason_of(&explained));
}

#[test]
fn a_refusal_in_the_model_log_leads_when_the_driver_said_nothing() {
    let dir = tempfile::tempdir().unwrap();
    transcript(dir.path(), &[], 10_400);
    events(
        dir.path(),
        DriverEnded::Exited { code: 0 },
        RunEnded {
            ending: Ending::Succeeded,
            retry_offered: false,
            error_code: None,
            reason: None,
        },
    );
    std::fs::write(dir.path().join("stderr.log"), "info: all done\n").unwrap();
    let log = [
        json!({"type":"user-input","text":"Ask me which file to edit."}),
        json!({"type":"tool-call","call_id":"c1","name":"request_user_input","arguments":"{\"questions\":[]}"}),
        json!({"type":"tool-output","call_id":"c1","output":"request_user_input is unavailable in Default mode"}),
    ]
    .map(|l| l.to_string())
    .join("\n");
    std::fs::write(dir.path().join("model-log.jsonl"), log + "\n").unwrap();
    let (explained, _) = explain(
        red(
            dir.path(),
            "check `request-answered` failed: the app-server never sent `item/tool/requestUserInput` in this run (the run ended succeeded), so the case shows nothing about how the driver answers it",
        ),
        None,
    );
    insta::assert_snapshot!("cause_model_log_refusal", reason_of(&explained));
}

#[test]
fn a_driver_that_exits_within_a_second_is_not_described_as_timed_out() {
    let dir = tempfile::tempdir().unwrap();
    let lines = transcript(
        dir.path(),
        &[
            json!({"method":"item/started","params":{"threadId":"th1","turnId":"t1","item":{"type":"agentMessage","id":"i1","text":""}}}),
        ],
        10_400,
    );
    // The terminal the harness writes, from the wire: the driver let go 0.4 s after the last
    // message with its turn open — no bound of its had expired.
    let ctx = wire::Context {
        cell: CELL.parse().unwrap(),
        driver: "x".into(),
        mode: Mode::Standard,
        target: Target::Local,
        network_enabled: false,
        policy: PolicyGeneration::Current,
        protocol: Default::default(),
    };
    let translation = wire::translate(
        (lines.join("\n") + "\n").as_bytes(),
        &ctx,
        &DriverEnd::Exited { code: 1 },
    )
    .unwrap();
    let ended = translation.terminal;
    assert_eq!(ended.ending, Ending::FailedPermanently, "{ended:?}");
    // A driver that gives up on a silent app-server after its bound, sending `turn/interrupt`
    // on its way out, did time out: only the app-server's messages start the wait.
    let elsewhere = tempfile::tempdir().unwrap();
    let mut patient = transcript(elsewhere.path(), &[], 12_500);
    let interrupt = json!({"direction":"in","time":12_400,"launch":1,"message":{"id":9,"method":"turn/interrupt","params":{"threadId":"th1","turnId":"t1"}}});
    patient.insert(patient.len() - 2, interrupt.to_string());
    let gave_up = wire::translate(
        (patient.join("\n") + "\n").as_bytes(),
        &ctx,
        &DriverEnd::Exited { code: 1 },
    )
    .unwrap()
    .terminal;
    assert_eq!(gave_up.ending, Ending::TimedOut, "{gave_up:?}");
    let check = format!(
        "check `run-succeeded` failed: the run ended failed-permanently: {}",
        ended.reason.clone().unwrap()
    );
    events(dir.path(), DriverEnded::Exited { code: 1 }, ended);
    let (explained, _) = explain(red(dir.path(), &check), None);
    let reason = reason_of(&explained);
    assert!(!reason.contains("timed-out"), "{reason}");
    insta::assert_snapshot!("cause_fast_exit_not_timed_out", reason);
}

#[test]
fn the_message_the_driver_rejected_is_named_not_the_open_turn() {
    let dir = tempfile::tempdir().unwrap();
    transcript(
        dir.path(),
        &[
            json!({"method":"item/agentMessage/delta","params":{"threadId":"th1","turnId":"t1","itemId":"i1","delta":"Hi"}}),
            json!({"method":"harness/unknownNotification","params":{"note":"a method no release has"}}),
        ],
        10_300,
    );
    events(
        dir.path(),
        DriverEnded::Exited { code: 1 },
        failed("the driver exited with status 1"),
    );
    let (explained, _) = explain(
        red(
            dir.path(),
            "check `run-unchanged` failed: the driver's turn t1 never completed on the wire (the run ended failed-permanently: the driver exited with status 1)",
        ),
        None,
    );
    let reason = reason_of(&explained);
    assert!(
        reason.starts_with("the driver exited with status 1, 300 ms after the app-server's last message, the `harness/unknownNotification` notification"),
        "{reason}"
    );
    insta::assert_snapshot!("cause_rejected_message", reason);
}

#[test]
fn an_unanswered_server_request_and_a_bound_are_causes_and_long_values_are_cut() {
    let dir = tempfile::tempdir().unwrap();
    transcript(
        dir.path(),
        &[
            json!({"id":"s1","method":"item/commandExecution/requestApproval","params":{"command":"x".repeat(5000)}}),
        ],
        20_000,
    );
    events(
        dir.path(),
        DriverEnded::KilledAtBound {
            reason: "nothing on the wire for 7 s".into(),
        },
        failed("nothing on the wire for 7 s"),
    );
    // Megabytes of stderr on one line: quoted by its end, the whole length stated.
    std::fs::write(dir.path().join("stderr.log"), "y".repeat(3 << 20)).unwrap();
    let (explained, _) = explain(red(dir.path(), &"z".repeat(10_000)), None);
    let reason = reason_of(&explained);
    assert!(reason.len() <= MAX_REASON_BYTES + 40, "{}", reason.len());
    assert!(
        reason.starts_with("the harness stopped the driver at its bound (nothing on the wire for 7 s), 10.0 s after the app-server's last message (the `item/commandExecution/requestApproval` request (id s1)), saying on stderr (the end of its 3145728 bytes of stderr.log): `…yyy"),
        "{reason}"
    );
    assert!(reason.ends_with(" bytes in all)"), "{reason}");

    std::fs::remove_file(dir.path().join("stderr.log")).unwrap();
    events(
        dir.path(),
        DriverEnded::Exited { code: 0 },
        failed("the driver exited with status 0"),
    );
    let (explained, _) = explain(red(dir.path(), "check `x` failed: y"), None);
    assert_eq!(
        reason_of(&explained),
        "the driver never answered the app-server's `item/commandExecution/requestApproval` request (id s1, launch 1) — check `x` failed: y"
    );
}

#[test]
fn a_cell_that_is_not_red_or_holds_no_cause_keeps_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut passed = red(dir.path(), "every check passed");
    passed.outcome = CellOutcome::Graded {
        verdict: Verdict::new(VerdictKind::Pass, "every check passed", vec![]),
        agreement: Expectation::pass().judge(VerdictKind::Pass),
    };
    assert_eq!(explain(passed.clone(), None), (passed, None));
    let empty = red(dir.path(), "check `x` failed: y");
    assert_eq!(explain(empty.clone(), None), (empty, None));
    // Evidence of an earlier run is not this run's cause.
    std::fs::write(dir.path().join("stderr.log"), "old\n").unwrap();
    events(
        dir.path(),
        DriverEnded::Exited { code: 1 },
        failed("the driver exited with status 1"),
    );
    let later = SystemTime::now() + Duration::from_secs(60);
    let stale = red(dir.path(), "check `x` failed: y");
    assert_eq!(explain(stale.clone(), Some(later)), (stale, None));
}

#[test]
fn a_harness_error_leads_with_the_cause_too() {
    let dir = tempfile::tempdir().unwrap();
    events(
        dir.path(),
        DriverEnded::NotStarted {
            error: "starting the driver `venv/bin/python`: No such file or directory".into(),
        },
        failed("the driver could not be started"),
    );
    let mut errored = red(dir.path(), "");
    errored.outcome = CellOutcome::Error {
        message: "reading the wire: transcript line 3: not JSON".into(),
    };
    let (explained, cause) = explain(errored, None);
    assert_eq!(
        explained.describe(),
        "error: the driver could not be started: starting the driver `venv/bin/python`: No such file or directory — reading the wire: transcript line 3: not JSON",
        "{cause:?}"
    );
}
