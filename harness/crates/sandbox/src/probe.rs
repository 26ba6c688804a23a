//! The probe: run the canaries inside an environment and compare with the spec. The start-up
//! canary is Codex's own start-up probe; the per-command canary has the flags Codex passes for
//! every sandboxed command (`--proc /proc`, `--dev /dev`, …); when its stderr carries the text
//! Codex retries on, the retry canary (without `--proc /proc`) runs too.

use crate::catalogue::spec;
use crate::environment::{check_prerequisites, launcher};
use crate::launcher::{EnvMounts, Launcher, ProcessSpec};
use crate::spec::{retry_canary, ExpectedProbe, CANARY, COMMAND_CANARY, NO_PROC_RETRY_TRIGGER};
use anyhow::{Context, Result};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Bound on one canary run, container start included.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

/// The shell every canary runs through: `bwrap` is looked up on PATH, as Codex looks for the
/// system bubblewrap, so an environment without one shows it (`bwrap: Permission denied`). The
/// shell stays bubblewrap's parent (no `exec`, and not the last command, so dash cannot turn it
/// into one), as Codex is: `--die-with-parent` kills bubblewrap when its parent goes, and under
/// `docker exec` the process runc starts loses its parent right away (bwrap then ends 137).
const SHELL: &str = "/bin/sh";
const RUN_ON_PATH: &str = "\"$@\"; exit $?";

/// What a canary did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ProbeSeen {
    /// `None` when it was killed by a signal.
    pub exit_code: Option<i32>,
    pub stderr: String,
}

/// Expected versus seen, for one canary.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CanaryReport {
    /// The canary command line.
    pub canary: Vec<String>,
    pub expected: ExpectedProbe,
    pub seen: ProbeSeen,
    pub agrees: bool,
}

/// Expected versus seen, for one environment.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProbeReport {
    pub environment: String,
    /// The start-up canary (Codex's start-up probe).
    pub canary: Vec<String>,
    pub expected: ExpectedProbe,
    pub seen: ProbeSeen,
    /// The per-command canary.
    pub command: CanaryReport,
    /// Codex's `--no-proc` retry, when the per-command canary printed its trigger text (or the
    /// spec expects one).
    pub retry: Option<CanaryReport>,
    /// Every canary agrees with the spec.
    pub agrees: bool,
    /// Wall time of the canaries, container starts and removals included.
    pub elapsed_ms: u128,
}

impl ProbeReport {
    /// `None` when every canary agrees; otherwise what differs, one canary per line.
    pub fn disagreement(&self) -> Option<String> {
        let startup = CanaryReport {
            canary: self.canary.clone(),
            expected: self.expected.clone(),
            agrees: self.expected.matches(&self.seen),
            seen: self.seen.clone(),
        };
        let lines: Vec<String> = [
            ("start-up", Some(&startup)),
            ("per-command", Some(&self.command)),
            ("retry", self.retry.as_ref()),
        ]
        .into_iter()
        .filter_map(|(label, report)| report.filter(|r| !r.agrees).map(|r| (label, r)))
        .map(|(label, r)| {
            format!(
                "{label} canary: expected {}, saw exit {:?} with stderr `{}`",
                r.expected.describe(),
                r.seen.exit_code,
                r.seen.stderr.trim()
            )
        })
        .collect();
        match (lines.is_empty(), self.agrees) {
            (true, true) => None,
            (true, false) => Some("a canary that the spec expects did not run".into()),
            _ => Some(lines.join("; ")),
        }
    }
}

impl ExpectedProbe {
    /// Does `seen` match? The exit code must be equal; a failure must carry its signature,
    /// a success must not print a bubblewrap error.
    pub fn matches(&self, seen: &ProbeSeen) -> bool {
        if seen.exit_code != Some(self.exit_code) {
            return false;
        }
        match self.stderr_signature {
            Some(signature) => seen.stderr.contains(signature),
            None => !seen.stderr.contains("bwrap:"),
        }
    }
}

/// Run `sh -c SCRIPT sh ARGS…` in the environment (bounded), with a minimal PATH.
/// The PATH the canaries and the lookup run with: the one Codex is started with in a cell.
pub const CANARY_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

async fn run_shell(
    launcher: &dyn Launcher,
    script: &str,
    args: &[&str],
    cwd: &Path,
) -> Result<std::process::Output> {
    run_shell_on(launcher, script, args, cwd, CANARY_PATH).await
}

async fn run_shell_on(
    launcher: &dyn Launcher,
    script: &str,
    args: &[&str],
    cwd: &Path,
    path: &str,
) -> Result<std::process::Output> {
    let process = ProcessSpec {
        program: SHELL.into(),
        args: ["-c", script, "sh"]
            .into_iter()
            .chain(args.iter().copied())
            .map(str::to_string)
            .collect(),
        env: vec![("PATH".to_string(), path.to_string())],
        cwd: cwd.to_path_buf(),
    };
    let mut prepared = launcher.prepare(&process)?;
    prepared
        .command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = prepared.command.spawn().context("starting the shell")?;
    let output = tokio::time::timeout(PROBE_TIMEOUT, child.wait_with_output())
        .await
        .with_context(|| format!("not finished within {PROBE_TIMEOUT:?}"))??;
    drop(prepared.guard);
    Ok(output)
}

async fn run_canary(
    launcher: &dyn Launcher,
    name: &str,
    argv: &[&str],
    scratch: &Path,
) -> Result<ProbeSeen> {
    let output = run_shell(launcher, RUN_ON_PATH, argv, scratch)
        .await
        .with_context(|| format!("running the canary in `{name}`"))?;
    Ok(ProbeSeen {
        exit_code: output.status.code(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    })
}

fn owned(argv: &[&str]) -> Vec<String> {
    argv.iter().map(|s| s.to_string()).collect()
}

/// Run the canaries in `name` (scratch folder `scratch`) and compare.
pub async fn probe(name: &str, scratch: &Path) -> Result<ProbeReport> {
    let spec = spec(name)?;
    // Container runtimes need an absolute working directory.
    let scratch = &std::path::absolute(scratch)?;
    if let Err(missing) = check_prerequisites(name) {
        anyhow::bail!("cannot probe `{name}`: {missing}");
    }
    let mounts = EnvMounts::scratch(scratch);
    let launcher = launcher(name, &mounts)?;
    let started = Instant::now();
    let seen = run_canary(launcher.as_ref(), name, &CANARY, scratch).await?;
    let command_seen = run_canary(launcher.as_ref(), name, COMMAND_CANARY, scratch).await?;
    let retry =
        if spec.expected_retry.is_some() || command_seen.stderr.contains(NO_PROC_RETRY_TRIGGER) {
            let argv = retry_canary();
            let retry_seen = run_canary(launcher.as_ref(), name, &argv, scratch).await?;
            // A retry the spec does not expect must not happen: expect the impossible exit -1.
            let expected = spec.expected_retry.clone().unwrap_or(ExpectedProbe {
                exit_code: -1,
                stderr_signature: None,
            });
            Some(CanaryReport {
                canary: owned(&argv),
                agrees: expected.matches(&retry_seen),
                expected,
                seen: retry_seen,
            })
        } else {
            None
        };
    drop(launcher);
    let command = CanaryReport {
        canary: owned(COMMAND_CANARY),
        agrees: spec.expected_command.matches(&command_seen),
        expected: spec.expected_command.clone(),
        seen: command_seen,
    };
    let startup_agrees = spec.expected_probe.matches(&seen);
    let retry_agrees = match (&spec.expected_retry, &retry) {
        (Some(_), Some(report)) => report.agrees,
        (None, None) => true,
        _ => false,
    };
    Ok(ProbeReport {
        environment: name.to_string(),
        canary: owned(&CANARY),
        agrees: startup_agrees && command.agrees && retry_agrees,
        expected: spec.expected_probe,
        seen,
        command,
        retry,
        elapsed_ms: started.elapsed().as_millis(),
    })
}

pub use crate::overlays::codex_bundled_bwrap;

/// Which bubblewrap Codex would run in an environment, as [`bubblewrap_in_use`] found it: the
/// same for every cell of that environment whose Codex package is the same, so a run looks it
/// up once per (environment, package) and each cell describes it with its own bundled path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BubblewrapInUse {
    /// The system `bwrap` on PATH, and its `--version`.
    System { path: String, version: String },
    /// The package's bundled one, and its `--version`.
    Bundled { version: String },
    /// No executable bubblewrap at all.
    Absent,
}

impl BubblewrapInUse {
    /// `system /usr/bin/bwrap (bubblewrap 0.8.0)`, `bundled BUNDLED (…)` or `none: …`.
    pub fn describe(&self, bundled: &Path) -> String {
        match self {
            BubblewrapInUse::System { path, version } => format!("system {path} ({version})"),
            BubblewrapInUse::Bundled { version } => {
                format!("bundled {} ({version})", bundled.display())
            }
            BubblewrapInUse::Absent => format!(
                "none: no executable bwrap on PATH, and no bundled {}",
                bundled.display()
            ),
        }
    }
}

/// Which bubblewrap Codex would run in this environment, looked up inside it the way Codex
/// 0.169.0 does: the system `bwrap` on PATH when it can be executed, else the bundled one at
/// `bundled`. An error when the lookup could not run or said nothing it knows.
pub async fn bubblewrap_in_use(
    launcher: &dyn Launcher,
    bundled: &Path,
    cwd: &Path,
) -> Result<BubblewrapInUse> {
    bubblewrap_in_use_on(launcher, bundled, cwd, CANARY_PATH).await
}

/// [`bubblewrap_in_use`] for an app-server started with `path` as its PATH (a driver chooses
/// it: without the system bubblewrap's folder Codex takes its bundled one).
pub async fn bubblewrap_in_use_on(
    launcher: &dyn Launcher,
    bundled: &Path,
    cwd: &Path,
    path: &str,
) -> Result<BubblewrapInUse> {
    // The first line says which; the rest is its `--version`.
    const LOOKUP: &str = r#"sys=$(command -v bwrap 2>/dev/null)
if [ -n "$sys" ] && [ -x "$sys" ]; then printf 'system %s\n' "$sys"; "$sys" --version 2>&1
elif [ -x "$1" ]; then echo bundled; "$1" --version 2>&1
else echo none; fi"#;
    let bundled = bundled.display().to_string();
    let output = run_shell_on(launcher, LOOKUP, &[&bundled], cwd, path).await?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let (first, rest) = stdout.split_once('\n').unwrap_or((&stdout, ""));
    let version = rest.trim().to_string();
    match first.trim().split_once(' ') {
        Some(("system", path)) => Ok(BubblewrapInUse::System {
            path: path.to_string(),
            version,
        }),
        None if first.trim() == "bundled" => Ok(BubblewrapInUse::Bundled { version }),
        None if first.trim() == "none" => Ok(BubblewrapInUse::Absent),
        _ => anyhow::bail!("the lookup printed `{}`", stdout.trim()),
    }
}
