//! Running one cell: not applicable (recorded, never run), a missing prerequisite (ignored, an
//! error under `CI=true`), or its attempts — one pipeline of the stages in [`crate::stages`]
//! each, retried only for the real Codex's helper pipe race ([`crate::retry`]) — judged against
//! the baseline (a `not-applicable` verdict: reported not applicable), and the verdict file
//! written, bound to the run and the evidence (`report::binding`).

use crate::context::CellContext;
use crate::guard::CellGuard;
use crate::{prereq, retry, stages};
use anyhow::{Context, Result};
use graders::verdict::{Verdict, VerdictKind};
use report::layout::CellEvidence;
use report::outcome::{CellOutcome, CellResult};
use report::verdict_file::VerdictFile;
use std::time::{Duration, Instant, SystemTime};
use suites::Cell;

/// Run one cell and leave its evidence in `<out_root>/<cell>/`.
pub async fn run_cell(ctx: &CellContext, cell: &Cell) -> CellResult {
    let started = Instant::now();
    // Evidence older than this is an earlier run's (a folder that could not be cleared); the
    // margin covers the file system's coarser clock.
    let fresh_since = SystemTime::now().checked_sub(Duration::from_secs(1));
    let evidence = ctx.evidence(cell);
    let outcome = if let Some(message) = crate::load::cell_error(cell) {
        CellOutcome::Error { message }
    } else if let Some(reason) = &cell.not_applicable {
        // Evidence of an earlier run of this cell would contradict "never run".
        match std::fs::remove_dir_all(&evidence.root) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => CellOutcome::Error {
                message: format!("clearing old evidence in {}: {e}", evidence.root.display()),
            },
            _ => CellOutcome::NotApplicable {
                reason: reason.clone(),
            },
        }
    } else {
        run_applicable(ctx, cell, &evidence).await
    };
    let result = CellResult {
        cell: cell.id.clone(),
        profile: Some(cell.profile),
        expected: cell.expected.clone(),
        outcome,
        duration: started.elapsed(),
        evidence_dir: evidence.root.clone(),
        earlier_attempts: Vec::new(),
    };
    // A red cell's reason leads with its cause, once judged: the graders' reason stays theirs.
    let (result, cause) = report::cause::explain(result, fresh_since);
    // Bound to this run and to the evidence the cell was graded on, as it is now: what ran in
    // the cell has ended.
    let file = match VerdictFile::from_result(&result)
        .with_cause(cause)
        .bind(&evidence)
    {
        Ok(file) => file,
        Err(e) => {
            return CellResult {
                outcome: CellOutcome::Error {
                    message: format!("binding verdict.json to the cell's evidence: {e:#}"),
                },
                ..result
            }
        }
    };
    // What ran in the cell has ended: the copies and caches it left go (none is graded) and its
    // large logs are compressed (read back decompressed), so the binding above holds. A folder
    // that stays larger is no wrong verdict: said, not failed.
    if let Err(why) = report::trim::after_cell(&evidence) {
        tracing::warn!(target: "notice",
            "harness: {}: trimming its evidence folder: {why}",
            cell.name()
        );
    }
    if let Err(e) = file.write(&evidence) {
        // What failed and why (the OS error ends the chain), and how the cell had ended: on a
        // full disk that is where the first write failed, which the verdict would have said.
        return CellResult {
            outcome: CellOutcome::Error {
                message: format!("{e:#}; the cell had ended: {}", result.describe()),
            },
            ..result
        };
    }
    result
}

async fn run_applicable(ctx: &CellContext, cell: &Cell, evidence: &CellEvidence) -> CellOutcome {
    match prereq::missing(cell, ctx) {
        Some(reason) if ctx.ci => CellOutcome::Error {
            message: format!("CI=true and this cell cannot run here: {reason}"),
        },
        Some(reason) => CellOutcome::Ignored { reason },
        None => match retry::run_cell_attempts(cell, &evidence.root, || attempt(ctx, cell)).await {
            // The run showed the driver's own legitimate choice keeps the case from arising:
            // reported as a cell it cannot express, with the grader's reason; its evidence kept.
            Ok(verdict) if verdict.verdict == VerdictKind::NotApplicable => {
                CellOutcome::NotApplicable {
                    reason: verdict.reason,
                }
            }
            Ok(verdict) => CellOutcome::Graded {
                agreement: cell.expected.judge_verdict(&verdict),
                verdict,
            },
            Err(e) => CellOutcome::Error {
                message: format!("{e:#}"),
            },
        },
    }
}

/// One attempt: the pipeline, from a fresh evidence folder to the verdict. Each stage takes what
/// earlier ones handed on; what one starts that must end with the cell goes to the guard here,
/// so whatever ends the attempt early, dropping the guard tears down what the cell started.
async fn attempt(ctx: &CellContext, cell: &Cell) -> Result<Verdict> {
    let mut guard = CellGuard::new(&cell.name(), &ctx.evidence(cell).root);
    // Each stage's error names the stage: an OS error alone ("No space left on device") does
    // not say which step of the cell failed.
    let folders = stages::folders::prepare(ctx, cell).context("preparing the cell's folders")?;
    let stages::app_server::Prepared { app_server, mock } =
        stages::app_server::prepare(ctx, cell, &folders)
            .await
            .context("preparing the app-server")?;
    guard.hold_mock(mock);
    let home = stages::home_canaries::plant(cell, &folders, &app_server)
        .context("planting the home canaries")?;
    let driver = stages::driver::declare(ctx, cell, &folders, &app_server)
        .context("declaring the driver")?;
    let stages::sandbox::Sandbox {
        recording,
        evidence: sandbox,
        contained,
    } = stages::sandbox::enter(ctx, cell, &folders, &app_server, &driver)
        .await
        .context("preparing the sandbox")?;
    guard.hold_sandbox(contained);
    let run = stages::driver::run(&driver, recording, guard.launcher()?)
        .await
        .context("running the driver")?;
    let wire = stages::events::from_the_wire(cell, &folders, &driver.declaration, &run)
        .context("reading the wire")?;
    // Everything the cell started ends here, before the harness adds its own evidence.
    let finished = guard.finish().await;
    let log = stages::events::with_the_harness_evidence(
        wire,
        sandbox,
        &finished,
        &app_server.model_log,
        &folders.dirs.workspace,
        home.as_ref(),
    )
    .context("adding the harness's evidence")?;
    stages::verdict::grade(cell, &log)
}
