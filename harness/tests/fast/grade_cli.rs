//! `harness grade`: verdict output and exit codes (0 pass, 1 other verdict, 2 unreadable input
//! or unknown suite/case), on streams written with the real event log, marked as the harness
//! marks its own (driver::provenance) with the key of a cache of the test's own.

use assert_cmd::Command;
use driver::event_log::EventLog;
use graders::events::*;
use predicates::prelude::PredicateBooleanExt;
use predicates::str::contains;
use std::path::Path;

/// The harness cache of the stream at `path` (holding the key it is marked with).
fn cache_of(path: &Path) -> std::path::PathBuf {
    path.parent().unwrap().join("cache")
}

fn write_run(path: &Path, refused: bool) {
    let key = driver::provenance::Key::load_or_create(&cache_of(path)).unwrap();
    write_run_with(
        EventLog::to_file_marked("run-cli", path, key.into()).unwrap(),
        refused,
    );
}

/// The same run, written without the harness's mark (as a driver or a hand could write it).
fn write_unmarked_run(path: &Path, refused: bool) {
    write_run_with(EventLog::to_file("run-cli", path).unwrap(), refused);
}

fn write_run_with(mut log: EventLog, refused: bool) {
    let perm = Some("runner-read-only".to_string());
    log.emit(
        Source::Driver,
        Body::SessionStarted(SessionStarted {
            thread_id: "t".into(),
            sandbox: SandboxFacts::default(),
            approval_policy: None,
            approvals_reviewer: None,
        }),
    )
    .unwrap();
    let output = if refused {
        "/bin/bash: line 1: plan-write-probe-1.txt: Read-only file system\nWRITE_REFUSED\n"
    } else {
        "bwrap: setting up uid map: Permission denied\n"
    };
    log.emit(
        Source::Driver,
        Body::ItemCompleted(ItemEvent {
            turn_id: None,
            item: Item::CommandExecution(CommandExecution {
                id: "c".into(),
                command: "printf probe > plan-write-probe-1.txt || echo WRITE_REFUSED".into(),
                cwd: None,
                status: "completed".into(),
                exit_code: Some(if refused { 0 } else { 1 }),
                stdout: None,
                stderr: None,
                aggregated_output: Some(output.into()),
                sandbox: perm,
                ran_in_sandbox: None,
            }),
        }),
    )
    .unwrap();
    log.emit(
        Source::Harness,
        Body::WorkspaceEvidence(WorkspaceEvidence {
            pattern: "plan-write-probe-*".into(),
            probes: vec![],
        }),
    )
    .unwrap();
    log.end(RunEnded {
        ending: Ending::Succeeded,
        retry_offered: false,
        error_code: None,
        reason: None,
    })
    .unwrap();
    log.flush().unwrap();
}

fn grade(path: &Path, format: &str) -> assert_cmd::assert::Assert {
    Command::cargo_bin("harness")
        .unwrap()
        .args([
            "grade",
            "--suite",
            "codex-planning-read-only",
            "--case",
            "plan-write-refused",
            "--format",
            format,
        ])
        .arg(path)
        .env("CODEX_DRIVER_CACHE", cache_of(path))
        .timeout(std::time::Duration::from_secs(60))
        .assert()
}

/// A stream that would pass, written by anyone but the harness (a driver under the events
/// contract, a hand) or edited after the harness wrote it: graded, never a pass.
#[test]
fn a_stream_without_the_harness_s_mark_cannot_pass() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    driver::provenance::Key::load_or_create(&cache_of(&path)).unwrap();
    write_unmarked_run(&path, true);
    grade(&path, "text")
        .code(1)
        .stdout(contains("verdict: incomplete"))
        .stdout(contains("carry no valid mark of this harness"))
        .stdout(contains("would have passed"));

    write_run(&path, true);
    let text = std::fs::read_to_string(&path).unwrap();
    let edited = text.replacen("WRITE_REFUSED", "WRITE_REFUSES", 1);
    assert_ne!(text, edited);
    std::fs::write(&path, edited).unwrap();
    grade(&path, "text")
        .code(1)
        .stdout(contains("the first: line 2"));
}

#[test]
fn a_refused_write_passes_with_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    write_run(&path, true);
    grade(&path, "text")
        .code(0)
        .stdout(contains("verdict: pass"))
        .stdout(contains("seq 1:"));
    let out = grade(&path, "json").code(0).get_output().stdout.clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["verdict"], "pass");
}

#[test]
fn a_launcher_failure_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    write_run(&path, false);
    grade(&path, "text")
        .code(1)
        .stdout(contains("verdict: sandbox-failed-to-start"));
}

#[test]
fn a_truncated_stream_is_incomplete_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    write_run(&path, true);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, &text[..text.len() - 10]).unwrap();
    grade(&path, "text")
        .code(1)
        .stdout(contains("verdict: incomplete"))
        .stdout(contains("line 4"));
}

#[test]
fn unreadable_input_or_unknown_case_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    grade(&dir.path().join("missing.jsonl"), "text").code(2);
    let path = dir.path().join("events.jsonl");
    write_run(&path, true);
    Command::cargo_bin("harness")
        .unwrap()
        .args([
            "grade",
            "--suite",
            "codex-planning-read-only",
            "--case",
            "nope",
        ])
        .arg(&path)
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .code(2)
        .stderr(contains("no case `nope`"));
}

/// An events file that is a FIFO (nobody writes it) or a link to `/dev/zero` ends the command at
/// once, naming it; a pipe is read through `-`.
#[test]
fn a_fifo_or_a_link_as_the_events_file_exits_2_without_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("events.jsonl");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    grade(&fifo, "text")
        .code(2)
        .stderr(contains("events.jsonl is a FIFO, not a regular file"));
    let link = dir.path().join("zero.jsonl");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    grade(&link, "text")
        .code(2)
        .stderr(contains("zero.jsonl is a symbolic link"));
}

#[test]
fn every_option_value_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.jsonl");
    write_run(&path, true);
    let run = |extra: &[&str]| {
        Command::cargo_bin("harness")
            .unwrap()
            .args([
                "grade",
                "--suite",
                "codex-planning-read-only",
                "--case",
                "plan-write-refused",
            ])
            .args(extra)
            .arg(&path)
            .env("CODEX_DRIVER_CACHE", cache_of(&path))
            .timeout(std::time::Duration::from_secs(60))
            .assert()
    };
    for (value, says) in [
        ("18446744073709551615", "above the largest accepted limit"),
        ("18446744073709551616", "not a byte count"),
        ("0", "at least 1"),
        ("-1", "not a byte count"),
        ("lots", "not a byte count"),
    ] {
        run(&[&format!("--max-line-bytes={value}")])
            .code(2)
            .stderr(contains("--max-line-bytes"))
            .stderr(contains(says))
            .stderr(contains("panicked").not());
    }
    run(&["--format", "yaml"])
        .code(2)
        .stderr(contains("--format"));
    run(&["--max-line-bytes", "8388608"]).code(0);
    run(&["--max-line-bytes", "100"])
        .code(1)
        .stdout(contains("longer than the line limit of 100 bytes"));
}
