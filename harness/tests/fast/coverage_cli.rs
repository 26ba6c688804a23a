//! `harness coverage --drivers FILE --out DIR`: what a declared driver was exercised on, read
//! from the transcripts of a run's cells — two cells of the minimal example driver against the
//! fake (under a second each) — and the ways it refuses to show an empty table.

use assert_cmd::Command;
use predicates::prelude::PredicateBooleanExt;
use predicates::str::contains;
use std::path::Path;

/// The minimal example driver (it declines approvals and answers any other server request with
/// an error), named `mini`.
const MINI: &str = r#"
[drivers.mini]
command = "python3 {repo}/harness/examples/minimal_driver.py --cwd {workspace} --prompt {prompt} --mode {mode} --timeout 60"
codex = "env:CODEX_PATH"
contract = "wire"
modes = ["standard"]
outcome = "exit-status"
"#;

const CELLS: &[&str] = &[
    "protocol-server-requests.mini-fake.local.command-approval",
    "protocol-server-requests.mini-fake.local.mcp-elicitation",
];

fn harness() -> Command {
    let mut command = Command::cargo_bin("harness").unwrap();
    command
        .env_remove("HARNESS_DRIVERS")
        .env_remove("CI")
        .env_remove("GITHUB_STEP_SUMMARY")
        .env(
            "HARNESS_OUT_DIR",
            std::env::temp_dir().join("coverage-cli-never-used"),
        );
    command
}

fn drivers_file(dir: &Path, text: &str) -> std::path::PathBuf {
    let path = dir.join("drivers.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn coverage(drivers: &Path, out: &Path, args: &[&str]) -> assert_cmd::assert::Assert {
    harness()
        .args(["coverage", "--drivers"])
        .arg(drivers)
        .arg("--out")
        .arg(out)
        .args(args)
        .timeout(std::time::Duration::from_secs(60))
        .assert()
}

/// `harness run` of [`CELLS`] with the driver [`MINI`] into `dir/out`: the drivers file and the
/// evidence folder.
fn run_mini_cells(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let drivers = drivers_file(dir, MINI);
    let out = dir.join("out");
    harness()
        .args(["run", "--drivers"])
        .arg(&drivers)
        .arg("--out")
        .arg(&out)
        .args(CELLS)
        .timeout(std::time::Duration::from_secs(120))
        .assert()
        .success();
    (drivers, out)
}

/// What `harness coverage --drivers FILE --out DIR --json` printed.
fn coverage_json(drivers: &Path, out: &Path) -> Vec<u8> {
    coverage(drivers, out, &["--json"])
        .success()
        .get_output()
        .stdout
        .clone()
}

#[test]
fn coverage_names_what_a_driver_exchanged_with_the_fake_in_its_cells() {
    let dir = tempfile::tempdir().unwrap();
    let (drivers, out) = run_mini_cells(dir.path());

    let json = coverage_json(&drivers, &out);
    let json: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let run = &json["drivers"][0]["runs"][0];
    assert_eq!(run["runner"], "mini-fake");
    assert_eq!(run["release"], "0.169.0");
    let row = |table: &str, method: &str| -> serde_json::Value {
        run[table]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["method"] == method)
            .unwrap_or_else(|| panic!("{method} in {table}: {run}"))
            .clone()
    };
    // It declines the approval and answers the elicitation with an error.
    let approval = row("server_requests", "item/commandExecution/requestApproval");
    assert_eq!(
        (approval["count"].as_u64(), approval["refused"].as_u64()),
        (Some(1), Some(1))
    );
    let elicitation = row("server_requests", "mcpServer/elicitation/request");
    assert_eq!(elicitation["error"].as_u64(), Some(1));
    assert_eq!(
        elicitation["profile_cases"],
        serde_json::json!(["protocol-server-requests/mcp-elicitation"])
    );
    for method in ["initialize", "thread/start", "turn/start"] {
        assert_eq!(row("client_requests", method)["answered"].as_u64(), Some(2));
    }
    assert!(run["not_met"]["server_requests"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!("item/tool/call")));

    let markdown = coverage(&drivers, &out, &["--markdown"])
        .success()
        .get_output()
        .stdout
        .clone();
    let markdown = String::from_utf8(markdown)
        .unwrap()
        .replace(&dir.path().display().to_string(), "[TMP]");
    insta::assert_snapshot!("coverage_drivers_mini_fake_two_cells", markdown);
    coverage(&drivers, &out, &[]).success().stdout(contains(
        "mini-fake: the fake app-server as Codex 0.169.0; 2 cells with a transcript",
    ));
}

#[test]
fn an_evidence_folder_that_does_not_exist_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let drivers = drivers_file(dir.path(), MINI);
    let absent = dir.path().join("no-such-run");
    coverage(&drivers, &absent, &[])
        .code(2)
        .stderr(contains(format!(
            "the evidence folder {} does not exist",
            absent.display()
        )));
    // Nor is a drivers file that does not exist, or `--out` alone.
    coverage(&dir.path().join("absent.toml"), dir.path(), &[])
        .code(2)
        .stderr(contains("absent.toml"));
    harness()
        .args(["coverage", "--out", "/tmp"])
        .assert()
        .code(2)
        .stderr(contains("--drivers"));
}

/// A driver the folder shows nothing of is said so — no cell at all, or cells without a
/// transcript — and the exit is 1; a transcript that cannot be read is an error naming it.
#[test]
fn a_driver_with_nothing_recorded_is_said_so_and_a_bad_transcript_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let drivers = drivers_file(
        dir.path(),
        &format!("{MINI}\n[drivers.ghost]\ncommand = \"true\"\ncodex = \"path\"\nmodes = [\"standard\"]\n"),
    );
    let out = dir.path().join("out");
    // A cell of `mini` that never ran: a folder without a transcript.
    let cell = out.join(CELLS[0]);
    std::fs::create_dir_all(&cell).unwrap();
    let listed = coverage(&drivers, &out, &[]).code(1);
    let stdout = String::from_utf8(listed.get_output().stdout.clone()).unwrap();
    assert!(
        stdout.contains("no cell of driver `ghost` in") && stdout.contains("harness run --drivers"),
        "{stdout}"
    );
    assert!(
        stdout.contains("no cell of driver `mini` in")
            && stdout.contains("recorded a transcript (its cells there: 1 no verdict.json)"),
        "{stdout}"
    );
    listed.stderr(contains("driver `ghost`").and(contains("driver `mini`")));

    std::fs::write(cell.join("transcript.jsonl"), "not json\n").unwrap();
    coverage(&drivers, &out, &[]).code(2).stderr(
        contains(format!(
            "reading {}",
            cell.join("transcript.jsonl").display()
        ))
        .and(contains("line 1")),
    );
}

/// Compress every log and JSON Lines file of the run's cell folders, as the harness does to a
/// large one once its cell was graded (docs/events.md, "What a cell's folder keeps"); how many.
fn compress_all(dir: &Path) -> usize {
    let mut compressed = 0;
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.file_type().unwrap().is_dir() {
            compressed += compress_all(&path);
        } else if name.ends_with(".jsonl") || name.ends_with(".log") {
            let done = graders::evidence_file::compress(&path, 0).unwrap();
            compressed += usize::from(done.is_some());
        }
    }
    compressed
}

#[test]
fn coverage_report_and_grade_read_a_run_whose_evidence_was_compressed() {
    let dir = tempfile::tempdir().unwrap();
    let (drivers, out) = run_mini_cells(dir.path());
    let before = coverage_json(&drivers, &out);
    let summary = |out: &Path| -> Vec<(String, String)> {
        let text = std::fs::read_to_string(out.join("summary.json")).unwrap();
        let summary: serde_json::Value = serde_json::from_str(&text).unwrap();
        summary["cells"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["cell"].to_string(), c["status"].to_string()))
            .collect()
    };
    let statuses = summary(&out);
    let grade = || {
        let output = harness()
            .args([
                "grade",
                "--suite",
                "protocol-server-requests",
                "--case",
                "command-approval",
            ])
            .arg(out.join(CELLS[0]).join("events.jsonl"))
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        (output.status.code(), output.stdout)
    };
    let graded = grade();
    assert_ne!(graded.0, Some(2), "the events are readable");

    assert!(
        compress_all(&out) >= 2 * 4,
        "each cell's transcript, events and logs"
    );
    let transcript = out.join(CELLS[0]).join("transcript.jsonl");
    assert!(!transcript.exists() && out.join(CELLS[0]).join("transcript.jsonl.gz").is_file());

    let after = coverage_json(&drivers, &out);
    assert_eq!(
        String::from_utf8(after).unwrap(),
        String::from_utf8(before).unwrap()
    );
    // `harness report` still finds each verdict bound to the evidence it was graded on.
    harness()
        .args(["report", "--drivers"])
        .arg(&drivers)
        .arg(&out)
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .success()
        .stderr(contains("changed after grading").not());
    assert_eq!(summary(&out), statuses);
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("transcript.jsonl.gz"),
        "the page links the file on disk"
    );
    // And `harness grade` reads a cell's events through their name, to the same verdict.
    assert_eq!(grade(), graded);
}
