//! `harness mutate [--drivers FILE] [--app-server fake|codex] [--operator NAME]… [--expect
//! FILE] [FILTER…]`: the selected cells once as they are (the reference), then every mutant the
//! reference does not rule out (`maintainer_tools::mutate::predict`), all in one pool, each operator's
//! queued runs left out once one killed it (`--all-kills`: every one); a table per driver
//! per operator (killed by which cells, survived, unsteady, not applicable), the score,
//! `mutation.json` and `report.html` in the out folder. A kill counts once a second run of its
//! cell kills again (`maintainer_tools::mutate::confirm`). Exit 0 when every operator that applied was
//! killed, 1 when one survived or is unsteady, 2 when the run could not be made (or no operator
//! applied anywhere: nothing was measured), 130 / 143 after SIGINT / SIGTERM; with `--expect`,
//! 0 / 1 say whether every expectation is met (`maintainer_tools::mutate::expect`).

mod judge;
mod pool;

use crate::dispatch::CancelReason;
use anyhow::Context;
use maintainer_tools::mutate::expect::Expectations;
use maintainer_tools::mutate::{self, predict, MutationReport};
use matrix::concurrency::Concurrency;
use matrix::context::CellContext;
use pool::Mutants;
use report::outcome::CellResult;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::process::ExitCode;
use suites::Cell;
use tap::mutation::Operator;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Only cells whose name (`suite.runner.environment.case`) contains one of these.
    pub filters: Vec<String>,
    /// A drivers file (as for `harness run`): its drivers' cells are the ones mutated.
    #[arg(long, env = matrix::load::DRIVERS_VAR, value_parser = super::absolute_path)]
    pub drivers: Option<PathBuf>,
    /// Only runners of this app-server.
    #[arg(long, value_parser = ["fake", "codex"])]
    pub app_server: Option<String>,
    /// Only cells in these environments (repeatable).
    #[arg(long = "environment")]
    pub environments: Vec<String>,
    /// Only these operators (repeatable; default: every one). See docs/mutate.md.
    #[arg(long = "operator", value_name = "NAME", value_parser = parse_operator)]
    pub operators: Vec<Operator>,
    /// Expected scores (a TOML file: per driver, the operators that must be killed and the
    /// lowest score; this project's: drivers/mutation.toml). Exit 1 when one is not met; then
    /// survivors it does not name are reported, not failed. See docs/mutate.md.
    #[arg(long, value_name = "FILE", value_parser = super::absolute_path)]
    pub expect: Option<PathBuf>,
    /// Run every mutant the reference does not rule out, for the complete "killed by" list;
    /// by default an operator's remaining runs are left out once one cell killed it (its status
    /// and the score are the same either way). See docs/mutate.md.
    #[arg(long)]
    pub all_kills: bool,
    /// Run the operators against the fake and the real Codex over the cells they pair
    /// (`harness fidelity`'s pairs: a fake runner and a real one declaring the same driver,
    /// same suite, environment and case) and compare per operator: one killed on one side and
    /// survived on the other is a fidelity finding about the fake (exit 1). See docs/mutate.md.
    #[arg(long, conflicts_with = "app_server")]
    pub fidelity: bool,
    /// Cells run at once (as for `harness run`).
    #[arg(long, short = 'j', value_parser = super::jobs)]
    pub jobs: Option<usize>,
    /// Evidence (one folder per run: `unmutated/`, one per operator) and `mutation.json` go
    /// here (default: `$HARNESS_OUT_DIR`, else `target/conformance`, then `mutate/`).
    #[arg(long, value_parser = super::absolute_path)]
    pub out: Option<PathBuf>,
}

fn parse_operator(name: &str) -> Result<Operator, String> {
    name.parse()
}

pub fn main(args: Args) -> ExitCode {
    match run(args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("harness mutate: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> anyhow::Result<ExitCode> {
    let selection = Selection::of(&args)?;
    let base = CellContext::from_env()?;
    let out = match &args.out {
        Some(out) => out.clone(),
        None => base.out_root.join("mutate"),
    };
    // The run owns its folder (created here) until it ends: a second one is refused.
    let _owned = matrix::out_lock::OutLock::take(&out)?;
    let jobs = Concurrency::from_jobs(args.jobs);
    eprintln!(
        "mutating {} cells with {} operators, {}; evidence in {}",
        selection.cells.len(),
        selection.operators.len(),
        jobs.describe(),
        out.display()
    );
    let mut runs_ms = BTreeMap::new();
    let reference_results = match reference_run(&base, &out, &selection.cells, jobs, &mut runs_ms)?
    {
        Ok(results) => results,
        Err(signal) => return Ok(stopped(signal)),
    };
    let reference = Reference::of(&reference_results, &selection.cells)?;
    let planned = Planned::predict(
        &base,
        &out,
        &selection.operators,
        &reference.compared,
        args.all_kills,
    );
    let pool = Mutants {
        runs: &planned.runs,
        of_run: &planned.of_run,
        reference: &reference.outcomes,
        durations: &reference.durations,
        out: &out,
    };
    let ran = match pool.run(jobs, !args.all_kills)? {
        Ok(ran) => ran,
        Err(signal) => return Ok(stopped(signal)),
    };
    runs_ms.insert("mutants".into(), ran.wall.as_millis() as u64);
    let judging = std::time::Instant::now();
    let report = judge::report(
        &args,
        &selection,
        &out,
        &reference.compared,
        planned,
        ran,
        runs_ms,
    )?;
    eprintln!("judged in {:.1} s", judging.elapsed().as_secs_f64());
    write_reports(&out, &report, &reference_results)?;
    Ok(exit_code(&report, selection.expectations.as_ref()))
}

/// What a mutation run covers: the selected cells (with `--fidelity`, those paired, and the
/// `[fake, real]` runners paired), the operators, and `--expect`'s file and expectations.
struct Selection {
    cells: Vec<Cell>,
    runner_pairs: Option<Vec<[String; 2]>>,
    operators: Vec<Operator>,
    expectations: Option<(PathBuf, Expectations)>,
}

impl Selection {
    fn of(args: &Args) -> anyhow::Result<Self> {
        let repo_root = matrix::paths::repo_root();
        let matrix = matrix::load::load_matrix(args.drivers.as_deref(), &[], repo_root.as_deref())?;
        let selection = super::run::Args {
            filters: args.filters.clone(),
            jobs: args.jobs,
            driver_cmd: None,
            drivers: args.drivers.clone(),
            all_runners: false,
            codex_versions: Vec::new(),
            partition: None,
            suite: None,
            environments: args.environments.clone(),
            app_server: args.app_server.clone(),
            out: None,
            list: false,
            retries: 0,
        };
        let mut cells = super::run::select(&matrix, &selection)?;
        let runner_pairs = if args.fidelity {
            let (paired, runner_pairs) = paired_cells(&matrix, &cells);
            anyhow::ensure!(
                !paired.is_empty(),
                "--fidelity: no selected cell of a fake runner has a real-Codex counterpart (the same declared driver, suite, environment and case) in the selection"
            );
            cells = paired;
            Some(runner_pairs)
        } else {
            None
        };
        let operators = if args.operators.is_empty() {
            Operator::ALL.to_vec()
        } else {
            let mut chosen = args.operators.clone();
            chosen.sort();
            chosen.dedup();
            chosen
        };
        let expectations = match &args.expect {
            Some(path) => {
                let expected = Expectations::load(path)?;
                let drivers: BTreeSet<String> = cells.iter().map(|c| c.id.runner.clone()).collect();
                expected.check_selection(&drivers, &operators)?;
                Some((path.clone(), expected))
            }
            None => None,
        };
        Ok(Self {
            cells,
            runner_pairs,
            operators,
            expectations,
        })
    }
}

/// What the reference run says of each cell: its duration, its outcome, and the cells with an
/// outcome to compare a mutant with (only those are run again).
struct Reference {
    durations: HashMap<String, std::time::Duration>,
    outcomes: HashMap<String, Option<String>>,
    compared: Vec<Cell>,
}

impl Reference {
    fn of(results: &[CellResult], cells: &[Cell]) -> anyhow::Result<Self> {
        let durations = results
            .iter()
            .map(|r| (r.cell.to_string(), r.duration))
            .collect();
        let outcomes: HashMap<String, Option<String>> = results
            .iter()
            .map(|r| (r.cell.to_string(), mutate::outcome(r)))
            .collect();
        let compared: Vec<Cell> = cells
            .iter()
            .filter(|c| outcomes.get(&c.name()).is_some_and(Option::is_some))
            .cloned()
            .collect();
        anyhow::ensure!(
            !compared.is_empty(),
            "no selected cell ran to an outcome unmutated: nothing to compare a mutant with"
        );
        Ok(Self {
            durations,
            outcomes,
            compared,
        })
    }
}

/// Every mutant the reference does not rule out, in one pool: no run waits for another
/// operator's slowest cell (and, first kill, each operator's quickest cells first).
struct Planned {
    runs: Vec<(CellContext, Cell)>,
    /// Each run's operator.
    of_run: Vec<Operator>,
    /// Per operator, the cells not run: their reference holds nothing it rewrites.
    untouched: BTreeMap<Operator, Vec<Cell>>,
}

impl Planned {
    fn predict(
        base: &CellContext,
        out: &std::path::Path,
        operators: &[Operator],
        compared: &[Cell],
        all_kills: bool,
    ) -> Self {
        let predicting = std::time::Instant::now();
        let reference_root = out.join(mutate::REFERENCE);
        let contexts: BTreeMap<Operator, CellContext> = operators
            .iter()
            .map(|operator| {
                let mut ctx = base.clone();
                ctx.out_root = out.join(operator.name());
                ctx.mutation = matrix::mutation::Mutation::of(*operator);
                (*operator, ctx)
            })
            .collect();
        let mut planned = Self {
            runs: Vec::new(),
            of_run: Vec::new(),
            untouched: BTreeMap::new(),
        };
        for cell in compared {
            let eligible: Vec<Operator> = operators
                .iter()
                .copied()
                .filter(|o| o.on_the_wire() || declares_exit_status(cell))
                .collect();
            let predictions = predict::predict(&reference_root, &cell.name(), &eligible);
            for (operator, prediction) in eligible.into_iter().zip(predictions) {
                if prediction.must_run() {
                    planned
                        .runs
                        .push((contexts[&operator].clone(), cell.clone()));
                    planned.of_run.push(operator);
                } else {
                    planned
                        .untouched
                        .entry(operator)
                        .or_default()
                        .push(cell.clone());
                }
            }
        }
        eprintln!(
            "mutants: {} runs ({} operator × cell pairs not run: their reference holds nothing the operator rewrites; predicted in {:.1} s){}",
            planned.runs.len(),
            planned.predicted_untouched(),
            predicting.elapsed().as_secs_f64(),
            if all_kills { "" } else { "; an operator's runs stop at its first kill" }
        );
        planned
    }

    fn predicted_untouched(&self) -> usize {
        self.untouched.values().map(Vec::len).sum()
    }
}

/// `mutation.json`, the reference run's page with the mutation section above its matrix, and
/// the table on stdout.
fn write_reports(
    out: &std::path::Path,
    report: &MutationReport,
    reference_results: &[CellResult],
) -> anyhow::Result<()> {
    let path = out.join("mutation.json");
    std::fs::write(&path, serde_json::to_string_pretty(report)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    let summary = report::Summary::from_results(
        reference_results,
        std::time::Duration::from_millis(report.runs_ms[mutate::REFERENCE]),
    );
    let html = out.join(report::layout::HTML);
    std::fs::write(
        &html,
        report::html::render_with_mutation(&summary, &report.section()),
    )
    .with_context(|| format!("writing {}", html.display()))?;
    println!("{}", report.table());
    eprintln!("mutation report: {}", path.display());
    Ok(())
}

/// With `--expect`, whether every expectation is met (and no fidelity finding); else 1 on a
/// survivor, an unsteady operator or a fidelity finding, 2 when nothing was measured.
fn exit_code(report: &MutationReport, expectations: Option<&(PathBuf, Expectations)>) -> ExitCode {
    let findings = report.fidelity.as_ref().map_or(0, |f| f.findings.len());
    if let Some(checked) = &report.expectations {
        for unclaimed in &checked.unclaimed {
            eprintln!("killed, though no expectation asks it (the expectation could be raised): {unclaimed}");
        }
        if let Some((_, expected)) = expectations {
            for unsteady in expected.unsteady_unnamed(report) {
                eprintln!("UNSTEADY, not counted (no expectation names it; its kills did not come back in a second run): {unsteady}");
            }
        }
        for unmet in &checked.unmet {
            eprintln!("expectation not met: {unmet}");
        }
        return if !checked.unmet.is_empty() || findings > 0 {
            ExitCode::from(1)
        } else {
            eprintln!("every expectation of {} is met", checked.file);
            ExitCode::SUCCESS
        };
    }
    if report.unsteady() > 0 {
        eprintln!(
            "harness mutate: {} operators are unsteady (a kill that did not come back in a second run): no verdict on them, exit 1",
            report.unsteady()
        );
    }
    if report.survivors() > 0 || findings > 0 || report.unsteady() > 0 {
        ExitCode::from(1)
    } else if report.killed() == 0 {
        eprintln!("harness mutate: no operator applied to any selected cell: nothing was measured");
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

/// `--fidelity`: of the `selected` cells, those `maintainer_tools::fidelity::pairs` pairs with a
/// selected cell of the other app-server (both sides), and the `[fake, real]` runners paired.
fn paired_cells(matrix: &suites::Matrix, selected: &[Cell]) -> (Vec<Cell>, Vec<[String; 2]>) {
    let chosen: BTreeSet<String> = selected.iter().map(Cell::name).collect();
    let mut cells: BTreeMap<String, Cell> = BTreeMap::new();
    let mut runners: BTreeSet<[String; 2]> = BTreeSet::new();
    // Every pair of the matrix: the selection (filters, environments) chose the cells already.
    for pair in maintainer_tools::fidelity::pairs(matrix, &[]) {
        if chosen.contains(&pair.fake.name()) && chosen.contains(&pair.real.name()) {
            runners.insert([pair.fake.id.runner.clone(), pair.real.id.runner.clone()]);
            cells.insert(pair.fake.name(), pair.fake);
            cells.insert(pair.real.name(), pair.real);
        }
    }
    (cells.into_values().collect(), runners.into_iter().collect())
}

/// Whether `cell`'s driver says its outcome is its exit status (`exit-zero` means nothing to
/// another); the harness's own drivers do.
fn declares_exit_status(cell: &Cell) -> bool {
    cell.runner
        .declared
        .as_ref()
        .is_none_or(|d| d.outcome == Some(graders::events::OutcomeDeclaration::ExitStatus))
}

/// The reference: `cells` as they are, into `out/unmutated/`; `Err(signal)` when a signal
/// stopped it.
fn reference_run(
    base: &CellContext,
    out: &std::path::Path,
    cells: &[Cell],
    jobs: Concurrency,
    runs_ms: &mut BTreeMap<String, u64>,
) -> anyhow::Result<Result<Vec<CellResult>, i32>> {
    let name = mutate::REFERENCE;
    let mut ctx = base.clone();
    ctx.out_root = out.join(name);
    eprintln!("{name}: {} cells", cells.len());
    matrix::prereq::check_named(&ctx, cells)?;
    let batch = matrix::scheduler::Batch::of_cells(&ctx, cells, jobs);
    let mut printer = super::run::Printer { progress: false };
    let ran = crate::dispatch::Run::new(batch, jobs)
        .execute(&mut printer)?
        .settle(&mut printer);
    let (run, wall) = (ran.run, ran.wall);
    runs_ms.insert(name.to_string(), wall.as_millis() as u64);
    match ran.cause {
        Some(CancelReason::Panic(message)) => anyhow::bail!("{name}: a cell panicked: {message}"),
        Some(CancelReason::Signal(signal)) => return Ok(Err(signal)),
        None => {}
    }
    report::write_all(&ctx.out_root, &run.finished, wall)?;
    eprintln!(
        "{name}: {} cells in {:.1} s",
        run.finished.len(),
        wall.as_secs_f64()
    );
    Ok(Ok(run.finished))
}

fn stopped(signal: i32) -> ExitCode {
    eprintln!("harness mutate: stopped by a signal; no mutation report");
    ExitCode::from(u8::try_from(128 + signal).unwrap_or(1))
}
