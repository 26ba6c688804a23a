//! The mutants' pool of `harness mutate`: every run the reference does not rule out, each
//! operator (per driver) left out once one of its runs killed it (first kill), in rounds the
//! [`Ledger`] plans: a killing run is made a second time, and a kill that does not come back
//! puts the runs it left out back in. See docs/mutate.md, "How it runs".

use crate::cli::run::Printer;
use crate::dispatch::{CancelReason, Observer, RunEvent};
use maintainer_tools::mutate::confirm::{Again, Ledger, Round};
use maintainer_tools::mutate::{self, CellMutant};
use matrix::concurrency::Concurrency;
use matrix::context::CellContext;
use matrix::scheduler;
use report::outcome::CellResult;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use suites::Cell;
use tap::mutation::Operator;
use tokio_util::sync::CancellationToken;

/// The mutants' runs (one per operator × cell the reference does not rule out) and what judges
/// one of them.
pub(super) struct Mutants<'a> {
    pub(super) runs: &'a [(CellContext, Cell)],
    /// Each run's operator.
    pub(super) of_run: &'a [Operator],
    /// Each cell's unmutated outcome and duration.
    pub(super) reference: &'a HashMap<String, Option<String>>,
    pub(super) durations: &'a HashMap<String, std::time::Duration>,
    pub(super) out: &'a Path,
}

/// An operator against one driver (the runner's name): one kill settles it.
type OperatorOn = (Operator, String);

/// One round of the pool, planned: the executor's batch, each of its runs' operator and driver,
/// and each operator's withdrawal of its queued runs.
struct PlannedRound {
    batch: scheduler::Batch,
    of_round: Vec<OperatorOn>,
    withdrawals: HashMap<OperatorOn, CancellationToken>,
}

/// What the mutants' pool gave, per run: its first run judged (`None`: left out after its
/// operator's first kill) with its second attached when it killed, and its result; the second
/// runs made, and the wall time.
pub(super) struct Ran {
    pub(super) judged: Vec<Option<CellMutant>>,
    pub(super) results: Vec<Option<CellResult>>,
    pub(super) second_runs: usize,
    pub(super) wall: std::time::Duration,
}

impl Mutants<'_> {
    /// Every round the ledger plans (`first_kill`: each operator's runs left out once one of
    /// them killed it, in the order [`mutate::first_kill_order`]; else the reference's longest
    /// cells first), each round's second runs first; `Err(signal)` when a signal stopped it.
    ///
    /// A kill seen while a round runs leaves its operator's queued runs out at once; whether it
    /// counts is settled by its second run, in the next round.
    pub(super) fn run(
        &self,
        jobs: Concurrency,
        first_kill: bool,
    ) -> anyhow::Result<Result<Ran, i32>> {
        let keys = (0..self.runs.len()).map(|i| self.operator_on(i)).collect();
        let mut ledger = Ledger::new(keys, first_kill);
        let mut results: Vec<Option<CellResult>> = vec![None; self.runs.len()];
        let mut wall = std::time::Duration::ZERO;
        while let Some(round) = ledger.next_round() {
            let PlannedRound {
                batch,
                of_round,
                withdrawals,
            } = self.plan(&round, first_kill);
            let seconds = round.again.len();
            let planned_count = batch.runs.len();
            let mut first_kills = FirstKills {
                mutants: self,
                seconds,
                of_round: &of_round,
                withdrawals: &withdrawals,
                printer: Printer { progress: false },
            };
            let ran = crate::dispatch::Run::new(batch, jobs)
                .execute(&mut first_kills)?
                .settle(&mut first_kills);
            let (run, took) = (ran.run, ran.wall);
            wall += took;
            match ran.cause {
                Some(CancelReason::Panic(message)) => {
                    anyhow::bail!("mutants: a cell panicked: {message}")
                }
                Some(CancelReason::Signal(signal)) => return Ok(Err(signal)),
                None => {}
            }
            anyhow::ensure!(
                run.finished.len() + run.skipped.len() == planned_count,
                "mutants: {} of {} runs finished",
                run.finished.len(),
                planned_count
            );
            let skipped = run.skipped.len();
            self.record(&mut ledger, &round, run, &mut results)?;
            eprintln!(
                "mutants: {} runs and {} second runs of killing cells in {:.1} s ({} left out after their operator's first kill)",
                round.runs.len() - skipped,
                seconds,
                took.as_secs_f64(),
                skipped
            );
        }
        let (judged, second_runs) = ledger.finish();
        Ok(Ok(Ran {
            judged,
            results,
            second_runs,
            wall,
        }))
    }

    /// A round as the executor runs it: its second runs first (one cell each, and each settles
    /// an operator), then its first runs (`first_kill`: in the order
    /// [`mutate::first_kill_order`], each operator's queued runs withdrawn by its first kill;
    /// else the reference's longest cells first).
    fn plan(&self, round: &Round, first_kill: bool) -> PlannedRound {
        let seconds = round.again.len();
        let mut runs: Vec<(CellContext, Cell)> = round
            .again
            .iter()
            .map(|&i| {
                let (ctx, cell) = &self.runs[i];
                let mut ctx = ctx.clone();
                ctx.out_root = self.again_root(self.of_run[i]);
                (ctx, cell.clone())
            })
            .collect();
        runs.extend(round.runs.iter().map(|&i| self.runs[i].clone()));
        let of_round: Vec<OperatorOn> = round
            .again
            .iter()
            .chain(&round.runs)
            .map(|&i| self.operator_on(i))
            .collect();
        let firsts = if first_kill {
            let timed: Vec<(Operator, std::time::Duration)> = round
                .runs
                .iter()
                .map(|&i| (self.of_run[i], self.cost(&self.runs[i].1)))
                .collect();
            mutate::first_kill_order(&timed)
        } else {
            // The longest cells of the reference first (stable among equals), so the pool
            // does not end waiting for one of them.
            let mut order: Vec<usize> = (0..round.runs.len()).collect();
            order.sort_by_key(|&at| std::cmp::Reverse(self.cost(&self.runs[round.runs[at]].1)));
            order
        };
        let order = (0..seconds)
            .chain(firsts.into_iter().map(|at| at + seconds))
            .collect();
        // One withdrawal per operator and driver: its first kill withdraws its queued runs.
        let withdrawals: HashMap<OperatorOn, CancellationToken> = of_round
            .iter()
            .map(|key| (key.clone(), CancellationToken::new()))
            .collect();
        let withdrawn = (0..runs.len())
            .map(|at| {
                if first_kill && at >= seconds {
                    withdrawals[&of_round[at]].clone()
                } else {
                    CancellationToken::new()
                }
            })
            .collect();
        let batch = scheduler::Batch {
            runs,
            order,
            withdrawn,
            // Mutate confirms a kill with its own run (`maintainer_tools::mutate::confirm`);
            // running a failed cell again here would blur what that run confirms.
            retries: 0,
        };
        PlannedRound {
            batch,
            of_round,
            withdrawals,
        }
    }

    /// Tell the ledger what a round's runs gave: each second run's mutant, each first run's
    /// judged mutant (`None`: left out after its operator's first kill); keep the first runs'
    /// results.
    fn record(
        &self,
        ledger: &mut Ledger<OperatorOn>,
        round: &Round,
        run: scheduler::MatrixRun,
        results: &mut [Option<CellResult>],
    ) -> anyhow::Result<()> {
        let seconds = round.again.len();
        let skipped: BTreeSet<usize> = run.skipped.iter().copied().collect();
        let mut finished = run.finished.into_iter();
        for at in 0..seconds + round.runs.len() {
            if at < seconds {
                anyhow::ensure!(!skipped.contains(&at), "mutants: a second run was left out");
                let index = round.again[at];
                let result = finished.next().expect("counted by the caller");
                let operator = self.of_run[index];
                let again = Again {
                    applied: mutate::applications(
                        &self.again_root(operator),
                        &result.cell.to_string(),
                    )?,
                    mutant: mutate::outcome(&result),
                };
                ledger.ran_again(index, again);
                continue;
            }
            let index = round.runs[at - seconds];
            if skipped.contains(&at) {
                ledger.ran(index, None);
                continue;
            }
            let result = finished.next().expect("counted by the caller");
            let judged = self.cell_mutant(self.of_run[index], &result)?;
            ledger.ran(index, Some((judged, result.duration)));
            results[index] = Some(result);
        }
        Ok(())
    }

    /// One mutant's cell as it is judged: the rewrites its transcript (below the out folder's
    /// folder of `operator`) records, its outcome and the reference's.
    fn cell_mutant(&self, operator: Operator, result: &CellResult) -> anyhow::Result<CellMutant> {
        let name = result.cell.to_string();
        Ok(CellMutant {
            applied: mutate::applications(&self.out.join(operator.name()), &name)?,
            reference: self.reference.get(&name).cloned().flatten(),
            mutant: mutate::outcome(result),
            cell: name,
            again: None,
        })
    }

    /// Where `operator`'s second runs keep their evidence.
    fn again_root(&self, operator: Operator) -> PathBuf {
        self.out.join(mutate::AGAIN).join(operator.name())
    }

    /// The reference's duration of `cell`: what a run of it is expected to cost.
    fn cost(&self, cell: &Cell) -> std::time::Duration {
        self.durations
            .get(&cell.name())
            .copied()
            .unwrap_or_default()
    }

    /// Run `index`'s operator and driver: what one kill settles.
    fn operator_on(&self, index: usize) -> OperatorOn {
        (self.of_run[index], self.runs[index].1.id.runner.clone())
    }
}

/// What a round of the pool is told as it runs: a first run that killed its operator withdraws
/// the operator's queued runs on that driver at once (the executor frees a finished run's slots
/// only once this was told its end, so none of them starts meanwhile).
struct FirstKills<'a> {
    mutants: &'a Mutants<'a>,
    /// The round's second runs, first in its runs: they withdraw nothing.
    seconds: usize,
    /// Each of the round's runs' operator and driver.
    of_round: &'a [OperatorOn],
    withdrawals: &'a HashMap<OperatorOn, CancellationToken>,
    printer: Printer,
}

impl Observer for FirstKills<'_> {
    fn observe(&mut self, event: RunEvent) {
        if let RunEvent::CellFinished { index, result, .. } = &event {
            let key = &self.of_round[*index];
            // A transcript that cannot be read is no kill here: the operator's runs go on
            // (judging reads it again and reports the error).
            let kills = *index >= self.seconds
                && self
                    .mutants
                    .cell_mutant(key.0, result)
                    .is_ok_and(|c| c.kills());
            if kills {
                self.withdrawals[key].cancel();
            }
        }
        self.printer.observe(event);
    }
}
