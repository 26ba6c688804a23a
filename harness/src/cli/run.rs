//! `harness run [FILTER…] [--jobs N] [--driver-cmd '…' --suite S]`: run the conformance matrix
//! (or the cells whose name contains a filter) in parallel with a bound, with live progress on
//! stderr, then print the Markdown matrix and write the reports. Exit 0 when every cell matches
//! its expectation, 1 when any differs (or is stale, or errs), 2 when the run cannot start.

use crate::matrix::{self, CellResult, MatrixOptions, Progress};
use crate::report;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use suites::spec::{AppServerKind, DriverKind};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Run only cells whose name (`suite.runner.environment.case`) contains one of these, like
    /// `cargo test FILTER` (`.daytona.` selects exactly the daytona cells).
    pub filters: Vec<String>,
    /// Cells run at once (default: the machine's parallelism).
    #[arg(long, short = 'j')]
    pub jobs: Option<usize>,
    /// Put this external driver command under the suites (replaces the example driver of
    /// `runner-external`; only external-runner cells run). See docs/driver-contract.md.
    #[arg(long)]
    pub driver_cmd: Option<String>,
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
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// List the selected cells and exit.
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
    let matrix = suites::load()?;
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
    let cells: Vec<suites::Cell> = matrix
        .select(&args.filters)
        .into_iter()
        .filter(|c| args.suite.as_ref().is_none_or(|s| &c.id.suite == s))
        .filter(|c| args.driver_cmd.is_none() || c.runner.driver == DriverKind::External)
        .filter(|c| args.environments.is_empty() || args.environments.contains(&c.id.environment))
        .filter(|c| {
            args.app_server
                .as_deref()
                .is_none_or(|kind| match c.runner.app_server {
                    AppServerKind::Fake => kind == "fake",
                    AppServerKind::Codex => kind == "codex",
                })
        })
        .cloned()
        .collect();
    anyhow::ensure!(!cells.is_empty(), "no cell matches the selection");
    if args.list {
        for cell in &cells {
            println!("{}", cell.name());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let mut options = MatrixOptions::from_env()?;
    if let Some(out) = args.out {
        options.out_root = out;
    }
    options.driver_cmd = args.driver_cmd;
    let jobs = args.jobs.unwrap_or_else(matrix::default_jobs).max(1);
    eprintln!(
        "running {} cells, {jobs} at a time; evidence in {}",
        cells.len(),
        options.out_root.display()
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let started = Instant::now();
    let results = runtime.block_on(matrix::run_cells(&cells, &options, jobs, print_progress));
    let wall = started.elapsed();
    let paths = report::write_all(&options.out_root, &results, wall)?;
    let markdown = std::fs::read_to_string(&paths.markdown)?;
    println!("{markdown}");
    report::append_job_summary(&markdown);
    eprintln!("reports:");
    eprintln!("  html:     {}", paths.html.display());
    eprintln!("  markdown: {}", paths.markdown.display());
    eprintln!("  junit:    {}", paths.junit.display());
    eprintln!("  json:     {}", paths.json.display());
    let failures = results.iter().filter(|r| r.is_failure()).count();
    Ok(if failures == 0 {
        ExitCode::SUCCESS
    } else {
        eprintln!("{failures} cells differ from their expectation");
        ExitCode::from(1)
    })
}

/// One line per finished cell, with the running counts (plain lines: CI logs are not terminals).
fn print_progress(progress: &Progress, finished: Option<&CellResult>) {
    let Some(result) = finished else { return };
    let mark = if result.is_failure() {
        "FAIL"
    } else if result.is_ignored() {
        "skip"
    } else {
        " ok "
    };
    eprintln!(
        "[{:>3}/{}] {mark} {} — {} ({} ms) | running {}, failed {}",
        progress.done,
        progress.total,
        result.cell,
        result.describe(),
        result.duration.as_millis(),
        progress.running,
        progress.failed
    );
}
