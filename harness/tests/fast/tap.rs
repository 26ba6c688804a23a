//! The wire tap as a driver meets it: the `codex` shim `tap::install` writes, run as a
//! process, relaying through the harness's recorder (`tap::session`, in this test process) to a
//! real program (the embedded fake app-server, or `sh`).

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tap::session::{AppServerSetup, HostSpawn, Recording};
use tap::{install, InstalledTap, TapProgram};
use wait_timeout::ChildExt;

struct Tapped {
    tap: InstalledTap,
    recording: Recording,
    transcript: PathBuf,
}

fn tap_into(dir: &Path, program: &str, prefix: &[&str], server_args: &[&str]) -> Tapped {
    let program_of_tap = TapProgram {
        program: env!("CARGO_BIN_EXE_harness").into(),
        leading_args: vec!["tap".into()],
    };
    let tap = install(&dir.join("tap"), &program_of_tap).unwrap();
    let transcript = dir.join("transcript.jsonl");
    let setup = AppServerSetup {
        program: program.into(),
        prefix: prefix.iter().map(|s| s.to_string()).collect(),
        server_args: server_args.iter().map(|s| s.to_string()).collect(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        inherit_env: Vec::new(),
    };
    let recording = Recording::start(&tap.socket, &transcript, setup, Arc::new(HostSpawn)).unwrap();
    Tapped {
        tap,
        recording,
        transcript,
    }
}

impl Tapped {
    /// The transcript as it stands (the recorder writes each record whole).
    fn lines(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.transcript)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// `codex app-server` as a driver runs it, stdin and stdout piped.
    fn app_server(&self) -> std::process::Child {
        Command::new(&self.tap.codex)
            .arg("app-server")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// The transcript once the recording is finished (sealed).
    fn finished(&self) -> Vec<Value> {
        let seal = self.recording.finish(Duration::from_secs(5));
        assert_eq!(seal.check(&self.transcript), Ok(()));
        graders::wire::transcript::read(BufReader::new(
            std::fs::File::open(&self.transcript).unwrap(),
        ))
        .expect("the reader takes what the recorder wrote");
        self.lines()
    }
}

fn run(tap: &Tapped, args: &[&str], input: &[u8]) -> std::process::Output {
    let mut child = Command::new(&tap.tap.codex)
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
        &["-c", "echo 'warming up' >&2; cat; exit 7", "sh"],
        &["--added"],
    );
    let input = b"{\"id\":1,\"method\":\"initialize\"}\nnot json \xff\n{\"id\":2}";
    let output = run(
        &tap,
        &["-c", "x=1", "app-server", "--listen", "stdio://"],
        input,
    );
    assert_eq!(output.stdout, input, "relayed byte for byte");
    assert_eq!(output.stderr, b"warming up\n", "stderr relayed too");
    assert_eq!(output.status.code(), Some(7), "the app-server's exit code");
    let lines = tap.finished();
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
    assert!(ins[1]["raw_b64"].is_string(), "the exact bytes, escaped");
    assert_eq!(ins[2]["message"]["id"], 2, "a last line without a newline");
    assert_eq!(ins[2]["partial"], true);
    assert_eq!(lines.iter().filter(|l| l["direction"] == "out").count(), 3);
    let stderr = lines.iter().find(|l| l["kind"] == "stderr").unwrap();
    assert_eq!(stderr["text"], "warming up");
    let exit = lines.iter().find(|l| l["kind"] == "exit").unwrap();
    assert_eq!(exit["status"], 7);
    assert!(exit.get("killed_by_harness").is_none());
    assert!(lines.iter().any(|l| l["kind"] == "stdin-closed"));
    assert!(lines.iter().any(|l| l["kind"] == "stdout-closed"));
}

#[test]
fn only_the_named_variables_of_the_drivers_environment_reach_the_app_server() {
    let dir = tempfile::tempdir().unwrap();
    let program_of_tap = TapProgram {
        program: env!("CARGO_BIN_EXE_harness").into(),
        leading_args: vec!["tap".into()],
    };
    let tap = install(&dir.path().join("tap"), &program_of_tap).unwrap();
    let setup = AppServerSetup {
        program: "/bin/sh".into(),
        prefix: vec!["-c".into(), "env".into(), "sh".into()],
        server_args: Vec::new(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        inherit_env: vec![
            ("SECRET_TOKEN".into(), "the-harness-value".into()),
            ("NOT_IN_THE_DRIVERS_ENV".into(), "never".into()),
        ],
    };
    let transcript = dir.path().join("transcript.jsonl");
    let recording = Recording::start(&tap.socket, &transcript, setup, Arc::new(HostSpawn)).unwrap();
    let output = Command::new(&tap.codex)
        .arg("app-server")
        .env("SECRET_TOKEN", "what-the-driver-wrote")
        .env("OTHER_SECRET", "kept-back")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    recording.finish(Duration::from_secs(5));
    let env = String::from_utf8_lossy(&output.stdout);
    assert!(
        env.contains("SECRET_TOKEN=the-harness-value"),
        "named, so inherited: {env}"
    );
    assert!(
        !env.contains("what-the-driver-wrote"),
        "the tap sends names, never values: {env}"
    );
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
    let launches: Vec<u64> = tap
        .finished()
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
    let exit = tap
        .finished()
        .into_iter()
        .find(|l| l["kind"] == "exit")
        .unwrap();
    assert_eq!(exit["signal"], libc::SIGTERM);
}

/// A driver that stops its `codex` with SIGTERM: the signal reaches the app-server, and the
/// transcript records that the driver sent it before the app-server's exit (so the graders do
/// not take the exit for a crash).
#[test]
fn a_signal_the_driver_sends_its_codex_is_passed_on_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let tap = tap_into(dir.path(), "/bin/sh", &["-c", "sleep 30", "sh"], &[]);
    let mut child = tap.app_server();
    // The launch is under way once the recorder wrote it.
    let started = Instant::now();
    while !tap.lines().iter().any(|l| l["kind"] == "launch") {
        assert!(started.elapsed() < Duration::from_secs(10), "no launch");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait_timeout(Duration::from_secs(10)).unwrap();
    assert!(status.is_some(), "the tap did not end after SIGTERM");
    let lines = tap.finished();
    let at = |kind: &str| lines.iter().position(|l| l["kind"] == kind);
    let signalled = at("driver-signal").expect("the driver's signal recorded");
    assert_eq!(lines[signalled]["signal"], libc::SIGTERM);
    let exit = at("exit").expect("the app-server's exit");
    assert!(signalled < exit, "{lines:?}");
    assert_eq!(lines[exit]["signal"], libc::SIGTERM, "{lines:?}");
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
    let mut child = tap.app_server();
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
    let lines = tap.finished();
    assert!(lines
        .iter()
        .any(|l| l["direction"] == "out" && l["message"]["id"] == 1));
}

/// Sweep finding: an app-server that closes its stdout but keeps running. Without the tap the
/// driver reads end of input at once; through the tap it must too, and the close is recorded.
#[test]
fn an_app_server_that_closes_stdout_and_keeps_running_gives_the_driver_end_of_input() {
    let dir = tempfile::tempdir().unwrap();
    let tap = tap_into(
        dir.path(),
        "/bin/sh",
        &[
            "-c",
            "echo '{\"id\":1,\"result\":{}}'; exec >&-; sleep 30",
            "sh",
        ],
        &[],
    );
    let mut child = tap.app_server();
    let started = Instant::now();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "end of input came after {:?}",
        started.elapsed()
    );
    assert_eq!(out, "{\"id\":1,\"result\":{}}\n");
    assert!(tap.lines().iter().any(|l| l["kind"] == "stdout-closed"));
    // The driver lets go of its `codex`: the app-server, still running, is killed and the
    // record says the harness did it.
    child.kill().unwrap();
    child.wait().unwrap();
    let lines = tap.finished();
    let exit = lines.iter().find(|l| l["kind"] == "exit").unwrap();
    assert_eq!(exit["signal"], libc::SIGKILL);
    assert!(
        exit["killed_by_harness"]
            .as_str()
            .unwrap()
            .contains("the tap's connection closed"),
        "{exit}"
    );
}

/// The long-line finding: a driver stops reading in the middle of a long line and lets go of
/// its `codex`. What the app-server had sent is in the transcript, the line marked partial.
#[test]
fn a_line_cut_off_when_the_driver_lets_go_is_recorded_as_partial() {
    let dir = tempfile::tempdir().unwrap();
    let tap = tap_into(
        dir.path(),
        "/bin/sh",
        // A 600 KiB line that never ends, then silence.
        &[
            "-c",
            "printf '{\"id\":1,\"result\":\"'; head -c 614400 /dev/zero | tr '\\0' a; sleep 30",
            "sh",
        ],
        &[],
    );
    let mut child = tap.app_server();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = vec![0u8; 4096];
    stdout.read_exact(&mut first).unwrap();
    // Give the recorder time to read what the app-server wrote (it reads whether or not the
    // driver does, until the relay blocks).
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    let lines = tap.finished();
    let partial = lines
        .iter()
        .find(|l| l["direction"] == "out" && l.get("raw").is_some())
        .expect("the line is in the transcript");
    assert_eq!(partial["partial"], true, "{}", &partial.to_string()[..200]);
    // And the recorder noted how much of the line the driver had taken when it let go: at least
    // the 4096 bytes it read.
    let delivered = lines
        .iter()
        .find_map(|l| l["delivered"].as_u64())
        .expect("a note of the line the driver let go of");
    assert!(delivered >= 4096, "{delivered}");
    assert!(partial["raw"]
        .as_str()
        .unwrap()
        .starts_with("{\"id\":1,\"result\":\"aaaa"));
}

#[test]
fn a_tap_whose_recorder_is_gone_says_so_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let tap = tap_into(dir.path(), "/bin/cat", &[], &[]);
    tap.recording.finish(Duration::ZERO);
    let started = Instant::now();
    let output = run(&tap, &["app-server"], b"");
    assert_eq!(output.status.code(), Some(1));
    assert!(started.elapsed() < Duration::from_secs(5));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("cannot reach the harness's recorder"),
        "{stderr}"
    );
}

/// A driver that kills its `codex` and then exits ends the pipe the recorder reads, but no
/// app-server would have seen its stdin close: only the tap's word that its stdin hung up makes
/// a `stdin-closed`. Here the pipe ends while the tap cannot speak (stopped), then it is killed.
#[test]
fn a_codex_killed_by_its_driver_never_saw_its_stdin_close() {
    let dir = tempfile::tempdir().unwrap();
    let tap = tap_into(dir.path(), "/bin/sh", &["-c", "cat", "sh"], &[]);
    let mut child = tap.app_server();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    stdin.write_all(b"{\"id\":1}\n").unwrap();
    let mut echoed = String::new();
    stdout.read_line(&mut echoed).unwrap();
    assert_eq!(echoed, "{\"id\":1}\n");
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    // kill() only queues the stop: until every thread of the tap has stopped, its hang-up
    // thread may still see the close below and report it. Wait for the stop (bounded).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
        match waitpid(pid, Some(WaitPidFlag::WUNTRACED | WaitPidFlag::WNOHANG)).unwrap() {
            WaitStatus::Stopped(..) => break,
            WaitStatus::StillAlive => {}
            other => panic!("the tap did not stop: {other:?}"),
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the tap never stopped"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    drop(stdin);
    // Time for the recorder to read the pipe's end while the tap is stopped.
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let lines = tap.finished();
    assert!(
        !lines.iter().any(|l| l["kind"] == "stdin-closed"),
        "{lines:#?}"
    );
    let exit = lines.iter().find(|l| l["kind"] == "exit").unwrap();
    assert!(
        exit["killed_by_harness"]
            .as_str()
            .is_some_and(|why| why.contains("let go of its `codex`")),
        "{exit}"
    );
}

/// A stdin that cannot hang up (`/dev/null` here) ends where its reader reaches its end.
#[test]
fn a_codex_whose_stdin_is_dev_null_sees_it_end() {
    let dir = tempfile::tempdir().unwrap();
    let tap = tap_into(dir.path(), "/bin/sh", &["-c", "cat", "sh"], &[]);
    let mut child = Command::new(&tap.tap.codex)
        .arg("app-server")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let status = child.wait_timeout(Duration::from_secs(20)).unwrap();
    if status.is_none() {
        child.kill().unwrap();
        panic!("cat never saw its stdin end");
    }
    assert!(status.unwrap().success());
    let lines = tap.finished();
    assert!(
        lines.iter().any(|l| l["kind"] == "stdin-closed"),
        "{lines:#?}"
    );
}

/// A stdin that is a socket, as Node.js gives its children: the driver ends its input with
/// `shutdown(SHUT_WR)` and keeps its end open (Node's `stdin.end()`), and the app-server sees
/// its stdin end. The tap's poll for the hang-up alone must read POLLRDHUP as ready.
#[test]
fn a_codex_whose_stdin_socket_is_shut_down_sees_it_end() {
    use std::io::Write;
    use std::os::unix::net::UnixStream;
    let dir = tempfile::tempdir().unwrap();
    let tap = tap_into(dir.path(), "/bin/sh", &["-c", "cat", "sh"], &[]);
    let (mut driver_end, codex_end) = UnixStream::pair().unwrap();
    let mut child = Command::new(&tap.tap.codex)
        .arg("app-server")
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(codex_end)))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    driver_end
        .write_all(b"{\"id\":1,\"method\":\"x\"}\n")
        .unwrap();
    driver_end.shutdown(std::net::Shutdown::Write).unwrap();
    let status = child.wait_timeout(Duration::from_secs(20)).unwrap();
    if status.is_none() {
        child.kill().unwrap();
        panic!("cat never saw its stdin end");
    }
    assert!(status.unwrap().success());
    drop(driver_end);
    let lines = tap.finished();
    assert!(
        lines.iter().any(|l| l["kind"] == "stdin-closed"),
        "{lines:#?}"
    );
}

/// The tap's complaints reach its driver as the bare line they always were: the relay emits a
/// `tracing` notice (library code prints nothing) and the binary writes it unadorned, no time,
/// level or target, and nothing on stdout, which is the protocol.
#[test]
fn a_tap_told_no_socket_says_so_in_one_bare_line_on_stderr() {
    let output = Command::new(env!("CARGO_BIN_EXE_harness"))
        .arg("tap")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "");
    assert_eq!(
        String::from_utf8_lossy(&output.stderr),
        "codex (harness tap): missing --socket PATH\n"
    );
}
