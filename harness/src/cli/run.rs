//! `harness run [FILTER…] [--drivers FILE] [--codex VERSION…] [--partition K/N] [--jobs N]`: run
//! the conformance matrix (or the cells whose name contains a filter) in parallel with a bound,
//! with live progress on stderr, then print the Markdown matrix and write the reports. Exit 0
//! when every cell matches its expectation, 1 when any differs (or is stale, or errs), 2 when
//! the run cannot start (a drivers file or a driver's program that does not exist, a Codex
//! version that cannot be installed, a selection that matches nothing), 130 / 143 after SIGINT /
//! SIGTERM (the reports then list the cells that finished).

use crate::dispatch::{CancelReason, Executed, Observer, Run, RunEvent};
use anyhow::Context;
use matrix::concurrency::Concurrency;
use matrix::context::CellContext;
use matrix::scheduler::{Batch, Progress};
use report::outcome::CellResult;
use std::path::PathBuf;
use std::process::ExitCode;
use suites::spec::{AppServerKind, DriverKind};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Run only cells whose name (`suite.runner.environment.case`) contains one of these, like
    /// `cargo test FILTER` (`.daytona.` selects exactly the daytona cells).
    pub filters: Vec<String>,
    /// Cells run at once (default: weighed by kind, per core one real-Codex cell or two fake
    /// cells).
    #[arg(long, short = 'j', value_parser = super::jobs)]
    pub jobs: Option<usize>,
    /// Put this external driver command under the suites (replaces the example driver of
    /// `runner-external`; only external-runner cells run). See docs/driver-contract.md.
    #[arg(long, conflicts_with = "drivers", value_parser = super::command_line)]
    pub driver_cmd: Option<String>,
    /// A drivers file (`[drivers.NAME]` tables, optional cases and baseline entries): each
    /// driver runs as `NAME-fake`, `NAME-codex`, `NAME-codex-<version>` cells. Only the file's
    /// cells run, unless `--all-runners`. See docs/driver-contract.md.
    #[arg(long, env = matrix::load::DRIVERS_VAR, value_parser = super::absolute_path)]
    pub drivers: Option<PathBuf>,
    /// With `--drivers`: also run the harness's own runners' cells.
    #[arg(long, requires = "drivers")]
    pub all_runners: bool,
    /// Add real-Codex runners at this published version of `@openai/codex` (repeatable); it is
    /// installed into the cache like the pins.
    #[arg(long = "codex", value_name = "VERSION")]
    pub codex_versions: Vec<String>,
    /// Run only shard K of N of the selection (1-based; round-robin over the selected cells),
    /// for a CI matrix over machines; merge the shards with `harness report`.
    #[arg(long, value_name = "K/N")]
    pub partition: Option<suites::Partition>,
    /// Only this suite.
    #[arg(long)]
    pub suite: Option<String>,
    /// Only cells in these environments (repeatable; e.g. `--environment local` on a PR runner
    /// without runc).
    #[arg(long = "environment")]
    pub environments: Vec<String>,
    /// Only runners of this app-server (`fake`: every PR, in seconds; `codex`: the real Codex).
    #[arg(long, value_parser = ["fake", "codex"])]
    pub app_server: Option<String>,
    /// Evidence and reports go here (default: `$HARNESS_OUT_DIR`, else `target/conformance`).
    #[arg(long, value_parser = super::absolute_path)]
    pub out: Option<PathBuf>,
    /// Run a cell whose result fails (it differs from its expectation, or errs) again from
    /// scratch, up to this many more times. One that then agrees is reported flaky: no failure
    /// of the run, but named in every report; its earlier attempts' evidence is kept in
    /// `<cell>/attempt-N/`.
    #[arg(long, env = "HARNESS_RETRIES", default_value_t = 0, value_name = "N")]
    pub retries: usize,
    /// List the selected cells, each with its status (runs, not applicable, ignored, error)
    /// and what is expected of it, and exit.
    #[arg(long)]
    pub list: bool,
}

pub fn main(args: Args) -> ExitCode {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("harness run: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> anyhow::Result<ExitCode> {
    let repo_root = matrix::paths::repo_root();
    let matrix = matrix::load::load_matrix(
        args.drivers.as_deref(),
        &args.codex_versions,
        repo_root.as_deref(),
    )?;
    let cells = select(&matrix, &args)?;
    let mut ctx = CellContext::from_env()?;
    if args.list {
        list(&cells, &ctx);
        return Ok(ExitCode::SUCCESS);
    }
    // A version the user named must install; a cell would otherwise only say so late.
    for version in &args.codex_versions {
        if cells
            .iter()
            .any(|c| c.runner.codex_version.as_ref() == Some(version) && c.not_applicable.is_none())
        {
            codex::provision::ensure(version).with_context(|| {
                format!("--codex {version}: installing @openai/codex@{version}")
            })?;
        }
    }
    if let Some(out) = args.out {
        ctx.out_root = out;
    }
    ctx.driver_cmd = args.driver_cmd;
    let jobs = Concurrency::from_jobs(args.jobs);
    eprintln!(
        "running {} cells, {}; evidence in {}",
        cells.len(),
        jobs.describe(),
        ctx.out_root.display()
    );
    let batch = Batch {
        retries: args.retries,
        ..Batch::of_cells(&ctx, &cells, jobs)
    };
    let run = Run::new(batch, jobs).reporting_to(&ctx.out_root)?;
    matrix::prereq::check_named(&ctx, &cells)?;
    let mut printer = Printer { progress: true };
    let executed = run.execute(&mut printer)?;
    Ok(print_the_end(executed, &mut printer))
}

/// Print the Markdown matrix and where the reports are, then settle the run and say how it
/// ended: a stopped run's note, and last the cells that differ, each with why and where its
/// evidence is. The exit code.
fn print_the_end(executed: Executed, printer: &mut Printer) -> ExitCode {
    if let Some(reports) = &executed.reports {
        println!("{}", reports.markdown);
        if let Err(why) = &reports.job_summary {
            eprintln!("{why}");
        }
        eprintln!("reports:");
        eprintln!("  html:     {}", reports.paths.html.display());
        eprintln!("  markdown: {}", reports.paths.markdown.display());
        eprintln!("  junit:    {}", reports.paths.junit.display());
        eprintln!("  json:     {}", reports.paths.json.display());
    }
    let settled = executed.settle(printer);
    if let Some(note) = settled.stop_note() {
        eprintln!("{note}");
    }
    for line in flaky_lines(settled.flaky()) {
        eprintln!("{line}");
    }
    let failures: Vec<&CellResult> = settled.failures().collect();
    if !failures.is_empty() {
        eprintln!("{} cells differ from their expectation", failures.len());
        // Named last, where a CI log's tail (all a reader of a truncated log sees) still shows
        // which cells and why.
        for result in failures {
            eprintln!(
                "  {}: {} (evidence: {})",
                result.cell,
                result.describe(),
                result.evidence_dir.display()
            );
            for earlier in &result.earlier_attempts {
                eprintln!("    {}", earlier.line(&result.evidence_dir));
            }
        }
    }
    settled.exit_code()
}

/// The flaky cells, each with what its earlier attempts ended with and where their evidence
/// is: no failure of the run, but never a silent pass.
fn flaky_lines<'a>(flaky: impl Iterator<Item = &'a CellResult>) -> Vec<String> {
    let flaky: Vec<&CellResult> = flaky.collect();
    if flaky.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![format!(
        "{} cells were flaky (failed, then as expected when run again):",
        flaky.len()
    )];
    for result in flaky {
        lines.push(format!(
            "  {}: then {} (evidence: {})",
            result.cell,
            result.describe(),
            result.evidence_dir.display()
        ));
        for earlier in &result.earlier_attempts {
            lines.push(format!("    {}", earlier.line(&result.evidence_dir)));
        }
    }
    lines
}

/// What `harness run` and `harness mutate` print while a run runs: the stop, and with
/// `progress` a line per finished cell.
pub(crate) struct Printer {
    pub(crate) progress: bool,
}

impl Observer for Printer {
    fn observe(&mut self, event: RunEvent) {
        match event {
            RunEvent::CellFinished {
                progress, result, ..
            } if self.progress => {
                eprintln!("{}", progress_line(&progress, &result));
            }
            RunEvent::CellFinished { .. } => {}
            RunEvent::Stopping(cause) => eprintln!("{}", stopping_line(&cause)),
        }
    }
}

fn stopping_line(cause: &CancelReason) -> String {
    format!("harness: {cause}: stopping — no new cell starts, the running ones are torn down, the report lists what finished (again to exit at once)")
}

/// The cells `args` select from `matrix`, in matrix order, the partition applied last.
pub(crate) fn select(matrix: &suites::Matrix, args: &Args) -> anyhow::Result<Vec<suites::Cell>> {
    for environment in &args.environments {
        anyhow::ensure!(
            matrix.file.environments.contains_key(environment),
            "unknown environment `{environment}` (known: {})",
            matrix
                .file
                .environments
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let Some(suite) = &args.suite {
        anyhow::ensure!(
            matrix.file.suites.contains_key(suite),
            "unknown suite `{suite}` (known: {})",
            matrix.suite_names().collect::<Vec<_>>().join(", ")
        );
    }
    let selected = matrix
        .select(&args.filters)
        .into_iter()
        .filter(|c| args.suite.as_ref().is_none_or(|s| &c.id.suite == s))
        .filter(|c| args.driver_cmd.is_none() || c.runner.driver == DriverKind::External)
        .filter(|c| {
            args.drivers.is_none()
                || args.all_runners
                || matrix.from_drivers_file.contains(&c.name())
        })
        .filter(|c| args.environments.is_empty() || args.environments.contains(&c.id.environment))
        .filter(|c| {
            args.app_server
                .as_deref()
                .is_none_or(|kind| match c.runner.app_server {
                    AppServerKind::Fake => kind == "fake",
                    AppServerKind::Codex => kind == "codex",
                })
        })
        .cloned();
    let cells = match args.partition {
        Some(partition) => partition.select(selected),
        None => selected.collect(),
    };
    anyhow::ensure!(!cells.is_empty(), "no cell matches the selection");
    Ok(cells)
}

/// `--list`: one line per cell, `NAME<TAB>PROFILE<TAB>STATUS<TAB>DETAIL`, grouped by profile
/// (the protocol's first; matrix order within), then the counts of each profile on stderr.
fn list(cells: &[suites::Cell], ctx: &CellContext) {
    let mut counts = std::collections::BTreeMap::<(suites::spec::Profile, &str), usize>::new();
    let mut grouped: Vec<&suites::Cell> = cells.iter().collect();
    grouped.sort_by_key(|c| c.profile);
    for cell in grouped {
        let (status, detail) = if let Some(reason) = matrix::load::cell_error(cell) {
            ("error", reason)
        } else if let Some(reason) = &cell.not_applicable {
            ("not-applicable", reason.clone())
        } else if let Some(reason) = matrix::prereq::missing(cell, ctx) {
            // Under CI=true a cell that cannot run here fails.
            let status = if ctx.ci { "error" } else { "ignored" };
            (status, reason)
        } else {
            ("runs", cell.expected.describe())
        };
        // Where a driver runs as another user, its install must be readable by that user.
        let detail = match sandbox::catalogue::spec(cell.id.environment.as_str())
            .ok()
            .and_then(|spec| spec.container)
            .filter(|container| container.uid != 0)
        {
            Some(container) => format!("as uid {}; {detail}", container.uid),
            None => detail,
        };
        *counts.entry((cell.profile, status)).or_default() += 1;
        println!(
            "{}\t{}\t{status}\t{detail}",
            cell.name(),
            cell.profile.as_str()
        );
    }
    let mut by_profile = Vec::new();
    for profile in suites::spec::Profile::ALL {
        let of: Vec<String> = counts
            .iter()
            .filter(|((p, _), _)| *p == profile)
            .map(|((_, s), n)| format!("{n} {s}"))
            .collect();
        if !of.is_empty() {
            by_profile.push(format!("{}: {}", profile.as_str(), of.join(", ")));
        }
    }
    eprintln!("{} cells; {}", cells.len(), by_profile.join("; "));
}

/// One line per finished cell, with the running counts (plain lines: CI logs are not terminals).
fn progress_line(progress: &Progress, result: &CellResult) -> String {
    if let (true, Some(first)) = (result.is_flaky(), result.earlier_attempts.first()) {
        return format!(
            "[{:>3}/{}] flaky {} — attempt {}: {}; then {} ({} ms) | running {}, failed {}",
            progress.done,
            progress.total,
            result.cell,
            first.attempt,
            first.describe,
            result.describe(),
            result.duration.as_millis(),
            progress.running,
            progress.failed
        );
    }
    let mark = if result.is_failure() {
        "FAIL"
    } else if result.is_ignored() {
        "skip"
    } else if result.is_not_applicable() {
        "n/a "
    } else {
        " ok "
    };
    format!(
        "[{:>3}/{}] {mark} {} — {} ({} ms) | running {}, failed {}",
        progress.done,
        progress.total,
        result.cell,
        result.describe(),
        result.duration.as_millis(),
        progress.running,
        progress.failed
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use report::outcome::CellOutcome;

    #[test]
    fn the_lines_a_run_prints_read_as_they_did_when_the_library_printed_them() {
        assert_eq!(
            stopping_line(&CancelReason::Signal(signal_hook::consts::SIGTERM)),
            "harness: SIGTERM: stopping — no new cell starts, the running ones are torn down, the report lists what finished (again to exit at once)"
        );
        let cell = suites::load().expect("the shipped suites load").cells[0].clone();
        let result = CellResult {
            cell: cell.id.clone(),
            profile: Some(cell.profile),
            expected: cell.expected.clone(),
            outcome: CellOutcome::Error {
                message: "no driver".into(),
            },
            duration: std::time::Duration::from_millis(1234),
            evidence_dir: std::path::PathBuf::new(),
            earlier_attempts: Vec::new(),
        };
        let progress = Progress {
            total: 12,
            done: 3,
            running: 2,
            failed: 1,
            ignored: 0,
        };
        assert_eq!(
            progress_line(&progress, &result),
            format!(
                "[  3/12] FAIL {} — error: no driver (1234 ms) | running 2, failed 1",
                cell.id
            )
        );

        // Failed, then not: flaky, with what the first attempt ended with; and listed at the end.
        let flaky = CellResult {
            outcome: CellOutcome::Ignored {
                reason: "no runc".into(),
            },
            evidence_dir: "out/cell".into(),
            earlier_attempts: vec![report::outcome::EarlierAttempt::of(1, &result)],
            ..result
        };
        assert_eq!(
            progress_line(&progress, &flaky),
            format!(
                "[  3/12] flaky {} — attempt 1: error: no driver; then ignored: no runc (1234 ms) | running 2, failed 1",
                cell.id
            )
        );
        assert_eq!(
            flaky_lines([&flaky].into_iter()),
            [
                "1 cells were flaky (failed, then as expected when run again):".to_string(),
                format!("  {}: then ignored: no runc (evidence: out/cell)", cell.id),
                "    attempt 1: error: no driver (evidence: out/cell/attempt-1)".to_string(),
            ]
        );
        assert!(flaky_lines(std::iter::empty()).is_empty());
    }
}
