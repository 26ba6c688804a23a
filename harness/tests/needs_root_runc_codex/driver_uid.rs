//! A declared driver whose interpreter the environment's uid cannot reach (a virtualenv linking
//! into a private home) is reported before the cell runs, naming the path and the uid — not
//! found later as exit 126 and an `incomplete` verdict that names nothing.

use crate::common::prereq;
use assert_cmd::Command;
use libtest_mimic::Trial;
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;

pub fn trials() -> Vec<Trial> {
    let root_and_runc = (!nix::unistd::geteuid().is_root()
        || sandbox::system::which("runc").is_none())
    .then(|| "root and runc (daytona-uidmap runs as uid 1000 on runc)".to_string());
    let docker = sandbox::docker::engine_reachable()
        .err()
        .map(|why| format!("a Docker engine ({why}; daytona-uidmap runs as uid 1000 on docker)"));
    vec![
        prereq::trial(
            "a_driver_interpreter_uid_1000_cannot_reach_is_an_error_naming_path_and_uid_needs_root_and_runc",
            root_and_runc,
            || {
                unreachable_interpreter_is_named("runc");
                Ok(())
            },
        ),
        prereq::trial(
            "a_driver_interpreter_uid_1000_cannot_reach_is_an_error_naming_path_and_uid_needs_docker",
            docker,
            || {
                unreachable_interpreter_is_named("docker");
                Ok(())
            },
        ),
    ]
}

/// The check on `runtime` (`HARNESS_CONTAINER_RUNTIME`).
fn unreachable_interpreter_is_named(runtime: &str) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let private = dir.path().join("home");
    std::fs::create_dir_all(private.join("bin")).unwrap();
    std::fs::copy("/bin/sh", private.join("bin/sh")).unwrap();
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::create_dir_all(dir.path().join("venv/bin")).unwrap();
    std::os::unix::fs::symlink(private.join("bin/sh"), dir.path().join("venv/bin/sh")).unwrap();
    std::fs::write(
        dir.path().join("drivers.toml"),
        r#"[drivers.venv]
command = "venv/bin/sh -c 'exit 0'"
codex = "env:CODEX_PATH"
contract = "wire"
modes = ["standard"]
outcome = "exit-status"

[[suites.core-compatibility.matrix]]
runners = ["venv-fake"]
environments = ["daytona-uidmap"]
cases = ["message-marker"]
"#,
    )
    .unwrap();
    let out = dir.path().join("out");
    let output = Command::cargo_bin("harness")
        .unwrap()
        .env_remove("GITHUB_STEP_SUMMARY")
        .env(sandbox::environment::RUNTIME_VAR, runtime)
        .args(["run", "--drivers"])
        .arg(dir.path().join("drivers.toml"))
        .arg("--out")
        .arg(&out)
        .arg("core-compatibility.venv-fake.daytona-uidmap.message-marker")
        .timeout(std::time::Duration::from_secs(300))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    let summary: Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let text = summary.to_string();
    assert!(
        text.contains("runs its processes as uid 1000")
            && text.contains(&format!("{}", private.display()))
            && text.contains("venv/bin/sh"),
        "the cell's error names the uid, the private folder and the program: {text}"
    );
    assert!(
        text.contains("name the install in the drivers file through `{cache}`")
            && text.contains("harness provision"),
        "the cell's error names the fix: {text}"
    );
    assert!(
        !text.contains("status 126") && !text.contains("status 127"),
        "{text}"
    );
}
