//! The Markdown matrix: totals (and each profile's), the differences from the baseline first,
//! the ignored and the not-applicable cells with their reasons, then per profile one table per
//! suite and runner (cases × environments).

use super::summary::{by_profile, ordered, profile_heading, CellSummary, Status, Summary, Totals};
use std::fmt::Write;

/// What marks a flaky cell, after its mark ([`CellSummary::is_flaky`]).
const FLAKY: &str = "⚠️ flaky";

fn mark(cell: &CellSummary) -> String {
    let mark = status_mark(cell);
    if cell.is_flaky() {
        format!("{mark} {FLAKY}")
    } else {
        mark
    }
}

fn status_mark(cell: &CellSummary) -> String {
    let verdict = cell.verdict.as_deref().unwrap_or("");
    match cell.status {
        Status::AsExpected if cell.expected == "pass" => "✅ pass".to_string(),
        Status::AsExpected => format!("✅ {verdict} (baseline)"),
        Status::Differs => format!("❌ {verdict} (expected {})", cell.expected),
        Status::Stale => format!("❌ pass (stale: baseline says {})", cell.expected),
        Status::Error => "💥 error".to_string(),
        Status::Ignored => "⏭️ ignored".to_string(),
        Status::NotApplicable => "➖ n/a".to_string(),
    }
}

/// Table cells must stay on one line and must not break the table.
fn escape(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

pub fn markdown(summary: &Summary) -> String {
    let mut out = String::new();
    totals(&mut out, summary);
    differences(&mut out, summary);
    flaky(&mut out, summary);
    listed_by_reason(&mut out, summary);
    declarations(&mut out, summary);
    for (profile, of_profile) in by_profile(&summary.cells) {
        let (name, about) = profile_heading(profile);
        let _ = writeln!(out, "### Profile `{name}`: {about}\n");
        suite_tables(&mut out, &of_profile);
    }
    let _ = writeln!(
        out,
        "✅ as expected (baseline: a known, documented non-pass verdict) · ❌ differs from the baseline · 💥 harness error · ⏭️ cannot run here · ➖ not applicable to the driver · `·` not in the matrix"
    );
    if summary.totals.flaky > 0 {
        let _ = writeln!(
            out,
            "\n{FLAKY}: failed, then as expected when run again (`harness run --retries`): not a failure of the run, but a race to look into"
        );
    }
    out
}

/// The verdict line with the totals, and each profile's when there are several.
fn totals(out: &mut String, summary: &Summary) {
    let t = &summary.totals;
    let verdict_line = if t.failures() == 0 && t.ignored == 0 && t.flaky > 0 {
        "**all cells as expected, but some only when run again (flaky)**"
    } else if t.failures() == 0 && t.ignored == 0 {
        "**all cells as expected**"
    } else if t.failures() == 0 {
        "**no cell differs from its expectation, but some could not run here**"
    } else {
        "**the matrix differs from its expectation**"
    };
    let _ = writeln!(out, "## Conformance matrix\n");
    let _ = writeln!(
        out,
        "{verdict_line}: {} cells, {} as expected, {} differ, {} stale, {} errors, {} ignored, {} not applicable{}.\n",
        t.cells,
        t.as_expected,
        t.differs,
        t.stale,
        t.errors,
        t.ignored,
        t.not_applicable,
        // Cells read back without a summary.json have no wall time.
        if summary.wall_ms == 0 {
            String::new()
        } else {
            format!(" ({:.1} s)", summary.wall_ms as f64 / 1000.0)
        }
    );
    if t.flaky > 0 {
        let _ = writeln!(
            out,
            "**⚠️ {} cells were flaky**: they failed, then were as expected when run again (each attempt's evidence is kept).\n",
            t.flaky
        );
    }

    if summary.profiles.len() > 1 {
        for (profile, totals) in &summary.profiles {
            let _ = writeln!(
                out,
                "- profile `{}`: {}",
                profile_heading(Some(*profile)).0,
                counts(totals)
            );
        }
        let _ = writeln!(out);
    }
}

/// The cells that differ from the baseline, one row each.
fn differences(out: &mut String, summary: &Summary) {
    let failures: Vec<&CellSummary> = summary
        .cells
        .iter()
        .filter(|c| c.status.is_failure())
        .collect();
    if !failures.is_empty() {
        let _ = writeln!(out, "### Differences from the baseline\n");
        let _ = writeln!(out, "| cell | expected | got | reason | evidence |");
        let _ = writeln!(out, "| --- | --- | --- | --- | --- |");
        for cell in failures {
            let got = match cell.status {
                Status::Error => "error".to_string(),
                _ => cell.verdict.clone().unwrap_or_default(),
            };
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | `{}` |",
                cell.cell,
                escape(&cell.expected_with_declarations()),
                got,
                escape(&with_earlier_attempts(&cell.reason, cell)),
                cell.evidence_dir
            );
        }
        let _ = writeln!(out);
    }
}

/// `reason`, then what each earlier attempt of `cell` ended with, when it was run again.
fn with_earlier_attempts(reason: &str, cell: &CellSummary) -> String {
    let mut text = reason.to_string();
    for earlier in &cell.earlier_attempts {
        let _ = write!(
            text,
            "; attempt {}: {} (`{}`)",
            earlier.attempt, earlier.describe, earlier.evidence
        );
    }
    text
}

/// The flaky cells, one row each, with what their first attempt ended with.
fn flaky(out: &mut String, summary: &Summary) {
    let flaky: Vec<&CellSummary> = summary.cells.iter().filter(|c| c.is_flaky()).collect();
    if flaky.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "### {FLAKY}: failed, then as expected when run again\n"
    );
    let _ = writeln!(out, "| cell | first attempt | then | evidence |");
    let _ = writeln!(out, "| --- | --- | --- | --- |");
    for cell in flaky {
        let first = &cell.earlier_attempts[0];
        let then = format!(
            "attempt {}: {}",
            cell.earlier_attempts.len() + 1,
            status_mark(cell)
        );
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | `{}/{}` |",
            cell.cell,
            escape(&first.describe),
            escape(&then),
            cell.evidence_dir,
            first.evidence
        );
    }
    let _ = writeln!(out);
}

/// The ignored and the not-applicable cells, counted by reason.
fn listed_by_reason(out: &mut String, summary: &Summary) {
    for (status, heading) in [
        (
            Status::Ignored,
            "Ignored (cannot run here; a failure under `CI=true`)",
        ),
        (
            Status::NotApplicable,
            "Not applicable (the driver cannot express the case; never run, never a pass)",
        ),
    ] {
        let listed: Vec<&CellSummary> = summary
            .cells
            .iter()
            .filter(|c| c.status == status)
            .collect();
        if listed.is_empty() {
            continue;
        }
        let _ = writeln!(out, "### {heading}\n");
        for reason in ordered(listed.iter().map(|c| c.reason.as_str())) {
            let count = listed.iter().filter(|c| c.reason == reason).count();
            let _ = writeln!(out, "- {count} cells: {}", escape(reason));
        }
        let _ = writeln!(out);
    }
}

/// What the driver's declarations make of the cells they change.
fn declarations(out: &mut String, summary: &Summary) {
    let graded_with: Vec<&CellSummary> = summary
        .cells
        .iter()
        .filter(|c| c.expected_declarations.is_some())
        .collect();
    if !graded_with.is_empty() {
        let _ = writeln!(
            out,
            "### What the driver's declarations make of these cells\n"
        );
        for cell in graded_with {
            let _ = writeln!(
                out,
                "- `{}` expects {}",
                cell.cell,
                escape(&cell.expected_with_declarations())
            );
        }
        let _ = writeln!(out);
    }
}

fn counts(t: &Totals) -> String {
    format!(
        "{} cells, {} as expected, {} differ, {} stale, {} errors, {} ignored, {} not applicable",
        t.cells, t.as_expected, t.differs, t.stale, t.errors, t.ignored, t.not_applicable
    )
}

/// One table per suite and runner of `cells`.
fn suite_tables(out: &mut String, cells: &[&CellSummary]) {
    for suite in ordered(cells.iter().map(|c| c.suite.as_str())) {
        let cells: Vec<&CellSummary> = cells.iter().copied().filter(|c| c.suite == suite).collect();
        let _ = writeln!(out, "#### {suite}\n");
        let environments = ordered(cells.iter().map(|c| c.environment.as_str()));
        for runner in ordered(cells.iter().map(|c| c.runner.as_str())) {
            let runner_cells: Vec<&&CellSummary> =
                cells.iter().filter(|c| c.runner == runner).collect();
            let _ = writeln!(out, "**{runner}**\n");
            let _ = writeln!(out, "| case | {} |", environments.join(" | "));
            let _ = writeln!(out, "| --- |{}", " --- |".repeat(environments.len()));
            for case in ordered(runner_cells.iter().map(|c| c.case.as_str())) {
                let row: Vec<String> = environments
                    .iter()
                    .map(|env| {
                        runner_cells
                            .iter()
                            .find(|c| c.case == case && c.environment == *env)
                            .map(|c| mark(c))
                            .unwrap_or_else(|| "·".to_string())
                    })
                    .collect();
                let _ = writeln!(out, "| {case} | {} |", row.join(" | "));
            }
            let _ = writeln!(out);
        }
    }
}
