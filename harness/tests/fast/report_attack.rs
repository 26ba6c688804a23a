//! `harness report` on evidence folders a driver or a downloaded artifact may have tampered with
//! (issue 36): a verdict borrowed from another cell, evidence changed after grading, and files
//! that are not regular files — a FIFO in place of each evidence file or of summary.json, and
//! summary.json as a link to `/dev/zero`. Each must end promptly (every command here runs under
//! a bound) with an error cell or a warning naming what was wrong, never a cell as expected. The
//! evidence comes from two real fake-app-server cells (`harness run`, about a second): the
//! reference driver's passing handshake and a driver that exits at once, whose cell fails.

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

const PASSING: &str = "protocol-handshake.runner-fake.local.handshake";
const FAILING: &str = "protocol-handshake.broken-fake.local.handshake";
/// Far above what reporting two cells takes; a report blocked on a FIFO or reading `/dev/zero`
/// runs into it.
const BOUND: Duration = Duration::from_secs(60);

fn harness() -> Command {
    let mut command = Command::cargo_bin("harness").expect("the harness binary");
    command.env_remove("GITHUB_STEP_SUMMARY").timeout(BOUND);
    command
}

/// The drivers file of the failing cell's driver (it exits 3 before launching `codex`).
fn drivers_file(dir: &Path) -> PathBuf {
    let path = dir.join("drivers.toml");
    std::fs::write(
        &path,
        r#"[drivers.broken]
command = "sh -c 'exit 3' {workspace}"
codex = "env:CODEX_PATH"
contract = "wire"
modes = ["standard"]
profiles = ["protocol"]
"#,
    )
    .unwrap();
    path
}

/// A run folder holding the passing and the failing cell, with its summary.json.
fn run_folder(dir: &Path) -> PathBuf {
    let out = dir.join("out");
    let output = harness()
        .args(["run", "--all-runners", PASSING, FAILING, "--drivers"])
        .arg(drivers_file(dir))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(1),
        "the failing cell fails: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary = summary(&out);
    assert_eq!(status_of(&summary, PASSING).0, "as-expected");
    assert_eq!(status_of(&summary, FAILING).0, "differs");
    out
}

fn summary(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

/// The status and reason of `cell` in `summary`.
fn status_of(summary: &Value, cell: &str) -> (String, String) {
    let row = summary["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cell"] == cell)
        .unwrap_or_else(|| panic!("{cell} in {summary}"));
    (
        row["status"].as_str().unwrap().to_string(),
        row["reason"].as_str().unwrap().to_string(),
    )
}

/// `harness report` of `dirs` into `out` (with `extra` arguments first): its exit code, stderr
/// and the summary it wrote.
fn report(out: &Path, extra: &[&str], dirs: &[&Path]) -> (Option<i32>, String, Value) {
    let output = harness()
        .arg("report")
        .args(extra)
        .arg("--out")
        .arg(out)
        .args(dirs)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let summary = serde_json::from_str(
        &std::fs::read_to_string(out.join("summary.json"))
            .unwrap_or_else(|e| panic!("no summary.json ({e}): {stderr}")),
    )
    .unwrap();
    (output.status.code(), stderr, summary)
}

fn copy_folder(from: &Path, to: &Path) {
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap();
    assert!(status.success());
}

fn mkfifo(path: &Path) {
    let _ = std::fs::remove_file(path);
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn a_passing_cells_verdict_copied_into_a_failing_cells_folder_is_not_reported_as_expected() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_folder(dir.path());
    let drivers = drivers_file(dir.path());
    // What a cut-off run leaves: no summary.json, so every cell is read from its verdict.json.
    std::fs::remove_file(out.join("summary.json")).unwrap();
    std::fs::copy(
        out.join(PASSING).join("verdict.json"),
        out.join(FAILING).join("verdict.json"),
    )
    .unwrap();
    let reports = dir.path().join("reports");
    let complete = dir.path().join("complete");
    let drivers_arg = ["--drivers", drivers.to_str().unwrap()];
    let complete_args = ["--complete", "--drivers", drivers.to_str().unwrap()];
    for (into, extra) in [
        (&reports, &drivers_arg[..]),
        (&complete, &complete_args[..]),
    ] {
        let (code, stderr, summary) = report(into, extra, &[&out]);
        assert_eq!(code, Some(1), "{stderr}");
        assert_eq!(status_of(&summary, PASSING).0, "as-expected");
        let (status, reason) = status_of(&summary, FAILING);
        assert_eq!(status, "error", "{extra:?}: {reason}");
        assert_eq!(
            reason,
            format!("verdict.json names cell {PASSING}, not this folder's {FAILING}")
        );
    }
    // Renamed to the folder's cell, the verdict is still bound to the passing cell's evidence.
    let text = std::fs::read_to_string(out.join(PASSING).join("verdict.json")).unwrap();
    std::fs::write(
        out.join(FAILING).join("verdict.json"),
        text.replace(PASSING, FAILING),
    )
    .unwrap();
    let (code, _, summary) = report(&reports, &drivers_arg, &[&out]);
    assert_eq!(code, Some(1));
    let (status, reason) = status_of(&summary, FAILING);
    assert_eq!(status, "error");
    assert!(
        reason.contains("changed after grading: sha256 "),
        "{reason}"
    );
}

#[test]
fn evidence_edited_after_grading_is_refused_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_folder(dir.path());
    let drivers = drivers_file(dir.path());
    let drivers_arg = ["--drivers", drivers.to_str().unwrap()];
    let (code, stderr, _) = report(&dir.path().join("before"), &drivers_arg, &[&out]);
    assert_eq!(code, Some(1), "only the failing cell fails: {stderr}");

    let transcript = out.join(PASSING).join("transcript.jsonl");
    let mut text = std::fs::read_to_string(&transcript).unwrap();
    text.push_str("{\"launch\":1,\"note\":\"added after grading\"}\n");
    std::fs::write(&transcript, text).unwrap();
    let (code, _, summary) = report(&dir.path().join("after"), &drivers_arg, &[&out]);
    assert_eq!(code, Some(1));
    let (status, reason) = status_of(&summary, PASSING);
    assert_eq!(status, "error");
    assert!(
        reason.starts_with("transcript.jsonl changed after grading: sha256 "),
        "{reason}"
    );
}

#[test]
fn a_fifo_in_place_of_an_evidence_file_ends_the_report_promptly_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_folder(dir.path());
    let drivers = drivers_file(dir.path());
    let drivers_arg = ["--drivers", drivers.to_str().unwrap()];
    for name in [
        "events.jsonl",
        "transcript.jsonl",
        "model-log.jsonl",
        "stderr.log",
    ] {
        let copy = dir.path().join(format!("fifo-{name}"));
        copy_folder(&out, &copy);
        mkfifo(&copy.join(PASSING).join(name));
        let (code, stderr, summary) = report(&copy.join("reports"), &drivers_arg, &[&copy]);
        assert_eq!(code, Some(1), "{name}: {stderr}");
        let (status, reason) = status_of(&summary, PASSING);
        assert_eq!(status, "error", "{name}: {reason}");
        assert!(
            reason.contains(&format!("{name} is a FIFO, not a regular file")),
            "{name}: {reason}"
        );
    }

    let copy = dir.path().join("fifo-summary");
    copy_folder(&out, &copy);
    mkfifo(&copy.join("summary.json"));
    let (code, stderr, summary) = report(&copy.join("reports"), &drivers_arg, &[&copy]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("summary.json is a FIFO, not a regular file"),
        "{stderr}"
    );
    // Its cells are read from their bound verdicts instead.
    assert_eq!(status_of(&summary, PASSING).0, "as-expected");
    assert_eq!(status_of(&summary, FAILING).0, "differs");
}

#[test]
fn a_summary_linked_to_dev_zero_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_folder(dir.path());
    std::fs::remove_file(out.join("summary.json")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", out.join("summary.json")).unwrap();
    // Far below what reading /dev/zero into memory for the bound's duration would take.
    let output = harness()
        .arg("report")
        .arg("--out")
        .arg(dir.path().join("reports"))
        .arg(&out)
        .timeout(Duration::from_secs(20))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("summary.json is a symbolic link, not a regular file"),
        "{stderr}"
    );
}
