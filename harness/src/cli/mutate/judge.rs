//! Judging a mutation run: each mutant's run sorted by operator and driver, each operator's
//! text reports, each driver's operators judged, and the report with its fidelity findings and
//! expectations checked.

use super::pool::Ran;
use super::{Args, Planned, Selection};
use maintainer_tools::mutate::{
    self, CellMutant, DriverMutants, ExpectationsChecked, FidelityChecked, Mutant, MutationReport,
};
use report::outcome::CellResult;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use suites::Cell;
use tap::mutation::Operator;

/// Each driver's judged mutants of one operator (by the runner's name).
type ByDriver = BTreeMap<String, Vec<CellMutant>>;

/// The pool's runs, by operator: results and judged mutants of the runs made, and the cells
/// whose run was left out (its operator was killed first).
#[derive(Default)]
struct Sorted {
    results: BTreeMap<Operator, Vec<CellResult>>,
    judged: BTreeMap<Operator, ByDriver>,
    not_run: BTreeMap<Operator, Vec<Cell>>,
}

impl Sorted {
    fn of(ran: Ran, planned: &Planned) -> Self {
        let mut sorted = Self::default();
        for (index, (cell, result)) in ran.judged.into_iter().zip(ran.results).enumerate() {
            let operator = planned.of_run[index];
            match (cell, result) {
                (Some(cell), Some(result)) => {
                    sorted
                        .judged
                        .entry(operator)
                        .or_default()
                        .entry(result.cell.runner.clone())
                        .or_default()
                        .push(cell);
                    sorted.results.entry(operator).or_default().push(result);
                }
                _ => sorted
                    .not_run
                    .entry(operator)
                    .or_default()
                    .push(planned.runs[index].1.clone()),
            }
        }
        sorted
    }
}

/// The mutation report of a run: `ran` judged against the reference of the `compared` cells.
pub(super) fn report(
    args: &Args,
    selection: &Selection,
    out: &Path,
    compared: &[Cell],
    mut planned: Planned,
    ran: Ran,
    runs_ms: BTreeMap<String, u64>,
) -> anyhow::Result<MutationReport> {
    let (wall, second_runs) = (ran.wall, ran.second_runs);
    let mut sorted = Sorted::of(ran, &planned);
    let mutant_runs = sorted.results.values().map(Vec::len).sum();
    let passes = operator_passes(&selection.operators, &mut sorted, out, wall)?;
    let predicted_untouched = planned.predicted_untouched();
    let drivers = judge_drivers(compared, passes, &mut planned.untouched, &sorted.not_run);
    let mut report = MutationReport {
        app_server: args.app_server.clone(),
        operators: selection
            .operators
            .iter()
            .map(|o| o.name().to_string())
            .collect(),
        cells: compared.len(),
        score: mutate::score(drivers.iter().flat_map(|d| &d.operators)),
        drivers,
        runs_ms,
        mutant_runs,
        predicted_untouched,
        confirmation_runs: second_runs,
        first_kill: !args.all_kills,
        not_run_after_kill: sorted.not_run.values().map(Vec::len).sum(),
        fidelity: None,
        expectations: None,
    };
    if let Some(pairs) = &selection.runner_pairs {
        report.fidelity = Some(FidelityChecked {
            findings: mutate::disagreements(&report.drivers, pairs),
            pairs: pairs.clone(),
        });
    }
    if let Some((path, expected)) = &selection.expectations {
        report.expectations = Some(ExpectationsChecked {
            file: path.display().to_string(),
            unmet: expected.unmet(&report),
            unclaimed: expected.unclaimed(&report),
        });
    }
    Ok(report)
}

/// Each operator's judged mutants by driver (each driver's cells in order), after writing the
/// operator's reports but its report.html (the evidence folders are there).
fn operator_passes(
    operators: &[Operator],
    sorted: &mut Sorted,
    out: &Path,
    wall: std::time::Duration,
) -> anyhow::Result<Vec<(Operator, ByDriver)>> {
    let mut passes = Vec::new();
    for operator in operators {
        let mut results = sorted.results.remove(operator).unwrap_or_default();
        results.sort_by_key(|r| r.cell.to_string());
        if !results.is_empty() {
            let summary = report::Summary::from_results(&results, wall);
            report::write_text_reports(&out.join(operator.name()), &summary)?;
        }
        let mut by_driver = sorted.judged.remove(operator).unwrap_or_default();
        for cells in by_driver.values_mut() {
            cells.sort_by(|a, b| a.cell.cmp(&b.cell));
        }
        passes.push((*operator, by_driver));
    }
    Ok(passes)
}

/// Each driver of the `compared` cells with every operator judged on its cells.
fn judge_drivers(
    compared: &[Cell],
    passes: Vec<(Operator, ByDriver)>,
    untouched: &mut BTreeMap<Operator, Vec<Cell>>,
    not_run: &BTreeMap<Operator, Vec<Cell>>,
) -> Vec<DriverMutants> {
    // A cell whose outcome changed in a run that rewrote nothing of it varies on its own.
    let unsteady: BTreeSet<String> = passes
        .iter()
        .flat_map(|(_, by_driver)| by_driver.values().flatten())
        .filter(|c| c.unsteady())
        .map(|c| c.cell.clone())
        .collect();
    let mut per_driver: BTreeMap<String, Vec<Mutant>> = BTreeMap::new();
    for cell in compared {
        per_driver.entry(cell.id.runner.clone()).or_default();
    }
    for (operator, mut by_driver) in passes {
        let untouched = untouched.remove(&operator).unwrap_or_default();
        for (driver, mutants) in per_driver.iter_mut() {
            let cells = by_driver.remove(driver).unwrap_or_default();
            let predicted = untouched
                .iter()
                .filter(|c| &c.id.runner == driver)
                .map(Cell::name)
                .collect();
            let mut mutant = Mutant::judge(operator, cells, predicted, &unsteady);
            mutant.not_run_after_kill = not_run
                .get(&operator)
                .into_iter()
                .flatten()
                .filter(|c| &c.id.runner == driver)
                .map(Cell::name)
                .collect();
            mutants.push(mutant);
        }
    }
    per_driver
        .into_iter()
        .map(|(driver, mutants)| {
            let cells = compared.iter().filter(|c| c.id.runner == driver).count();
            DriverMutants::new(&driver, cells, mutants)
        })
        .collect()
}
