//! The AppArmor class on a real kernel (`sandbox::kvm`): the real Codex in the virtual machine of
//! `apparmor-userns` and `apparmor-userns-bwrap-profile`, which bubblewrap it uses, and what the
//! app-server's PATH does to that choice. Each environment's machine boots once for this binary.
//!
//! Every trial needs the kvm runtime (`/dev/kvm`, QEMU, the guest image of `ci/kvm-guest-image`),
//! the `…_and_codex` ones the pinned Codex too; a trial that cannot run here is ignored with the reason, and fails under
//! `CI=true`.

use crate::common;

use common::codex_cell::{codex_cell, codex_launcher, codex_thread_start_with, DEFAULT_PATH};
use common::prereq;
use driver::launch::PolicyGeneration;
use graders::signatures::{classify_line, messages::USERNS_MESSAGE_BWRAP_012};
use libtest_mimic::{Failed, Trial};
use sandbox::probe::{bubblewrap_in_use_on, BubblewrapInUse};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RESTRICTED: &str = "apparmor-userns";
const EXEMPT: &str = "apparmor-userns-bwrap-profile";
/// A PATH without /usr/bin and /bin: Codex finds no system bubblewrap and takes its bundled one.
const PATH_WITHOUT_SYSTEM_BWRAP: &str = "/usr/local/bin";

/// Set in the child of the SIGKILL trial: boot this environment's machine, say so, wait.
const CHILD_VAR: &str = "ENV_KVM_CHILD";
/// The environment of the SIGKILL trial (no AppArmor profile to compile: the quickest boot).
const KILLED: &str = "max-userns-zero";
/// Bound on the child's boot, as the runtime's own bound under QEMU's emulator.
const CHILD_BOOT_BOUND: Duration = Duration::from_secs(300);

/// When this process is the SIGKILL trial's child (see [`CHILD_VAR`]), play it and say so.
pub fn run_as_child() -> bool {
    let Ok(environment) = std::env::var(CHILD_VAR) else {
        return false;
    };
    boot_and_wait(&environment);
    true
}

pub fn trials() -> Vec<Trial> {
    let needs = |name: &str, environment: &str, body: fn() -> Result<(), Failed>| {
        let codex = name.ends_with("_and_codex");
        let missing = prereq::environment_missing(environment)
            .or_else(|| codex.then(prereq::codex_missing).flatten());
        prereq::trial(name, missing, body)
    };
    let trials: Vec<Trial> = vec![
        needs(
            "codex_fails_with_the_apparmor_message_on_the_system_bubblewrap_needs_kvm_and_codex",
            RESTRICTED,
            codex_fails_with_the_apparmor_message_on_the_system_bubblewrap,
        ),
        needs(
            "the_bwrap_profile_exempts_only_the_system_bubblewrap_needs_kvm_and_codex",
            EXEMPT,
            the_bwrap_profile_exempts_only_the_system_bubblewrap,
        ),
        needs(
            "a_sigkilled_harness_leaves_no_machine_needs_kvm",
            KILLED,
            a_sigkilled_harness_leaves_no_machine,
        ),
    ];
    trials
}

/// Which bubblewrap Codex would run in `environment` with `path` as the app-server's PATH.
fn bubblewrap_codex_uses(environment: &str, path: &str) -> Result<BubblewrapInUse, Failed> {
    let codex = codex::provision::resolve(codex::provision::PINNED)?;
    let cell = codex_cell(path)?;
    let booting = Instant::now();
    let launcher = codex_launcher(environment, &cell, &codex)?;
    eprintln!(
        "{environment}: launcher ready in {:?} (the machine's boot, on first use)",
        booting.elapsed()
    );
    let runtime = tokio::runtime::Runtime::new()?;
    let started = Instant::now();
    let found = runtime.block_on(bubblewrap_in_use_on(
        launcher.as_ref(),
        &codex.bundled_bwrap(),
        &cell.workspace,
        path,
    ))?;
    eprintln!(
        "{environment}, PATH={path}: Codex uses {} (looked up in {:?})",
        found.describe(&codex.bundled_bwrap()),
        started.elapsed()
    );
    Ok(found)
}

fn restricted_thread_start_error(environment: &str, path: &str) -> Result<String, Failed> {
    let started = Instant::now();
    let outcome = codex_thread_start_with(environment, PolicyGeneration::Legacy, false, path)?;
    eprintln!(
        "{environment}, PATH={path}: a real-Codex session to its thread/start answer in {:?}",
        started.elapsed()
    );
    match outcome {
        Ok(result) => Err(format!("thread/start succeeded in `{environment}`: {result}").into()),
        Err(err) => Ok(err.message),
    }
}

/// Ubuntu's restriction without the bwrap profile: Codex takes the system bubblewrap (Debian
/// 13's 0.12.0), the kernel's AppArmor refuses it its namespaces, and a restricted-read
/// thread/start fails with exactly the environment's message.
fn codex_fails_with_the_apparmor_message_on_the_system_bubblewrap() -> Result<(), Failed> {
    match bubblewrap_codex_uses(RESTRICTED, DEFAULT_PATH)? {
        BubblewrapInUse::System { path, version }
            if path == "/usr/bin/bwrap" && version.contains("0.12.0") => {}
        other => {
            return Err(format!("expected the system bubblewrap 0.12.0, found {other:?}").into())
        }
    }
    let message = restricted_thread_start_error(RESTRICTED, DEFAULT_PATH)?;
    if !message.ends_with(USERNS_MESSAGE_BWRAP_012) {
        return Err(format!("thread/start failed otherwise: {message}").into());
    }
    Ok(())
}

/// With bwrap-userns-restrict loaded: on the default PATH Codex takes /usr/bin/bwrap, which the
/// profile exempts, and thread/start works; on a PATH without /usr/bin Codex falls back to its
/// bundled bubblewrap, which no profile exempts, and thread/start fails with the namespace row.
fn the_bwrap_profile_exempts_only_the_system_bubblewrap() -> Result<(), Failed> {
    match bubblewrap_codex_uses(EXEMPT, DEFAULT_PATH)? {
        BubblewrapInUse::System { path, .. } if path == "/usr/bin/bwrap" => {}
        other => return Err(format!("expected the system bubblewrap, found {other:?}").into()),
    }
    match codex_thread_start_with(EXEMPT, PolicyGeneration::Legacy, false, DEFAULT_PATH)? {
        Ok(result) if result["thread"]["id"].is_string() => {}
        Ok(result) => {
            return Err(format!("thread/start answered without a thread: {result}").into())
        }
        Err(err) => {
            return Err(format!("thread/start failed with the system bubblewrap: {err}").into())
        }
    }
    match bubblewrap_codex_uses(EXEMPT, PATH_WITHOUT_SYSTEM_BWRAP)? {
        BubblewrapInUse::Bundled { .. } => {}
        other => return Err(format!("expected the bundled bubblewrap, found {other:?}").into()),
    }
    let message = restricted_thread_start_error(EXEMPT, PATH_WITHOUT_SYSTEM_BWRAP)?;
    let bwrap_line = message
        .rsplit(": bwrap: ")
        .next()
        .map(|rest| format!("bwrap: {rest}"))
        .unwrap_or_default();
    match classify_line(&bwrap_line) {
        Some(row) if row.name == "bwrap-namespace-no-permission" => Ok(()),
        _ => Err(format!("the bundled bubblewrap failed otherwise: {message}").into()),
    }
}

/// The child: the machine of `environment` booted, its QEMU pid and state folder on stdout,
/// then a wait to be killed (bounded: it gives up after the boot bound).
fn boot_and_wait(environment: &str) {
    let spec = sandbox::catalogue::spec(environment).expect("spec");
    let machine =
        sandbox::kvm::machine::for_environment(environment, spec.vm.as_ref().expect("vm"))
            .expect("boot");
    println!("{} {}", machine.pid(), machine.state_folder().display());
    std::thread::sleep(CHILD_BOOT_BOUND);
}

/// A harness killed with SIGKILL takes its QEMU along (the parent-death signal), and the next
/// reaping pass removes the state folder it left.
fn a_sigkilled_harness_leaves_no_machine() -> Result<(), Failed> {
    let mut child = Command::new(std::env::current_exe()?)
        .env(CHILD_VAR, KILLED)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = sender.send(line);
    });
    let line = receiver.recv_timeout(CHILD_BOOT_BOUND).map_err(|_| {
        let _ = child.kill();
        format!("the child did not boot {KILLED} within {CHILD_BOOT_BOUND:?}")
    })?;
    let (pid, state) = line
        .trim()
        .split_once(' ')
        .ok_or(format!("child said `{line}`"))?;
    let qemu = nix::unistd::Pid::from_raw(pid.parse()?);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )?;
    child.wait()?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while nix::sys::signal::kill(qemu, None).is_ok() && !is_zombie(qemu) {
        if Instant::now() >= deadline {
            return Err(format!("QEMU {qemu} outlived its SIGKILLed harness by 10 s").into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let state = std::path::Path::new(state);
    if !state.exists() {
        return Err(format!("{} vanished before any reaping", state.display()).into());
    }
    sandbox::reap::stale_kvm();
    if state.exists() {
        return Err(format!("the reaping pass left {}", state.display()).into());
    }
    Ok(())
}

fn is_zombie(pid: nix::unistd::Pid) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            stat.rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z'))
        })
        .unwrap_or(true)
}
