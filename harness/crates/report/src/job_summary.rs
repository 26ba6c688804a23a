//! The GitHub Actions job summary: the Markdown matrix, headed by a link to the HTML report.
//! The harness writes the summary before the workflow uploads the artifact, so the link goes to
//! the run's artifact list (the artifact's own URL is known only after its upload; a workflow
//! that has it sets `HARNESS_REPORT_URL`).

use std::io::Write;

/// The artifact the workflow uploads report.html in (`HARNESS_REPORT_ARTIFACT` overrides).
pub(crate) const DEFAULT_ARTIFACT: &str = "conformance-report";

/// The summary text: a line linking report.html, then the matrix. `var` reads the environment
/// (a parameter so tests need not change the process environment).
pub fn job_summary(markdown: &str, var: impl Fn(&str) -> Option<String>) -> String {
    let var = |name: &str| var(name).filter(|v| !v.is_empty());
    let artifact = var("HARNESS_REPORT_ARTIFACT").unwrap_or_else(|| DEFAULT_ARTIFACT.into());
    let url = var("HARNESS_REPORT_URL").or_else(|| {
        Some(format!(
            "{}/{}/actions/runs/{}#artifacts",
            var("GITHUB_SERVER_URL")?,
            var("GITHUB_REPOSITORY")?,
            var("GITHUB_RUN_ID")?
        ))
    });
    let link = match url {
        Some(url) => format!(
            "📄 **[The HTML report]({url})**: `report.html` in the `{artifact}` artifact (the grid, and a page per cell with its launch and timeline; opens offline).\n\n"
        ),
        None => format!(
            "📄 The HTML report: `report.html` in the `{artifact}` artifact (the grid, and a page per cell with its launch and timeline; opens offline).\n\n"
        ),
    };
    // The matrix starts with its own `## ` heading; the link goes right below it.
    match markdown.split_once('\n') {
        Some((heading, rest)) if heading.starts_with("## ") => {
            format!("{heading}\n\n{link}{}", rest.trim_start_matches('\n'))
        }
        _ => format!("{link}{markdown}"),
    }
}

/// In GitHub Actions (`$GITHUB_STEP_SUMMARY` set), append the job summary of `markdown`.
/// A failed append is no failed run: the error, worded for the user, goes back to the command
/// line to show.
pub fn append_job_summary(markdown: &str) -> Result<(), String> {
    let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) else {
        return Ok(());
    };
    let text = job_summary(markdown, |name| std::env::var(name).ok());
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    written.map_err(|e| format!("could not append to $GITHUB_STEP_SUMMARY: {e}"))
}
