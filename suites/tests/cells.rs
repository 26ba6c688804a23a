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
//! The differential fidelity of the matrix's pairs is checked here too, one trial per pair
//! (`fidelity::needs_real_codex::suite.fake~real.environment.case`; `needs_root_runc_real_codex`
//! outside `local`): the fake app-server and the real Codex played the same scenario through the
//! same driver in the same environment, and must reach the same verdict with the same normalised
//! driver-visible message sequence (`harness fidelity` runs the same comparison and prints a
//! table). Each pair's sequence is an insta snapshot named after the real cell. A pair compares
//! the runs of its two cells' own trials: each cell runs at most once per process, by its trial
//! or by the first pair that needs it, so the comparison costs no cell run of its own.
//!
//! This binary also serves as the fake app-server of its own cells: launched with a first
//! argument `fake-app-server`, it is the fake (`fake_app_server::cli_main`), with `tap` the wire
//! tap (`tap::relay::main`), with `drive` the reference driver as a process, so cells never depend on a separately built binary.

use libtest_mimic::{Arguments, Completion, Failed, Trial};
use maintainer_tools::fidelity::{self, Pair};
use matrix::cell::run_cell;
use matrix::context::CellContext;
use report::outcome::{CellOutcome, CellResult};
use std::collections::{BTreeMap, HashMap};
use std::process::ExitCode;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use suites::Cell;

fn main() -> ExitCode {
    if let Some(code) = harness::dispatch::start_cells_binary() {
        return code;
    }
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
    let runs = Arc::new(Runs::new(&matrix.cells));
    // Cells that cannot run here are flagged ignored up front, so `--list` shows them and
    // `--ignored` runs them (and fails with the reason); under CI=true nothing is ignored.
    let mut ignored_reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut trials: Vec<Trial> = matrix
        .cells
        .iter()
        .cloned()
        .map(|cell| {
            let missing = if let Some(reason) = &cell.not_applicable {
                Some(format!("not applicable: {reason}"))
            } else {
                missing_here(&cell, &ctx)
            };
            if let Some(reason) = &missing {
                *ignored_reasons.entry(reason.clone()).or_default() += 1;
            }
            let (ctx, runs) = (ctx.clone(), runs.clone());
            Trial::ignorable_test(cell.name(), move || cell_trial(&cell, &ctx, &runs))
                .with_ignored_flag(missing.is_some())
        })
        .collect();
    // The pairs of the suites' own matrix: a user's drivers file (HARNESS_DRIVERS) adds cells,
    // not snapshots. After the cells, so that each pair finds its cells already run.
    let pairs = match suites::load() {
        Ok(own) => fidelity::pairs(&own, &[]),
        Err(e) => {
            eprintln!("error: the suites do not load: {e:#}");
            return ExitCode::from(101);
        }
    };
    let mut ignored_pairs: BTreeMap<String, usize> = BTreeMap::new();
    trials.extend(pairs.into_iter().map(|pair| {
        let missing = missing_here(&pair.real, &ctx).or_else(|| missing_here(&pair.fake, &ctx));
        if let Some(reason) = &missing {
            *ignored_pairs.entry(reason.clone()).or_default() += 1;
        }
        let (ctx, runs) = (ctx.clone(), runs.clone());
        Trial::test(fidelity_trial_name(&pair), move || {
            pair_trial(&pair, &ctx, &runs)
        })
        .with_ignored_flag(missing.is_some())
    }));
    if !arguments.list && !arguments.ignored && !arguments.include_ignored {
        for (reason, count) in &ignored_reasons {
            eprintln!("ignored {count} cells: {reason}");
        }
        for (reason, count) in &ignored_pairs {
            eprintln!("ignored {count} fidelity pairs: {reason}");
        }
    }
    libtest_mimic::run(&arguments, trials).exit_code()
}

/// Why `cell` cannot run here, unless `CI=true` (where it runs and fails with the reason).
fn missing_here(cell: &Cell, ctx: &CellContext) -> Option<String> {
    if ctx.ci {
        None
    } else {
        matrix::prereq::missing(cell, ctx)
    }
}

/// Each cell's result, run at most once in this process: by the cell's own trial or by the
/// first fidelity trial that needs it, whichever comes first; the other waits for it. A cell
/// run twice would overwrite the evidence the first run's comparison reads.
struct Runs {
    results: HashMap<String, OnceLock<CellResult>>,
}

impl Runs {
    fn new(cells: &[Cell]) -> Self {
        Self {
            results: cells
                .iter()
                .map(|cell| (cell.name(), OnceLock::new()))
                .collect(),
        }
    }

    fn result(&self, cell: &Cell, ctx: &CellContext) -> Result<&CellResult, Failed> {
        let slot = self.results.get(&cell.name()).ok_or_else(|| {
            Failed::from(format!("`{}` is not a cell of this matrix", cell.name()))
        })?;
        Ok(slot.get_or_init(|| run_once(cell, ctx)))
    }
}

/// One cell on a runtime of its own.
fn run_once(cell: &Cell, ctx: &CellContext) -> CellResult {
    match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(run_cell(ctx, cell)),
        Err(e) => CellResult {
            cell: cell.id.clone(),
            profile: Some(cell.profile),
            expected: cell.expected.clone(),
            outcome: CellOutcome::Error {
                message: format!("tokio runtime: {e}"),
            },
            duration: Duration::ZERO,
            evidence_dir: ctx.evidence(cell).root,
            earlier_attempts: Vec::new(),
        },
    }
}

fn cell_trial(cell: &Cell, ctx: &CellContext, runs: &Runs) -> Result<Completion, Failed> {
    let result = runs.result(cell, ctx)?;
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

/// What the trial's name promises it needs, as the other tests' names say it.
fn fidelity_trial_name(pair: &Pair) -> String {
    let needs = if pair.real.id.environment == "local" {
        "needs_real_codex"
    } else {
        "needs_root_runc_real_codex"
    };
    format!("fidelity::{needs}::{}", pair.name())
}

fn pair_trial(pair: &Pair, ctx: &CellContext, runs: &Runs) -> Result<(), Failed> {
    let fake = runs.result(&pair.fake, ctx)?;
    let real = runs.result(&pair.real, ctx)?;
    let outcome = fidelity::compare_results(pair, fake, real, ctx);
    outcome.agreement()?;
    let id = &pair.real.id;
    let snapshot = format!(
        "fidelity.{}.{}.{}.{}",
        id.suite, id.runner, id.environment, id.case
    );
    // insta reports a mismatch by panicking; libtest-mimic turns the panic into this trial's
    // failure.
    insta::assert_json_snapshot!(snapshot, outcome.real.sequence);
    Ok(())
}
