//! `harness repro`: reproduce a known sandbox failure in its restricted environment with one
//! command. It runs two cells of `codex-planning-read-only/plan-write-refused` through the same
//! machinery as the matrix (`matrix::run_cell`: environment probe, the runner's app-server, the
//! reference driver, evidence, grading): the legacy planning profile, then the fixed one.

mod evidence;
mod explain;
mod render;
pub mod session;

pub use render::render;

use anyhow::{bail, Context, Result};
use codex::provision;
use evidence::RunEvidence;
use graders::events::PolicyGeneration;
use graders::signatures::messages::NO_BWRAP_SIGNATURE;
use graders::verdict::VerdictKind;
use matrix::context::CellContext;
use report::layout::CellEvidence;
use report::outcome::{CellOutcome, CellResult};
use sandbox::environment::{check_prerequisites, select_runtime, Runtime};
use sandbox::{catalogue, runc, spec};
use std::path::PathBuf;

pub(crate) const SUITE: &str = "codex-planning-read-only";
pub(crate) const CASE: &str = "plan-write-refused";
/// The same planning run with the network disabled.
pub(crate) const NO_NETWORK_CASE: &str = "plan-write-refused-no-network";

/// A failure `harness repro` reproduces: one restricted environment, named by the environment or
/// by a historical alias (`rtm-newaddr` = `daytona`, `uidmap` = `daytona-uidmap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    name: &'static str,
    environment: &'static str,
}

/// The historical names of two failures.
pub(crate) const ALIASES: &[(&str, &str)] =
    &[("rtm-newaddr", "daytona"), ("uidmap", "daytona-uidmap")];

impl std::str::FromStr for Failure {
    type Err = String;

    /// An alias or an environment other than `local`; anything else is an error listing both.
    fn from_str(text: &str) -> Result<Self, String> {
        if let Some((name, environment)) = ALIASES.iter().find(|(alias, _)| *alias == text) {
            return Ok(Failure { name, environment });
        }
        match catalogue::names()
            .into_iter()
            .find(|n| *n == text && *n != "local")
        {
            Some(environment) => Ok(Failure {
                name: environment,
                environment,
            }),
            None => Err(format!(
                "no failure or environment `{text}` (known: {}, {})",
                ALIASES
                    .iter()
                    .map(|(a, _)| *a)
                    .collect::<Vec<_>>()
                    .join(", "),
                catalogue::names()
                    .into_iter()
                    .filter(|n| *n != "local")
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

impl Failure {
    pub fn name(self) -> &'static str {
        self.name
    }

    pub(crate) fn environment(self) -> &'static str {
        self.environment
    }

    fn spec(self) -> spec::EnvSpec {
        catalogue::spec(self.environment).expect("a Failure names a known environment")
    }

    /// The text of the environment's failure, as Codex's output carries it.
    pub(crate) fn signature(self) -> &'static str {
        let spec = self.spec();
        match spec.expected_command.stderr_signature {
            // The canaries' shell wording is not what Codex prints: its helper panics.
            Some(spec::BWRAP_NOT_EXECUTABLE_SIGNATURE) => NO_BWRAP_SIGNATURE,
            None => spec.message.unwrap_or(""),
            Some(signature) => signature,
        }
    }

    /// Why it happens, in a few lines.
    pub(crate) fn explanation(self) -> String {
        explain::explanation(&self.spec())
    }
}

/// Which app-server ran: the pinned Codex when installed, else the fake in real-sandbox mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AppServer {
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
    pub(crate) fn choose() -> AppServer {
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
    pub(crate) fn runners(&self) -> [(PolicyGeneration, &'static str); 2] {
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

    pub(crate) fn describe(&self) -> String {
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
pub(crate) struct Run {
    pub(crate) policy: PolicyGeneration,
    /// The verdict the baseline expects of this run.
    pub(crate) expected: VerdictKind,
    pub(crate) cell: String,
    pub(crate) result: CellResult,
    /// What its event stream shows (absent when the run produced no readable stream).
    pub(crate) evidence: Option<RunEvidence>,
    /// `(container id, bundle)` kept with `--keep`.
    pub(crate) bundles: Vec<(String, PathBuf)>,
}

#[derive(Debug)]
pub struct Report {
    pub(crate) failure: Failure,
    pub(crate) app_server: AppServer,
    pub(crate) runs: Vec<Run>,
    pub(crate) kept: bool,
    pub(crate) network_disabled: bool,
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
pub(crate) fn default_out_root(failure: Failure) -> PathBuf {
    matrix::paths::conformance_root().join(format!("repro-{}", failure.name()))
}

/// Run the repro for `failure`: the legacy run, then the fixed run.
pub async fn run(failure: Failure, options: &Options) -> Result<Report> {
    let environment = failure.environment();
    if let Err(missing) = check_prerequisites(environment) {
        bail!("environment `{environment}` cannot run here: {missing}");
    }
    if select_runtime(environment)? == Runtime::Kvm {
        bail!(
            "environment `{environment}` runs in a virtual machine: a repro runs whole cells, whose \
             driver reaches the tap through a Unix socket that does not cross into the guest; its \
             real-Codex reproduction is `cargo test -p harness --test needs_root_runc_codex -- \
             '[env_kvm]'`"
        );
    }
    if options.keep && select_runtime(environment)? != Runtime::Runc {
        bail!("harness repro --keep needs runc (root and runc installed); the Docker runtime has no bundles to rerun by hand");
    }
    let app_server = AppServer::choose();
    let matrix = suites::load().context("loading the shipped suites")?;
    let mut base = CellContext::from_env()?;
    base.out_root = options
        .out_root
        .clone()
        .unwrap_or_else(|| default_out_root(failure));
    // Real sandboxing for the fake even where its `auto` choice would simulate.
    base.fake_args.extend(["--sandbox".into(), "real".into()]);
    let mut runs = Vec::new();
    for (policy, runner) in app_server.runners() {
        let name = format!("{SUITE}.{runner}.{environment}.{CASE}");
        let mut cell = matrix
            .cell(&name)
            .with_context(|| format!("the suites have no cell `{name}`"))?
            .clone();
        cell.case.network = !options.network_disabled;
        // What the run must show is the baseline's: of the network-off case when it exists.
        let expected_cell = format!("{SUITE}.{runner}.{environment}.{NO_NETWORK_CASE}");
        let expected = match matrix.cell(&expected_cell) {
            Some(no_network) if options.network_disabled => no_network.expected.verdict,
            _ => cell.expected.verdict,
        };
        let kept = runc::PreparedList::default();
        let mut cell_options = base.clone();
        if options.keep {
            cell_options.kept_bundles = Some(kept.clone());
        }
        let result = matrix::cell::run_cell(&cell_options, &cell).await;
        let evidence = RunEvidence::read(&CellEvidence::new(&result.evidence_dir).events()).ok();
        let bundles = kept.lock().map(|list| list.clone()).unwrap_or_default();
        runs.push(Run {
            policy,
            expected,
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

/// Why a run could not be graded at all (the harness could not run it: its environment, a
/// launch, a path), if one could not: that says nothing about the failure, so the repro must
/// not call it "did not reproduce".
pub fn could_not_run(report: &Report) -> Option<String> {
    let reasons: Vec<String> = report
        .runs
        .iter()
        .filter_map(|run| match &run.result.outcome {
            CellOutcome::Error { message } => Some(format!(
                "{}: {message}",
                render::generation_label(run.policy)
            )),
            CellOutcome::Ignored { reason } | CellOutcome::NotApplicable { reason } => Some(
                format!("{}: {reason}", render::generation_label(run.policy)),
            ),
            CellOutcome::Graded { .. } => None,
        })
        .collect();
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

/// Did the runs show what the repro promises (the baseline's verdicts, with the environment's
/// own text as evidence)? `Err` lists what differs.
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
    if legacy.expected == VerdictKind::StartupRejected {
        match legacy_error {
            Some((_, error)) if error.message.contains(signature) => {}
            Some((_, error)) => problems.push(format!(
                "legacy: thread/start failed without `{signature}`: {}",
                error.message
            )),
            None => problems.push("legacy: thread/start did not fail".into()),
        }
    }
    check_verdict(legacy, quote_for(legacy.expected, signature), &mut problems);
    if fixed
        .evidence
        .as_ref()
        .is_none_or(|e| e.thread_started.is_none())
    {
        problems.push("fixed: thread/start did not succeed".into());
    }
    check_verdict(fixed, quote_for(fixed.expected, signature), &mut problems);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

/// The text a verdict's evidence must quote: the refusal for a pass, else the failure.
fn quote_for(verdict: VerdictKind, signature: &'static str) -> &'static str {
    if verdict == VerdictKind::Pass {
        "Read-only file system"
    } else {
        signature
    }
}

fn check_verdict(run: &Run, quote: &str, problems: &mut Vec<String>) {
    let label = render::generation_label(run.policy);
    let expected = run.expected;
    match run.result.verdict() {
        Some(verdict) if verdict.verdict != expected => problems.push(format!(
            "{label}: verdict {} (expected {expected}): {}",
            verdict.verdict, verdict.reason
        )),
        Some(verdict)
            if !verdict.evidence.iter().any(|e| e.excerpt.contains(quote))
                && !verdict.reason.contains(quote) =>
        {
            problems.push(format!(
                "{label}: the verdict's evidence does not quote `{quote}`"
            ))
        }
        Some(_) => {}
        None => problems.push(format!("{label}: {}", run.result.describe())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn run(outcome: CellOutcome) -> Run {
        let cell: graders::events::CellId = format!("{SUITE}.runner-codex.daytona.{CASE}")
            .parse()
            .unwrap();
        Run {
            policy: PolicyGeneration::Current,
            expected: VerdictKind::Pass,
            cell: cell.to_string(),
            result: CellResult {
                cell,
                profile: None,
                expected: suites::Expectation::pass(),
                outcome,
                duration: Duration::ZERO,
                evidence_dir: PathBuf::from("/nonexistent"),
                earlier_attempts: Vec::new(),
            },
            evidence: None,
            bundles: Vec::new(),
        }
    }

    /// A run the harness could not start (runc refusing a relative cwd, once) is not a failure
    /// that did not reproduce: the repro says it could not run.
    #[test]
    fn a_run_that_errored_is_reported_as_not_run_not_as_not_reproduced() {
        let report = Report {
            failure: "rtm-newaddr".parse().unwrap(),
            app_server: AppServer::Fake { why: "test".into() },
            runs: vec![run(CellOutcome::Error {
                message: "Cwd must be an absolute path".into(),
            })],
            kept: false,
            network_disabled: false,
        };
        let why = could_not_run(&report).expect("the run could not run");
        assert!(why.contains("Cwd must be an absolute path"), "{why}");
    }
}
