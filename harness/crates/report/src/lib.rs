//! How cells ended, and every report of a matrix run.
//!
//! Owns: the outcome of a cell ([`outcome::CellResult`], [`outcome::CellOutcome`]); the
//! layout of a run's output and of each cell's evidence folder ([`layout`]); the one typed
//! `verdict.json` ([`verdict_file`]) its writer and readers share, bound to its cell, run and
//! evidence ([`binding`]); why a red cell went red ([`cause`]); and the reports: JUnit XML (for
//! CI test panels), a JSON summary (for machines), a Markdown matrix (for
//! `$GITHUB_STEP_SUMMARY` or a PR comment) and `report.html` ([`html`], for people: the grid
//! and a page per cell with its evidence). [`folders`] reads evidence folders back, so `harness
//! report` can rebuild the reports of a downloaded run or merge shards; [`trim`] drops what a
//! cell's folder need not keep once the cell ended.
//!
//! May use: `graders` (events, verdicts), `suites` (cells' names and expectations) and
//! third-party crates. Nothing of the harness: the matrix writes through it, never the
//! reverse.

// Library code prints nothing: it returns values, or emits a `tracing` notice the command line
// shows (`harness::cli::notices`). Unit tests may print.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![deny(unreachable_pub)]

pub mod binding;
pub mod cause;
mod evidence_lines;
pub mod folders;
pub mod html;
mod job_summary;
mod junit;
pub mod layout;
mod markdown;
pub mod outcome;
mod run_id;
mod summary;
pub mod trim;
pub mod verdict_file;

pub use job_summary::{append_job_summary, job_summary};
pub use junit::junit_xml;
pub use markdown::markdown;
pub use summary::{CellSummary, Status, Summary, Totals};

use anyhow::{Context, Result};
use outcome::CellResult;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where [`write_all`] put the reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportPaths {
    pub junit: PathBuf,
    pub json: PathBuf,
    pub markdown: PathBuf,
    pub html: PathBuf,
}

/// Write `junit.xml`, `summary.json`, `matrix.md` and `report.html` into `dir`.
pub fn write_all(dir: &Path, results: &[CellResult], wall: Duration) -> Result<ReportPaths> {
    write_summary(dir, &Summary::from_results(results, wall))
}

/// Write the four reports of `summary` into `dir`; report.html reads each cell's evidence from
/// its `evidence_dir`.
pub fn write_summary(dir: &Path, summary: &Summary) -> Result<ReportPaths> {
    let paths = write_text_reports(dir, summary)?;
    std::fs::write(&paths.html, html::render(summary))
        .with_context(|| format!("writing {}", paths.html.display()))?;
    Ok(paths)
}

/// The reports of `summary` but report.html (whose path is returned, not written): `harness
/// mutate`'s mutant runs, whose pages would embed the same large evidence once per operator;
/// their cells' evidence folders stay as they are.
pub fn write_text_reports(dir: &Path, summary: &Summary) -> Result<ReportPaths> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let paths = ReportPaths {
        junit: dir.join(layout::JUNIT),
        json: dir.join(layout::SUMMARY),
        markdown: dir.join(layout::MARKDOWN),
        html: dir.join(layout::HTML),
    };
    let write = |path: &Path, text: String| write_atomically(path, text.as_bytes());
    write(&paths.junit, junit_xml(summary)?)?;
    write(&paths.json, serde_json::to_string_pretty(summary)? + "\n")?;
    write(&paths.markdown, markdown(summary))?;
    Ok(paths)
}

/// Write `bytes` to `path` whole or not at all: into a temporary file beside it, then renamed
/// over it. A full or read-only disk, or a run killed mid-write, leaves the previous file (or
/// none), never a truncated report that a reader would take for the run's.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let folder = path
        .parent()
        .with_context(|| format!("{} has no folder", path.display()))?;
    let mut file = tempfile::Builder::new()
        .prefix(".partial-")
        .tempfile_in(folder)
        .with_context(|| {
            format!(
                "writing {}: creating a file in {}",
                path.display(),
                folder.display()
            )
        })?;
    file.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))?;
    // Readers (a browser, `harness report`) expect the usual mode, not tempfile's private one.
    use std::os::unix::fs::PermissionsExt;
    file.as_file()
        .set_permissions(std::fs::Permissions::from_mode(0o644))
        .with_context(|| format!("writing {}", path.display()))?;
    file.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests;
