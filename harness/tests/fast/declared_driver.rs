//! Declared drivers through the cell executor, against the fake app-server: the tap where the
//! declaration says, a hung driver ended by the wire's idle bound in seconds.

use crate::common;

use matrix::cell::run_cell;
use matrix::context::CellContext;
use report::outcome::CellOutcome;
use std::time::{Duration, Instant};
use suites::spec::CodexDiscovery;

fn options(out: &std::path::Path) -> CellContext {
    let mut options = CellContext::from_env().unwrap();
    let harness: std::path::PathBuf = env!("CARGO_BIN_EXE_harness").into();
    options.out_root = out.to_path_buf();
    options.harness_binary = harness;
    options.repo_root = Some(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .unwrap()
            .to_path_buf(),
    );
    options.ci = false;
    options
}

fn minimal_cell(name: &str) -> suites::Cell {
    suites::load().unwrap().cell(name).unwrap().clone()
}

#[tokio::test]
async fn a_driver_finding_codex_through_its_command_line_is_graded_from_the_wire() {
    let dir = tempfile::tempdir().unwrap();
    let mut cell = minimal_cell("core-compatibility.runner-minimal-fake.local.message-marker");
    let declared = cell.runner.declared.as_mut().unwrap();
    declared.codex = CodexDiscovery::Arg;
    declared.command = format!("CODEX_PATH={{codex}} {}", declared.command);
    let result = run_cell(&options(dir.path()), &cell).await;
    let CellOutcome::Graded { verdict, .. } = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert!(verdict.is_pass(), "{verdict:?}");
    let transcript =
        common::evidence::read_text(&result.evidence_dir.join("transcript.jsonl")).unwrap();
    assert!(
        transcript.contains("\"kind\":\"launch\""),
        "the tap recorded the launch"
    );
    assert!(transcript.contains("\"env_names\""));
}

#[tokio::test]
async fn a_hung_driver_against_the_fake_ends_in_seconds_and_is_credited_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut cell = minimal_cell("transport-faults.runner-minimal-fake.local.hang");
    cell.runner.declared.as_mut().unwrap().command = "sleep 600".into();
    let started = Instant::now();
    let result = run_cell(&options(dir.path()), &cell).await;
    // A driver that never writes a byte gets the start-up allowance before its idle bound
    // (an interpreter's import time is no wait of the task), then the fake's idle bound.
    let task = driver::task::Task::new(graders::events::Mode::Standard, "hang");
    let idle =
        matrix::stages::driver::bounds(&matrix::stages::app_server::fake_timeouts(), &task, None)
            .idle;
    let bound = driver::bounds::DRIVER_START_ALLOWANCE + idle + Duration::from_secs(10);
    assert!(started.elapsed() < bound, "{:?}", started.elapsed());
    let CellOutcome::Graded { verdict, .. } = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert!(!verdict.is_pass(), "{verdict:?}");
    let events = common::evidence::read_text(&result.evidence_dir.join("events.jsonl")).unwrap();
    assert!(events.contains("driver_hung"), "{events}");
}

#[tokio::test]
async fn a_hang_is_bounded_by_the_drivers_declared_idle_timeout_not_the_harness_default() {
    let dir = tempfile::tempdir().unwrap();
    let mut cell = minimal_cell("transport-faults.runner-minimal-fake.local.hang");
    let declared = cell.runner.declared.as_mut().unwrap();
    // The driver declares it gives up after 1 s of silence, but (a bug) waits 600 s: the harness
    // ends it at its declared wait plus the shutdown and margin, well before its default 10 s.
    declared.command = declared
        .command
        .replace("--timeout {idle_seconds}", "--timeout 600");
    assert!(
        declared.command.contains("--timeout 600"),
        "{}",
        declared.command
    );
    declared.idle_timeout_seconds = Some(1);
    let fake = matrix::stages::app_server::fake_timeouts();
    let bound = matrix::stages::driver::idle_bound(&fake, Some(declared));
    assert_eq!(
        bound,
        Duration::from_secs(1) + fake.shutdown + driver::bounds::IDLE_MARGIN
    );
    assert!(bound < matrix::stages::driver::idle_bound(&fake, None));
    let result = run_cell(&options(dir.path()), &cell).await;
    let CellOutcome::Graded { verdict, .. } = &result.outcome else {
        panic!("{:?}", result.outcome)
    };
    assert!(!verdict.is_pass(), "{verdict:?}");
    let events = common::evidence::read_text(&result.evidence_dir.join("events.jsonl")).unwrap();
    assert!(
        events.contains(&format!("nothing on the wire for {bound:?}")),
        "the harness's kill names the declared bound ({bound:?}): {events}"
    );
}
