//! `harness run --retries N`: a cell that fails runs again from scratch; one that then agrees is
//! flaky — exit 0, but said in every report — and one that fails every attempt fails the run,
//! naming each attempt. The driver is a script in a folder the test owns that fails until a
//! marker file exists (its first run writes it), against the fake app-server, `local`.

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The one cell these tests run: a handshake the minimal example driver passes.
const CELL: &str = "protocol-handshake.retried-fake.local.handshake";

/// A drivers file in `dir` declaring `retried`: a script that, while `dir/marker` is absent,
/// writes it when `writes_marker` and exits 1 (the driver sends nothing: `incomplete`), and
/// once it exists is the minimal example driver.
fn drivers(dir: &Path, writes_marker: bool) -> PathBuf {
    let marker = dir.join("marker");
    let touch = if writes_marker {
        format!("touch '{}'", marker.display())
    } else {
        String::new()
    };
    let script = dir.join("driver.sh");
    std::fs::write(
        &script,
        format!(
            "if [ ! -e '{marker}' ]; then\n  {touch}\n  exit 1\nfi\nexec python3 '{repo}/examples/minimal_driver.py' \"$@\"\n",
            marker = marker.display(),
            repo = env!("CARGO_MANIFEST_DIR"),
        ),
    )
    .unwrap();
    let drivers = dir.join("drivers.toml");
    std::fs::write(
        &drivers,
        format!(
            r#"[drivers.retried]
command = "sh {} --cwd {{workspace}} --prompt {{prompt}} --mode {{mode}} --timeout 2"
codex = "env:CODEX_PATH"
contract = "wire"
modes = ["standard"]
profiles = ["protocol"]
"#,
            script.display()
        ),
    )
    .unwrap();
    drivers
}

/// `harness run CELL --drivers DRIVERS --out OUT ARGS`: its exit code and stderr. The local
/// driver runs without a mount namespace of its own so that it can write its marker.
fn run(drivers: &Path, out: &Path, args: &[&str]) -> (Option<i32>, String) {
    let output = Command::cargo_bin("harness")
        .unwrap()
        .args(["run", CELL, "--drivers"])
        .arg(drivers)
        .arg("--out")
        .arg(out)
        .args(args)
        .env("HARNESS_LOCAL_ISOLATION", "off")
        .env_remove("CI")
        .env_remove("HARNESS_RETRIES")
        .env_remove("GITHUB_STEP_SUMMARY")
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn summary(out: &Path) -> Value {
    serde_json::from_str(&read(&out.join("summary.json"))).unwrap()
}

/// The flaky cell as every report says it, from `out`'s reports.
fn assert_reported_flaky(out: &Path) {
    let summary = summary(out);
    assert_eq!(summary["totals"]["flaky"], 1, "{summary:#}");
    assert_eq!(summary["totals"]["as_expected"], 1, "{summary:#}");
    let earlier = &summary["cells"][0]["earlier_attempts"];
    assert_eq!(earlier[0]["attempt"], 1, "{summary:#}");
    assert_eq!(earlier[0]["verdict"], "incomplete", "{summary:#}");
    assert_eq!(earlier[0]["evidence"], "attempt-1", "{summary:#}");
    let markdown = read(&out.join("matrix.md"));
    assert!(markdown.contains("1 cells were flaky"), "{markdown}");
    assert!(markdown.contains("✅ pass ⚠️ flaky"), "{markdown}");
    let junit = read(&out.join("junit.xml"));
    assert!(
        junit.contains("<flakyFailure")
            && junit.contains("attempt 1: expected `pass`, got `incomplete`"),
        "{junit}"
    );
    assert!(!junit.contains("<failure"), "{junit}");
    assert!(read(&out.join("report.html")).contains("⚠ 1 flaky"));
}

#[test]
fn a_cell_that_fails_then_agrees_is_flaky_exits_0_and_every_report_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (code, stderr) = run(&drivers(dir.path(), true), &out, &["--retries", "1"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "] flaky {CELL} — attempt 1: expected `pass`, got `incomplete`"
        )),
        "the progress line: {stderr}"
    );
    assert!(
        stderr.contains("1 cells were flaky (failed, then as expected when run again):"),
        "{stderr}"
    );
    let kept = out.join(CELL).join("attempt-1");
    assert!(
        stderr.contains("attempt 1: expected `pass`, got `incomplete`")
            && stderr.contains(&format!("(evidence: {})", kept.display())),
        "{stderr}"
    );
    assert!(
        !stderr.contains("differ from their expectation"),
        "{stderr}"
    );
    // Both attempts' evidence: the first whole, with its own verdict, the last at the top.
    let first = read(&kept.join("verdict.json"));
    assert!(first.contains("\"incomplete\""), "{first}");
    let last = read(&out.join(CELL).join("verdict.json"));
    assert!(last.contains("\"earlier_attempts\""), "{last}");
    assert_reported_flaky(&out);

    // `harness report` reads the attempts back from the cell's verdict.json alone.
    std::fs::remove_file(out.join("summary.json")).unwrap();
    let report = Command::cargo_bin("harness")
        .unwrap()
        .arg("report")
        .arg(&out)
        .env_remove("GITHUB_STEP_SUMMARY")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&report.stderr);
    assert_eq!(report.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("1 cells were flaky"), "{stderr}");
    assert_reported_flaky(&out);
}

#[test]
fn a_cell_that_fails_every_attempt_fails_the_run_naming_each_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (code, stderr) = run(&drivers(dir.path(), false), &out, &["--retries", "1"]);
    assert_eq!(code, Some(1), "{stderr}");
    let tail = stderr
        .split("1 cells differ from their expectation")
        .nth(1)
        .unwrap_or_else(|| panic!("no list of differing cells: {stderr}"));
    assert!(
        tail.contains(&format!("{CELL}: expected `pass`, got `incomplete`"))
            && tail.contains("attempt 1: expected `pass`, got `incomplete`; verdict reason:")
            && tail.contains(&out.join(CELL).join("attempt-1").display().to_string()),
        "both attempts named last: {tail}"
    );
    assert!(!stderr.contains("flaky"), "{stderr}");
    let summary = summary(&out);
    assert_eq!(summary["totals"]["differs"], 1, "{summary:#}");
    assert_eq!(summary["totals"]["flaky"], 0, "{summary:#}");
    let junit = read(&out.join("junit.xml"));
    assert!(junit.contains("<rerunFailure"), "{junit}");
    let markdown = read(&out.join("matrix.md"));
    assert!(
        markdown.contains("; attempt 1: expected `pass`"),
        "{markdown}"
    );
}

#[test]
fn without_retries_a_failing_cell_runs_once_as_before() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (code, stderr) = run(&drivers(dir.path(), true), &out, &[]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(dir.path().join("marker").exists(), "it ran");
    assert!(!out.join(CELL).join("attempt-1").exists());
    assert!(
        !stderr.contains("flaky") && !stderr.contains("attempt 1"),
        "{stderr}"
    );
    let summary = summary(&out);
    assert_eq!(summary["totals"]["flaky"], 0, "{summary:#}");
    assert!(
        summary["cells"][0].get("earlier_attempts").is_none(),
        "{summary:#}"
    );
}
