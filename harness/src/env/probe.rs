//! The probe: run the canary bubblewrap inside an environment and compare with the spec.

use super::spec::{ExpectedProbe, CANARY};
use super::EnvMounts;
use crate::launcher::ProcessSpec;
use anyhow::{Context, Result};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Bound on one canary run, container start included.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

/// What the canary did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ProbeSeen {
    /// `None` when it was killed by a signal.
    pub exit_code: Option<i32>,
    pub stderr: String,
}

/// Expected versus seen, for one environment.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProbeReport {
    pub environment: String,
    /// The canary command line.
    pub canary: Vec<String>,
    pub expected: ExpectedProbe,
    pub seen: ProbeSeen,
    pub agrees: bool,
    /// Wall time of the canary, container start and removal included.
    pub elapsed_ms: u128,
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

/// Run the canary in `name` (bundle-free scratch in `scratch`) and compare.
pub async fn probe(name: &str, scratch: &Path) -> Result<ProbeReport> {
    let spec = super::spec(name)?;
    if let Err(missing) = super::check_prerequisites(name) {
        anyhow::bail!("cannot probe `{name}`: {missing}");
    }
    let bwrap = crate::codex::provision::which("bwrap").context("bwrap is not on PATH")?;
    let mounts = EnvMounts {
        scratch: scratch.to_path_buf(),
        writable: Vec::new(),
        readonly: Vec::new(),
    };
    let launcher = super::launcher(name, &mounts)?;
    let process = ProcessSpec {
        program: bwrap,
        args: CANARY[1..].iter().map(|s| s.to_string()).collect(),
        env: vec![(
            "PATH".to_string(),
            "/usr/local/bin:/usr/bin:/bin".to_string(),
        )],
        cwd: scratch.to_path_buf(),
    };
    let started = Instant::now();
    let mut prepared = launcher.prepare(&process)?;
    prepared
        .command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = prepared.command.spawn().context("starting the canary")?;
    let output = tokio::time::timeout(PROBE_TIMEOUT, child.wait_with_output())
        .await
        .with_context(|| {
            format!("the canary in `{name}` did not finish within {PROBE_TIMEOUT:?}")
        })??;
    drop(prepared.guard);
    let elapsed_ms = started.elapsed().as_millis();
    let seen = ProbeSeen {
        exit_code: output.status.code(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    Ok(ProbeReport {
        environment: name.to_string(),
        canary: CANARY.iter().map(|s| s.to_string()).collect(),
        agrees: spec.expected_probe.matches(&seen),
        expected: spec.expected_probe,
        seen,
        elapsed_ms,
    })
}
