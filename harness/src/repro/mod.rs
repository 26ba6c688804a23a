//! `harness repro`: reproduce a known sandbox failure in its restricted environment with one
//! command, with the launch policy's legacy and current planning profiles, and say what the
//! graders make of it.

pub mod record;
pub mod session;

use crate::codex::provision;
use crate::env::{self, runc::RuncLauncher, EnvMounts};
use crate::launch::{self, profiles::HostPaths, LaunchRequest};
use crate::launcher::ProcessSpec;
use crate::rpc::RpcError;
use anyhow::{bail, Context, Result};
use graders::events::{Mode, PolicyGeneration, Target};
use graders::verdict::Verdict;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The planning write the fixed profile must refuse.
pub const PROBE_FILE: &str = "plan-write-probe-repro.txt";
pub const PROBE_SCRIPT: &str = "printf probe > plan-write-probe-repro.txt || echo WRITE_REFUSED";

/// A failure `harness repro` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Failure {
    /// `bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted` (environment `daytona`).
    RtmNewaddr,
    /// `bwrap: setting up uid map: Permission denied` (environment `daytona-uidmap`).
    Uidmap,
}

impl Failure {
    pub fn name(self) -> &'static str {
        match self {
            Failure::RtmNewaddr => "rtm-newaddr",
            Failure::Uidmap => "uidmap",
        }
    }

    pub fn environment(self) -> &'static str {
        match self {
            Failure::RtmNewaddr => "daytona",
            Failure::Uidmap => "daytona-uidmap",
        }
    }

    /// Why it happens, in a few lines.
    pub fn explanation(self) -> &'static str {
        match self {
            Failure::RtmNewaddr => {
                "With restricted reads (`:root`=none), Codex loads AGENTS.md through its filesystem helper, which it runs \
under bubblewrap with --unshare-user --unshare-net. In the new network namespace bubblewrap adds the loopback \
address with a netlink sendto(); this runtime refuses that call (here: a seccomp rule, sendto with a 12-byte \
sockaddr_nl -> EPERM), so the helper dies and thread/start fails. Dropping CAP_NET_ADMIN alone does not do this: \
the new user namespace has every capability. The fix gives planning full-disk read inside an external sandbox \
(no helper, network as configured), so thread/start succeeds and the sandbox still refuses the write."
            }
            Failure::Uidmap => {
                "bubblewrap runs as a non-root uid and is non-dumpable (here: an execute-only copy, mode 0711, bound over \
the bwrap Codex uses; exec of an unreadable binary clears the dumpable flag). /proc/self/uid_map of a \
non-dumpable process belongs to root, so bubblewrap's write of its uid map fails with EACCES. The full-read \
profile lets thread/start succeed (no helper), but every sandboxed command still needs bubblewrap, so nothing \
runs: the write is \"refused\" only because it never ran, which the grader calls sandbox-failed-to-start."
            }
        }
    }
}

/// Which app-server the repro drives.
#[derive(Debug, Clone)]
pub enum AppServer {
    Codex(provision::CodexInstall),
    /// The fake app-server in real-sandbox mode (this binary's `fake-app-server` subcommand).
    Fake(PathBuf),
}

impl AppServer {
    /// The pinned Codex when installed, else the fake.
    pub fn choose() -> Result<(AppServer, Option<String>)> {
        match provision::resolve(provision::PINNED) {
            Ok(install) => Ok((AppServer::Codex(install), None)),
            Err(err) => Ok((
                AppServer::Fake(std::env::current_exe().context("locating the harness binary")?),
                Some(format!("{err:#}")),
            )),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            AppServer::Codex(install) => {
                format!("real Codex {} ({})", install.version, install.binary.display())
            }
            AppServer::Fake(exe) => format!(
                "the fake app-server in real-sandbox mode ({} fake-app-server app-server --sandbox real)",
                exe.display()
            ),
        }
    }

    pub fn runner(&self) -> &'static str {
        match self {
            AppServer::Codex(_) => "runner-codex",
            AppServer::Fake(_) => "runner-fake",
        }
    }

    fn program(&self) -> &Path {
        match self {
            AppServer::Codex(install) => &install.binary,
            AppServer::Fake(exe) => exe,
        }
    }

    fn leading_args(&self) -> Vec<String> {
        match self {
            AppServer::Codex(_) => vec!["app-server".into()],
            AppServer::Fake(_) => ["fake-app-server", "app-server", "--sandbox", "real"]
                .map(String::from)
                .to_vec(),
        }
    }

    fn readonly_folders(&self) -> Vec<PathBuf> {
        match self {
            AppServer::Codex(install) => vec![install.package_dir.clone()],
            AppServer::Fake(exe) => exe.parent().map(Path::to_path_buf).into_iter().collect(),
        }
    }
}

/// One launch of the app-server with one launch-policy generation.
#[derive(Debug)]
pub struct Attempt {
    pub policy: PolicyGeneration,
    pub profile: String,
    pub profile_override: String,
    pub thread_start: Result<Value, RpcError>,
    /// `command/exec` of the probe write (only when thread/start succeeded).
    pub exec: Option<Result<Value, RpcError>>,
    pub probe_exists: bool,
    pub verdict: Verdict,
    /// The JSON lines sent, in order.
    pub sent: Vec<String>,
    pub stderr_log: PathBuf,
    /// `(container id, bundle)`.
    pub containers: Vec<(String, PathBuf)>,
}

#[derive(Debug)]
pub struct Report {
    pub failure: Failure,
    pub app_server: String,
    /// Why the real Codex was not used, when it was not.
    pub fallback_reason: Option<String>,
    pub attempts: Vec<Attempt>,
    /// The scratch folder (kept with `--keep`).
    pub scratch: PathBuf,
    pub kept: bool,
    pub network_disabled: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Keep the scratch folder and the runc bundles for rerunning by hand.
    pub keep: bool,
    /// Launch with network access disabled (the profiles then ask for `--unshare-net` on every
    /// command, so in `daytona` even the fixed profile's commands fail to start).
    pub network_disabled: bool,
}

/// Run the repro for `failure`.
pub async fn run(failure: Failure, options: &Options) -> Result<Report> {
    let environment = failure.environment();
    if let Err(missing) = env::check_prerequisites(environment) {
        bail!("environment `{environment}` cannot run here: {missing}");
    }
    if env::select_runtime(environment)? != env::Runtime::Runc {
        bail!("harness repro needs runc (root and runc installed); the Docker runtime has no bundles to rerun by hand");
    }
    let probe_scratch = tempfile::Builder::new()
        .prefix("ccf-repro-probe-")
        .tempdir()?;
    let probe = env::probe(environment, probe_scratch.path()).await?;
    if !probe.agrees {
        bail!(
            "the probe of `{environment}` disagrees with its spec (expected {}, saw exit {:?}: {}): this machine does not reproduce the environment",
            probe.expected.describe(),
            probe.seen.exit_code,
            probe.seen.stderr.trim()
        );
    }
    let (app_server, fallback_reason) = AppServer::choose()?;
    let scratch_dir = tempfile::Builder::new().prefix("ccf-repro-").tempdir()?;
    let scratch = scratch_dir.path().to_path_buf();
    let mut attempts = Vec::new();
    for policy in [PolicyGeneration::Legacy, PolicyGeneration::Current] {
        attempts.push(attempt(failure, &app_server, policy, &scratch, options).await?);
    }
    let kept = options.keep;
    if kept {
        let _ = scratch_dir.keep();
    }
    Ok(Report {
        failure,
        app_server: app_server.describe(),
        fallback_reason,
        attempts,
        scratch,
        kept,
        network_disabled: options.network_disabled,
    })
}

async fn attempt(
    failure: Failure,
    app_server: &AppServer,
    policy: PolicyGeneration,
    scratch: &Path,
    options: &Options,
) -> Result<Attempt> {
    let label = match policy {
        PolicyGeneration::Legacy => "legacy",
        PolicyGeneration::Current => "current",
    };
    let cell = scratch.join(label);
    let workspace = cell.join("workspace");
    let home = cell.join("home");
    let codex_home = cell.join("codex-home");
    let tmp = cell.join("tmp");
    for dir in [&workspace, &home, &codex_home, &tmp] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    std::fs::create_dir_all(workspace.join(".git"))?;
    std::fs::write(
        workspace.join("AGENTS.md"),
        "# Project agents\nAlways be terse.\n",
    )?;

    let process_env = vec![
        (
            "PATH".to_string(),
            "/usr/local/bin:/usr/bin:/bin".to_string(),
        ),
        ("HOME".to_string(), home.display().to_string()),
        ("CODEX_HOME".to_string(), codex_home.display().to_string()),
        // Not a parent of CODEX_HOME: Codex refuses to create its helper aliases under TMPDIR.
        ("TMPDIR".to_string(), tmp.display().to_string()),
        ("LANG".to_string(), "C.UTF-8".to_string()),
    ];
    let request = LaunchRequest {
        mode: Mode::Planning,
        target: Target::ExternalSandbox,
        network_enabled: !options.network_disabled,
        policy,
        workspace: workspace.clone(),
    };
    let plan = launch::plan_with(
        &request,
        &HostPaths::from_env_pairs(&process_env, Some(app_server.program())),
    );
    let profile = plan.default_profile.clone();
    let profile_override = plan
        .profiles
        .iter()
        .find(|view| view.profile.name == profile)
        .map(|view| view.config_override.clone())
        .unwrap_or_default();

    let mounts = EnvMounts {
        scratch: cell.clone(),
        writable: Vec::new(),
        readonly: app_server.readonly_folders(),
    };
    let mut launcher = RuncLauncher::new(env::spec(failure.environment())?, mounts)?;
    if options.keep {
        launcher = launcher.keeping_bundles();
    }
    let process = ProcessSpec {
        program: app_server.program().to_path_buf(),
        args: app_server
            .leading_args()
            .into_iter()
            .chain(plan.argv.iter().cloned())
            .collect(),
        env: process_env,
        cwd: workspace.clone(),
    };
    let stderr_log = cell.join("stderr.log");
    let mut session = session::Session::start(&launcher, &process, &stderr_log).await?;
    let thread_start = session
        .request("thread/start", plan.thread_params.clone())
        .await?;
    let exec = if thread_start.is_ok() {
        Some(
            session
                .request(
                    "command/exec",
                    json!({
                        "command": ["sh", "-c", PROBE_SCRIPT],
                        "cwd": workspace,
                        "permissionProfile": profile,
                    }),
                )
                .await?,
        )
    } else {
        None
    };
    let sent = std::mem::take(&mut session.sent);
    session.close().await;
    let probe_exists = workspace.join(PROBE_FILE).exists();
    let verdict = record::grade_attempt(&record::AttemptFacts {
        runner: app_server.runner(),
        environment: failure.environment(),
        plan: &plan,
        thread_start: &thread_start,
        exec: exec.as_ref(),
        workspace: &workspace,
    })?;
    Ok(Attempt {
        policy,
        profile,
        profile_override,
        thread_start,
        exec,
        probe_exists,
        verdict,
        sent,
        stderr_log,
        containers: launcher.prepared(),
    })
}

/// The printed report.
pub fn render(report: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let failure = report.failure;
    let _ = writeln!(
        out,
        "== harness repro {}: environment `{}` ==",
        failure.name(),
        failure.environment()
    );
    let _ = writeln!(out, "app-server: {}", report.app_server);
    let _ = writeln!(
        out,
        "launch: planning run in an external sandbox, network {}",
        if report.network_disabled {
            "disabled"
        } else {
            "enabled"
        }
    );
    if let Some(reason) = &report.fallback_reason {
        let _ = writeln!(out, "  (the pinned Codex is not installed: {reason})");
    }
    for attempt in &report.attempts {
        let generation = match attempt.policy {
            PolicyGeneration::Legacy => "legacy planning profile",
            PolicyGeneration::Current => "fixed planning profile",
        };
        let _ = writeln!(out, "\n-- {generation}: `{}` --", attempt.profile);
        let _ = writeln!(out, "   -c '{}'", attempt.profile_override);
        match &attempt.thread_start {
            Ok(result) => {
                let _ = writeln!(
                    out,
                    "thread/start: OK (thread {}, activePermissionProfile {})",
                    result["thread"]["id"].as_str().unwrap_or("?"),
                    result["activePermissionProfile"]["id"]
                        .as_str()
                        .unwrap_or("?")
                );
            }
            Err(err) => {
                let _ = writeln!(out, "thread/start: ERROR {}\n  {}", err.code, err.message);
            }
        }
        if let Some(exec) = &attempt.exec {
            match exec {
                Ok(result) => {
                    let _ = writeln!(
                        out,
                        "command/exec sh -c '{PROBE_SCRIPT}':\n  exitCode {}\n  stdout {:?}\n  stderr {:?}",
                        result["exitCode"],
                        result["stdout"].as_str().unwrap_or(""),
                        result["stderr"].as_str().unwrap_or("")
                    );
                }
                Err(err) => {
                    let _ = writeln!(out, "command/exec: ERROR {}: {}", err.code, err.message);
                }
            }
            let _ = writeln!(
                out,
                "probe file {PROBE_FILE}: {}",
                if attempt.probe_exists {
                    "EXISTS (the write succeeded)"
                } else {
                    "absent"
                }
            );
        }
        let _ = writeln!(
            out,
            "grader (codex-planning-read-only/plan-write-refused): {} — {}",
            attempt.verdict.verdict.as_str(),
            attempt.verdict.reason
        );
    }
    let _ = writeln!(out, "\nWhy:\n{}", wrap(failure.explanation(), 96));
    let _ = writeln!(out, "\nRerun by hand:");
    let _ = writeln!(
        out,
        "  harness env probe {}        # the canary bubblewrap inside the environment",
        failure.environment()
    );
    let _ = writeln!(
        out,
        "  harness repro {} --keep   # keep the bundles and scratch",
        failure.name()
    );
    if report.kept {
        let _ = writeln!(out, "  scratch (kept): {}", report.scratch.display());
        for attempt in &report.attempts {
            for (id, bundle) in &attempt.containers {
                let _ = writeln!(
                    out,
                    "  # {:?} profile; then paste these lines:",
                    attempt.policy
                );
                let _ = writeln!(out, "  {}", env::runc::rerun_command(id, bundle));
                for line in &attempt.sent {
                    let _ = writeln!(out, "    {line}");
                }
            }
        }
        let _ = writeln!(
            out,
            "  (remove them afterwards: rm -rf {} and the bundle folders)",
            report.scratch.display()
        );
    } else {
        let _ = writeln!(out, "  (bundles and scratch were removed; with --keep this prints `runc run --bundle …` commands and the JSON lines to paste)");
    }
    out
}

fn wrap(text: &str, width: usize) -> String {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
        .into_iter()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Did the run show what the repro promises? The legacy profile's thread/start fails with the
/// environment's bubblewrap text; the fixed profile's thread/start succeeds; its write is then
/// refused by the sandbox (`rtm-newaddr`: grader `pass`) or never runs (`uidmap`: grader
/// `sandbox-failed-to-start`).
pub fn reproduced(report: &Report) -> bool {
    let Some(signature) = env::spec(report.failure.environment())
        .ok()
        .and_then(|spec| spec.expected_probe.stderr_signature)
    else {
        return false;
    };
    let [legacy, current] = report.attempts.as_slice() else {
        return false;
    };
    let legacy_failed = legacy
        .thread_start
        .as_ref()
        .is_err_and(|err| err.message.contains(signature));
    let expected_verdict = match report.failure {
        Failure::RtmNewaddr if !report.network_disabled => graders::verdict::VerdictKind::Pass,
        Failure::RtmNewaddr => graders::verdict::VerdictKind::SandboxFailedToStart,
        Failure::Uidmap => graders::verdict::VerdictKind::SandboxFailedToStart,
    };
    legacy_failed && current.thread_start.is_ok() && current.verdict.verdict == expected_verdict
}
