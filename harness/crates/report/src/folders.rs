//! Reading evidence folders back into a [`Summary`]: one folder written by `harness run`
//! (possibly downloaded from CI, so its recorded paths are somebody else's), or several
//! shards' folders merged into one report. Each folder's `summary.json` lists its cells; a cell
//! folder with a `verdict.json` that the summary does not list (a run cut off before its
//! summary) is read from that file; a cell folder with neither is an error cell, never dropped.

use crate::layout::CellEvidence;
use crate::outcome::{CellOutcome, CellResult};
use crate::summary::{ordered, CellSummary, Status, Summary};
use crate::verdict_file::VerdictFile;
use anyhow::{bail, Context, Result};
use graders::events::CellId;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// What reading the folders found, and what it had to tolerate.
#[derive(Debug)]
pub struct Loaded {
    pub summary: Summary,
    /// Problems worth telling the user (an unreadable summary.json, a cell without a verdict).
    pub warnings: Vec<String>,
}

fn read_json(path: &Path) -> Result<Option<Value>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .with_context(|| format!("{} is not valid JSON", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// The cell folders directly in `dir`: sub-folders whose name is a cell name.
fn cell_folders(dir: &Path) -> Result<Vec<(CellId, PathBuf)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry?;
        if !entry.file_type()?.is_dir() {
            continue;
        }
        if let Ok(id) = entry.file_name().to_string_lossy().parse::<CellId>() {
            found.push((id, entry.path()));
        }
    }
    found.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(found)
}

/// Whether a folder's summary.json is read.
#[derive(Debug, Clone, Copy)]
enum Summaries {
    Read,
    /// Every cell from its own verdict.json: the summary.json of an earlier run in the same
    /// folder would describe cells whose evidence has since been written again.
    Ignore,
}

/// One folder's cells, in its summary's order, then the unlisted cell folders.
fn load_one(
    dir: &Path,
    summaries: Summaries,
    warnings: &mut Vec<String>,
) -> Result<(Vec<CellSummary>, u64)> {
    anyhow::ensure!(
        dir.is_dir(),
        "{} is not a folder of conformance evidence (it does not exist or is not a folder)",
        dir.display()
    );
    let mut cells = Vec::new();
    let mut wall_ms = 0;
    let summary_path = dir.join(crate::layout::SUMMARY);
    let summary = match summaries {
        Summaries::Read => read_json(&summary_path),
        Summaries::Ignore => Ok(None),
    };
    match summary.and_then(|doc| {
        doc.map(|doc| {
            serde_json::from_value::<Summary>(doc)
                .with_context(|| format!("{} is not a summary", summary_path.display()))
        })
        .transpose()
    }) {
        Ok(Some(summary)) => {
            wall_ms = summary.wall_ms;
            cells = summary.cells;
        }
        Ok(None) => {}
        Err(e) => warnings.push(format!(
            "{e:#}; its cells are read from their verdict.json instead"
        )),
    }
    let folders = cell_folders(dir)?;
    let located: HashMap<String, PathBuf> = folders
        .iter()
        .map(|(id, path)| (id.to_string(), path.clone()))
        .collect();
    // The recorded evidence_dir is where the cell ran (maybe another machine): point at the
    // folder given here instead, when it holds the cell.
    for cell in &mut cells {
        if let Some(path) = located.get(&cell.cell) {
            cell.evidence_dir = path.display().to_string();
        }
    }
    for (id, path) in folders {
        let name = id.to_string();
        if cells.iter().any(|c| c.cell == name) {
            continue;
        }
        let evidence = CellEvidence::new(&path);
        let cell = match VerdictFile::read(&evidence) {
            Ok(Some(file)) => file.summary(&id, &evidence),
            outcome => {
                let why = match outcome {
                    Err(e) => format!("{e:#}"),
                    _ => "no verdict.json: the cell did not finish".to_string(),
                };
                warnings.push(format!("{name}: {why}"));
                CellSummary {
                    cell: name,
                    profile: None,
                    suite: id.suite.clone(),
                    runner: id.runner.clone(),
                    environment: id.environment.clone(),
                    case: id.case.clone(),
                    status: Status::Error,
                    expected: "pass".into(),
                    expected_reason: None,
                    verdict: None,
                    reason: why,
                    duration_ms: 0,
                    evidence_dir: path.display().to_string(),
                }
            }
        };
        cells.push(cell);
    }
    if cells.is_empty() {
        bail!(
            "{} holds no conformance evidence: no summary.json and no cell folder (suite.runner.environment.case)",
            dir.display()
        );
    }
    Ok((cells, wall_ms))
}

/// Read and merge `dirs`. Cells are ordered by `known_order` (the matrix's cell names) where
/// they appear in it, then in the order found; a cell in two folders is an error (shards never
/// overlap; two runs of one cell cannot both be the report's). The wall time is the longest
/// shard's, as shards run side by side.
pub fn load(dirs: &[PathBuf], known_order: &[String]) -> Result<Loaded> {
    load_with(dirs, known_order, Summaries::Read)
}

fn load_with(dirs: &[PathBuf], known_order: &[String], summaries: Summaries) -> Result<Loaded> {
    anyhow::ensure!(!dirs.is_empty(), "no evidence folder given");
    let mut warnings = Vec::new();
    let mut cells: Vec<CellSummary> = Vec::new();
    let mut origin: HashMap<String, PathBuf> = HashMap::new();
    let mut wall_ms = 0;
    for dir in dirs {
        let (found, wall) = load_one(dir, summaries, &mut warnings)?;
        wall_ms = wall_ms.max(wall);
        for cell in found {
            if let Some(first) = origin.get(&cell.cell) {
                bail!(
                    "cell `{}` is in both {} and {}: shards must not overlap",
                    cell.cell,
                    first.display(),
                    dir.display()
                );
            }
            origin.insert(cell.cell.clone(), dir.clone());
            cells.push(cell);
        }
    }
    let rank: HashMap<&str, usize> = known_order
        .iter()
        .enumerate()
        .map(|(i, name)| (name.as_str(), i))
        .collect();
    // Unknown cells keep their found order, grouped with their suite/runner as first seen.
    let suites = ordered(cells.iter().map(|c| c.suite.as_str()));
    let found_rank: HashMap<String, (usize, usize)> = cells
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let suite = suites.iter().position(|s| *s == c.suite).unwrap_or(0);
            (c.cell.clone(), (suite, i))
        })
        .collect();
    let mut keyed: Vec<((usize, usize, usize), CellSummary)> = cells
        .iter()
        .cloned()
        .map(|c| {
            let key = match rank.get(c.cell.as_str()) {
                Some(r) => (0, *r, 0),
                None => {
                    let (suite, i) = found_rank[&c.cell];
                    (1, suite, i)
                }
            };
            (key, c)
        })
        .collect();
    keyed.sort_by_key(|(key, _)| *key);
    let cells: Vec<CellSummary> = keyed.into_iter().map(|(_, c)| c).collect();
    Ok(Loaded {
        summary: Summary::from_cells(cells, wall_ms),
        warnings,
    })
}

/// Each cell of the folders from its own verdict.json, in the order of `matrix`, then every cell
/// of `matrix` the folders do not hold: a not-applicable one as not applicable (such a cell never
/// runs, so it has evidence nowhere), any other as an error cell. For folders that must hold the
/// whole matrix, such as the one the suites' `cells` test binary fills (it writes no
/// summary.json, skips not-applicable cells, and may share the folder with an earlier `harness
/// run`'s summary): without this, a cell that never ran would be missing from a report that
/// reads as complete.
pub fn load_complete(dirs: &[PathBuf], matrix: &[suites::Cell]) -> Result<Loaded> {
    let order: Vec<String> = matrix.iter().map(suites::Cell::name).collect();
    let mut loaded = load_with(dirs, &order, Summaries::Ignore)?;
    let present: HashSet<String> = loaded
        .summary
        .cells
        .iter()
        .map(|c| c.cell.clone())
        .collect();
    let mut cells = std::mem::take(&mut loaded.summary.cells);
    let folders = dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    for cell in matrix.iter().filter(|c| !present.contains(&c.name())) {
        let outcome = match &cell.not_applicable {
            Some(reason) => CellOutcome::NotApplicable {
                reason: reason.clone(),
            },
            None => CellOutcome::Error {
                message: format!("no evidence of this cell in {folders}: it did not run"),
            },
        };
        cells.push(CellSummary::from_result(&CellResult {
            cell: cell.id.clone(),
            profile: Some(cell.profile),
            expected: cell.expected.clone(),
            outcome,
            duration: std::time::Duration::ZERO,
            evidence_dir: dirs[0].join(cell.name()),
        }));
    }
    // Stable: cells the matrix does not know keep their found order, after its own.
    let rank: HashMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, name)| (name.as_str(), i))
        .collect();
    cells.sort_by_key(|c| rank.get(c.cell.as_str()).copied().unwrap_or(usize::MAX));
    loaded.summary = Summary::from_cells(cells, loaded.summary.wall_ms);
    Ok(loaded)
}
