//! `harness run --retries N`: a cell whose result fails (graded and differs from its
//! expectation, or an error) runs again from scratch, up to N more times, as cargo-nextest
//! retries a failed test. Each earlier attempt's folder is kept whole in the cell's, as
//! `attempt-K/` (its own verdict.json included); the cell's top level is the last attempt's,
//! and its verdict.json lists the earlier attempts, so `harness report` reads them back. A cell
//! that failed and then did not is flaky: as expected for the exit code, and said so by every
//! report. Cells that did not fail (ignored, not applicable) never run again.
//!
//! Not the helper-pipe-race retry (`crate::retry`), which is one attempt's own and always on.

use crate::cell::run_cell;
use crate::context::CellContext;
use anyhow::{Context, Result};
use report::layout::{self, CellEvidence};
use report::outcome::{CellOutcome, CellResult, EarlierAttempt};
use report::verdict_file::VerdictFile;
use std::path::{Path, PathBuf};
use suites::Cell;

/// Run `cell`, and again while it fails, `retries` more times at most; the last attempt's
/// result, carrying the earlier ones. A stop drops this future like any cell's: the attempt
/// that runs is torn down, and the earlier ones' folders still go into the cell's
/// ([`SetAside`]).
pub(crate) async fn run_cell_retried(ctx: &CellContext, cell: &Cell, retries: usize) -> CellResult {
    let mut result = run_cell(ctx, cell).await;
    let evidence = ctx.evidence(cell);
    let mut earlier = Vec::new();
    let mut set_aside = SetAside {
        root: evidence.root.clone(),
        waiting: Vec::new(),
    };
    while result.is_failure() && earlier.len() < retries {
        let attempt = earlier.len() + 1;
        match set_aside_attempt(&evidence.root, attempt) {
            Ok(Some(waiting)) => set_aside.waiting.push((waiting, attempt)),
            Ok(None) => {}
            // Never a pass the attempt did not earn: the cell is an error, saying why.
            Err(e) => return with_error(result, earlier, &format!("{e:#}")),
        }
        earlier.push(EarlierAttempt::of(attempt, &result));
        result = run_cell(ctx, cell).await;
    }
    if earlier.is_empty() {
        return result;
    }
    if let Err(e) = keep_attempts(&evidence, &mut set_aside, &earlier) {
        return with_error(result, earlier, &format!("{e:#}"));
    }
    result.earlier_attempts = earlier;
    result
}

/// The folders of earlier attempts waiting beside the cell's while a later attempt runs, each
/// with its attempt's number: moved into the cell's folder however the cell ends — a stop
/// drops the attempt running, and with it this — so none is left under a name no report reads.
struct SetAside {
    root: PathBuf,
    waiting: Vec<(PathBuf, usize)>,
}

impl SetAside {
    /// Move each waiting folder into the cell's, as `attempt-N/`.
    fn keep(&mut self) -> Result<()> {
        if self.waiting.is_empty() {
            return Ok(());
        }
        std::fs::create_dir_all(&self.root)
            .with_context(|| format!("creating {}", self.root.display()))?;
        for (waiting, attempt) in std::mem::take(&mut self.waiting) {
            let kept = self.root.join(layout::attempt_dir(attempt));
            std::fs::rename(&waiting, &kept).with_context(|| {
                format!(
                    "keeping attempt {attempt}'s evidence: moving {} to {}",
                    waiting.display(),
                    kept.display()
                )
            })?;
        }
        Ok(())
    }
}

impl Drop for SetAside {
    fn drop(&mut self) {
        if let Err(e) = self.keep() {
            tracing::warn!(target: "notice", "harness: {e:#}");
        }
    }
}

/// Where the `attempt`-th attempt's folder waits while the next attempt runs: beside the cell's,
/// under a name no cell has (a leading dot), so the next attempt starts from no folder at all.
fn waiting_place(root: &Path, attempt: usize) -> PathBuf {
    let name = root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    root.with_file_name(format!(".{name}.{}", layout::attempt_dir(attempt)))
}

/// Move the folder of the attempt that just ended out of the way; `None` when it left none.
fn set_aside_attempt(root: &Path, attempt: usize) -> Result<Option<PathBuf>> {
    let waiting = waiting_place(root, attempt);
    match std::fs::remove_dir_all(&waiting) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| {
                format!(
                    "running the cell again: clearing {} (left by an earlier run)",
                    waiting.display()
                )
            })
        }
        _ => {}
    }
    match std::fs::rename(root, &waiting) {
        Ok(()) => Ok(Some(waiting)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| {
            format!(
                "running the cell again: setting attempt {attempt}'s evidence aside from {} to {}",
                root.display(),
                waiting.display()
            )
        }),
    }
}

/// Move each earlier attempt's folder into the last attempt's, and list them in its
/// verdict.json (which stays bound: it binds the graded files, none of which moved).
fn keep_attempts(
    evidence: &CellEvidence,
    set_aside: &mut SetAside,
    earlier: &[EarlierAttempt],
) -> Result<()> {
    set_aside.keep()?;
    // A last attempt that left no verdict.json is an error already, and says why.
    if let Some(mut file) = VerdictFile::read(evidence)? {
        file.earlier_attempts = earlier.to_vec();
        file.write(evidence)
            .context("listing the earlier attempts in verdict.json")?;
    }
    Ok(())
}

fn with_error(result: CellResult, earlier: Vec<EarlierAttempt>, why: &str) -> CellResult {
    CellResult {
        outcome: CellOutcome::Error {
            message: format!("{why}; the cell had ended: {}", result.describe()),
        },
        earlier_attempts: earlier,
        ..result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attempt_waits_beside_the_cell_under_a_name_no_cell_has() {
        let out = tempfile::tempdir().unwrap();
        let root = out.path().join("s.r.local.c");
        std::fs::create_dir_all(root.join("driver")).unwrap();
        std::fs::write(root.join("verdict.json"), "{}").unwrap();
        let waiting = set_aside_attempt(&root, 1).unwrap().unwrap();
        assert_eq!(waiting, out.path().join(".s.r.local.c.attempt-1"));
        assert!(waiting.join("verdict.json").is_file() && !root.exists());
        assert!(waiting
            .file_name()
            .unwrap()
            .to_string_lossy()
            .parse::<graders::events::CellId>()
            .is_err());
        assert_eq!(
            set_aside_attempt(&root, 2).unwrap(),
            None,
            "an attempt that left no folder"
        );

        // A stop drops the attempt running: the waiting folder still goes into the cell's.
        std::fs::create_dir_all(root.join("driver")).unwrap();
        drop(SetAside {
            root: root.clone(),
            waiting: vec![(waiting.clone(), 1)],
        });
        assert!(root.join("attempt-1/verdict.json").is_file() && !waiting.exists());
    }
}
