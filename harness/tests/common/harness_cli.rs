//! The `harness` binary as a user runs it: `harness run FILTER… --out DIR` and `harness report
//! DIR`, each failing with what the command said on stderr.

use std::path::Path;
use std::process::{Command, Stdio};

/// `harness run FILTER… --out DIR`: real cells, real evidence.
pub fn run_cells(out: &Path, filters: &[&str]) -> Result<(), String> {
    let output = Command::new(assert_cmd::cargo::cargo_bin("harness"))
        .arg("run")
        .args(filters)
        .args(["--jobs", "2", "--out"])
        .arg(out)
        .env_remove("GITHUB_STEP_SUMMARY")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running harness run: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "harness run {} failed: {}",
            filters.join(" "),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(())
}

/// `harness report DIR`: rebuild the reports from the folder. Exit 1 (cells differ) is still a
/// report; 2 is not.
pub fn rebuild(dir: &Path) -> Result<(), String> {
    let output = Command::new(assert_cmd::cargo::cargo_bin("harness"))
        .arg("report")
        .arg(dir)
        .env_remove("GITHUB_STEP_SUMMARY")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running harness report: {e}"))?;
    if output.status.code() == Some(2) || !dir.join("report.html").is_file() {
        return Err(format!(
            "harness report failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(())
}
