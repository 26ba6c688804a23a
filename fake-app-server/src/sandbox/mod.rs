//! The sandbox model: commands run under bubblewrap (really, or simulated from environment
//! facts) or directly, as Codex 0.169.0 decides from the permissions.

pub mod bwrap;
pub mod policy;
pub mod process;
mod simulated;

use crate::scenario::EnvironmentFacts;
use policy::{ExecPolicy, SandboxSpec};
use process::ProcessOutput;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `--sandbox auto|real|simulated`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModeChoice {
    Auto,
    Real,
    Simulated,
}

/// How sandboxed commands actually run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Run this bubblewrap binary: the kernel decides.
    Real { bwrap: PathBuf },
    /// Derive the outcome from the scenario's environment facts.
    Simulated,
    /// No bubblewrap at all (neither the system's nor a bundled one): Codex's sandbox helper
    /// panics for every sandboxed command ([`BWRAP_UNAVAILABLE_PANIC`]).
    Unavailable,
}

/// The summary of Codex 0.169.0's `configWarning` when no system bubblewrap is on PATH (sent
/// whether or not a bundled one exists; measured).
pub const NO_SYSTEM_BWRAP_WARNING: &str = "Codex could not find bubblewrap on PATH. Install bubblewrap with your OS package manager. See the sandbox prerequisites: https://developers.openai.com/codex/concepts/sandboxing#prerequisites. Codex will use the bundled bubblewrap in the meantime.";

/// What Codex 0.169.0's sandbox helper prints (exit 101) for every sandboxed command when it
/// finds no bubblewrap at all (measured in `no-bwrap`).
pub const BWRAP_UNAVAILABLE_PANIC: &str = "\nthread 'main' (2) panicked at linux-sandbox/src/launcher.rs:60:13:\nbubblewrap is unavailable: no system bwrap was found on PATH and no bundled codex-resources/bwrap binary was found next to the Codex executable\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n";

/// Codex retries a command without `--proc /proc` when bubblewrap's stderr contains this
/// (bubblewrap up to 0.11: `Can't mount proc on /newroot/proc`; 0.12 says `on /proc`, which
/// defeats the retry).
pub const NO_PROC_RETRY_TRIGGER: &str = "/newroot/proc";

/// The summary of Codex's `configWarning` when its start-up bubblewrap probe fails.
pub const USERNS_WARNING: &str =
    "Codex's Linux sandbox uses bubblewrap and needs access to create user namespaces.";

/// stderr texts of the start-up probe that Codex turns into the warning.
const PROBE_WARNING_PATTERNS: &[&str] = &[
    "loopback: Failed RTM_NEWADDR",
    "loopback: Failed RTM_NEWLINK",
    "setting up uid map: Permission denied",
    "No permissions to create a new namespace",
];

/// Codex's sandbox-denial keywords: a quick failing sandboxed command whose output contains one
/// of them is reported to the model only, with no commandExecution item (gotcha G1).
pub const DENIAL_KEYWORDS: &[&str] = &[
    "operation not permitted",
    "permission denied",
    "read-only file system",
    "seccomp",
    "sandbox",
    "landlock",
    "failed to write file",
];

/// Codex's unified-exec start-up window: a command finishing within it is reported at once.
pub const STARTUP_WINDOW: Duration = Duration::from_millis(250);

/// The result of one command, whatever ran it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecResult {
    pub exit_code: i32,
    pub stdout: String,
    pub stderr: String,
    /// Interleaved output (for model-facing reports).
    pub aggregated: String,
    pub duration: Duration,
    pub pid: Option<u32>,
    pub sandboxed: bool,
}

impl ExecResult {
    fn from_process(output: ProcessOutput, sandboxed: bool) -> Self {
        Self {
            exit_code: output.exit_code,
            aggregated: output.merged,
            stdout: output.stdout,
            stderr: output.stderr,
            duration: output.duration,
            pid: Some(output.pid),
            sandboxed,
        }
    }

    /// A launcher failure: bubblewrap printed `message` and exited 1 before anything ran.
    fn launcher_failure(message: &str) -> Self {
        let text = format!("{message}\n");
        Self {
            exit_code: 1,
            stdout: String::new(),
            stderr: text.clone(),
            aggregated: text,
            duration: Duration::from_millis(1),
            pid: None,
            sandboxed: true,
        }
    }

    /// Whether Codex would judge this a sandbox denial (and emit no commandExecution item).
    pub fn looks_like_sandbox_denial(&self) -> bool {
        if !self.sandboxed || self.exit_code == 0 || self.duration > STARTUP_WINDOW {
            return false;
        }
        let lowered = self.aggregated.to_ascii_lowercase();
        DENIAL_KEYWORDS.iter().any(|k| lowered.contains(k)) || self.exit_code == 128 + 31
    }
}

/// The sandbox of one fake server process.
#[derive(Debug, Clone)]
pub struct Sandbox {
    pub mode: Mode,
    pub facts: EnvironmentFacts,
    pub command_limit: Duration,
}

impl Sandbox {
    /// Resolve `--sandbox`; `auto` falls back to simulated (saying so on stderr) without bwrap.
    pub fn new(
        choice: ModeChoice,
        facts: EnvironmentFacts,
        command_limit: Duration,
    ) -> Result<Self, String> {
        let mode = match (choice, bwrap::find_bwrap()) {
            (ModeChoice::Simulated, _) => Mode::Simulated,
            (ModeChoice::Real, Some(bwrap)) | (ModeChoice::Auto, Some(bwrap)) => {
                Mode::Real { bwrap }
            }
            // As Codex: without any bubblewrap the server starts and every sandboxed command
            // fails. Simulating instead would run commands Codex never could.
            (ModeChoice::Real, None) | (ModeChoice::Auto, None) => {
                eprintln!("fake-app-server: no executable bubblewrap (system or bundled); every sandboxed command fails as in Codex");
                Mode::Unavailable
            }
        };
        Ok(Self {
            mode,
            facts,
            command_limit,
        })
    }

    /// Codex's start-up probe: `Some(summary)` when it would emit a `configWarning`.
    pub fn startup_warning(&self) -> Option<&'static str> {
        if !matches!(self.mode, Mode::Simulated) && bwrap::system_bwrap().is_none() {
            return Some(NO_SYSTEM_BWRAP_WARNING);
        }
        let stderr = match &self.mode {
            Mode::Unavailable => return None,
            Mode::Real { bwrap } => {
                let output = process::run(
                    bwrap,
                    &bwrap::probe_args(),
                    Path::new("/"),
                    true,
                    Duration::from_secs(10),
                    |_| {},
                )
                .ok()?;
                if output.exit_code == 0 {
                    return None;
                }
                output.merged
            }
            Mode::Simulated => simulated::launcher_error(&self.facts, true, false)
                .unwrap_or_default()
                .to_string(),
        };
        PROBE_WARNING_PATTERNS
            .iter()
            .any(|pattern| stderr.contains(pattern))
            .then_some(USERNS_WARNING)
    }

    /// thread/start under restricted reads: read AGENTS.md through a helper under bubblewrap with
    /// `--unshare-user --unshare-net`. `Err` carries `exit status: N: <the helper's stderr, trimmed>`.
    pub fn load_agents_md_sandboxed(&self, cwd: &Path) -> Result<Option<PathBuf>, String> {
        let agents = cwd.join("AGENTS.md");
        let spec = bwrap::fs_helper_spec(cwd);
        let result = match &self.mode {
            Mode::Real { bwrap } => {
                let mut args = bwrap::sandbox_args(&spec, Path::new("/"));
                args.extend(
                    [
                        "--",
                        "/bin/sh",
                        "-c",
                        "if [ -f \"$1\" ]; then cat -- \"$1\" >/dev/null; fi",
                        "sh",
                    ]
                    .iter()
                    .map(|s| s.to_string()),
                );
                args.push(agents.display().to_string());
                match run_bwrap(bwrap, &args, Path::new("/"), false, self.command_limit) {
                    Ok(output) => ExecResult::from_process(output, true),
                    Err(err) => return Err(format!("exit status: 1: bwrap: {err}")),
                }
            }
            Mode::Unavailable => {
                return Err(format!(
                    "exit status: 101: {}",
                    BWRAP_UNAVAILABLE_PANIC.trim()
                ));
            }
            Mode::Simulated => {
                return match simulated::launcher_error(&self.facts, true, true) {
                    Some(message) => Err(format!("exit status: 1: {message}")),
                    None => Ok(agents.is_file().then_some(agents)),
                };
            }
        };
        if result.exit_code != 0 && !result.stderr.trim().is_empty() {
            return Err(format!(
                "exit status: {}: {}",
                result.exit_code,
                result.stderr.trim_end()
            ));
        }
        Ok(agents.is_file().then_some(agents))
    }

    /// Run `argv` in `cwd` under `policy`. `merge` interleaves stdout and stderr (exec tool).
    pub fn run(&self, argv: &[String], cwd: &Path, policy: &ExecPolicy, merge: bool) -> ExecResult {
        let Some((program, rest)) = argv.split_first() else {
            return ExecResult::launcher_failure("empty command");
        };
        match policy {
            ExecPolicy::Direct => {
                match process::run(
                    Path::new(program),
                    rest,
                    cwd,
                    merge,
                    self.command_limit,
                    |_| {},
                ) {
                    Ok(output) => ExecResult::from_process(output, false),
                    Err(err) => spawn_failure(program, &err, false),
                }
            }
            ExecPolicy::Sandboxed(spec) => self.run_sandboxed(argv, cwd, spec, merge),
        }
    }

    fn run_sandboxed(
        &self,
        argv: &[String],
        cwd: &Path,
        spec: &SandboxSpec,
        merge: bool,
    ) -> ExecResult {
        match &self.mode {
            Mode::Real { bwrap } => {
                let mut args = bwrap::sandbox_args(spec, cwd);
                args.push("--".into());
                if spec.readable.is_some() && !spec.minimal_readable {
                    // Codex execs its helper alias first, which this profile cannot see.
                    args.push(bwrap::sandbox_helper_alias().display().to_string());
                } else if !program_exists(&argv[0], cwd) {
                    return helper_exec_panic(&argv[0]);
                }
                args.extend(argv.iter().cloned());
                match run_bwrap(bwrap, &args, cwd, merge, self.command_limit) {
                    Ok(output) => ExecResult::from_process(output, true),
                    Err(err) => spawn_failure(&bwrap.display().to_string(), &err, true),
                }
            }
            Mode::Unavailable => ExecResult {
                exit_code: 101,
                stdout: String::new(),
                stderr: BWRAP_UNAVAILABLE_PANIC.to_string(),
                aggregated: BWRAP_UNAVAILABLE_PANIC.to_string(),
                duration: Duration::from_millis(1),
                pid: None,
                sandboxed: true,
            },
            Mode::Simulated => {
                if let Some(message) = simulated::launcher_error(&self.facts, !spec.network, true) {
                    return ExecResult::launcher_failure(message);
                }
                if spec.readable.is_some() && !spec.minimal_readable {
                    return ExecResult::launcher_failure(&format!(
                        "bwrap: execvp {}: No such file or directory",
                        bwrap::sandbox_helper_alias().display()
                    ));
                }
                if !program_exists(&argv[0], cwd) {
                    return helper_exec_panic(&argv[0]);
                }
                simulated::run_without_bwrap(argv, cwd, spec, merge, self.command_limit)
            }
        }
    }
}

/// Run bubblewrap; when it could not mount /proc and said so with the text Codex looks for,
/// run it again without `--proc /proc`, as Codex's `--no-proc` fallback does.
fn run_bwrap(
    bwrap: &Path,
    args: &[String],
    cwd: &Path,
    merge: bool,
    limit: Duration,
) -> std::io::Result<ProcessOutput> {
    let mut output = process::run(bwrap, args, cwd, merge, limit, |_| {})?;
    if std::env::var(BWRAP_WORDING_VAR).as_deref() == Ok("0.12") {
        for text in [&mut output.stderr, &mut output.merged] {
            *text = reword_as_0_12(text);
        }
    }
    if output.exit_code != 0
        && (retries_without_proc(&output.stderr) || retries_without_proc(&output.merged))
    {
        return process::run(bwrap, &bwrap::without_proc(args), cwd, merge, limit, |_| {});
    }
    Ok(output)
}

/// `FAKE_APP_SERVER_BWRAP_WORDING=0.12`: print bubblewrap's errors as bubblewrap 0.12 does.
/// Debian 12 (the machines here) has no bubblewrap >= 0.12, so this is a simulation of one
/// documented change: 0.12 names the /proc mount point inside the sandbox.
pub const BWRAP_WORDING_VAR: &str = "FAKE_APP_SERVER_BWRAP_WORDING";

/// bubblewrap 0.12's wording of a failed /proc mount (`… on /proc: …`, not `/newroot/proc`).
pub fn reword_as_0_12(text: &str) -> String {
    text.replace(
        "Can't mount proc on /newroot/proc",
        "Can't mount proc on /proc",
    )
}

/// Whether Codex would retry a failed bubblewrap run without `--proc /proc`.
pub fn retries_without_proc(stderr: &str) -> bool {
    stderr.contains("Can't mount proc") && stderr.contains(NO_PROC_RETRY_TRIGGER)
}

fn program_exists(program: &str, cwd: &Path) -> bool {
    if program.contains('/') {
        return cwd.join(program).exists();
    }
    std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false)
}

/// What Codex's inner sandbox helper prints when the command does not exist (measured).
fn helper_exec_panic(program: &str) -> ExecResult {
    let text = format!(
        "\nthread 'main' (2) panicked at linux-sandbox/src/linux_run_main.rs:1199:5:\nFailed to execvp {program}: No such file or directory (os error 2)\nnote: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n"
    );
    ExecResult {
        exit_code: 101,
        stdout: String::new(),
        stderr: text.clone(),
        aggregated: text,
        duration: Duration::from_millis(1),
        pid: None,
        sandboxed: true,
    }
}

fn spawn_failure(program: &str, err: &std::io::Error, sandboxed: bool) -> ExecResult {
    let text = format!("{program}: {err}\n");
    ExecResult {
        exit_code: 127,
        stdout: String::new(),
        stderr: text.clone(),
        aggregated: text,
        duration: Duration::ZERO,
        pid: None,
        sandboxed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UP_TO_0_11: &str = "bwrap: Can't mount proc on /newroot/proc: Operation not permitted";

    #[test]
    fn codex_retries_the_pre_0_12_wording_only() {
        assert!(retries_without_proc(UP_TO_0_11));
        let worded_0_12 = reword_as_0_12(UP_TO_0_11);
        assert_eq!(
            worded_0_12,
            "bwrap: Can't mount proc on /proc: Operation not permitted"
        );
        // bubblewrap 0.12's text defeats the fallback: every command then fails.
        assert!(!retries_without_proc(&worded_0_12));
        assert!(!retries_without_proc(
            "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted"
        ));
    }
}
