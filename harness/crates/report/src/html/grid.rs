//! The matrix as an HTML grid: per profile, one table per suite, runners down, environments ×
//! cases across, each cell coloured by its verdict and outlined by its agreement with the
//! baseline. Rendered here (not by the page's script) so the grid shows at once, and without
//! script at all.

use super::escape;
use crate::summary::{by_profile, ordered, profile_heading, CellSummary, Status, Summary};
use std::fmt::Write;

/// The status as the JSON summary names it (`as-expected`, `differs`, …): read from its serde
/// name so a status added later is named the same way everywhere.
pub(super) fn status_name(status: Status) -> String {
    serde_json::to_value(status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{status:?}"))
}

/// The verdict class of a cell: its verdict, or its status (`error`, `ignored`, …) when it has
/// none.
fn verdict_class(cell: &CellSummary) -> String {
    cell.verdict
        .clone()
        .unwrap_or_else(|| status_name(cell.status))
}

/// The mark before the verdict: as expected (pass, or the baseline's known verdict), differs,
/// error; anything else did not run.
fn mark(cell: &CellSummary) -> &'static str {
    if cell.status == Status::AsExpected {
        if cell.expected == "pass" {
            "✓"
        } else {
            "≈"
        }
    } else if cell.status == Status::Error {
        "!"
    } else if cell.status.is_failure() {
        "✗"
    } else {
        "–"
    }
}

fn tooltip(cell: &CellSummary) -> String {
    let got = verdict_class(cell);
    let mut text = format!(
        "{}\n{got} (expected {})\n{}",
        cell.cell, cell.expected, cell.reason
    );
    if let Some(why) = &cell.expected_reason {
        let _ = write!(text, "\nbaseline: {why}");
    }
    if let Some(note) = &cell.expected_declarations {
        let _ = write!(text, "\ndeclarations: {note}");
    }
    if cell.is_flaky() {
        text.push_str("\nflaky: failed, then as expected when run again");
    }
    for earlier in &cell.earlier_attempts {
        let _ = write!(text, "\nattempt {}: {}", earlier.attempt, earlier.describe);
    }
    text
}

/// What follows the verdict in a flaky cell's `<td>`.
fn flaky_label(cell: &CellSummary) -> &'static str {
    if cell.is_flaky() {
        " <span class=\"flaky\">⚠ flaky</span>"
    } else {
        ""
    }
}

/// One `<td>` of the grid; `index` is the cell's position in the page's data.
fn cell_td(out: &mut String, cell: &CellSummary, index: usize) {
    let verdict = verdict_class(cell);
    let _ = write!(
        out,
        "<td class=\"c v-{verdict} s-{status}\" data-cell=\"{name}\" data-index=\"{index}\" data-env=\"{env}\" data-failure=\"{failure}\"><a href=\"#/cell/{name}\" title=\"{tip}\"><span class=\"mark\">{mark}</span> {label}{flaky}</a></td>",
        verdict = escape(&verdict),
        status = status_name(cell.status),
        name = escape(&cell.cell),
        env = escape(&cell.environment),
        failure = cell.status.is_failure(),
        tip = escape(&tooltip(cell)),
        mark = mark(cell),
        label = escape(&verdict),
        flaky = flaky_label(cell),
    );
}

pub(super) fn grid(summary: &Summary) -> String {
    let mut out = String::new();
    // Each cell's position in the page's data, by name.
    let index: std::collections::HashMap<&str, usize> = summary
        .cells
        .iter()
        .enumerate()
        .map(|(i, c)| (c.cell.as_str(), i))
        .collect();
    for (profile, of_profile) in by_profile(&summary.cells) {
        let (name, about) = profile_heading(profile);
        let _ = write!(
            out,
            "<section class=\"profile\" data-profile=\"{n}\"><h2>Profile <code>{n}</code></h2><p class=\"dim\">{a}</p>",
            n = escape(name),
            a = escape(about)
        );
        let cells: Vec<(usize, &CellSummary)> = of_profile
            .iter()
            .map(|c| (index[c.cell.as_str()], *c))
            .collect();
        suite_grids(&mut out, name, &cells);
        out.push_str("</section>");
    }
    out
}

/// One table per suite of `cells` (each with its position in the page's data).
fn suite_grids(out: &mut String, profile: &str, cells: &[(usize, &CellSummary)]) {
    for suite in ordered(cells.iter().map(|(_, c)| c.suite.as_str())) {
        let in_suite: Vec<&(usize, &CellSummary)> =
            cells.iter().filter(|(_, c)| c.suite == suite).collect();
        let environments = ordered(in_suite.iter().map(|(_, c)| c.environment.as_str()));
        let cases = ordered(in_suite.iter().map(|(_, c)| c.case.as_str()));
        let _ = write!(
            out,
            "<section class=\"suite\" data-suite=\"{s}\" data-profile=\"{p}\"><h3>{s}</h3><div class=\"scroll\"><table class=\"grid\"><thead><tr><th rowspan=\"2\" class=\"corner\">runner</th>",
            s = escape(suite),
            p = escape(profile)
        );
        for env in &environments {
            let _ = write!(
                out,
                "<th colspan=\"{}\" class=\"env\" data-env=\"{e}\">{e}</th>",
                cases.len(),
                e = escape(env)
            );
        }
        out.push_str("</tr><tr>");
        for env in &environments {
            for case in &cases {
                let _ = write!(
                    out,
                    "<th class=\"case\" data-env=\"{}\">{}</th>",
                    escape(env),
                    escape(case)
                );
            }
        }
        out.push_str("</tr></thead><tbody>");
        for runner in ordered(in_suite.iter().map(|(_, c)| c.runner.as_str())) {
            let _ = write!(
                out,
                "<tr data-runner=\"{r}\"><th class=\"runner\">{r}</th>",
                r = escape(runner)
            );
            for env in &environments {
                for case in &cases {
                    let found = in_suite.iter().find(|(_, c)| {
                        c.runner == runner && c.environment == *env && c.case == *case
                    });
                    match found {
                        Some((index, cell)) => cell_td(out, cell, *index),
                        None => {
                            let _ = write!(
                                out,
                                "<td class=\"none\" data-env=\"{}\">·</td>",
                                escape(env)
                            );
                        }
                    }
                }
            }
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table></div></section>");
    }
}

/// The differences from the baseline, first on the page (as in matrix.md).
pub(super) fn differences(summary: &Summary) -> String {
    let failing: Vec<&CellSummary> = summary
        .cells
        .iter()
        .filter(|c| c.status.is_failure())
        .collect();
    if failing.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<section id=\"differences\"><h2>Differences from the baseline</h2><table class=\"list\"><thead><tr><th>cell</th><th>expected</th><th>got</th><th>reason</th></tr></thead><tbody>",
    );
    for cell in failing {
        let got = verdict_class(cell);
        let _ = write!(
            out,
            "<tr><td><a href=\"#/cell/{n}\">{n}</a></td><td>{e}</td><td class=\"v-{g}\">{g}</td><td>{r}</td></tr>",
            n = escape(&cell.cell),
            e = escape(&cell.expected),
            g = escape(&got),
            r = escape(&cell.reason)
        );
        for earlier in &cell.earlier_attempts {
            let _ = write!(
                out,
                "<tr class=\"earlier\"><td></td><td></td><td colspan=\"2\">{}</td></tr>",
                escape(&earlier.line(std::path::Path::new(&cell.evidence_dir)))
            );
        }
    }
    out.push_str("</tbody></table></section>");
    out
}

/// The flaky cells (failed, then as expected when run again), each with its earlier attempts.
pub(super) fn flaky(summary: &Summary) -> String {
    let flaky: Vec<&CellSummary> = summary.cells.iter().filter(|c| c.is_flaky()).collect();
    if flaky.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<section id=\"flaky\"><h2>⚠ Flaky: failed, then as expected when run again</h2><ul>",
    );
    for cell in flaky {
        let earlier: Vec<String> = cell
            .earlier_attempts
            .iter()
            .map(|a| escape(&a.line(std::path::Path::new(&cell.evidence_dir))))
            .collect();
        let _ = write!(
            out,
            "<li><a href=\"#/cell/{n}\">{n}</a>: {e}; then {v}</li>",
            n = escape(&cell.cell),
            e = earlier.join("; "),
            v = escape(&verdict_class(cell)),
        );
    }
    out.push_str("</ul></section>");
    out
}

/// The cells that did not run (ignored; any other status that is neither graded nor a failure),
/// grouped by status and reason.
pub(super) fn not_run(summary: &Summary) -> String {
    let not_run: Vec<&CellSummary> = summary
        .cells
        .iter()
        .filter(|c| c.status != Status::AsExpected && !c.status.is_failure())
        .collect();
    let mut out = String::new();
    let statuses: Vec<String> = not_run.iter().map(|c| status_name(c.status)).collect();
    for status in ordered(statuses.iter().map(String::as_str)) {
        let cells: Vec<&&CellSummary> = not_run
            .iter()
            .filter(|c| status_name(c.status) == status)
            .collect();
        let heading = match status {
            "ignored" => "Ignored (cannot run here; a failure under CI=true)".to_string(),
            "not-applicable" => {
                "Not applicable (the driver cannot express the case; never run, never a pass)"
                    .to_string()
            }
            other => other.replace('-', " "),
        };
        let _ = write!(
            out,
            "<section class=\"not-run\" id=\"{}\"><h2>{}</h2><ul>",
            escape(status),
            escape(&heading)
        );
        for reason in ordered(cells.iter().map(|c| c.reason.as_str())) {
            let count = cells.iter().filter(|c| c.reason == reason).count();
            let _ = write!(out, "<li>{count} cells: {}</li>", escape(reason));
        }
        out.push_str("</ul></section>");
    }
    out
}
