//! Reports of a matrix run: JUnit XML (for CI test panels), a JSON summary (for machines) and a
//! Markdown matrix (for `$GITHUB_STEP_SUMMARY` or a PR comment).

mod junit;
mod markdown;
mod summary;

pub use junit::junit_xml;
pub use markdown::markdown;
pub use summary::{CellSummary, Status, Summary, Totals};

use crate::matrix::CellResult;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where [`write_all`] put the reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportPaths {
    pub junit: PathBuf,
    pub json: PathBuf,
    pub markdown: PathBuf,
}

/// Write `junit.xml`, `summary.json` and `matrix.md` into `dir`.
pub fn write_all(dir: &Path, results: &[CellResult], wall: Duration) -> Result<ReportPaths> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let summary = Summary::from_results(results, wall);
    let paths = ReportPaths {
        junit: dir.join("junit.xml"),
        json: dir.join("summary.json"),
        markdown: dir.join("matrix.md"),
    };
    let write = |path: &Path, text: String| {
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
    };
    write(&paths.junit, junit_xml(&summary)?)?;
    write(&paths.json, serde_json::to_string_pretty(&summary)? + "\n")?;
    write(&paths.markdown, markdown(&summary))?;
    Ok(paths)
}

#[cfg(test)]
mod tests;
