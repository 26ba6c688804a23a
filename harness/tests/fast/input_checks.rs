//! Issue 36, "every input checked when it is read": a bad argument or a broken case is refused
//! where it is read — before a folder is created, anything installed or a cell listed as one
//! that runs — with a message naming what was wrong. A full disk's messages need root: that
//! test is in the other binary (needs_root_runc_codex/input_checks.rs).

use assert_cmd::Command;
use predicates::str::contains;
use std::path::Path;
use std::time::Duration;

fn harness(scratch: &Path) -> Command {
    let mut command = Command::cargo_bin("harness").unwrap();
    command
        .env_remove("HARNESS_DRIVERS")
        .env_remove("CI")
        .env("HARNESS_OUT_DIR", scratch.join("out"))
        .env("CODEX_DRIVER_CACHE", scratch.join("cache"))
        .current_dir(scratch)
        .timeout(Duration::from_secs(30));
    command
}

/// The entries of `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The fault sweep: `harness drift ../../x` created folders outside `target/` (the version is
/// part of `drift-VERSION`) and, on an empty cache, installed the pinned Codex before it
/// looked at the argument.
#[test]
fn drift_refuses_a_version_that_is_no_version_before_it_creates_or_installs_anything() {
    for version in ["../../x", "0.1.0-..", "0.1.0-a/b", "latest"] {
        let scratch = tempfile::tempdir().unwrap();
        std::fs::create_dir(scratch.path().join("inside")).unwrap();
        harness(scratch.path())
            .current_dir(scratch.path().join("inside"))
            .args(["drift", version, "--no-matrix"])
            .timeout(Duration::from_secs(10))
            .assert()
            .code(2)
            .stderr(contains(format!(
                "Codex version `{version}` is not of the form"
            )));
        assert_eq!(entries(scratch.path()), ["inside"], "{version}");
        assert!(
            entries(&scratch.path().join("inside")).is_empty(),
            "{version}"
        );
    }
}

#[test]
fn no_command_takes_zero_jobs() {
    let scratch = tempfile::tempdir().unwrap();
    for args in [
        &["run", "--list", "-j", "0"][..],
        &["run", "--list", "--jobs", "0"],
        &["mutate", "-j", "0"],
        &["fidelity", "-j", "0", "runner-minimal"],
    ] {
        harness(scratch.path())
            .args(args)
            .assert()
            .code(2)
            .stderr(contains("must be at least 1"));
    }
}

#[test]
fn an_empty_driver_command_or_one_that_needs_a_shell_is_refused() {
    let scratch = tempfile::tempdir().unwrap();
    for command in ["", "   ", "\t"] {
        harness(scratch.path())
            .args(["run", "--list", "--driver-cmd", command])
            .assert()
            .code(2)
            .stderr(contains("is empty: give the driver's command line"));
    }
    // Run without a shell, a pipe would be two arguments: refused before any cell starts.
    harness(scratch.path())
        .args([
            "run",
            "--environment",
            "local",
            "--driver-cmd",
            "sh -c true | cat",
        ])
        .arg("--out")
        .arg(scratch.path().join("run"))
        .assert()
        .code(2)
        .stderr(contains(
            "--driver-cmd: the external driver: command the word `|` is shell syntax",
        ));
}

/// Two cases of the user's own that could only fail: a scenario that does not exist, and a
/// task table with a misspelt key.
const BROKEN_CASES: &str = r#"
[drivers.my-runner]
command = "sh ./driver.sh --prompt {prompt}"
codex = "env:CODEX_PATH"
modes = ["standard"]

[suites.core-compatibility.cases.nope-scenario]
about = "a scenario the fake does not have"
scenario = "builtin:nope"
grade_as = "message-marker"
mode = "standard"
network = false
task = { prompt = "Reply with the marker." }

[suites.core-compatibility.cases.bad-task]
about = "a task key the driver's task does not take"
scenario = "builtin:message-marker"
grade_as = "message-marker"
mode = "standard"
network = false
task = { promt = "Reply with the marker." }

[[suites.core-compatibility.matrix]]
runners = ["my-runner-fake"]
environments = ["local"]
cases = ["nope-scenario", "bad-task"]
"#;

const NOPE: &str = "core-compatibility.my-runner-fake.local.nope-scenario";
const BAD_TASK: &str = "core-compatibility.my-runner-fake.local.bad-task";

#[test]
fn a_case_with_an_unknown_scenario_or_a_bad_task_lists_as_an_error_and_fails_at_once() {
    let scratch = tempfile::tempdir().unwrap();
    let drivers = scratch.path().join("drivers.toml");
    std::fs::write(&drivers, BROKEN_CASES).unwrap();
    std::fs::write(scratch.path().join("driver.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    let listed = harness(scratch.path())
        .args(["run", "--list", "--drivers"])
        .arg(&drivers)
        .args([NOPE, BAD_TASK])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let listed = String::from_utf8(listed).unwrap();
    let line = |cell: &str| {
        listed
            .lines()
            .find(|l| l.starts_with(&format!("{cell}\t")))
            .unwrap_or_else(|| panic!("{cell} is not listed:\n{listed}"))
            .to_string()
    };
    let nope = line(NOPE);
    assert!(nope.contains("\terror\t"), "{nope}");
    assert!(nope.contains("nope"), "{nope}");
    let bad = line(BAD_TASK);
    assert!(bad.contains("\terror\t"), "{bad}");
    assert!(bad.contains("unknown field `promt`"), "{bad}");

    let started = std::time::Instant::now();
    let out = scratch.path().join("run");
    harness(scratch.path())
        .args(["run", "--drivers"])
        .arg(&drivers)
        .arg("--out")
        .arg(&out)
        .args([NOPE, BAD_TASK])
        .assert()
        .code(1)
        .stderr(contains("unknown field `promt`"))
        .stderr(contains("unknown built-in scenario `nope`"));
    assert!(started.elapsed() < Duration::from_secs(20));
    // Neither cell ran: no driver was started, no workspace made.
    for cell in [NOPE, BAD_TASK] {
        assert!(!out.join(cell).join("driver").exists(), "{cell} ran");
    }
}
