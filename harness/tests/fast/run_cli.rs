//! `harness run --drivers FILE --codex VERSION --partition K/N --list`: the matrix built at run
//! time from a user's drivers file, listed with each cell's status, without running a cell.

use assert_cmd::Command;
use predicates::str::contains;
use std::path::Path;

const DRIVERS: &str = r#"
[drivers.my-runner]
about = "a driver written without the harness in mind"
command = "sh ./driver.sh --cwd {workspace} --prompt {prompt} --mode {mode}"
codex = "env:CODEX_PATH"
modes = ["planning", "standard"]
# Opts in to the runner contract: the listings below are of its suites.
profiles = ["protocol", "runner-contract"]
"#;

/// A folder holding `drivers.toml` (with `text`) and the script its command names.
fn drivers_dir(text: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("drivers.toml"), text).unwrap();
    std::fs::write(dir.path().join("driver.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    dir
}

fn harness() -> Command {
    let mut command = Command::cargo_bin("harness").unwrap();
    command.env_remove("HARNESS_DRIVERS").env_remove("CI").env(
        "HARNESS_OUT_DIR",
        std::env::temp_dir().join("run-cli-never-used"),
    );
    command
}

fn list(drivers: &Path, args: &[&str]) -> String {
    let out = harness()
        .args(["run", "--list", "--drivers"])
        .arg(drivers)
        .args(args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    String::from_utf8(out).unwrap()
}

#[test]
fn list_shows_the_declared_drivers_cells_with_their_status() {
    let dir = drivers_dir(DRIVERS);
    let listing = list(
        &dir.path().join("drivers.toml"),
        &[
            "--app-server",
            "fake",
            "--environment",
            "local",
            "core-compatibility",
        ],
    );
    insta::assert_snapshot!("run_list_core_compatibility_my_runner_fake_local", listing);
}

#[test]
fn list_with_drivers_selects_only_the_files_cells_unless_all_runners() {
    let dir = drivers_dir(DRIVERS);
    let file = dir.path().join("drivers.toml");
    let own = list(&file, &[]);
    assert!(own
        .lines()
        .all(|l| l.split('.').nth(1).unwrap().starts_with("my-runner-")));
    assert!(own.contains("codex-planning-read-only.my-runner-codex.daytona.plan-write-refused\t"));
    let all = list(&file, &["--all-runners"]);
    assert!(all.contains("codex-planning-read-only.runner-fake.daytona.plan-write-refused\t"));
    assert!(all.lines().count() > own.lines().count());
}

#[test]
fn codex_versions_add_runners_that_list_shows() {
    let dir = drivers_dir(DRIVERS);
    let listing = list(
        &dir.path().join("drivers.toml"),
        &[
            "--all-runners",
            "--codex",
            "0.168.0",
            "codex-planning-read-only",
        ],
    );
    for runner in ["runner-codex-0-168-0", "my-runner-codex-0-168-0"] {
        assert!(
            listing.contains(&format!(
                "codex-planning-read-only.{runner}.daytona.plan-write-refused\t"
            )),
            "{runner} missing:\n{listing}"
        );
    }
    harness()
        .args(["run", "--list", "--codex", "latest"])
        .assert()
        .code(2)
        .stderr(contains(
            "--codex: Codex version `latest` is not of the form",
        ));
}

#[test]
fn partitions_split_the_selection_into_disjoint_shards_that_cover_it() {
    let dir = drivers_dir(DRIVERS);
    let file = dir.path().join("drivers.toml");
    let whole: Vec<String> = list(&file, &[]).lines().map(String::from).collect();
    let mut shards: Vec<String> = (1..=3)
        .flat_map(|k| {
            list(&file, &["--partition", &format!("{k}/3")])
                .lines()
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    shards.sort();
    let mut sorted = whole.clone();
    sorted.sort();
    assert_eq!(shards, sorted);
    harness()
        .args(["run", "--list", "--partition", "4/3"])
        .assert()
        .code(2)
        .stderr(contains("partition `4/3` must be K/N"));
}

/// `harness run --list --drivers FILE` must exit 2 saying `wanted`.
fn refused(drivers: &Path, wanted: &str) {
    harness()
        .args(["run", "--list", "--drivers"])
        .arg(drivers)
        .assert()
        .code(2)
        .stderr(contains(wanted));
}

#[test]
fn a_drivers_file_or_program_that_does_not_exist_is_an_error_not_a_skip() {
    refused(
        Path::new("/nonexistent/drivers.toml"),
        "drivers file `/nonexistent/drivers.toml` cannot be read",
    );
    for (program, wanted) in [
        (
            "./no-such-driver",
            "driver `my-runner`: its program `./no-such-driver` does not exist",
        ),
        (
            "no-such-driver-program-x9",
            "`no-such-driver-program-x9` is not installed",
        ),
    ] {
        let dir = drivers_dir(&DRIVERS.replace("sh ./driver.sh", program));
        refused(&dir.path().join("drivers.toml"), wanted);
    }
}

/// Found by the fault sweep: `--drivers /dev/zero` grew until the kernel killed the harness,
/// and `harness drift TYPO` asked npm for 70 s and left a lock file.
#[test]
fn a_device_or_an_oversized_file_is_no_drivers_file_and_drift_checks_the_version_first() {
    refused(
        Path::new("/dev/zero"),
        "`/dev/zero` cannot be read: not a regular file",
    );
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("drivers.toml");
    std::fs::write(&big, "#".repeat(5 << 20)).unwrap();
    refused(&big, "larger than a drivers file's bound");
    harness()
        .args(["drift", "not-a-version"])
        .timeout(std::time::Duration::from_secs(10))
        .assert()
        .code(2)
        .stderr(contains(
            "`not-a-version` is not of the form MAJOR.MINOR.PATCH",
        ));
}

#[test]
fn a_bad_drivers_file_is_refused_naming_the_file_and_the_entry() {
    let dir = drivers_dir(&DRIVERS.replace("{mode}", "{mdoe}"));
    refused(
        &dir.path().join("drivers.toml"),
        "drivers.toml: driver `my-runner`: command: unknown placeholder `{mdoe}`",
    );
}

#[test]
fn the_drivers_file_can_come_from_the_environment() {
    let dir = drivers_dir(DRIVERS);
    let out = harness()
        .args(["run", "--list", "transport-faults"])
        .env("HARNESS_DRIVERS", dir.path().join("drivers.toml"))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let listing = String::from_utf8(out).unwrap();
    assert!(
        listing.contains("transport-faults.my-runner-fake.local.hang\trunner-contract\truns"),
        "{listing}"
    );
}

/// A new driver's line-size cells say which declaration they are graded with: without
/// `max_line_bytes` every legal line must work; with one, a line above it may end the run.
#[test]
fn list_says_what_a_line_size_cell_expects_from_the_declarations() {
    let listing = |extra: &str| {
        let dir = drivers_dir(&format!("{DRIVERS}{extra}"));
        list(
            &dir.path().join("drivers.toml"),
            &[
                "--app-server",
                "fake",
                "--environment",
                "local",
                "protocol-size.",
            ],
        )
    };
    insta::assert_snapshot!("run_list_protocol_size_without_a_line_bound", listing(""));
    insta::assert_snapshot!(
        "run_list_protocol_size_with_a_64k_line_bound",
        listing("max_line_bytes = 65536\n")
    );
}
