//! `harness mutate` from a test: a drivers file of the test's, the out folder below a temporary
//! one, what it said and its `mutation.json`.

use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

/// A drivers file declaring the minimal example driver (harness/examples/minimal_driver.py) as
/// `[drivers.NAME]` (runners `NAME-fake`, `NAME-codex`, …) with this idle timeout in seconds.
pub fn minimal_driver(name: &str, timeout: u32) -> String {
    format!(
        r#"[drivers.{name}]
command = "python3 {{repo}}/harness/examples/minimal_driver.py --cwd {{workspace}} --prompt {{prompt}} --mode {{mode}} --timeout {timeout}"
codex = "env:CODEX_PATH"
contract = "wire"
modes = ["planning", "standard", "ask"]
outcome = "exit-status"
"#
    )
}

/// `harness mutate --drivers DIR/drivers.toml (holding `drivers`) --out DIR/out ARGS…`, bounded
/// (a hung run fails the test): its exit code, and its stdout and stderr together.
pub fn run(drivers: &str, dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let file = dir.join("drivers.toml");
    std::fs::write(&file, drivers).unwrap();
    let output = Command::cargo_bin("harness")
        .unwrap()
        .env_remove("GITHUB_STEP_SUMMARY")
        .arg("mutate")
        .arg("--drivers")
        .arg(&file)
        .arg("--out")
        .arg(dir.join("out"))
        .args(args)
        .timeout(std::time::Duration::from_secs(600))
        .output()
        .unwrap();
    (
        output.status.code(),
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
    )
}

/// The run's `mutation.json` (`said`: its output, shown when there is none).
pub fn report(dir: &Path, said: &str) -> Value {
    let text = std::fs::read_to_string(dir.join("out/mutation.json"))
        .unwrap_or_else(|e| panic!("no mutation.json ({e}):\n{said}"));
    serde_json::from_str(&text).unwrap()
}
