//! The real Codex's own retried stream and its own log on stderr (issue 37's held-out
//! measurement: a driver ending its turn on every `error` and a driver never reading codex's
//! stderr were green on every real-Codex cell, the cases that catch them ran on the fake only).
//!
//! Two copies of the minimal example driver (`harness/examples/minimal_driver.py`), patched as
//! `broken_drivers.rs` patches its own: one exits 1 on any `error` notification, willRetry or
//! not; one takes codex's stderr as a pipe it never reads. Against the real Codex, the shipped
//! cases `protocol-turn-outcomes/retried-stream` (the mock model API cuts the turn's first
//! stream once; Codex sends `error` "Reconnecting... 1/5" with willRetry: true and retries) and
//! `protocol-size/codex-log` (Codex's log filter at `codex_api=trace`: about 1.9 MB on stderr in
//! the middle of one turn)
//! must not pass them, and the unmodified driver must pass both. Before these cases no
//! real-Codex cell of a declared driver had either condition.

use crate::common;

use common::{driver_copies, prereq};

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;

const ORIGINAL: &str = "minimal";
/// Every `error` notification ends its turn.
const ERROR_TERMINAL: &str = "error-terminal";
/// Codex's stderr is a pipe nobody reads.
const STDERR_UNREAD: &str = "stderr-unread";
/// How long each driver waits for a line: a stalled app-server ends the run this soon.
const DRIVER_IDLE_SECONDS: u64 = 15;

const RETRIED: &str = "protocol-turn-outcomes.{driver}-codex.local.retried-stream";
const LOG: &str = "protocol-size.{driver}-codex.local.codex-log";

fn error_terminal(original: &str) -> Result<String, String> {
    driver_copies::apply(
        original,
        &[(
            "        elif method == \"item/completed\"",
            "        elif method == \"error\":  # taken for the end of the turn, willRetry or not\n            sys.exit(1)\n        elif method == \"item/completed\"",
        )],
        ERROR_TERMINAL,
    )
}

fn stderr_unread(original: &str) -> Result<String, String> {
    driver_copies::apply(
        original,
        &[(
            "stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)",
            "stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)",
        )],
        STDERR_UNREAD,
    )
}

fn cell(pattern: &str, driver: &str) -> String {
    pattern.replace("{driver}", driver)
}

fn own_faults() {
    let dir = tempfile::tempdir().unwrap();
    let original = driver_copies::minimal_driver();
    let mut file = String::new();
    for (name, text) in [
        (ORIGINAL, original.clone()),
        (ERROR_TERMINAL, error_terminal(&original).unwrap()),
        (STDERR_UNREAD, stderr_unread(&original).unwrap()),
    ] {
        std::fs::write(dir.path().join(format!("{name}.py")), text).unwrap();
        let _ = write!(
            file,
            "[drivers.{name}]\ncommand = \"python3 {name}.py --cwd {{workspace}} --prompt {{prompt}} --mode {{mode}} --timeout {DRIVER_IDLE_SECONDS}\"\ncodex = \"env:CODEX_PATH\"\nmodes = [\"planning\", \"standard\", \"ask\"]\noutcome = \"exit-status\"\nidle_timeout_seconds = {DRIVER_IDLE_SECONDS}\n\n"
        );
    }
    let drivers = dir.path().join("drivers.toml");
    std::fs::write(&drivers, file).unwrap();
    let filters: Vec<String> = [ORIGINAL, ERROR_TERMINAL, STDERR_UNREAD]
        .iter()
        .flat_map(|d| [cell(RETRIED, d), cell(LOG, d)])
        .collect();
    let mut args = vec!["--app-server", "codex"];
    args.extend(filters.iter().map(String::as_str));
    let cells: BTreeMap<String, Value> =
        driver_copies::run(&drivers, &dir.path().join("out"), &args);
    let verdict = |name: &str| {
        cells
            .get(name)
            .map_or("missing", |c| c["verdict"].as_str().unwrap_or("none"))
            .to_string()
    };
    let mut failures = Vec::new();
    for name in [cell(RETRIED, ORIGINAL), cell(LOG, ORIGINAL)] {
        if verdict(&name) != "pass" {
            failures.push(format!(
                "{name}: the unmodified driver got {}",
                verdict(&name)
            ));
        }
    }
    // Both stop in the middle of the turn, which the graders see: a failure, not a case that
    // shows nothing (a log that filled the pipe before thread/start was answered, as Codex's
    // `info` level does, would leave the session unopened: `incomplete`).
    for name in [cell(RETRIED, ERROR_TERMINAL), cell(LOG, STDERR_UNREAD)] {
        if verdict(&name) != "fail" {
            failures.push(format!("{name}: {}, not fail", verdict(&name)));
        }
    }
    // Each copy's bug is its own: the other case passes it.
    for name in [cell(LOG, ERROR_TERMINAL), cell(RETRIED, STDERR_UNREAD)] {
        if verdict(&name) != "pass" {
            failures.push(format!("{name}: got {}", verdict(&name)));
        }
    }
    let report: Vec<String> = cells
        .iter()
        .map(|(name, c)| format!("{name}: {}", c["verdict"]))
        .collect();
    eprintln!("{}", report.join("\n"));
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

pub fn trials() -> Vec<libtest_mimic::Trial> {
    vec![
        prereq::trial(
            "the_real_codexs_retried_stream_and_log_catch_a_terminal_error_and_an_unread_stderr_real_codex",
            prereq::codex_missing(),
            || {
                own_faults();
                Ok(())
            },
        ),
        libtest_mimic::Trial::test("the_own_fault_patches_apply_to_the_minimal_driver_once", || {
            let original = driver_copies::minimal_driver();
            if error_terminal(&original)? == original || stderr_unread(&original)? == original {
                return Err("a patch changes nothing".into());
            }
            Ok(())
        }),
    ]
}
