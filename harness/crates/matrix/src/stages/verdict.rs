//! Stage 6, the verdict: the suite's grader over the run's events (`graders::grade`), with the
//! signature that decided it. Judging it against the baseline is the cell's, not the stage's.

use anyhow::{anyhow, Result};
use driver::event_log::EventLog;
use graders::verdict::Verdict;
use suites::Cell;

/// Stage 6 of `cell`.
pub(crate) fn grade(cell: &Cell, log: &EventLog) -> Result<Verdict> {
    graders::grade::grade(&cell.id.suite, cell.grader_case(), log.events())
        .map_err(|e| anyhow!("grading: {e}"))
}
