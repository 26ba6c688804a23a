//! Two runs with one `--out`: the second is refused with an error naming the folder and the run
//! holding it, while the first runs on; once the first has ended, the folder is free again.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn harness() -> Command {
    let mut command = Command::new(assert_cmd::cargo::cargo_bin("harness"));
    command.env_remove("CI").env_remove("GITHUB_STEP_SUMMARY");
    command
}

#[test]
fn a_second_run_into_the_same_out_is_refused_while_the_first_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // The `hang` case waits on the harness's idle bound: seconds, long enough to overlap.
    let mut first = harness()
        .args(["run", "transport-faults.runner-fake.local.hang", "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lock = out.join(".harness-run.lock");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&lock).is_ok_and(|text| text.starts_with("pid ")) {
        assert!(
            Instant::now() < deadline,
            "the first run never took its folder"
        );
        assert!(
            first.try_wait().unwrap().is_none(),
            "the first run ended early"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let second = harness()
        .args(["run", "transport-faults.runner-fake.local.hang", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let still_running = first.try_wait().unwrap().is_none();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("another harness run is writing to")
            && stderr.contains(&out.display().to_string())
            && stderr.contains(&format!("pid {}", first.id())),
        "{stderr}"
    );
    assert!(
        still_running,
        "the refused run must not have stopped the first"
    );
    let status = wait_bounded(&mut first, Duration::from_secs(120));
    assert!(status.is_some(), "the first run did not end within 120 s");
    assert!(out.join("summary.json").is_file());
    let third = harness()
        .args([
            "run",
            "core-compatibility.runner-fake.local.message-marker",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&third.stderr);
    assert_eq!(third.status.code(), Some(0), "{text}");
}

fn wait_bounded(
    child: &mut std::process::Child,
    bound: Duration,
) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + bound;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}
