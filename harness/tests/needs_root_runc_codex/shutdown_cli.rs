//! `harness run` end to end on the host, the shutdown path: SIGTERM during local cells ends the
//! run with 143 and the report of what finished, leaving no process of the cells behind; a
//! daemon a driver leaves goes with its cell. Both need root and cgroup v2 (containment).

use crate::common::{self, prereq};
use assert_cmd::Command;
use libtest_mimic::Trial;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

pub fn trials() -> Vec<Trial> {
    // Without root or cgroup v2 there is no containment.
    let missing = || {
        sandbox::containment::scope_folder()
            .is_none()
            .then(|| "needs root and a cgroup v2 hierarchy".to_string())
    };
    vec![
        prereq::trial(
            "sigterm_during_local_cells_exits_143_with_the_report_and_no_process_left_needs_root_cgroup2",
            missing(),
            || {
                sigterm_during_local_cells_exits_143_with_the_report_and_no_process_left();
                Ok(())
            },
        ),
        prereq::trial(
            "a_daemon_that_drops_tmpdir_goes_with_its_cell_and_the_cause_is_named_needs_root_cgroup2",
            missing(),
            || {
                a_daemon_that_drops_tmpdir_goes_with_its_cell_and_the_cause_is_named();
                Ok(())
            },
        ),
    ]
}

/// Needs root and cgroup v2: the daemon leaves its session and drops `TMPDIR`, so only the
/// cell's cgroup can find it.
fn sigterm_during_local_cells_exits_143_with_the_report_and_no_process_left() {
    let dir = tempfile::tempdir().unwrap();
    let driver = daemon_driver(dir.path(), "hanging-driver.sh", "exec sleep 300");
    let out = dir.path().join("out");
    let stderr_path = dir.path().join("stderr");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_harness"))
        .args(["run", "-j", "2", "--environment", "local", "--driver-cmd"])
        .arg(&driver)
        .arg("--out")
        .arg(&out)
        .env_remove("CI")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    // Both hanging cells are running once their drivers' sleeps show up.
    let marker = format!("{}/", out.display());
    let deadline = Instant::now() + Duration::from_secs(30);
    while common::procs::mentioning(&marker).len() < 4 {
        assert!(
            Instant::now() < deadline,
            "the cells did not start: {}",
            read(&stderr_path)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let deadline = Instant::now() + Duration::from_secs(40);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            panic!("SIGTERM did not end the run: {}", read(&stderr_path));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stderr = read(&stderr_path);
    assert_eq!(status.code(), Some(143), "{stderr}");
    assert!(out.join("summary.json").is_file(), "no report: {stderr}");
    assert!(stderr.contains("stopped by SIGTERM"), "{stderr}");
    // The run's dispatcher tells the command line of the stop, which says it once.
    let stopping = "harness: SIGTERM: stopping — no new cell starts, the running ones are torn down, the report lists what finished (again to exit at once)\n";
    assert_eq!(stderr.matches(stopping).count(), 1, "{stderr}");
    // Every selected cell is in summary.json: the two torn down as ignored, saying so.
    let summary: serde_json::Value =
        serde_json::from_str(&read(&out.join("summary.json"))).unwrap();
    let reasons: Vec<&str> = summary["cells"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "ignored")
        .filter_map(|c| c["reason"].as_str())
        .collect();
    assert!(
        reasons
            .iter()
            .filter(|r| r.starts_with("interrupted: the run was stopped by SIGTERM"))
            .count()
            >= 2,
        "{summary}"
    );
    assert!(read(&out.join("junit.xml")).contains("interrupted: the run was stopped by SIGTERM"));
    let matrix = read(&out.join("matrix.md"));
    assert!(matrix.starts_with("**stopped by SIGTERM**"), "{matrix}");
    assert!(
        !stderr.contains("FAIL"),
        "a torn-down cell was reported as a failure: {stderr}"
    );
    let left = common::procs::mentioning(&marker);
    for (pid, _) in &left {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    assert!(left.is_empty(), "left behind: {left:?}\n{stderr}");
}

/// A driver script in `dir` that starts a daemon out of its session and without `TMPDIR`, then
/// runs `then`.
fn daemon_driver(dir: &std::path::Path, name: &str, then: &str) -> std::path::PathBuf {
    let driver = dir.join(name);
    std::fs::write(
        &driver,
        format!("#!/bin/sh\nenv -u TMPDIR setsid sleep 300 </dev/null >/dev/null 2>&1 &\n{then}\n"),
    )
    .unwrap();
    std::fs::set_permissions(&driver, std::fs::Permissions::from_mode(0o755)).unwrap();
    driver
}

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Needs root and cgroup v2, like the test above. A driver that starts a daemon (out of its
/// session, without `TMPDIR`) and exits without `run.ended`: the cell ends normally, the daemon
/// goes with it, and the progress line names the cause.
fn a_daemon_that_drops_tmpdir_goes_with_its_cell_and_the_cause_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let driver = daemon_driver(dir.path(), "daemon-driver.sh", "exit 3");
    let out = dir.path().join("out");
    let assert = Command::cargo_bin("harness")
        .unwrap()
        .args([
            "run",
            "core-compatibility.runner-external.local.message-marker",
        ])
        .arg("--driver-cmd")
        .arg(&driver)
        .arg("--out")
        .arg(&out)
        .env_remove("CI")
        .timeout(Duration::from_secs(120))
        .assert()
        .code(1);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        stderr.contains("the driver exited with status 3"),
        "the progress line does not name the cause: {stderr}"
    );
    let left = common::procs::mentioning(&format!("{}/", out.display()));
    for (pid, _) in &left {
        let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
    }
    assert!(left.is_empty(), "left behind: {left:?}\n{stderr}");
}
