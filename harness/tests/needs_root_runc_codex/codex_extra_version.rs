//! `harness run --codex VERSION` runs the real Codex at a published version the harness does not
//! pin, without a rebuild: the runner `runner-codex-<version>` is generated at run time and the
//! version is found in the same cache as the pins. Needs that version in the cache (CI runs
//! `harness provision 0.168.0` first; a test never installs Codex) and bubblewrap; without them
//! the test is ignored with the reason, and fails under `CI=true`.

use crate::common;

use assert_cmd::Command;
use codex::provision;
use common::prereq;

/// A published version that is not one of the pins.
const EXTRA: &str = "0.168.0";

pub fn trials() -> Vec<libtest_mimic::Trial> {
    let missing = prereq::environment_missing("local").or_else(|| {
        provision::resolve(EXTRA)
            .err()
            .map(|e| format!("Codex {EXTRA} (run `harness provision {EXTRA}`): {e:#}"))
    });
    let trials = vec![prereq::trial(
        "codex_flag_runs_an_unpinned_version_needs_real_codex_0_168_0",
        missing,
        codex_flag_runs_an_unpinned_version,
    )];
    trials
}

fn codex_flag_runs_an_unpinned_version() -> Result<(), libtest_mimic::Failed> {
    let out = tempfile::tempdir().map_err(|e| e.to_string())?;
    let cell = "core-compatibility.runner-codex-0-168-0.local.message-marker";
    Command::cargo_bin("harness")
        .map_err(|e| e.to_string())?
        .args(["run", "--codex", EXTRA, cell, "--out"])
        .arg(out.path())
        .env_remove("HARNESS_DRIVERS")
        .timeout(std::time::Duration::from_secs(180))
        .assert()
        .success();
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("summary.json")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let only = &summary["cells"][0];
    assert_eq!(only["cell"], cell);
    assert_eq!(only["status"], "as-expected", "{only}");
    assert_eq!(only["verdict"], "pass", "{only}");
    // The app-server that answered is that version.
    let transcript = common::evidence::read_text(&out.path().join(cell).join("transcript.jsonl"))
        .map_err(|e| e.to_string())?;
    assert!(
        transcript.contains(EXTRA),
        "the transcript does not show Codex {EXTRA}"
    );
    Ok(())
}
