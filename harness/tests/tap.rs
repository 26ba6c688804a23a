//! The wire tap as a driver meets it: the `codex` shim `tap::install` writes, run as a
//! process, relaying to a real program (the embedded fake app-server, or `sh`).

use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use tap::{install, InstalledTap, TapConfig, TapProgram};
use wait_timeout::ChildExt;

fn tap_into(dir: &Path, program: &str, prefix: &[&str], server_args: &[&str]) -> InstalledTap {
    let tap = TapProgram {
        program: env!("CARGO_BIN_EXE_harness").into(),
        leading_args: vec!["tap".into()],
    };
    let config = TapConfig {
        program: program.into(),
        prefix: prefix.iter().map(|s| s.to_string()).collect(),
        server_args: server_args.iter().map(|s| s.to_string()).collect(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        inherit_env: Vec::new(),
        transcript: dir.join("transcript.jsonl"),
        launches: dir.join("tap").join("launches"),
        max_line_bytes: 1 << 20,
        max_transcript_bytes: 1 << 26,
    };
    install(&dir.join("tap"), &tap, &config, None).unwrap()
}

fn transcript(tap: &InstalledTap) -> Vec<Value> {
    std::fs::read_to_string(&tap.transcript)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn run(tap: &InstalledTap, args: &[&str], input: &[u8]) -> std::process::Output {
    let mut child = Command::new(&tap.codex)
        .args(args)
        .env("SECRET_TOKEN", "never-recorded")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    match child.wait_timeout(Duration::from_secs(20)).unwrap() {
        Some(_) => child.wait_with_output().unwrap(),
        None => {
            child.kill().unwrap();
            panic!("the tap did not end within 20 s");
        }
    }
}

#[test]
fn bytes_pass_unchanged_both_ways_and_the_launch_is_recorded_without_env_values() {
    let dir = tempfile::tempdir().unwrap();
    let tap = tap_into(
        dir.path(),
        "/bin/sh",
        &["-c", "cat; exit 7", "sh"],
        &["--added"],
    );
    let input = b"{\"id\":1,\"method\":\"initialize\"}\nnot json \xff\n{\"id\":2}";
    let output = run(
        &tap,
        &["-c", "x=1", "app-server", "--listen", "stdio://"],
        input,
    );
    assert_eq!(output.stdout, input, "relayed byte for byte");
    assert_eq!(output.status.code(), Some(7), "the app-server's exit code");
    let lines = transcript(&tap);
    let launch = &lines[0];
    assert_eq!(launch["kind"], "launch");
    assert_eq!(launch["launch"], 1);
    assert_eq!(
        launch["argv"],
        serde_json::json!(["-c", "x=1", "app-server", "--listen", "stdio://"])
    );
    assert_eq!(launch["added_args"], serde_json::json!(["--added"]));
    let names: Vec<&str> = launch["env_names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(names.contains(&"SECRET_TOKEN"), "{names:?}");
    let text = std::fs::read_to_string(&tap.transcript).unwrap();
    assert!(
        !text.contains("never-recorded"),
        "no environment value is recorded"
    );
    let ins: Vec<&Value> = lines.iter().filter(|l| l["direction"] == "in").collect();
    assert_eq!(ins[0]["message"]["method"], "initialize");
    assert_eq!(ins[1]["raw"], "not json \u{fffd}");
    assert_eq!(ins[2]["message"]["id"], 2, "a last line without a newline");
    assert_eq!(lines.iter().filter(|l| l["direction"] == "out").count(), 3);
    let exit = lines.iter().find(|l| l["kind"] == "exit").unwrap();
    assert_eq!(exit["status"], 7);
    assert!(lines.iter().any(|l| l["kind"] == "stdin-closed"));
}

#[test]
fn only_the_named_variables_of_the_drivers_environment_reach_the_app_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut tap = tap_into(dir.path(), "/bin/sh", &["-c", "env", "sh"], &[]);
    let mut config: TapConfig =
        serde_json::from_slice(&std::fs::read(&tap.config).unwrap()).unwrap();
    config.inherit_env = vec!["SECRET_TOKEN".into(), "NOT_IN_THE_DRIVERS_ENV".into()];
    let program = TapProgram {
        program: env!("CARGO_BIN_EXE_harness").into(),
        leading_args: vec!["tap".into()],
    };
    tap = install(&dir.path().join("tap"), &program, &config, None).unwrap();
    let output = Command::new(&tap.codex)
        .arg("app-server")
        .env("SECRET_TOKEN", "handed-on")
        .env("OTHER_SECRET", "kept-back")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let env = String::from_utf8_lossy(&output.stdout);
    assert!(env.contains("SECRET_TOKEN=handed-on"), "{env}");
    assert!(!env.contains("OTHER_SECRET"), "{env}");
    assert!(!env.contains("NOT_IN_THE_DRIVERS_ENV"), "{env}");
    assert!(env.contains("PATH=/usr/bin:/bin"), "{env}");
}

#[test]
fn version_and_tool_subcommands_get_no_cell_arguments_and_launches_are_numbered() {
    let dir = tempfile::tempdir().unwrap();
    let tap = tap_into(
        dir.path(),
        "/bin/sh",
        &["-c", "printf '%s\\n' \"$*\"", "sh"],
        &["--scenario", "s"],
    );
    let version = run(&tap, &["--version"], b"");
    assert_eq!(String::from_utf8_lossy(&version.stdout), "--version\n");
    let schema = run(
        &tap,
        &["app-server", "generate-json-schema", "--out", "x"],
        b"",
    );
    assert_eq!(
        String::from_utf8_lossy(&schema.stdout),
        "app-server generate-json-schema --out x\n"
    );
    let server = run(&tap, &["app-server"], b"");
    assert_eq!(
        String::from_utf8_lossy(&server.stdout),
        "app-server --scenario s\n"
    );
    let launches: Vec<u64> = transcript(&tap)
        .iter()
        .filter(|l| l["kind"] == "launch")
        .map(|l| l["launch"].as_u64().unwrap())
        .collect();
    assert_eq!(launches, [1, 2, 3]);
}

#[test]
fn an_app_server_killed_by_a_signal_ends_the_tap_by_that_signal() {
    let dir = tempfile::tempdir().unwrap();
    let tap = tap_into(dir.path(), "/bin/sh", &["-c", "kill -TERM $$", "sh"], &[]);
    let output = run(&tap, &["app-server"], b"");
    assert_eq!(output.status.signal(), Some(libc::SIGTERM), "{output:?}");
    let exit = transcript(&tap)
        .into_iter()
        .find(|l| l["kind"] == "exit")
        .unwrap();
    assert_eq!(exit["signal"], libc::SIGTERM);
}

#[test]
fn the_fake_app_server_answers_through_the_tap() {
    let dir = tempfile::tempdir().unwrap();
    let tap = tap_into(
        dir.path(),
        env!("CARGO_BIN_EXE_harness"),
        &["fake-app-server"],
        &["--scenario", "builtin:healthy"],
    );
    let mut child = Command::new(&tap.codex)
        .arg("app-server")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"id":1,"method":"initialize","params":{{"clientInfo":{{"name":"t","version":"1"}}}}}}"#
    )
    .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    let answer: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(answer["id"], 1, "{line}");
    assert!(answer.get("result").is_some(), "{line}");
    drop(stdin);
    let status = child.wait_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(status.and_then(|s| s.code()), Some(0));
    let lines = transcript(&tap);
    assert!(lines
        .iter()
        .any(|l| l["direction"] == "out" && l["message"]["id"] == 1));
}
