//! `harness repro`: reproduce a known sandbox failure in its restricted environment with one
//! command. It runs two cells of `codex-planning-read-only/plan-write-refused` through the same
//! machinery as the matrix (`matrix::run_cell`: environment probe, the runner's app-server, the
//! reference driver, evidence, grading): the legacy planning profile, then the fixed one.

mod evidence;
mod render;
pub mod session;

pub use render::render;

use crate::codex::provision;
use crate::env;
use crate::matrix::{self, CellResult, MatrixOptions};
use anyhow::{bail, Context, Result};
use evidence::RunEvidence;
use graders::events::PolicyGeneration;
use graders::verdict::VerdictKind;
use std::path::PathBuf;

pub const SUITE: &str = "codex-planning-read-only";
pub const CASE: &str = "plan-write-refused";

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

    /// The bubblewrap message the environment produces.
    pub fn signature(self) -> &'static str {
        match self {
            Failure::RtmNewaddr => env::spec::RTM_NEWADDR_SIGNATURE,
            Failure::Uidmap => env::spec::UID_MAP_SIGNATURE,
        }
    }

    /// What the fixed profile's planning run must show: its verdict, and a text the verdict's
    /// evidence must quote.
    pub fn fixed_expectation(self, network_disabled: bool) -> (VerdictKind, &'static str) {
        match self {
            Failure::RtmNewaddr if !network_disabled => {
                (VerdictKind::Pass, "Read-only file system")
            }
            // Without network every sandboxed command needs `--unshare-net` too.
            Failure::RtmNewaddr => (VerdictKind::SandboxFailedToStart, self.signature()),
            Failure::Uidmap => (VerdictKind::SandboxFailedToStart, self.signature()),
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
(no helper, network as configured), so thread/start succeeds, the model's write runs in Codex's sandbox, and the \
sandbox refuses it (Read-only file system)."
            }
            Failure::Uidmap => {
                "bubblewrap runs as a non-root uid and is non-dumpable (here: an execute-only copy, mode 0711, bound over \
the bwrap Codex uses; exec of an unreadable binary clears the dumpable flag). /proc/self/uid_map of a \
non-dumpable process belongs to root, so bubblewrap's write of its uid map fails with EACCES. The full-read \
profile lets thread/start succeed (no helper), but every sandboxed command still needs bubblewrap, so the \
model's write never runs: Codex tells the model the bwrap error, and the grader calls it sandbox-failed-to-start."
            }
        }
    }
}

/// Which app-server ran: the pinned Codex when installed, else the fake in real-sandbox mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppServer {
    Codex {
        version: String,
        binary: PathBuf,
    },
    /// `why`: why the pinned Codex was not used.
    Fake {
        why: String,
    },
}

impl AppServer {
    /// Installed only: the repro never downloads Codex (the fake stands in instead).
    pub fn choose() -> AppServer {
        match provision::resolve(provision::PINNED) {
            Ok(install) => AppServer::Codex {
                version: install.version,
                binary: install.binary,
            },
            Err(err) => AppServer::Fake {
                why: format!("{err:#}"),
            },
        }
    }

    /// The runners of the legacy and the fixed run.
    pub fn runners(&self) -> [(PolicyGeneration, &'static str); 2] {
        match self {
            AppServer::Codex { .. } => [
                (PolicyGeneration::Legacy, "runner-codex-legacy"),
                (PolicyGeneration::Current, "runner-codex"),
            ],
            AppServer::Fake { .. } => [
                (PolicyGeneration::Legacy, "runner-fake-legacy"),
                (PolicyGeneration::Current, "runner-fake"),
            ],
        }
    }

    pub fn describe(&self) -> String {
        match self {
            AppServer::Codex { version, binary } => {
                format!("real Codex {version} ({})", binary.display())
            }
            AppServer::Fake { .. } => {
                "the fake app-server in real-sandbox mode (`harness fake-app-server app-server --sandbox real`: it runs bubblewrap itself)".into()
            }
        }
    }
}

/// One planning run: one cell of the matrix.
#[derive(Debug)]
pub struct Run {
    pub policy: PolicyGeneration,
    pub cell: String,
    pub result: CellResult,
    /// What its event stream shows (absent when the run produced no readable stream).
    pub evidence: Option<RunEvidence>,
    /// `(container id, bundle)` kept with `--keep`.
    pub bundles: Vec<(String, PathBuf)>,
}

#[derive(Debug)]
pub struct Report {
    pub failure: Failure,
    pub app_server: AppServer,
    pub runs: Vec<Run>,
    pub kept: bool,
    pub network_disabled: bool,
}

#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Keep the runc bundles for rerunning by hand.
    pub keep: bool,
    /// Launch with network access disabled (the profiles then ask for `--unshare-net` on every
    /// command, so in `daytona` even the fixed profile's commands fail to start).
    pub network_disabled: bool,
    /// Evidence goes to `<out_root>/<cell>/` (default: `<conformance root>/repro-<failure>`).
    pub out_root: Option<PathBuf>,
}

/// The folder of `failure`'s evidence when none is given.
pub fn default_out_root(failure: Failure) -> PathBuf {
    matrix::paths::conformance_root().join(format!("repro-{}", failure.name()))
}

/// Run the repro for `failure`: the legacy run, then the fixed run.
pub async fn run(failure: Failure, options: &Options) -> Result<Report> {
    let environment = failure.environment();
    if let Err(missing) = env::check_prerequisites(environment) {
        bail!("environment `{environment}` cannot run here: {missing}");
    }
    if env::select_runtime(environment)? != env::Runtime::Runc {
        bail!("harness repro needs runc (root and runc installed); the Docker runtime has no bundles to rerun by hand");
    }
    let app_server = AppServer::choose();
    let matrix = suites::load().context("loading the shipped suites")?;
    let mut base = MatrixOptions::from_env()?;
    base.out_root = options
        .out_root
        .clone()
        .unwrap_or_else(|| default_out_root(failure));
    // Real sandboxing for the fake even where its `auto` choice would simulate.
    base.fake_leading_args
        .extend(["--sandbox".into(), "real".into()]);
    let mut runs = Vec::new();
    for (policy, runner) in app_server.runners() {
        let name = format!("{SUITE}.{runner}.{environment}.{CASE}");
        let mut cell = matrix
            .cell(&name)
            .with_context(|| format!("the suites have no cell `{name}`"))?
            .clone();
        cell.case.network = !options.network_disabled;
        let kept = env::runc::PreparedList::default();
        let mut cell_options = base.clone();
        if options.keep {
            cell_options.kept_bundles = Some(kept.clone());
        }
        let result = matrix::run_cell(&cell, &cell_options).await;
        let evidence = RunEvidence::read(&result.evidence_dir.join("events.jsonl")).ok();
        let bundles = kept.lock().map(|list| list.clone()).unwrap_or_default();
        runs.push(Run {
            policy,
            cell: name,
            result,
            evidence,
            bundles,
        });
    }
    Ok(Report {
        failure,
        app_server,
        runs,
        kept: options.keep,
        network_disabled: options.network_disabled,
    })
}

/// Did the runs show what the repro promises? `Err` lists what differs.
pub fn reproduced(report: &Report) -> Result<(), String> {
    let mut problems = Vec::new();
    let signature = report.failure.signature();
    let [legacy, fixed] = report.runs.as_slice() else {
        return Err(format!("expected 2 runs, got {}", report.runs.len()));
    };
    let legacy_error = legacy
        .evidence
        .as_ref()
        .and_then(|e| e.thread_start_error.as_ref());
    match legacy_error {
        Some((_, error)) if error.message.contains(signature) => {}
        Some((_, error)) => problems.push(format!(
            "legacy: thread/start failed without `{signature}`: {}",
            error.message
        )),
        None => problems.push("legacy: thread/start did not fail".into()),
    }
    check_verdict(
        legacy,
        VerdictKind::StartupRejected,
        signature,
        &mut problems,
    );
    if fixed
        .evidence
        .as_ref()
        .is_none_or(|e| e.thread_started.is_none())
    {
        problems.push("fixed: thread/start did not succeed".into());
    }
    let (verdict, quote) = report.failure.fixed_expectation(report.network_disabled);
    check_verdict(fixed, verdict, quote, &mut problems);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

fn check_verdict(run: &Run, expected: VerdictKind, quote: &str, problems: &mut Vec<String>) {
    let label = render::generation_label(run.policy);
    match run.result.verdict() {
        Some(verdict) if verdict.verdict != expected => problems.push(format!(
            "{label}: verdict {} (expected {expected}): {}",
            verdict.verdict, verdict.reason
        )),
        Some(verdict) if !verdict.evidence.iter().any(|e| e.excerpt.contains(quote)) => problems
            .push(format!(
                "{label}: the verdict's evidence does not quote `{quote}`"
            )),
        Some(_) => {}
        None => problems.push(format!("{label}: {}", run.result.describe())),
    }
}
