//! Patched copies of the minimal example driver (`harness/examples/minimal_driver.py`) and
//! `harness run` over a drivers file declaring them, as a user runs their driver: for the tests
//! that compare a copy's cells with the original's.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The minimal example driver's text.
pub fn minimal_driver() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/minimal_driver.py");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// `text` with each `(old, new)` applied; an `old` that does not occur exactly once is an error
/// naming `copy` and the text, so no copy drifts silently from the original.
pub fn apply(text: &str, patches: &[(&str, &str)], copy: &str) -> Result<String, String> {
    let mut text = text.to_string();
    for (old, new) in patches {
        let count = text.matches(old).count();
        if count != 1 {
            return Err(format!(
                "the patch of `{copy}` expects this text exactly once in minimal_driver.py, found {count}: {old:?}"
            ));
        }
        text = text.replacen(old, new, 1);
    }
    Ok(text)
}

/// Write copy `name` of the minimal driver into `dir` and declare it in `file` (a drivers
/// file's text): its codex is the pinned real Codex named by `CODEX_PATH`, and it waits at most
/// `idle_seconds` for a line, a wait it declares so the harness's idle bound follows it.
pub fn declare_copy(dir: &Path, file: &mut String, name: &str, text: &str, idle_seconds: u64) {
    std::fs::write(dir.join(format!("{name}.py")), text).unwrap();
    file.push_str(&format!(
        "[drivers.{name}]\ncommand = \"python3 {name}.py --cwd {{workspace}} --prompt {{prompt}} --mode {{mode}} --timeout {idle_seconds}\"\ncodex = \"env:CODEX_PATH\"\nmodes = [\"planning\", \"standard\", \"ask\"]\noutcome = \"exit-status\"\nidle_timeout_seconds = {idle_seconds}\n\n"
    ));
}

/// `harness run --drivers DRIVERS --out OUT ARGS…`; the JSON summary's cells by name. Exit 1
/// (cells differ from their expectation) is what these tests look at; 2, a run that could not
/// start, fails the test.
pub fn run(drivers: &Path, out: &Path, args: &[&str]) -> BTreeMap<String, Value> {
    let output = Command::new(env!("CARGO_BIN_EXE_harness"))
        .arg("run")
        .arg("--drivers")
        .arg(drivers)
        .arg("--out")
        .arg(out)
        // A red cell counts when it is red twice: the unmodified minimal driver's stderr-flood
        // cell once ran out of its 2 s wait in a rehearsal (the published matrix beside the
        // tests), a loaded machine's flake and no finding; a broken copy's bug is red each time.
        // A cell red once, then green, reads as-expected here and flaky in the reports.
        .args(["--retries", "1"])
        .args(args)
        .env_remove("HARNESS_DRIVERS")
        .output()
        .expect("harness run");
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "harness run: {:?}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    summary["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["cell"].as_str().unwrap().to_string(), c.clone()))
        .collect()
}
