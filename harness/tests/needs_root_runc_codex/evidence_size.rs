//! What a run leaves is sized for a CI artifact (docs/events.md, "What a cell's folder
//! keeps"): a real cell's folder keeps no copy or cache (the real Codex's SQLite databases and
//! their write-ahead logs, its bundled skills, the fake's copy of bubblewrap) and its verdict
//! stays bound to what is left; a delta-burst cell (100 000 transcript lines, 30 MB) keeps its
//! transcript compressed (`transcript.jsonl.gz`, which `harness report` and `harness grade` read
//! through its name) and makes a report.html of a bounded size, not 24.6 MB.
//!
//! Needs bubblewrap (the `local` environment) and, for the real-Codex cell, the pinned Codex:
//! without them a trial is ignored with the reason; under `CI=true` it fails.

use crate::common;

use common::harness_cli::{rebuild, run_cells};
use common::prereq;
use libtest_mimic::{Failed, Trial};
use std::path::Path;

const DELTA_BURST: &str = "protocol-size.runner-fake.local.delta-burst";
const REAL_CODEX: &str = "protocol-handshake.runner-codex.local.handshake";
/// report.html of the one delta-burst cell: its page's timeline within the report's budget,
/// the grid, the style and the script.
const DELTA_BURST_REPORT_BYTES: u64 = 6 << 20;
/// The delta-burst cell's folder, its transcript compressed (30 MB plain).
const DELTA_BURST_FOLDER_BYTES: u64 = 5 << 20;

pub fn trials() -> Vec<Trial> {
    let local = || prereq::environment_missing("local");
    let trials = vec![
        prereq::trial(
            "a_delta_burst_cells_report_is_bounded_and_its_folder_keeps_no_bubblewrap_copy_needs_bwrap",
            local(),
            || delta_burst().map_err(Failed::from),
        ),
        prereq::trial(
            "a_real_codex_cells_folder_keeps_no_sqlite_wal_or_bundled_skills_needs_real_codex",
            local().or_else(prereq::codex_missing),
            || real_codex().map_err(Failed::from),
        ),
    ];
    trials
}

/// Every path below `dir` whose name satisfies `wanted`.
fn find(dir: &Path, wanted: &dyn Fn(&str) -> bool, found: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if wanted(&entry.file_name().to_string_lossy()) {
            found.push(path.display().to_string());
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            find(&path, wanted, found);
        }
    }
}

/// The bytes of the files below `dir`.
fn folder_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => folder_bytes(&entry.path()),
            _ => entry.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

/// `harness report DIR` believes the cell: its verdict is still bound to its evidence.
fn still_bound(out: &Path, cell: &str) -> Result<(), String> {
    rebuild(out)?;
    let summary = std::fs::read_to_string(out.join("summary.json")).map_err(|e| e.to_string())?;
    if !summary.contains("\"status\": \"as-expected\"") {
        return Err(format!(
            "harness report does not believe {cell} after its folder was trimmed: {summary}"
        ));
    }
    Ok(())
}

fn delta_burst() -> Result<(), String> {
    let out = tempfile::tempdir().map_err(|e| e.to_string())?;
    run_cells(out.path(), &[DELTA_BURST])?;
    let cell = out.path().join(DELTA_BURST);
    if cell.join("transcript.jsonl").exists() {
        return Err("transcript.jsonl was left uncompressed".into());
    }
    // Read as every reader reads it: through its name, decompressed.
    let transcript = graders::evidence_file::read(
        &cell.join("transcript.jsonl"),
        graders::evidence_file::MAX_STREAMED_BYTES,
    )
    .map_err(|e| e.to_string())?
    .ok_or("the cell left no transcript")?
    .len() as u64;
    let folder = folder_bytes(&cell);
    eprintln!("{DELTA_BURST}: its folder {folder} bytes");
    if folder > DELTA_BURST_FOLDER_BYTES {
        return Err(format!(
            "the cell's folder holds {folder} bytes, over {DELTA_BURST_FOLDER_BYTES}"
        ));
    }
    let report = std::fs::metadata(out.path().join("report.html"))
        .map_err(|e| e.to_string())?
        .len();
    eprintln!("{DELTA_BURST}: transcript.jsonl {transcript} bytes, report.html {report} bytes");
    if transcript < 20 << 20 {
        return Err(format!(
            "the transcript is {transcript} bytes: the burst did not happen"
        ));
    }
    if report > DELTA_BURST_REPORT_BYTES {
        return Err(format!(
            "report.html is {report} bytes, over {DELTA_BURST_REPORT_BYTES}"
        ));
    }
    let mut copies = Vec::new();
    find(
        &out.path().join(DELTA_BURST),
        &|name| name == "fake-codex-package",
        &mut copies,
    );
    if !copies.is_empty() {
        return Err(format!(
            "the folder keeps the copy of bubblewrap: {copies:?}"
        ));
    }
    still_bound(out.path(), DELTA_BURST)
}

fn real_codex() -> Result<(), String> {
    let out = tempfile::tempdir().map_err(|e| e.to_string())?;
    run_cells(out.path(), &[REAL_CODEX])?;
    let cell = out.path().join(REAL_CODEX);
    let mut left = Vec::new();
    find(
        &cell,
        &|name| name.contains(".sqlite") || name == "skills",
        &mut left,
    );
    if !left.is_empty() {
        return Err(format!(
            "the folder keeps Codex's databases or skills: {left:?}"
        ));
    }
    let mut rollouts = Vec::new();
    find(&cell, &|name| name.starts_with("rollout-"), &mut rollouts);
    if rollouts.is_empty() {
        return Err("the session as Codex wrote it (sessions/…/rollout-*.jsonl) is gone".into());
    }
    still_bound(out.path(), REAL_CODEX)
}
