//! The layout of a run's output folder — the reports (`summary.json`, `junit.xml`, `matrix.md`,
//! `report.html`) and one evidence folder per cell (`<out>/<suite.runner.environment.case>/`):
//! the one place that names their files and folders. The cell pipeline writes them by these names, the
//! reports, `harness report`, repro, fidelity and drift read them back by the same names.
//!
//! A cell's folder has two parts: the harness's evidence, which the driver under test never
//! gets to write (docs/prerequisites.md says how, per environment), and `driver/`, the folders
//! the driver and its app-server work in.
//!
//! ```text
//! <cell>/                  the harness's evidence
//!   verdict.json           the outcome (VerdictFile), written for every cell that ran
//!   events.jsonl           the run's events, graded
//!   transcript.jsonl       every launch of `codex` and every line on the wire (the recorder)
//!   findings.json          where the driver's own events disagree with the wire
//!   driver-stdout.log      the driver's stdout; stderr.log its stderr (the app-server's stderr
//!                          is in the transcript)
//!   model-log.jsonl        what the model was told (tool calls and outputs)
//!   model-requests.jsonl   every request the real Codex sent the mock model API
//!   model-api-timing.json  how long the mock model API served
//!   workspace-changes.jsonl what happened in the workspace, from the kernel (the watcher)
//!   retries.json, retries/ earlier attempts of the helper pipe race retry
//!   attempt-N/             with `harness run --retries`: the N-th attempt of a cell that failed
//!                          and ran again, its whole folder as it left it (the top level is
//!                          the last attempt's)
//!   scenario.toml          a scenario file the fake plays
//!   tap/                   the wire tap: bin/codex (the shim), sock/ (the recorder's socket)
//!   fake-codex-package/    the fake's stand-in for Codex's bundled bubblewrap
//!   driver/                the driver's own part, the only one it may write:
//!     task.json            the task envelope it gets (read-only to it)
//!     events.jsonl         its own events (events contract)
//!     workspace/ home/ tmp/  the folders it and the app-server work in; codex/ the real
//!                          Codex's HOME, CODEX_HOME and TMPDIR
//! ```

use std::path::{Path, PathBuf};

/// The reports of a run, next to its cell folders.
pub const SUMMARY: &str = "summary.json";
pub const JUNIT: &str = "junit.xml";
pub const MARKDOWN: &str = "matrix.md";
pub const HTML: &str = "report.html";
/// Where each environment's probe runs, next to the cell folders.
pub const PROBES: &str = "_probes";

pub const VERDICT: &str = "verdict.json";
pub const EVENTS: &str = "events.jsonl";
pub const TRANSCRIPT: &str = "transcript.jsonl";
pub const FINDINGS: &str = "findings.json";
pub const TASK: &str = "task.json";
pub const DRIVER_EVENTS: &str = "events.jsonl";
pub const DRIVER_STDOUT: &str = "driver-stdout.log";
pub const STDERR: &str = "stderr.log";
pub const MODEL_LOG: &str = "model-log.jsonl";
pub const MODEL_REQUESTS: &str = "model-requests.jsonl";
pub const MODEL_API_TIMING: &str = "model-api-timing.json";
pub const RETRIES: &str = "retries.json";
pub const RETRIES_DIR: &str = "retries";
pub const SCENARIO: &str = "scenario.toml";
/// The prefix of an earlier attempt's folder (`attempt-N`, `harness run --retries`).
pub const ATTEMPT_PREFIX: &str = "attempt-";
pub const WORKSPACE: &str = "workspace";
pub const HOME: &str = "home";
pub const TMP: &str = "tmp";
pub const TAP: &str = "tap";
pub const DRIVER: &str = "driver";
pub const WORKSPACE_CHANGES: &str = "workspace-changes.jsonl";
pub const FAKE_CODEX_PACKAGE: &str = "fake-codex-package";
pub const CODEX: &str = "codex";

/// The folder, relative to the cell's, that keeps its `attempt`-th (1-based) attempt.
pub fn attempt_dir(attempt: usize) -> String {
    format!("{ATTEMPT_PREFIX}{attempt}")
}

/// One cell's evidence folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellEvidence {
    pub root: PathBuf,
}

impl CellEvidence {
    pub fn new(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
        }
    }

    /// The folder of the cell named `cell` below `out_root`.
    pub fn of(out_root: &Path, cell: &str) -> Self {
        Self::new(&out_root.join(cell))
    }

    pub fn verdict(&self) -> PathBuf {
        self.root.join(VERDICT)
    }
    pub fn events(&self) -> PathBuf {
        self.root.join(EVENTS)
    }
    pub fn transcript(&self) -> PathBuf {
        self.root.join(TRANSCRIPT)
    }
    pub fn findings(&self) -> PathBuf {
        self.root.join(FINDINGS)
    }
    /// The driver's own part of the folder (it may write there, nowhere else of the cell).
    pub fn driver(&self) -> PathBuf {
        self.root.join(DRIVER)
    }
    pub fn task(&self) -> PathBuf {
        self.driver().join(TASK)
    }
    pub fn driver_events(&self) -> PathBuf {
        self.driver().join(DRIVER_EVENTS)
    }
    pub fn driver_stdout(&self) -> PathBuf {
        self.root.join(DRIVER_STDOUT)
    }
    pub fn stderr(&self) -> PathBuf {
        self.root.join(STDERR)
    }
    pub fn model_log(&self) -> PathBuf {
        self.root.join(MODEL_LOG)
    }
    pub fn model_requests(&self) -> PathBuf {
        self.root.join(MODEL_REQUESTS)
    }
    pub fn model_api_timing(&self) -> PathBuf {
        self.root.join(MODEL_API_TIMING)
    }
    pub fn retries(&self) -> PathBuf {
        self.root.join(RETRIES)
    }
    pub fn retries_dir(&self) -> PathBuf {
        self.root.join(RETRIES_DIR)
    }
    pub fn scenario(&self) -> PathBuf {
        self.root.join(SCENARIO)
    }
    pub fn workspace(&self) -> PathBuf {
        self.driver().join(WORKSPACE)
    }
    pub fn home(&self) -> PathBuf {
        self.driver().join(HOME)
    }
    pub fn tmp(&self) -> PathBuf {
        self.driver().join(TMP)
    }
    pub fn codex(&self) -> PathBuf {
        self.driver().join(CODEX)
    }
    pub fn tap(&self) -> PathBuf {
        self.root.join(TAP)
    }
    pub fn workspace_changes(&self) -> PathBuf {
        self.root.join(WORKSPACE_CHANGES)
    }
    pub fn fake_codex_package(&self) -> PathBuf {
        self.root.join(FAKE_CODEX_PACKAGE)
    }

    /// The evidence a cell's verdict is graded on, each by its name in the folder and its path:
    /// `verdict.json` records the digest of each (`crate::binding`).
    pub fn graded(&self) -> Vec<(String, PathBuf)> {
        [
            EVENTS,
            TRANSCRIPT,
            FINDINGS,
            STDERR,
            MODEL_LOG,
            WORKSPACE_CHANGES,
        ]
        .into_iter()
        .map(|name| (name.to_string(), self.root.join(name)))
        .chain([(format!("{DRIVER}/{DRIVER_EVENTS}"), self.driver_events())])
        .collect()
    }
}
