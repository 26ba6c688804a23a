//! `report.html`: one self-contained page (no network, no CDN: the style, the script and every
//! cell's page are inside it, so it works from a downloaded CI artifact; each page embeds a
//! bounded part of its cell's evidence, [`budget`], and links the files). The matrix grid
//! is plain HTML; each cell's page data is a JSON block the script parses only when that cell is
//! opened, so the whole matrix opens fast however much evidence the cells hold, and the cell
//! timeline is virtualised (only the rows on screen exist in the DOM).

mod about;
mod budget;
mod cell;
mod grid;
mod mutation;
mod timeline;

pub use about::CaseAbout;
pub use budget::{MAX_TIMELINE_ENTRIES, MIN_ENTRIES_EACH_END, REPORT_TIMELINE_BYTES};
pub use cell::CellPage;
pub use mutation::{MutationDriver, MutationFidelity, MutationRow, MutationSection};
pub use timeline::Entry;

use super::summary::{by_profile, ordered, profile_heading, Summary};
use std::fmt::Write;

const STYLE: &str = include_str!("report.css");
const SCRIPT: &str = include_str!("report.js");

/// HTML-escape text for element content and quoted attribute values (five characters; a crate
/// for this would be one more dependency for a six-line function).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON that can sit inside `<script type="application/json">`: no `<` at all (so neither
/// `</script>` nor `<!--` can end or change the block); `\u003c` decodes back to `<`.
fn script_json(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value)
        .unwrap_or_else(|_| "null".into())
        .replace('<', "\\u003c")
}

fn verdict_line(summary: &Summary) -> &'static str {
    let t = &summary.totals;
    if t.failures() == 0 && t.ignored == 0 {
        "all cells as expected"
    } else if t.failures() == 0 {
        "no cell differs from its expectation, but some could not run here"
    } else {
        "the matrix differs from its expectation"
    }
}

/// A count of zero is shown quietly.
fn zero(count: usize) -> &'static str {
    if count == 0 {
        " zero"
    } else {
        ""
    }
}

/// The page for `summary`, with each cell's evidence read from its `evidence_dir`.
pub fn render(summary: &Summary) -> String {
    let pages: Vec<CellPage> = summary.cells.iter().map(CellPage::load).collect();
    render_pages(summary, pages)
}

/// The page for `summary` with these cells' pages, fitted to the report's budget
/// ([`budget`]).
pub fn render_pages(summary: &Summary, pages: Vec<CellPage>) -> String {
    render_page(summary, pages, None)
}

/// [`render`], with `harness mutate`'s section above the matrix (the reference run's cells).
pub fn render_with_mutation(summary: &Summary, mutation: &MutationSection) -> String {
    let pages: Vec<CellPage> = summary.cells.iter().map(CellPage::load).collect();
    render_page(summary, pages, Some(mutation))
}

fn render_page(
    summary: &Summary,
    mut pages: Vec<CellPage>,
    mutation: Option<&MutationSection>,
) -> String {
    budget::fit(&mut pages);
    let t = &summary.totals;
    let mut out = String::with_capacity(64 * 1024);
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>Conformance report — {cells} cells, {fail} differ</title><style>{STYLE}</style></head><body>",
        cells = t.cells,
        fail = t.failures(),
    );
    header(&mut out, summary);
    filters(&mut out, summary);
    if let Some(mutation) = mutation {
        out.push_str(&mutation::section(mutation));
    }
    out.push_str(LEGEND);
    out.push_str(&grid::differences(summary));
    out.push_str(&grid::not_run(summary));
    out.push_str(&grid::grid(summary));
    out.push_str("</main><main id=\"cell-view\" hidden></main>");
    let names: Vec<&str> = summary.cells.iter().map(|c| c.cell.as_str()).collect();
    let base = about::repository_base(|name| std::env::var(name).ok());
    let _ = write!(
        out,
        "<script type=\"application/json\" id=\"repository-base\">{}</script>",
        script_json(&base)
    );
    let _ = write!(
        out,
        "<script type=\"application/json\" id=\"cells-index\">{}</script>",
        script_json(&names)
    );
    for (index, page) in pages.iter().enumerate() {
        let _ = write!(
            out,
            "<script type=\"application/json\" id=\"cell-{index}\">{}</script>",
            script_json(page)
        );
    }
    let _ = writeln!(out, "<script>{SCRIPT}</script></body></html>");
    out
}

/// The page's header: the verdict line and the totals.
fn header(out: &mut String, summary: &Summary) {
    let t = &summary.totals;
    let state = if t.failures() > 0 {
        "bad"
    } else if t.ignored > 0 {
        "warn"
    } else {
        "good"
    };
    let _ = write!(
        out,
        "<header><h1><a href=\"#\">Conformance report</a></h1><p class=\"verdict {state}\">{line}</p><p class=\"totals\"><span class=\"chip\">{cells} cells</span><span class=\"chip s-as-expected\">{ok} as expected</span><span class=\"chip s-differs{z_differs}\">{differs} differ</span><span class=\"chip s-stale{z_stale}\">{stale} stale</span><span class=\"chip s-error{z_errors}\">{errors} errors</span><span class=\"chip s-ignored{z_ignored}\">{ignored} ignored</span><span class=\"chip s-not-applicable{z_na}\">{na} not applicable</span>{wall}</p></header>",
        line = verdict_line(summary),
        cells = t.cells,
        ok = t.as_expected,
        differs = t.differs,
        stale = t.stale,
        errors = t.errors,
        ignored = t.ignored,
        na = t.not_applicable,
        // Cells read back without a summary.json have no wall time.
        wall = if summary.wall_ms == 0 {
            String::new()
        } else {
            format!(
                "<span class=\"chip\">{:.1} s</span>",
                summary.wall_ms as f64 / 1000.0
            )
        },
        z_differs = zero(t.differs),
        z_stale = zero(t.stale),
        z_errors = zero(t.errors),
        z_ignored = zero(t.ignored),
        z_na = zero(t.not_applicable),
    );
}

/// The matrix's filters: differences only, and one list per profile, suite, runner and
/// environment.
fn filters(out: &mut String, summary: &Summary) {
    out.push_str("<main id=\"matrix-view\"><div class=\"filters\" id=\"filters\"><label><input type=\"checkbox\" id=\"only-differences\"> differences only</label>");
    let profiles: Vec<&str> = by_profile(&summary.cells)
        .into_iter()
        .map(|(profile, _)| profile_heading(profile).0)
        .collect();
    for (id, label, names) in [
        ("profile", "profile", profiles),
        (
            "suite",
            "suite",
            ordered(summary.cells.iter().map(|c| c.suite.as_str())),
        ),
        (
            "runner",
            "runner",
            ordered(summary.cells.iter().map(|c| c.runner.as_str())),
        ),
        (
            "environment",
            "environment",
            ordered(summary.cells.iter().map(|c| c.environment.as_str())),
        ),
    ] {
        let _ = write!(
            out,
            "<label>{label} <select id=\"filter-{id}\"><option value=\"\">all</option>"
        );
        for name in names {
            let _ = write!(out, "<option>{}</option>", escape(name));
        }
        out.push_str("</select></label>");
    }
    out.push_str("<span id=\"shown\" class=\"shown\"></span></div>");
}

const LEGEND: &str = "<div class=\"legend\"><span class=\"c v-pass s-as-expected\">✓ pass</span><span class=\"c v-sandbox-failed-to-start s-as-expected\">≈ known verdict (baseline)</span><span class=\"c v-write-succeeded s-differs\">✗ differs from the baseline</span><span class=\"c v-error s-error\">! harness error</span><span class=\"c v-ignored s-ignored\">– cannot run here</span><span class=\"c v-not-applicable s-not-applicable\">– not applicable to the driver</span><span class=\"hint\">colour = verdict · red outline = differs · click a cell for its page</span></div>";

#[cfg(test)]
mod tests;
