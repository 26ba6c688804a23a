//! The conformance matrix as tests: one libtest-mimic trial per cell, named
//! `suite.runner.environment.case`, so the usual filters select cells
//! (`cargo test -p suites -- .daytona.`, `--exact NAME`, `--skip`, `--ignored`, `--list`) and
//! `cargo nextest run -p suites` runs (and partitions) them too.
//!
//! A user's drivers file joins the matrix through `HARNESS_DRIVERS=FILE` (and more Codex
//! versions through `HARNESS_CODEX_VERSIONS=0.171.0,…`), as `harness run --drivers FILE --codex
//! VERSION` does. Cells a declared driver cannot express are listed as ignored and, when run
//! with `--ignored`, end ignored with "not applicable: REASON" — never a pass.
//!
//! This binary also serves as the fake app-server of its own cells: launched with a first
//! argument `fake-app-server`, it is the fake (`fake_app_server::cli_main`), with `tap` the wire
//! tap (`tap::relay::main`), with `drive` the reference driver as a process, so cells never depend on a separately built binary.

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use matrix::cell::run_cell;
use matrix::context::CellContext;
use report::outcome::CellOutcome;
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;

fn main() -> ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some(code) = matrix::hidden::dispatch(&args) {
        return code;
    }
    // As the harness binary does: a signal tears down what the running cells started.
    harness::shutdown::install_signal_handler();
    let arguments = Arguments::from_args();
    let repo_root = matrix::paths::repo_root();
    let matrix = match matrix::load::load_matrix_from_env(repo_root.as_deref()) {
        Ok(matrix) => matrix,
        Err(e) => {
            eprintln!("error: the suites do not load: {e:#}");
            return ExitCode::from(101);
        }
    };
    let ctx = match CellContext::from_env() {
        Ok(ctx) => Arc::new(ctx),
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(101);
        }
    };
    // Cells that cannot run here are flagged ignored up front, so `--list` shows them and
    // `--ignored` runs them (and fails with the reason); under CI=true nothing is ignored.
    let mut ignored_reasons: BTreeMap<String, usize> = BTreeMap::new();
    let trials: Vec<Trial> = matrix
        .cells
        .iter()
        .cloned()
        .map(|cell| {
            let missing = if let Some(reason) = &cell.not_applicable {
                Some(format!("not applicable: {reason}"))
            } else if ctx.ci {
                None
            } else {
                matrix::prereq::missing(&cell, &ctx)
            };
            if let Some(reason) = &missing {
                *ignored_reasons.entry(reason.clone()).or_default() += 1;
            }
            let ctx = ctx.clone();
            Trial::ignorable_test(cell.name(), move || run_trial(&cell, &ctx))
                .with_ignored_flag(missing.is_some())
        })
        .collect();
    if !arguments.list && !arguments.ignored && !arguments.include_ignored {
        for (reason, count) in &ignored_reasons {
            eprintln!("ignored {count} cells: {reason}");
        }
    }
    libtest_mimic::run(&arguments, trials).exit_code()
}

fn run_trial(cell: &suites::Cell, ctx: &CellContext) -> Result<Completion, Failed> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Failed::from(format!("tokio runtime: {e}")))?;
    let result = runtime.block_on(run_cell(ctx, cell));
    let evidence = result.evidence_dir.display();
    match &result.outcome {
        CellOutcome::Ignored { reason } => Ok(Completion::ignored_with(reason)),
        CellOutcome::NotApplicable { reason } => Ok(Completion::ignored_with(format!(
            "not applicable: {reason}"
        ))),
        _ if result.is_failure() => Err(Failed::from(format!(
            "{}\nevidence: {evidence}",
            result.describe()
        ))),
        _ => Ok(Completion::Completed),
    }
}
