//! How a run ended, as values: why it stopped early ([`CancelReason`]), what its reports list
//! for the cells a stop left unfinished, the note a stopped run carries, and its exit code.

use matrix::scheduler::MatrixRun;
use report::outcome::{CellOutcome, CellResult};
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;
use suites::Cell;

/// Why a run stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CancelReason {
    /// SIGINT or SIGTERM (the number), the first of the run.
    Signal(i32),
    /// A cell's task panicked (its message).
    Panic(String),
}

impl CancelReason {
    /// The cause of `run`'s early end: a panic in a cell outranks a signal, as in its exit code.
    pub(crate) fn of(run: &MatrixRun, signal: Option<i32>) -> Option<CancelReason> {
        match (&run.panic, signal) {
            (Some(message), _) => Some(CancelReason::Panic(message.clone())),
            (None, Some(signal)) => Some(CancelReason::Signal(signal)),
            (None, None) => None,
        }
    }

    /// The process's exit code for a run that ended this way: 101 after a panic, 128 + the
    /// signal after a signal.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            CancelReason::Panic(_) => ExitCode::from(101),
            CancelReason::Signal(signal) => ExitCode::from(u8::try_from(128 + signal).unwrap_or(1)),
        }
    }
}

impl std::fmt::Display for CancelReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CancelReason::Signal(signal_hook::consts::SIGINT) => f.write_str("SIGINT"),
            CancelReason::Signal(signal_hook::consts::SIGTERM) => f.write_str("SIGTERM"),
            CancelReason::Signal(_) => f.write_str("signal"),
            CancelReason::Panic(message) => write!(f, "a cell panicked ({message})"),
        }
    }
}

/// The finished results and, in the cells' order, one ignored result for each cell the stop
/// interrupted or kept from starting, so summary.json and junit.xml (skipped, with the reason)
/// account for every cell selected — a consumer of a stopped run's JUnit sees what is missing.
/// Not failures: the run's exit code (130, 143, 101) already says it did not finish.
pub(crate) fn with_unfinished<'a>(
    cells: impl Iterator<Item = &'a Cell>,
    run: &MatrixRun,
    cause: Option<&CancelReason>,
    out_root: &Path,
) -> Vec<CellResult> {
    let Some(cause) = cause else {
        return run.finished.clone();
    };
    let mut finished: std::collections::HashMap<String, &CellResult> = run
        .finished
        .iter()
        .map(|r| (r.cell.to_string(), r))
        .collect();
    let interrupted: std::collections::HashSet<String> =
        run.interrupted.iter().map(|id| id.to_string()).collect();
    cells
        .map(|cell| {
            let name = cell.name();
            if let Some(result) = finished.remove(&name) {
                return result.clone();
            }
            let reason = if interrupted.contains(&name) {
                format!("interrupted: the run was stopped by {cause} while this cell ran; it was torn down")
            } else {
                format!("not started: the run was stopped by {cause} first")
            };
            CellResult {
                cell: cell.id.clone(),
                profile: Some(cell.profile),
                expected: cell.expected.clone(),
                outcome: CellOutcome::Ignored { reason },
                duration: Duration::ZERO,
                evidence_dir: out_root.join(&name),
            }
        })
        .collect()
}

/// What a stopped run did not finish, or `None` when it was not stopped.
pub(crate) fn stop_note(run: &MatrixRun, cause: Option<&CancelReason>) -> Option<String> {
    let cause = cause?;
    let names = |ids: &[graders::events::CellId]| {
        ids.iter()
            .map(|id| id.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some(format!(
        "**stopped by {cause}**: {} cells finished, {} interrupted{}, {} not started (the last two listed as ignored)",
        run.finished.len(),
        run.interrupted.len(),
        if run.interrupted.is_empty() {
            String::new()
        } else {
            format!(" ({})", names(&run.interrupted))
        },
        run.not_started.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal_hook::consts::{SIGINT, SIGTERM};

    #[test]
    fn a_cancel_reason_names_its_cause_and_its_exit_code() {
        let cases = [
            (CancelReason::Signal(SIGINT), "SIGINT", ExitCode::from(130)),
            (
                CancelReason::Signal(SIGTERM),
                "SIGTERM",
                ExitCode::from(143),
            ),
            (
                CancelReason::Panic("boom".into()),
                "a cell panicked (boom)",
                ExitCode::from(101),
            ),
        ];
        for (reason, said, code) in cases {
            assert_eq!(reason.to_string(), said);
            assert_eq!(reason.exit_code(), code, "{said}");
        }
    }

    #[test]
    fn a_panic_outranks_a_signal_and_no_stop_is_no_cause() {
        let mut run = MatrixRun::default();
        assert_eq!(CancelReason::of(&run, None), None);
        assert_eq!(
            CancelReason::of(&run, Some(SIGTERM)),
            Some(CancelReason::Signal(SIGTERM))
        );
        run.panic = Some("boom".into());
        assert_eq!(
            CancelReason::of(&run, Some(SIGTERM)),
            Some(CancelReason::Panic("boom".into()))
        );
        assert_eq!(stop_note(&MatrixRun::default(), None), None);
        assert_eq!(
            stop_note(&run, Some(&CancelReason::Signal(SIGINT))).as_deref(),
            Some("**stopped by SIGINT**: 0 cells finished, 0 interrupted, 0 not started (the last two listed as ignored)")
        );
    }
}
