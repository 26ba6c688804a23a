//! Reading evidence folders back into a [`Summary`]: one folder written by `harness run`
//! (possibly downloaded from CI, so its recorded paths are somebody else's), or several
//! shards' folders merged into one report. Each folder's `summary.json` lists its cells; a cell
//! folder with a `verdict.json` that the summary does not list (a run cut off before its
//! summary) is read from that file; a cell folder with neither is an error cell, never dropped.
//! Every verdict.json read must be bound to where it is found (`crate::binding`): a cell whose
//! verdict is not is an error cell saying why, whatever its summary row or verdict claim.

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

/// The largest `summary.json` read back: a row per cell, each reason bounded far below it.
pub const MAX_SUMMARY_BYTES: u64 = 64 << 20;

fn read_json(path: &Path) -> Result<Option<Value>> {
    match graders::evidence_file::read(path, MAX_SUMMARY_BYTES)? {
        Some(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .with_context(|| format!("{} is not valid JSON", path.display())),
        None => Ok(None),
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

/// A cell as read, with the run its verdict.json is bound to (when it has one that is).
struct Found {
    cell: CellSummary,
    run: Option<String>,
}

/// One folder's cells, in its summary's order, then the unlisted cell folders; and its wall time.
fn load_one(
    dir: &Path,
    summaries: Summaries,
    warnings: &mut Vec<String>,
) -> Result<(Vec<Found>, u64)> {
    anyhow::ensure!(
        dir.is_dir(),
        "{} is not a folder of conformance evidence (it does not exist or is not a folder)",
        dir.display()
    );
    let mut listed = Vec::new();
    let mut run = None;
    let mut wall_ms = 0;
    let summary_path = dir.join(crate::layout::SUMMARY);
    let summary = match summaries {
        Summaries::Read => read_json(&summary_path),
        Summaries::Ignore => Ok(None),
    };
    match summary.and_then(|doc| {
        doc.map(|doc| {
            let summary = serde_json::from_value::<Summary>(doc)
                .with_context(|| format!("{} is not a summary", summary_path.display()))?;
            // Its rows are only believed with their verdicts bound to its run.
            anyhow::ensure!(
                summary.run_id.is_some(),
                "{} names no run, so its cells' verdicts cannot be bound to it",
                summary_path.display()
            );
            Ok(summary)
        })
        .transpose()
    }) {
        Ok(Some(summary)) => {
            wall_ms = summary.wall_ms;
            run = summary.run_id;
            listed = summary.cells;
        }
        Ok(None) => {}
        Err(e) => warnings.push(format!(
            "{e:#}; its cells are read from their verdict.json instead"
        )),
    }
    let folders = cell_folders(dir)?;
    let mut located: HashMap<String, (CellId, PathBuf)> = folders
        .iter()
        .map(|(id, path)| (id.to_string(), (id.clone(), path.clone())))
        .collect();
    let mut cells = Vec::new();
    for row in listed {
        // The recorded evidence_dir is where the cell ran (maybe another machine): point at the
        // folder given here instead, when it holds the cell.
        let found = match located.remove(&row.cell) {
            Some((id, path)) => listed_cell(row, &id, &path, run.as_deref(), warnings),
            None => Found {
                cell: row,
                run: run.clone(),
            },
        };
        cells.push(found);
    }
    for (id, path) in folders {
        if !located.contains_key(&id.to_string()) {
            continue;
        }
        let evidence = CellEvidence::new(&path);
        cells.push(match bound_verdict(&id, &evidence, None) {
            Ok(Some(file)) => Found {
                cell: file.summary(&id, &evidence),
                run: file.run_id,
            },
            outcome => {
                let why = match outcome {
                    Err(why) => why,
                    _ => "no verdict.json: the cell did not finish".to_string(),
                };
                warnings.push(format!("{id}: {why}"));
                error_cell(&id, &path, why)
            }
        });
    }
    if cells.is_empty() {
        bail!(
            "{} holds no conformance evidence: no summary.json and no cell folder (suite.runner.environment.case)",
            dir.display()
        );
    }
    Ok((cells, wall_ms))
}

/// `verdict.json` of the cell `id` in `evidence`, bound to it (and to `run`, when given); the
/// error says what is wrong with it.
fn bound_verdict(
    id: &CellId,
    evidence: &CellEvidence,
    run: Option<&str>,
) -> Result<Option<VerdictFile>, String> {
    let Some(file) = VerdictFile::read(evidence).map_err(|e| format!("{e:#}"))? else {
        return Ok(None);
    };
    file.check_binding(id, evidence, run)?;
    Ok(Some(file))
}

/// A row of `summary.json` whose cell folder is here: believed only as far as the folder's
/// verdict.json, bound to the summary's run, bears it out.
fn listed_cell(
    mut row: CellSummary,
    id: &CellId,
    path: &Path,
    run: Option<&str>,
    warnings: &mut Vec<String>,
) -> Found {
    row.evidence_dir = path.display().to_string();
    let evidence = CellEvidence::new(path);
    let why = match bound_verdict(id, &evidence, run) {
        Ok(Some(file)) if file.status == row.status => {
            return Found {
                cell: row,
                run: file.run_id,
            }
        }
        Ok(Some(file)) => format!(
            "summary.json says {} but verdict.json says {}",
            row.status.name(),
            file.status.name()
        ),
        // A cell a stop left unfinished, or one that never got as far as its verdict.
        Ok(None) if row.status != Status::AsExpected => {
            return Found {
                cell: row,
                run: run.map(str::to_string),
            }
        }
        Ok(None) => {
            "summary.json says as-expected, but the cell's folder holds no verdict.json".into()
        }
        Err(why) => why,
    };
    warnings.push(format!("{id}: {why}"));
    error_cell(id, path, why)
}

/// The error cell `id`, whose evidence is in `path`, for `why`.
fn error_cell(id: &CellId, path: &Path, why: String) -> Found {
    Found {
        cell: CellSummary {
            cell: id.to_string(),
            profile: None,
            suite: id.suite.clone(),
            runner: id.runner.clone(),
            environment: id.environment.clone(),
            case: id.case.clone(),
            status: Status::Error,
            expected: "pass".into(),
            expected_reason: None,
            expected_declarations: None,
            verdict: None,
            reason: why,
            duration_ms: 0,
            evidence_dir: path.display().to_string(),
            earlier_attempts: Vec::new(),
        },
        run: None,
    }
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
    let mut runs: HashSet<String> = HashSet::new();
    for dir in dirs {
        let (found, wall) = load_one(dir, summaries, &mut warnings)?;
        wall_ms = wall_ms.max(wall);
        for Found { cell, run } in found {
            runs.extend(run);
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
    // The run of all the cells when they are of one; a summary written from cells of several
    // runs names none (its rows would not be bound to it).
    let run_id = (runs.len() == 1).then(|| runs.into_iter().next()).flatten();
    Ok(Loaded {
        summary: Summary {
            run_id,
            ..Summary::from_cells(cells, wall_ms)
        },
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
            earlier_attempts: Vec::new(),
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
    loaded.summary = Summary {
        run_id: loaded.summary.run_id.take(),
        ..Summary::from_cells(cells, loaded.summary.wall_ms)
    };
    Ok(loaded)
}
