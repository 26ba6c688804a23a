//! `harness bench gate --drivers FILE`: the minimal example driver's gate on a few of its cells
//! against the same sessions run directly against the fake. The figures are not checked (a
//! benchmark, not a timed test); that both sides ran the same sessions, and the driver's own
//! verdict on each direct session, are.

use assert_cmd::Command;
use serde_json::Value;

const DRIVERS: &str = r#"[drivers.mini]
command = "python3 {repo}/harness/examples/minimal_driver.py --cwd {workspace} --prompt {prompt} --mode {mode} --timeout 2"
codex = "env:CODEX_PATH"
idle_timeout_seconds = 2
contract = "wire"
modes = ["planning", "standard", "ask"]
outcome = "exit-status"
"#;

fn harness(dir: &std::path::Path) -> Command {
    let mut command = Command::cargo_bin("harness").unwrap();
    command
        .env_remove("HARNESS_DRIVERS")
        .env_remove("GITHUB_STEP_SUMMARY")
        .env("HARNESS_OUT_DIR", dir.join("out"));
    command
}

#[test]
fn the_gate_and_the_direct_sessions_of_a_driver_are_the_same_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let drivers = dir.path().join("drivers.toml");
    std::fs::write(&drivers, DRIVERS).unwrap();
    let summary = dir.path().join("summary.md");
    let output = harness(dir.path())
        .env("GITHUB_STEP_SUMMARY", &summary)
        .args(["bench", "gate", "--drivers"])
        .arg(&drivers)
        .arg("protocol-handshake.mini-fake.local.handshake")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/bench-gate/bench-gate.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(report["sessions"], 1, "{report}");
    assert_eq!(report["differ_from_baseline"], 0, "{report}");
    // The driver's own verdict: its turn completed against the fake started as its `codex`.
    assert_eq!(report["direct_nonzero"], 0, "{report}");
    assert!(report["ratio"].as_f64().unwrap() > 0.0, "{report}");
    assert!(stdout.contains("(target 1.5×)"), "{stdout}");
    let summary = std::fs::read_to_string(&summary).unwrap();
    assert!(summary.contains("The PR gate of `mini`"), "{summary}");
}

#[test]
fn a_driver_the_file_does_not_declare_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let drivers = dir.path().join("drivers.toml");
    std::fs::write(&drivers, DRIVERS).unwrap();
    let output = harness(dir.path())
        .args(["bench", "gate", "--driver", "nope", "--drivers"])
        .arg(&drivers)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("declares no driver `nope`"), "{stderr}");
}
