//! `harness run` end to end on the host (the prerequisite rule): a driver the user names that
//! does not exist is an error of the run. The shutdown path (SIGTERM during local cells), which
//! needs root and cgroup v2, is in the other binary (needs_root_runc_codex/shutdown_cli.rs).

use assert_cmd::Command;

#[test]
fn a_driver_cmd_that_does_not_exist_is_an_error_not_a_skip() {
    let out = tempfile::tempdir().unwrap();
    Command::cargo_bin("harness")
        .unwrap()
        .args([
            "run",
            "--driver-cmd",
            "/nonexistent/driver",
            "--environment",
            "local",
        ])
        .arg("--out")
        .arg(out.path())
        .env_remove("CI")
        .assert()
        .code(2)
        .stderr(predicates::str::contains("`/nonexistent/driver`"));
}
