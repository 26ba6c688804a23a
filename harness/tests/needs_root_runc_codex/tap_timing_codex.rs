//! The real Codex always answers at once, so a driver's missing request bound and its dropping
//! of a turn/completed that comes before the turn/start answer never showed against it (issue
//! 37's held-out measurement: `no-request-bound` and `drops-early-completion` were green on every
//! real-Codex cell). The harness's tap now plays the scenarios' `hang` and `answer_after_turn`
//! on the real Codex's wire (`tap::timing`): against the pinned Codex the held-out driver
//! (`drivers/heldout-style`) passes `no-answer` and `events-before-answer`, its copies with each
//! bug fail the case of their bug, the shipped runners keep their expectations (the minimal
//! driver's documented finding: it discards early events), and every cell's transcript says the
//! tap did it (a `timing` record).

use crate::common;

use common::{driver_copies, prereq};

use std::path::{Path, PathBuf};
use std::process::Command;

/// The held-out driver's folder.
fn heldout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../drivers/heldout-style")
}

/// The held-out driver and its copies with every bug (`bugs.py`) below `dir`, and a drivers file
/// declaring the driver (`heldout-style`) and the copies (`bug-NAME`).
fn drivers_file(dir: &Path) -> PathBuf {
    let status = Command::new("python3")
        .arg(heldout().join("bugs.py"))
        .arg(dir)
        .status()
        .expect("python3 bugs.py");
    assert!(status.success(), "bugs.py: {status}");
    let base = dir.join("heldout-style");
    std::fs::create_dir_all(&base).unwrap();
    std::fs::copy(heldout().join("driver.mjs"), base.join("driver.mjs")).unwrap();
    let shipped = std::fs::read_to_string(heldout().join("drivers.toml")).unwrap();
    let declared = shipped.replace("node driver.mjs", "node heldout-style/driver.mjs");
    let path = dir.join("drivers.toml");
    let bugs = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, format!("{declared}\n{bugs}")).unwrap();
    path
}

/// The cells run, and the verdict each must get.
const EXPECTED: &[(&str, &str)] = &[
    (
        "protocol-control.heldout-style-codex.local.no-answer",
        "pass",
    ),
    (
        "protocol-binding.heldout-style-codex.local.events-before-answer",
        "pass",
    ),
    ("protocol-control.runner-codex.local.no-answer", "pass"),
    (
        "protocol-binding.runner-codex.local.events-before-answer",
        "pass",
    ),
    (
        "protocol-control.runner-minimal-codex.local.no-answer",
        "pass",
    ),
    (
        "protocol-binding.runner-minimal-codex.local.events-before-answer",
        "fail",
    ),
    (
        "protocol-control.bug-no-request-bound-codex.local.no-answer",
        "fail",
    ),
    (
        "protocol-binding.bug-drops-early-completion-codex.local.events-before-answer",
        "fail",
    ),
];

/// The `timing` records of a cell's transcript: their rules.
fn timing_rules(cell_dir: &Path) -> Vec<String> {
    common::evidence::json_records(&cell_dir.join("transcript.jsonl"))
        .into_iter()
        .filter(|r| r["kind"] == "timing")
        .filter_map(|r| r["rule"].as_str().map(str::to_string))
        .collect()
}

fn real_codex_plays_the_timings() {
    let dir = tempfile::tempdir().unwrap();
    let drivers = drivers_file(dir.path());
    let out = dir.path().join("out");
    let mut args = vec!["--app-server", "codex", "--all-runners"];
    args.extend(EXPECTED.iter().map(|(cell, _)| *cell));
    let cells = driver_copies::run(&drivers, &out, &args);
    let mut failures = Vec::new();
    for (cell, expected) in EXPECTED {
        let got = cells
            .get(*cell)
            .map_or("missing", |c| c["verdict"].as_str().unwrap_or("none"));
        if got != *expected {
            let reason = cells.get(*cell).and_then(|c| c["reason"].as_str());
            failures.push(format!("{cell}: {got}, expected {expected} ({reason:?})"));
            continue;
        }
        let rule = if cell.ends_with("no-answer") {
            "withhold"
        } else {
            "answer-after-events"
        };
        let rules = timing_rules(&out.join(cell));
        if !rules.iter().any(|r| r == rule) {
            failures.push(format!("{cell}: no `{rule}` timing record ({rules:?})"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

pub fn trials() -> Vec<libtest_mimic::Trial> {
    vec![prereq::trial(
        "the_real_codex_plays_no_answer_and_events_before_answer_through_the_tap_real_codex",
        prereq::codex_missing(),
        || {
            real_codex_plays_the_timings();
            Ok(())
        },
    )]
}
