//! Issue 36, "every input checked when it is read": a bad argument or a broken case is refused
//! where it is read — before a folder is created, anything installed or a cell listed as one
//! that runs — with a message naming what was wrong.

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

/// `harness run` of one fake cell with `--out` on a 256 KiB tmpfs that holds `fill_kib` KiB
/// already, in a private mount namespace; its stderr.
fn run_on_a_small_disk(fill_kib: u32) -> String {
    let scratch = tempfile::tempdir().unwrap();
    let disk = scratch.path().join("disk");
    std::fs::create_dir(&disk).unwrap();
    // The folder, the fill and the binary are the script's arguments, never part of its text.
    let script = "mount -t tmpfs -o size=256k tmpfs \"$0\" && \
         { dd if=/dev/zero of=\"$0/fill\" bs=1k count=\"$1\" 2>/dev/null; true; } && \
         exec \"$2\" run --environment local --out \"$0/out\" \
         core-compatibility.runner-minimal-fake.local.message-marker";
    let ran = std::process::Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", script])
        .arg(&disk)
        .arg(fill_kib.to_string())
        .arg(env!("CARGO_BIN_EXE_harness"))
        .env_remove("HARNESS_DRIVERS")
        .env_remove("CI")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&ran.stderr).into_owned();
    assert_ne!(ran.status.code(), Some(0), "{stderr}");
    stderr
}

/// The fault sweep: on a full disk a cell was reported as "writing verdict.json" — the write
/// that failed first (the cell's own folders) and why were lost — and a run whose lock could
/// not be written said only "No space left on device". Each write that fails is now named, with
/// the OS's reason.
#[test]
fn a_full_disk_names_each_write_that_failed_and_why_needs_root() {
    let full = run_on_a_small_disk(300);
    assert!(
        full.contains("harness run: writing this run's pid into")
            && full.contains(".harness-run.lock: No space left on device"),
        "{full}"
    );
    // Room for the run's lock, none for the cell's folders.
    let nearly = run_on_a_small_disk(250);
    assert!(
        nearly.contains("verdict.json: No space left on device"),
        "{nearly}"
    );
    assert!(
        nearly.contains("the cell had ended: error: preparing the cell's folders: writing")
            && nearly.contains("AGENTS.md: No space left on device"),
        "{nearly}"
    );
}
