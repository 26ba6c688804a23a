//! The real Codex's own versions of fake-only conditions (its long lines, its retried stream,
//! its log on stderr) reach every declared driver's Codex runners, as the shipped runners'.

use crate::drivers_file::{load, GOOD};

/// A driver's line limit shows against the real Codex's own long lines, not only the fake's
/// (issue 37's held-out measurement: a copy reading at most 64 KiB a line was green on every
/// real-Codex cell). Before, no real-Codex cell of a declared driver sent a line over 64 KiB.
#[test]
fn a_declared_driver_meets_the_real_codexs_long_line() {
    let matrix = load(GOOD, &[]).unwrap();
    let name = "protocol-size.my-runner-codex.local.long-message";
    let cell = matrix
        .cell(name)
        .unwrap_or_else(|| panic!("no cell {name}"));
    assert_eq!(cell.not_applicable, None, "{name}");
    assert_eq!(cell.grader_case(), "line-1m", "{name}");
}

/// A driver's handling of `error` and of codex's stderr shows against the real Codex's own
/// retried stream and own log, not only the fake's (issue 37's held-out measurement: a driver
/// ending its turn on every `error` and one never reading stderr were green on every real-Codex
/// cell). Before, no real-Codex cell of a declared driver had either.
#[test]
fn a_declared_driver_meets_the_real_codexs_retried_stream_and_log() {
    let matrix = load(GOOD, &[]).unwrap();
    for (name, grader) in [
        (
            "protocol-turn-outcomes.my-runner-codex.local.retried-stream",
            "retryable-error",
        ),
        (
            "protocol-size.my-runner-codex.local.codex-log",
            "stderr-flood",
        ),
    ] {
        let cell = matrix
            .cell(name)
            .unwrap_or_else(|| panic!("no cell {name}"));
        assert_eq!(cell.grader_case(), grader, "{name}");
    }
    // Whether a driver's outcome can show a retried turn is its declaration, as on the fake.
    let declared = format!("{GOOD}outcome = \"exit-status\"\n");
    let matrix = load(&declared, &[]).unwrap();
    let name = "protocol-turn-outcomes.my-runner-codex.local.retried-stream";
    assert_eq!(matrix.cell(name).unwrap().not_applicable, None, "{name}");
}
