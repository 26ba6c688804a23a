//! `harness report`: rebuilding the reports of an evidence folder, merging shards' folders into
//! one report, the job summary's link to report.html, and clear errors for folders that are not
//! evidence. The evidence comes from real fake-app-server cells (`harness run`, seconds).

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use std::path::Path;

fn harness() -> Command {
    let mut command = Command::cargo_bin("harness").expect("the harness binary");
    command.env_remove("GITHUB_STEP_SUMMARY");
    command
}

fn run_into(out: &Path, filter: &str) {
    harness()
        .args(["run", filter, "--jobs", "2", "--out"])
        .arg(out)
        .assert()
        .success();
}

fn summary(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

/// `drivers.toml` in `dir`, declaring the minimal example driver as `mini` (no
/// `max_line_bytes`), held to both profiles.
fn mini_drivers(dir: &Path) -> std::path::PathBuf {
    let drivers = dir.join("drivers.toml");
    std::fs::write(
        &drivers,
        r#"[drivers.mini]
command = "python3 {repo}/harness/examples/minimal_driver.py --cwd {workspace} --prompt {prompt} --mode {mode} --timeout 2"
codex = "env:CODEX_PATH"
contract = "wire"
modes = ["standard"]
profiles = ["protocol", "runner-contract"]
"#,
    )
    .unwrap();
    drivers
}

/// `harness run ARGS --drivers DRIVERS --out OUT`: whether the driver passes is not these
/// tests' business; that the run ran is.
fn run_drivers(drivers: &Path, out: &Path, args: &[&str]) {
    let output = harness()
        .arg("run")
        .args(args)
        .arg("--drivers")
        .arg(drivers)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(
        matches!(output.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn cell_names(summary: &Value) -> Vec<String> {
    summary["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cell"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn shards_merge_into_one_report_with_a_linked_job_summary() {
    let (a, b, merged) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    run_into(a.path(), "transport-faults.runner-fake.local.");
    run_into(b.path(), "core-compatibility.runner-fake.local.");
    let step_summary = merged.path().join("step-summary.md");
    // Shard b first: the merged report still follows the matrix's order.
    harness()
        .arg("report")
        .arg("--out")
        .arg(merged.path())
        .arg(b.path())
        .arg(a.path())
        .env("GITHUB_STEP_SUMMARY", &step_summary)
        .env("GITHUB_SERVER_URL", "https://github.com")
        .env("GITHUB_REPOSITORY", "owner/repo")
        .env("GITHUB_RUN_ID", "7")
        .assert()
        .success()
        .stdout(predicate::str::contains("## Conformance matrix"));
    let merged_summary = summary(merged.path());
    let mut expected = cell_names(&summary(b.path()));
    expected.extend(cell_names(&summary(a.path())));
    assert_eq!(merged_summary["totals"]["cells"], expected.len());
    let names = cell_names(&merged_summary);
    assert_eq!(
        names.first().map(|n| n.starts_with("core-compatibility.")),
        Some(true)
    );
    let mut sorted = names.clone();
    sorted.sort();
    expected.sort();
    assert_eq!(sorted, expected);
    // The merged cells point at the shards' folders, which the page reads its evidence from.
    for cell in merged_summary["cells"].as_array().unwrap() {
        let dir = Path::new(cell["evidence_dir"].as_str().unwrap());
        assert!(dir.join("events.jsonl").is_file(), "{}", dir.display());
    }
    let html = std::fs::read_to_string(merged.path().join("report.html")).unwrap();
    assert_eq!(html.matches("data-cell=").count(), expected.len());
    for name in ["junit.xml", "matrix.md"] {
        assert!(merged.path().join(name).is_file(), "{name}");
    }
    let text = std::fs::read_to_string(&step_summary).unwrap();
    assert!(
        text.contains("(https://github.com/owner/repo/actions/runs/7#artifacts)"),
        "{text}"
    );

    // One folder, rebuilt in place (as from a downloaded artifact).
    std::fs::remove_file(a.path().join("report.html")).unwrap();
    harness().arg("report").arg(a.path()).assert().success();
    assert!(a.path().join("report.html").is_file());

    // As the whole matrix (`--complete`, as CI reads the `cells` test binary's folder): the
    // shard's cells are there, every other cell is an error that names the folder.
    let whole = tempfile::tempdir().unwrap();
    harness()
        .args(["report", "--complete", "--out"])
        .arg(whole.path())
        .arg(a.path())
        .assert()
        .code(1)
        .stdout(predicate::str::contains("it did not run"))
        .stderr(predicate::str::contains(
            "cells differ from their expectation",
        ));
    let whole_summary = summary(whole.path());
    let shard_cells = cell_names(&summary(a.path()));
    for cell in whole_summary["cells"].as_array().unwrap() {
        let ran = shard_cells.contains(&cell["cell"].as_str().unwrap().to_string());
        let status = cell["status"].as_str().unwrap();
        assert!(
            ran || status == "error" || status == "not-applicable",
            "{cell}"
        );
    }

    // The same shard twice is not a merge.
    harness()
        .arg("report")
        .arg("--out")
        .arg(merged.path())
        .arg(a.path())
        .arg(a.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("shards must not overlap"));
}

#[test]
fn folders_that_are_not_evidence_are_errors() {
    let empty = tempfile::tempdir().unwrap();
    harness()
        .arg("report")
        .arg(empty.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("holds no conformance evidence"));
    harness()
        .arg("report")
        .arg(empty.path().join("absent"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("does not exist"));
    harness()
        .arg("report")
        .arg(empty.path())
        .arg(empty.path())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("needs --out DIR"));
    harness().arg("report").assert().code(2);
}

/// A drivers file's cells are unknown to the shipped matrix: with `--drivers` the merged report
/// still lists them in the matrix's order, whatever order the shards come in.
#[test]
fn merged_shards_of_a_drivers_file_follow_its_matrix_order() {
    let (dir, a, b, merged) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let drivers = mini_drivers(dir.path());
    let filter = "core-compatibility.mini-fake.local.";
    for (shard, out) in [("1/2", a.path()), ("2/2", b.path())] {
        run_drivers(
            &drivers,
            out,
            &[filter, "--jobs", "2", "--partition", shard],
        );
    }
    let listed = harness()
        .args(["run", filter, "--list", "--drivers"])
        .arg(&drivers)
        .output()
        .unwrap();
    let in_matrix_order: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .filter_map(|l| l.split('\t').next())
        .filter(|name| name.starts_with(filter))
        .map(str::to_string)
        .collect();
    assert!(in_matrix_order.len() >= 2, "{in_matrix_order:?}");
    let output = harness()
        .arg("report")
        .arg("--drivers")
        .arg(&drivers)
        .arg("--out")
        .arg(merged.path())
        .arg(b.path())
        .arg(a.path())
        .output()
        .unwrap();
    assert!(matches!(output.status.code(), Some(0 | 1)));
    assert_eq!(cell_names(&summary(merged.path())), in_matrix_order);
}

/// What the declarations make of a cell reaches the reports of a real run and survives
/// `harness report`: a legal long line of a driver that declares no `max_line_bytes` must work,
/// and the case that needs the declaration is not applicable naming it.
#[test]
fn the_reports_say_what_a_drivers_declarations_make_of_its_cells() {
    let (dir, out, rebuilt) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let drivers = mini_drivers(dir.path());
    let line = "protocol-size.mini-fake.local.line-64k";
    let oversized = "transport-faults.mini-fake.local.oversized-line";
    run_drivers(&drivers, out.path(), &[line, oversized]);
    let note = "the driver declares no max_line_bytes, so its line of over 65536 bytes must work";
    let row = |summary: &Value, name: &str| -> Value {
        summary["cells"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["cell"] == name)
            .unwrap()
            .clone()
    };
    for folder in [out.path(), rebuilt.path()] {
        if folder == rebuilt.path() {
            let status = harness()
                .arg("report")
                .arg("--out")
                .arg(rebuilt.path())
                .arg(out.path())
                .output()
                .unwrap()
                .status;
            assert!(matches!(status.code(), Some(0 | 1)));
        }
        let summary = summary(folder);
        let expected = row(&summary, line)["expected_declarations"].clone();
        assert!(expected.as_str().unwrap().starts_with(note), "{expected}");
        assert_eq!(row(&summary, oversized)["status"], "not-applicable");
        let matrix = std::fs::read_to_string(folder.join("matrix.md")).unwrap();
        assert!(
            matrix.contains(&format!("- `{line}` expects pass ({note}")),
            "{matrix}"
        );
        assert!(matrix.contains("the case needs the driver to declare max_line_bytes = N"));
        let junit = std::fs::read_to_string(folder.join("junit.xml")).unwrap();
        assert!(junit
            .contains("not applicable: the case needs the driver to declare max_line_bytes = N"));
        let html = std::fs::read_to_string(folder.join("report.html")).unwrap();
        assert!(html.contains(note));
    }
    let verdict: Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join(line).join("verdict.json")).unwrap(),
    )
    .unwrap();
    assert!(verdict["expected_declarations"]
        .as_str()
        .unwrap()
        .starts_with(note));
}
