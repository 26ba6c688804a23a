//! What running one cell produced.

use graders::events::CellId;
use graders::verdict::Verdict;
use std::path::PathBuf;
use std::time::Duration;
use suites::spec::Profile;
use suites::{Agreement, Expectation};

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

    pub fn is_not_applicable(&self) -> bool {
        matches!(self.outcome, CellOutcome::NotApplicable { .. })
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
