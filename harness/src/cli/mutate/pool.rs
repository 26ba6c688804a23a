//! The mutants' pool of `harness mutate`: every run the reference does not rule out, each
//! operator (per driver) left out once one of its runs killed it (first kill), and the rounds
//! that rerun what a kill from an unsteady cell left out. See docs/mutate.md, "How it runs".

use crate::mutate::{self, CellMutant};
use matrix::concurrency::Concurrency;
use matrix::context::CellContext;
use matrix::scheduler;
use report::outcome::CellResult;
use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use suites::Cell;
use tap::mutation::Operator;

/// The mutants' runs (one per operator × cell the reference does not rule out) and what judges
/// one of them.
pub(super) struct Mutants<'a> {
    pub(super) runs: &'a [(CellContext, Cell)],
    /// Each run's operator.
    pub(super) of_run: &'a [Operator],
    /// Each cell's unmutated outcome and duration.
    pub(super) reference: &'a HashMap<String, Option<String>>,
    pub(super) durations: &'a HashMap<String, std::time::Duration>,
    pub(super) out: &'a std::path::Path,
}

/// An operator against one driver (the runner's name): one kill settles it.
type OperatorOn = (Operator, String);

/// What the mutants' pool gave: each run's result (`None`: left out after its operator's
/// first kill), and its wall time.
pub(super) struct Ran {
    pub(super) results: Vec<Option<CellResult>>,
    pub(super) wall: std::time::Duration,
}

impl Mutants<'_> {
    /// One mutant's cell as it is judged: the rewrites its transcript records, its outcome and
    /// the reference's.
    pub(super) fn cell_mutant(
        &self,
        operator: Operator,
        result: &CellResult,
    ) -> anyhow::Result<CellMutant> {
        cell_mutant(self.out, self.reference, operator, result)
    }

    /// Every run (`first_kill`: each operator's left out once one of its runs killed it, the
    /// order [`mutate::first_kill_order`]; else the reference's longest cells first);
    /// `Err(signal)` when a signal stopped it.
    ///
    /// A kill seen while the pool runs is taken at its word; a cell found unsteady afterwards
    /// (its outcome changed in a run that rewrote nothing) kills nothing, so the operators whose
    /// every kill came from such a cell get their left-out runs in another round: an
    /// operator's status never rests on a run that was not made.
    pub(super) fn run(
        &self,
        jobs: Concurrency,
        first_kill: bool,
    ) -> anyhow::Result<Result<Ran, i32>> {
        let mut results: Vec<Option<CellResult>> = vec![None; self.runs.len()];
        let mut wall = std::time::Duration::ZERO;
        let mut pending: Vec<usize> = (0..self.runs.len()).collect();
        while !pending.is_empty() {
            let killed: Arc<Mutex<BTreeSet<OperatorOn>>> =
                Arc::new(Mutex::new(self.killed(&results)?));
            let round: Vec<(CellContext, Cell)> =
                pending.iter().map(|&i| self.runs[i].clone()).collect();
            let of_round: Arc<Vec<OperatorOn>> =
                Arc::new(pending.iter().map(|&i| self.operator_on(i)).collect());
            let order = if first_kill {
                let timed: Vec<(Operator, std::time::Duration)> = pending
                    .iter()
                    .map(|&i| {
                        let cell = self.runs[i].1.name();
                        (
                            self.of_run[i],
                            self.durations.get(&cell).copied().unwrap_or_default(),
                        )
                    })
                    .collect();
                mutate::first_kill_order(&timed)
            } else {
                // The longest cells of the reference first (stable among equals), so the pool
                // does not end waiting for one of them.
                let mut order: Vec<usize> = (0..round.len()).collect();
                order.sort_by_key(|&i| {
                    std::cmp::Reverse(self.durations.get(&round[i].1.name()).copied())
                });
                order
            };
            let skip = {
                let (killed, of_round) = (killed.clone(), of_round.clone());
                Arc::new(move |i: usize| first_kill && lock(&killed).contains(&of_round[i]))
            };
            let finished = {
                let (killed, of_round) = (killed.clone(), of_round.clone());
                let judge = Judge {
                    reference: self.reference.clone(),
                    out: self.out.to_path_buf(),
                };
                Arc::new(move |i: usize, result: &CellResult| {
                    if judge.kills(of_round[i].0, result) {
                        lock(&killed).insert(of_round[i].clone());
                    }
                })
            };
            let pool = scheduler::Pool {
                order,
                skip,
                finished,
            };
            let (run, took) = crate::shutdown::run_pool(&round, jobs, pool, |_, _| {})?;
            wall += took;
            if let Some(message) = &run.panic {
                anyhow::bail!("mutants: a cell panicked: {message}");
            }
            if let Some(signal) = crate::shutdown::stopped_by() {
                return Ok(Err(signal));
            }
            anyhow::ensure!(
                run.finished.len() + run.skipped.len() == round.len(),
                "mutants: {} of {} runs finished",
                run.finished.len(),
                round.len()
            );
            let skipped: BTreeSet<usize> = run.skipped.iter().copied().collect();
            let mut finished = run.finished.into_iter();
            for (at, &index) in pending.iter().enumerate() {
                if !skipped.contains(&at) {
                    results[index] = finished.next();
                }
            }
            eprintln!(
                "mutants: {} runs in {:.1} s ({} left out after their operator's first kill)",
                round.len() - skipped.len(),
                took.as_secs_f64(),
                skipped.len()
            );
            // Left out, though the kill that left them out came from an unsteady cell.
            let killed = self.killed(&results)?;
            pending = skipped
                .into_iter()
                .map(|at| pending[at])
                .filter(|&index| !killed.contains(&self.operator_on(index)))
                .collect();
        }
        Ok(Ok(Ran { results, wall }))
    }

    /// Run `index`'s operator and driver: what one kill settles.
    fn operator_on(&self, index: usize) -> OperatorOn {
        (self.of_run[index], self.runs[index].1.id.runner.clone())
    }

    /// The operators (per driver) some finished run killed, by a cell no run found unsteady.
    fn killed(&self, results: &[Option<CellResult>]) -> anyhow::Result<BTreeSet<OperatorOn>> {
        let mut judged = Vec::new();
        for (index, result) in results.iter().enumerate() {
            if let Some(result) = result {
                judged.push((
                    self.operator_on(index),
                    self.cell_mutant(self.of_run[index], result)?,
                ));
            }
        }
        let unsteady: BTreeSet<&str> = judged
            .iter()
            .filter(|(_, c)| c.unsteady())
            .map(|(_, c)| c.cell.as_str())
            .collect();
        Ok(judged
            .iter()
            .filter(|(_, c)| c.kills() && !unsteady.contains(c.cell.as_str()))
            .map(|(operator_on, _)| operator_on.clone())
            .collect())
    }
}

/// What the pool's finish hook needs to see a kill as it happens (owned: the hook outlives
/// the borrow of a round).
struct Judge {
    reference: HashMap<String, Option<String>>,
    out: PathBuf,
}

impl Judge {
    /// Whether this run of `operator` killed it. A transcript that cannot be read is no kill
    /// here: the operator's runs go on (judging reads it again and reports the error).
    fn kills(&self, operator: Operator, result: &CellResult) -> bool {
        cell_mutant(&self.out, &self.reference, operator, result).is_ok_and(|c| c.kills())
    }
}

/// One mutant's cell as it is judged: the rewrites its transcript (below `out`'s folder of
/// `operator`) records, its outcome and the reference's.
fn cell_mutant(
    out: &std::path::Path,
    reference: &HashMap<String, Option<String>>,
    operator: Operator,
    result: &CellResult,
) -> anyhow::Result<CellMutant> {
    let name = result.cell.to_string();
    Ok(CellMutant {
        applied: mutate::applications(&out.join(operator.name()), &name)?,
        reference: reference.get(&name).cloned().flatten(),
        mutant: mutate::outcome(result),
        cell: name,
    })
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
