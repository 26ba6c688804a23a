//! The layout of a run's output folder — the reports (`summary.json`, `junit.xml`, `matrix.md`,
//! `report.html`) and one evidence folder per cell (`<out>/<suite.runner.environment.case>/`):
//! the one place that names their files and folders. The cell pipeline writes them by these names, the
//! reports, `harness report`, repro, fidelity and drift read them back by the same names.
//!
//! ```text
//! <cell>/
//!   verdict.json           the outcome (VerdictFile), written for every cell that ran
//!   events.jsonl           the run's events, graded
//!   transcript.jsonl       every launch of `codex` and every line on the wire (the tap)
//!   findings.json          where the driver's own events disagree with the wire
//!   task.json              the task envelope the driver got
//!   driver-events.jsonl    the driver's own events (events contract)
//!   driver-stdout.log      the driver's stdout; stderr.log its stderr (and the app-server's)
//!   model-log.jsonl        what the model was told (tool calls and outputs)
//!   model-requests.jsonl   every request the real Codex sent the mock model API
//!   model-api-timing.json  how long the mock model API served
//!   retries.json, retries/ earlier attempts of the helper pipe race retry
//!   scenario.toml          a scenario file the fake plays
//!   workspace/ home/ tmp/  the app-server's folders; tap/ the wire tap; codex/ the real
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
pub const DRIVER_EVENTS: &str = "driver-events.jsonl";
pub const DRIVER_STDOUT: &str = "driver-stdout.log";
pub const STDERR: &str = "stderr.log";
pub const MODEL_LOG: &str = "model-log.jsonl";
pub const MODEL_REQUESTS: &str = "model-requests.jsonl";
pub const MODEL_API_TIMING: &str = "model-api-timing.json";
pub const RETRIES: &str = "retries.json";
pub const RETRIES_DIR: &str = "retries";
pub const SCENARIO: &str = "scenario.toml";
pub const WORKSPACE: &str = "workspace";
pub const HOME: &str = "home";
pub const TMP: &str = "tmp";
pub const TAP: &str = "tap";
pub const CODEX: &str = "codex";

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
    pub fn task(&self) -> PathBuf {
        self.root.join(TASK)
    }
    pub fn driver_events(&self) -> PathBuf {
        self.root.join(DRIVER_EVENTS)
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
        self.root.join(WORKSPACE)
    }
    pub fn home(&self) -> PathBuf {
        self.root.join(HOME)
    }
    pub fn tmp(&self) -> PathBuf {
        self.root.join(TMP)
    }
    pub fn tap(&self) -> PathBuf {
        self.root.join(TAP)
    }
    pub fn codex(&self) -> PathBuf {
        self.root.join(CODEX)
    }
}
