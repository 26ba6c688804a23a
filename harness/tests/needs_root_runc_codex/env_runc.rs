//! Restricted environments on a real runtime: each probe agrees with its spec; the real Codex's
//! thread/start fails with the exact bubblewrap message where the spec says so; nothing outlives
//! a harness killed by SIGTERM or SIGINT.
//!
//! Every test needs root and runc (and the real Codex for the `codex_` ones). Without them a
//! test is reported as ignored with the reason; under `CI=true` it fails instead.
//!
//! Longer than 600 lines on purpose: one libtest-mimic binary for everything that needs the
//! container runtimes (probes, the real Codex's messages, cleanup after a signal, Docker), so
//! the child processes a trial starts are this binary and the prerequisites are checked once.

use crate::common;

use common::codex_cell::runtime;
use common::codex_cell::{
    self, codex_thread_start, codex_thread_start_with, FACTS_PROFILE, HELPER_PIPE_RACE,
    PIPE_RACE_ATTEMPTS,
};
use common::prereq;
use driver::launch;
use libtest_mimic::{Failed, Trial};
use sandbox::launcher::EnvMounts;
use sandbox::launcher::{Launcher, ProcessSpec};
use sandbox::runc::RuncLauncher;
use sandbox::spec::FailsAt;
use sandbox::{catalogue, docker, environment, probe, reap};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Set in a child copy of this test binary: run one long-lived container and wait to be killed.
const CHILD_VAR: &str = "ENV_RUNC_CLEANUP_CHILD";
/// The same on the Docker runtime.
const DOCKER_CHILD_VAR: &str = "ENV_DOCKER_CLEANUP_CHILD";

/// When this process is a child copy (see [`CHILD_VAR`], [`DOCKER_CHILD_VAR`]), play it and
/// say so.
pub fn run_as_child() -> bool {
    if let Ok(environment) = std::env::var(CHILD_VAR) {
        cleanup_child(&environment);
        return true;
    }
    if let Ok(environment) = std::env::var(DOCKER_CHILD_VAR) {
        docker_child(&environment);
        return true;
    }
    false
}

pub fn trials() -> Vec<Trial> {
    let mut trials = Vec::new();
    // A virtual machine's environment (sandbox::kvm) runs the same trials on its own runtime.
    let runs_on = |name: &str| match catalogue::spec(name).map(|s| s.vm.is_some()) {
        Ok(true) => "kvm",
        _ => "root_and_runc",
    };
    for name in catalogue::names() {
        trials.push(needs(
            &format!("probe_agrees_with_spec_{name}_needs_{}", runs_on(name)),
            name,
            false,
            move || probe_agrees(name),
        ));
    }
    // Every environment that fails Codex at start-up or per command with a bubblewrap message:
    // the real Codex's restricted-read thread/start must fail with it, since its fs helper
    // passes the per-command flags (from the catalogue, so a new environment gets its trial
    // without a list to keep).
    let start_up_failures = catalogue::all().into_iter().filter_map(|spec| {
        let signature = match spec.fails_at {
            FailsAt::StartUp => spec.expected_probe.stderr_signature?,
            FailsAt::PerCommand => spec.expected_command.stderr_signature?,
            _ => return None,
        };
        signature
            .starts_with("bwrap: ")
            .then_some((spec.name, signature))
    });
    for (name, signature) in start_up_failures {
        trials.push(needs(
            &format!(
                "codex_restricted_thread_start_fails_{name}_needs_{}_and_codex",
                runs_on(name)
            ),
            name,
            true,
            move || codex_restricted_thread_start_fails(name, signature),
        ));
    }
    // bubblewrap's order of operations (docs/environments.md): the overflow ids are read
    // before the arguments are parsed; `container` is the control.
    for (environment, reads_ids_first) in [("proc-sys-kernel-masked", true), ("container", false)] {
        trials.push(needs(
            &format!("bubblewrap_reads_overflow_ids_before_its_arguments_{environment}_needs_root_and_runc"),
            environment,
            false,
            move || bubblewrap_reads_overflow_ids_first(environment, reads_ids_first),
        ));
    }
    // The control: restricted reads work in `container` (the facts doc's profile (a)).
    trials.push(needs(
        "codex_restricted_thread_start_works_container_needs_root_and_runc_and_codex",
        "container",
        true,
        || codex_facts_profile_thread_start_works("container"),
    ));
    // The launch policy's own narrow planning profile must work on a plain host.
    trials.push(needs(
        "codex_policy_narrow_profile_thread_start_works_local_needs_codex",
        "local",
        true,
        || codex_thread_start_works("local", launch::PolicyGeneration::Legacy),
    ));
    trials.push(needs(
        "codex_full_read_thread_start_works_daytona_needs_root_and_runc_and_codex",
        "daytona",
        true,
        || codex_thread_start_works("daytona", launch::PolicyGeneration::Current),
    ));
    trials.push(needs(
        "prestarted_container_runs_what_it_is_told_needs_root_and_runc",
        "daytona",
        false,
        prestarted_container_runs_what_it_is_told,
    ));
    trials.push(needs(
        "untold_prestarted_container_ends_and_leaves_nothing_needs_root_and_runc",
        "daytona",
        false,
        untold_prestarted_container_ends_and_leaves_nothing,
    ));
    for signal in ["TERM", "INT"] {
        trials.push(needs(
            &format!(
                "cleanup_after_sig{}_needs_root_and_runc",
                signal.to_lowercase()
            ),
            "container",
            false,
            move || cleanup_after_signal(signal),
        ));
    }
    // The Docker runtime renders the same spec. It is an alternative to runc, so it runs where
    // an engine answers; a CI job that promises an engine sets HARNESS_REQUIRE_DOCKER=1, and
    // then a missing engine fails instead of being ignored.
    let docker_required = std::env::var("HARNESS_REQUIRE_DOCKER").as_deref() == Ok("1");
    let engine = docker_engine_answers();
    for spec in catalogue::all()
        .into_iter()
        .filter(|s| s.container.is_some())
    {
        let name = spec.name;
        let trial_name = format!("probe_agrees_with_spec_{name}_docker_needs_a_docker_engine");
        // Each trial runs the probe in a child harness: the runtime is chosen by an
        // environment variable, which must not leak into the runc trials of this process.
        let trial = Trial::test(trial_name.clone(), move || docker_probe_agrees(name));
        let unsupported = match name {
            "ambient-caps" => Some("Docker has no option for ambient capabilities (runc only)"),
            _ => None,
        };
        trials.push(match unsupported {
            Some(reason) => {
                eprintln!("ignored: {trial_name}: {reason}");
                trial.with_ignored_flag(true)
            }
            None if engine || docker_required => trial,
            None => {
                eprintln!("ignored: {trial_name}: no Docker engine answers `docker info` here (set HARNESS_REQUIRE_DOCKER=1 to make that a failure)");
                trial.with_ignored_flag(true)
            }
        });
    }
    let trial_name = "docker_container_of_a_sigkilled_harness_is_reaped_needs_a_docker_engine";
    let trial = Trial::test(trial_name, docker_container_of_a_killed_harness_is_reaped);
    trials.push(if engine || docker_required {
        trial
    } else {
        eprintln!("ignored: {trial_name}: no Docker engine answers `docker info` here (set HARNESS_REQUIRE_DOCKER=1 to make that a failure)");
        trial.with_ignored_flag(true)
    });
    trials
}

/// The child of [`docker_container_of_a_killed_harness_is_reaped`]: start the environment's
/// Docker container, say its id, and wait to be SIGKILLed.
fn docker_child(environment: &str) {
    let scratch = tempfile::Builder::new()
        .prefix("ccf-test-docker-child-")
        .tempdir()
        .expect("scratch");
    let launcher = docker::DockerLauncher::start(
        catalogue::spec(environment).expect("spec"),
        &EnvMounts {
            scratch: scratch.path().to_path_buf(),
            ..EnvMounts::default()
        },
        &[],
    )
    .expect("the Docker container starts");
    println!(
        "READY {} {}",
        launcher.container_id(),
        scratch.path().display()
    );
    std::thread::sleep(Duration::from_secs(120));
}

/// A child copy of this test binary with `vars` set, and a receiver of its first stdout line.
fn spawn_child(
    vars: &[(&str, &str)],
) -> Result<(std::process::Child, std::sync::mpsc::Receiver<String>), Failed> {
    let mut command = Command::new(std::env::current_exe()?);
    for (key, value) in vars {
        command.env(key, value);
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    Ok((child, rx))
}

fn docker_container_exists(id: &str) -> bool {
    Command::new("docker")
        .args(["inspect", "--format", "{{.Id}}", id])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A harness SIGKILLed while its Docker container runs leaves the container under dockerd; the
/// next harness's reaping pass removes it (and only because its owner is gone).
fn docker_container_of_a_killed_harness_is_reaped() -> Result<(), Failed> {
    let (mut child, rx) = spawn_child(&[
        (DOCKER_CHILD_VAR, "container"),
        (environment::RUNTIME_VAR, "docker"),
    ])?;
    let line = rx.recv_timeout(Duration::from_secs(600));
    let (id, scratch) = match line
        .as_deref()
        .map(str::split_whitespace)
        .map(|mut w| (w.next(), w.next(), w.next()))
    {
        Ok((Some("READY"), Some(id), Some(scratch))) => (id.to_string(), scratch.to_string()),
        other => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("the child did not start its container: {other:?}").into());
        }
    };
    // While its owner lives, a reaping pass leaves it alone.
    let report = reap::stale_docker();
    if report.containers.contains(&id) || !docker_container_exists(&id) {
        let _ = child.kill();
        return Err(format!("the container of a live harness was reaped: {report:?}").into());
    }
    let overlays = docker_label(&id, docker::OVERLAYS_LABEL);
    child.kill()?;
    child.wait()?;
    // The killed child's own scratch folder is this test's to remove.
    let _ = std::fs::remove_dir_all(&scratch);
    if !docker_container_exists(&id) {
        return Err("the container went with the SIGKILL: the test would prove nothing".into());
    }
    if !Path::new(&overlays).is_dir() {
        return Err(format!("the killed harness's overlay folder `{overlays}` is not there: the test would prove nothing").into());
    }
    // A parallel trial's harness may reap it first: gone is what counts.
    let report = reap::stale_docker();
    if docker_container_exists(&id) {
        let _ = Command::new("docker").args(["rm", "-f", &id]).status();
        return Err(format!(
            "the container of the killed harness survived the reaping: {report:?}"
        )
        .into());
    }
    if Path::new(&overlays).exists() {
        return Err(
            format!("the overlay folder `{overlays}` survived the reaping: {report:?}").into(),
        );
    }
    Ok(())
}

fn docker_label(id: &str, label: &str) -> String {
    let format = format!("{{{{ index .Config.Labels \"{label}\" }}}}");
    Command::new("docker")
        .args(["inspect", "--format", &format, id])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// `HARNESS_CONTAINER_RUNTIME=docker harness env probe NAME`, bounded.
fn docker_probe_agrees(name: &str) -> Result<(), Failed> {
    let output = assert_cmd::Command::cargo_bin("harness")?
        .args(["env", "probe", name])
        .env(environment::RUNTIME_VAR, "docker")
        .timeout(std::time::Duration::from_secs(600))
        .output()?;
    if !output.status.success() {
        return Err(format!(
            "`{}=docker harness env probe {name}` failed ({}):\n{}{}",
            environment::RUNTIME_VAR,
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    Ok(())
}

/// Whether a Docker engine answers (bounded: `docker info` is given a few seconds).
fn docker_engine_answers() -> bool {
    let Ok(mut child) = std::process::Command::new("docker")
        .arg("info")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
    else {
        return false;
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return status.success(),
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return false;
            }
        }
    }
}

/// A trial that runs only when `environment` (and, with `codex`, the pinned Codex) is available.
fn needs(
    name: &str,
    environment: &'static str,
    codex: bool,
    body: impl FnOnce() -> Result<(), Failed> + Send + 'static,
) -> Trial {
    let missing = prereq::environment_missing(environment)
        .or_else(|| codex.then(prereq::codex_missing).flatten());
    prereq::trial(name, missing, body)
}

/// `bwrap ARGS` in `environment` (runc), bounded.
fn bwrap_in(environment: &str, args: &[&str]) -> Result<std::process::Output, Failed> {
    let scratch = tempfile::tempdir()?;
    let scratch = std::path::absolute(scratch.path())?;
    let launcher = RuncLauncher::new(catalogue::spec(environment)?, EnvMounts::scratch(&scratch))?;
    let mut prepared = launcher.prepare(&ProcessSpec {
        program: PathBuf::from("/usr/bin/bwrap"),
        args: args.iter().map(|a| a.to_string()).collect(),
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: scratch.clone(),
    })?;
    prepared.command.stdin(Stdio::null());
    let output = runtime().block_on(async {
        tokio::time::timeout(Duration::from_secs(60), prepared.command.output()).await
    })??;
    drop(prepared.guard);
    Ok(output)
}

/// Where /proc/sys/kernel is masked, an unknown option fails with the overflowuid text, not
/// `Unknown option` (the ids are read before the arguments are parsed), and a bare `--version`
/// still answers (it comes first of all); in the control the option is what fails.
fn bubblewrap_reads_overflow_ids_first(
    environment: &str,
    reads_ids_first: bool,
) -> Result<(), Failed> {
    use graders::signatures::messages::OVERFLOWUID_SIGNATURE;
    let unknown = bwrap_in(environment, &["--no-such-option", "true"])?;
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    let expected = if reads_ids_first {
        OVERFLOWUID_SIGNATURE
    } else {
        "bwrap: Unknown option --no-such-option"
    };
    if unknown.status.success() || !stderr.contains(expected) {
        return Err(format!(
            "`bwrap --no-such-option` in `{environment}`: {}, stderr `{stderr}` (expected `{expected}`)",
            unknown.status
        )
        .into());
    }
    let version = bwrap_in(environment, &["--version"])?;
    let stdout = String::from_utf8_lossy(&version.stdout);
    if !version.status.success() || !stdout.starts_with("bubblewrap ") {
        return Err(format!(
            "`bwrap --version` in `{environment}`: {}, stdout `{stdout}`, stderr `{}`",
            version.status,
            String::from_utf8_lossy(&version.stderr)
        )
        .into());
    }
    Ok(())
}

fn probe_agrees(name: &str) -> Result<(), Failed> {
    let scratch = tempfile::tempdir()?;
    let report = runtime().block_on(probe::probe(name, scratch.path()))?;
    if let Some(what) = report.disagreement() {
        return Err(format!("probe of `{name}` disagrees: {what}").into());
    }
    Ok(())
}

fn codex_facts_profile_thread_start_works(environment: &str) -> Result<(), Failed> {
    match codex_thread_start_with(
        environment,
        launch::PolicyGeneration::Legacy,
        true,
        codex_cell::DEFAULT_PATH,
    )? {
        Ok(result) if result["activePermissionProfile"]["id"] == FACTS_PROFILE => Ok(()),
        Ok(result) => Err(format!("thread/start answered with another profile: {result}").into()),
        Err(err) => Err(format!("thread/start failed in `{environment}`: {err}").into()),
    }
}

fn codex_restricted_thread_start_fails(environment: &str, signature: &str) -> Result<(), Failed> {
    let mut outcome = codex_thread_start(environment, launch::PolicyGeneration::Legacy)?;
    for _ in 1..PIPE_RACE_ATTEMPTS {
        match &outcome {
            Err(err) if err.message.contains(HELPER_PIPE_RACE) => {
                outcome = codex_thread_start(environment, launch::PolicyGeneration::Legacy)?;
            }
            _ => break,
        }
    }
    match outcome {
        Ok(result) => Err(format!("thread/start succeeded in `{environment}`: {result}").into()),
        Err(err) => {
            let expected_prefix = "error creating thread: failed to load AGENTS.md instructions for environment `local`: fs sandbox helper failed with status exit status: 1: ";
            if err.code == -32603
                && err.message.starts_with(expected_prefix)
                && err.message.contains(signature)
            {
                Ok(())
            } else {
                Err(format!("unexpected thread/start error in `{environment}`: {err}").into())
            }
        }
    }
}

fn codex_thread_start_works(
    environment: &str,
    policy: launch::PolicyGeneration,
) -> Result<(), Failed> {
    match codex_thread_start(environment, policy)? {
        Ok(result) if result["thread"]["id"].is_string() => Ok(()),
        Ok(result) => Err(format!("thread/start answered without a thread: {result}").into()),
        Err(err) => {
            Err(format!("thread/start failed in `{environment}` under {policy:?}: {err}").into())
        }
    }
}

/// The child: one container running `sleep`, its id/bundle/pid on stdout, then wait to be
/// killed (bounded: it gives up after a minute).
fn cleanup_child(environment: &str) {
    // As the harness binary does: its one signal handler tears down what the sandbox lists.
    harness::dispatch::install_signal_handler();
    let scratch = tempfile::Builder::new()
        .prefix("ccf-test-child-")
        .tempdir()
        .expect("scratch");
    let launcher = RuncLauncher::new(
        catalogue::spec(environment).expect("spec"),
        EnvMounts {
            scratch: scratch.path().to_path_buf(),
            ..EnvMounts::default()
        },
    )
    .expect("launcher");
    let rt = runtime();
    rt.block_on(async {
        let mut prepared = launcher
            .prepare(&ProcessSpec {
                program: PathBuf::from("/bin/sleep"),
                args: vec!["600".into()],
                env: vec![("PATH".into(), "/usr/bin:/bin".into())],
                cwd: scratch.path().to_path_buf(),
            })
            .expect("prepare");
        prepared.command.stdin(Stdio::null()).stdout(Stdio::null());
        let _child = prepared.command.spawn().expect("spawn runc");
        let (id, bundle) = launcher.prepared().pop().expect("one container");
        let deadline = Instant::now() + Duration::from_secs(30);
        let pid = loop {
            if let Some(pid) = container_pid(&id) {
                break pid;
            }
            assert!(Instant::now() < deadline, "the container did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        println!(
            "READY {id} {} {pid} {}",
            bundle.display(),
            scratch.path().display()
        );
        tokio::time::sleep(Duration::from_secs(60)).await;
        drop(prepared.guard);
    });
}

/// A `daytona` launcher over `scratch` with the harness binary's folder bound read-only (a
/// container's `/tmp` is its own: a checkout there is not otherwise seen), and the binary's
/// stand-in command.
fn prestart_launcher(scratch: &Path) -> Result<(RuncLauncher, PathBuf, [String; 1]), Failed> {
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_harness"));
    let folder = binary.parent().ok_or("the harness binary has no folder")?;
    let launcher = RuncLauncher::new(
        catalogue::spec("daytona")?,
        EnvMounts {
            readonly: vec![folder.to_path_buf()],
            ..EnvMounts::scratch(scratch)
        },
    )?;
    let stand_in = ["told-exec".to_string()];
    Ok((launcher, binary, stand_in))
}

/// The stand-in execs what it is told, in its container, with exactly the told environment (and
/// runc's `HOME`, which a launch without one also gets), in the told folder; the bytes after
/// the spec are the program's stdin.
fn prestarted_container_runs_what_it_is_told() -> Result<(), Failed> {
    use sandbox::prestart::Prestarted;
    use std::io::{Read, Write};
    let scratch = tempfile::tempdir()?;
    let (launcher, binary, stand_in) = prestart_launcher(scratch.path())?;
    let prestarted = Prestarted::start(&launcher, &binary, &stand_in, scratch.path())?;
    let told = ProcessSpec {
        program: "/bin/sh".into(),
        args: vec![
            "-c".into(),
            "echo \"$X|$HOME|$(pwd)|$(hostname)\"; read line; echo \"got:$line\"".into(),
        ],
        env: vec![("X".into(), "told".into())],
        cwd: scratch.path().to_path_buf(),
    };
    let (mut child, guard) = prestarted.run(&told)?;
    child
        .stdin
        .take()
        .ok_or("no stdin")?
        .write_all(b"hello\n")?;
    let read_all = |mut from: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut out = String::new();
            from.read_to_string(&mut out).map(|_| out)
        })
    };
    let reader = read_all(Box::new(child.stdout.take().ok_or("no stdout")?));
    let errors = read_all(Box::new(child.stderr.take().ok_or("no stderr")?));
    use wait_timeout::ChildExt;
    let status = child.wait_timeout(Duration::from_secs(30))?;
    if status.is_none() {
        let _ = child.kill();
        return Err("the told program did not end within 30 s".into());
    }
    let out = reader.join().map_err(|_| "the reader panicked")??;
    let errors = errors.join().map_err(|_| "the reader panicked")??;
    drop(guard);
    let expected = format!(
        "told|/root|{}|conformance\ngot:hello\n",
        scratch.path().display()
    );
    if out != expected {
        return Err(format!(
            "the told program printed {out:?}, not {expected:?} ({status:?}, stderr {errors:?})"
        )
        .into());
    }
    Ok(())
}

/// A stand-in never told anything sees its stdin close, exits without running anything, and
/// its container and bundle are gone once it is dropped.
fn untold_prestarted_container_ends_and_leaves_nothing() -> Result<(), Failed> {
    let scratch = tempfile::tempdir()?;
    let (launcher, binary, stand_in) = prestart_launcher(scratch.path())?;
    let prestarted =
        sandbox::prestart::Prestarted::start(&launcher, &binary, &stand_in, scratch.path())?;
    let (id, bundle) = launcher
        .prepared()
        .pop()
        .ok_or("no container was prepared")?;
    drop(prestarted);
    let state = Command::new("runc").args(["state", &id]).output()?;
    if state.status.success() {
        return Err(format!(
            "runc still has container {id}: {}",
            String::from_utf8_lossy(&state.stdout)
        )
        .into());
    }
    if bundle.exists() {
        return Err(format!("the bundle {} is still there", bundle.display()).into());
    }
    Ok(())
}

fn container_pid(id: &str) -> Option<u32> {
    let output = Command::new("runc").args(["state", id]).output().ok()?;
    let state: serde_json::Value = serde_json::from_slice(&output.stdout).ok()?;
    (state["status"] == "running")
        .then(|| state["pid"].as_u64())
        .flatten()
        .map(|p| p as u32)
}

fn cleanup_after_signal(signal: &str) -> Result<(), Failed> {
    let (mut child, rx) = spawn_child(&[(CHILD_VAR, "container")])?;
    let line = match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(line) => line,
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err("the child harness did not start its container within 60 s".into());
        }
    };
    let fields: Vec<&str> = line.split_whitespace().collect();
    let [_, id, bundle, pid, scratch] = fields.as_slice() else {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("unexpected child output: {line:?}").into());
    };
    // Before the signal: the container is live, so the checks below can see it.
    if !runc_list().contains(id) || !Path::new(&format!("/proc/{pid}")).exists() {
        let _ = child.kill();
        return Err(format!("container {id} is not running before the signal").into());
    }
    let cgroups_before = find_cgroups(id);
    if cgroups_before.is_empty() {
        let _ = child.kill();
        return Err(format!(
            "no cgroup named after {id} found while it runs: the cgroup check would be vacuous"
        )
        .into());
    }
    let kill = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()?;
    if !kill.success() {
        return Err("kill failed".into());
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(
                format!("the child harness did not exit within 30 s of SIG{signal}").into(),
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut leftovers = Vec::new();
    if runc_list().contains(id) {
        leftovers.push(format!("runc still lists {id}"));
    }
    if Path::new(&format!("/run/runc/{id}")).exists() {
        leftovers.push(format!("runc state /run/runc/{id} remains"));
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")?;
    if mountinfo.contains(*bundle) {
        leftovers.push(format!("a mount under {bundle} remains"));
    }
    // The container's process: gone, or at most a zombie being reaped.
    if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
        if !stat.contains("State:\tZ") && stat.contains("sleep") {
            leftovers.push(format!("the container process {pid} is still running"));
        }
    }
    for cgroup in find_cgroups(id) {
        leftovers.push(format!("cgroup {} remains", cgroup.display()));
    }
    if Path::new(bundle).exists() {
        leftovers.push(format!("the bundle folder {bundle} remains"));
    }
    // The scratch is the child's own TempDir: a signal death does not run its destructor, so
    // the test removes it (it is not the environment's to clean).
    let _ = std::fs::remove_dir_all(scratch);
    if !leftovers.is_empty() {
        return Err(format!(
            "after SIG{signal} (child {status}): {}",
            leftovers.join("; ")
        )
        .into());
    }
    Ok(())
}

fn runc_list() -> String {
    Command::new("runc")
        .args(["list", "--quiet"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// Cgroup folders named after the container, two levels deep under each hierarchy.
fn find_cgroups(id: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(hierarchies) = std::fs::read_dir("/sys/fs/cgroup") else {
        return found;
    };
    for hierarchy in hierarchies.flatten() {
        let mut pending = vec![(hierarchy.path(), 0)];
        while let Some((dir, depth)) = pending.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if !path.is_dir() {
                    continue;
                }
                if entry.file_name().to_string_lossy().contains(id) {
                    found.push(path.clone());
                }
                if depth < 2 {
                    pending.push((path, depth + 1));
                }
            }
        }
    }
    found
}
