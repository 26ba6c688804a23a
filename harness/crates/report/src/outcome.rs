//! What running one cell produced.

use graders::events::CellId;
use graders::verdict::Verdict;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;
use suites::spec::Profile;
use suites::{Agreement, Expectation};

/// How a cell relates to its expectation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// The verdict is the expected one.
    AsExpected,
    /// The verdict differs from the expected one.
    Differs,
    /// A baseline entry expects a failure, but the cell passes.
    Stale,
    /// The harness could not produce a gradable run.
    Error,
    /// The cell cannot run here.
    Ignored,
    /// The cell's driver cannot express its case: never run, never a pass.
    NotApplicable,
}

impl Status {
    /// As the JSON reports spell it (`as-expected`, …).
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }

    pub fn is_failure(self) -> bool {
        matches!(self, Status::Differs | Status::Stale | Status::Error)
    }
}

/// How a cell ended.
#[derive(Debug, Clone, PartialEq)]
pub enum CellOutcome {
    /// The run was graded; `agreement` compares the verdict with the baseline.
    Graded {
        verdict: Verdict,
        agreement: Agreement,
    },
    /// The cell cannot run on this machine (a missing prerequisite, outside CI).
    Ignored { reason: String },
    /// The cell's driver cannot express its case (`suites::Cell::not_applicable`: never run), or
    /// its run showed a choice the protocol leaves the driver kept the case from arising (graded
    /// `not-applicable`): never a pass, and not a failure — the reports show it with the reason.
    NotApplicable { reason: String },
    /// The harness could not produce a gradable run: an environment probe that disagrees with
    /// its spec, a missing prerequisite under `CI=true`, a driver that could not be started.
    Error { message: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct CellResult {
    pub cell: CellId,
    /// The profile of the cell's suite (`None`: not known, e.g. a cell read back from evidence
    /// written before profiles existed).
    pub profile: Option<Profile>,
    pub expected: Expectation,
    pub outcome: CellOutcome,
    pub duration: Duration,
    /// `target/conformance/<cell>/`.
    pub evidence_dir: PathBuf,
    /// The attempts `harness run --retries` made before this one, which failed, oldest first
    /// (empty: this is the cell's only attempt). A cell that then does not fail is flaky.
    pub earlier_attempts: Vec<EarlierAttempt>,
}

/// An attempt of a cell that failed and was run again (`harness run --retries`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EarlierAttempt {
    /// 1-based.
    pub attempt: usize,
    pub status: Status,
    /// Its verdict, when it was graded.
    #[serde(default)]
    pub verdict: Option<String>,
    /// What happened, in one line ([`CellResult::describe`]).
    pub describe: String,
    /// Its evidence folder, relative to the cell's (`attempt-N`).
    pub evidence: String,
}

impl EarlierAttempt {
    /// The `attempt`-th (1-based) attempt, which ended with `result`, its evidence kept in the
    /// cell's folder under [`crate::layout::attempt_dir`].
    pub fn of(attempt: usize, result: &CellResult) -> Self {
        Self {
            attempt,
            status: result.status(),
            verdict: result.verdict().map(|v| v.verdict.to_string()),
            describe: result.describe(),
            evidence: crate::layout::attempt_dir(attempt),
        }
    }

    /// `attempt N: WHAT (evidence: DIR/attempt-N)`, `cell_dir` the cell's evidence folder.
    pub fn line(&self, cell_dir: &std::path::Path) -> String {
        format!(
            "attempt {}: {} (evidence: {})",
            self.attempt,
            self.describe,
            cell_dir.join(&self.evidence).display()
        )
    }
}

impl CellResult {
    /// Does this cell fail the matrix? Ignored cells do not (they are reported loudly instead).
    pub fn is_failure(&self) -> bool {
        match &self.outcome {
            CellOutcome::Graded { agreement, .. } => !agreement.is_ok(),
            CellOutcome::Ignored { .. } | CellOutcome::NotApplicable { .. } => false,
            CellOutcome::Error { .. } => true,
        }
    }

    pub fn is_ignored(&self) -> bool {
        matches!(self.outcome, CellOutcome::Ignored { .. })
    }

    /// Failed, was run again (`harness run --retries`), and then did not fail: as expected for
    /// the exit code, but every report says so.
    pub fn is_flaky(&self) -> bool {
        !self.is_failure() && !self.earlier_attempts.is_empty()
    }

    pub fn is_not_applicable(&self) -> bool {
        matches!(self.outcome, CellOutcome::NotApplicable { .. })
    }

    /// How the cell relates to its expectation.
    pub fn status(&self) -> Status {
        match &self.outcome {
            CellOutcome::Graded { agreement, .. } => match agreement {
                Agreement::AsExpected => Status::AsExpected,
                Agreement::Differs { .. } => Status::Differs,
                Agreement::Stale { .. } => Status::Stale,
            },
            CellOutcome::Ignored { .. } => Status::Ignored,
            CellOutcome::NotApplicable { .. } => Status::NotApplicable,
            CellOutcome::Error { .. } => Status::Error,
        }
    }

    /// The verdict, when the cell was graded.
    pub fn verdict(&self) -> Option<&Verdict> {
        match &self.outcome {
            CellOutcome::Graded { verdict, .. } => Some(verdict),
            _ => None,
        }
    }

    /// One line saying what happened, for test failures and progress output.
    pub fn describe(&self) -> String {
        match &self.outcome {
            CellOutcome::Graded { verdict, agreement } => match agreement {
                Agreement::AsExpected => format!("{}: {}", verdict.verdict, verdict.reason),
                other => format!("{}; verdict reason: {}", other.describe(), verdict.reason),
            },
            CellOutcome::Ignored { reason } => format!("ignored: {reason}"),
            CellOutcome::NotApplicable { reason } => format!("not applicable: {reason}"),
            CellOutcome::Error { message } => format!("error: {message}"),
        }
    }
}
