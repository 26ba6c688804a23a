//! Kills that reproduce: a run of an operator that killed it is made a second time (the same
//! cell, the same operator), and the kill counts only when the second run kills too. An
//! operator whose kills no second run reproduced is *unsteady* ([`super::Status::Unsteady`]):
//! neither killed nor survived.
//!
//! The [`Ledger`] keeps the book over the rounds of `harness mutate`'s pool: which mutants are
//! still to run, which killing run to make again, which runs a kill left out (first kill) must
//! be made after all because that kill did not hold. It runs nothing itself: the pool asks it
//! for a round, runs it, and tells it what each run showed.
//!
//! The cost in the steady case is one second run per killed operator (and driver): its cheapest
//! killing cell (the one whose first mutated run took least: a mutant may wait out a driver's
//! timeout where the reference did not). Only when a kill does not hold is another tried
//! — the next killing cell, or the runs its kill left out, whose kills are confirmed in turn —
//! at most [`MAX_CONFIRMATIONS`] second runs per operator.

use super::CellMutant;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// Second runs one operator (on one driver) gets before it is settled as unsteady.
pub(crate) const MAX_CONFIRMATIONS: usize = 3;

/// A killing cell's second run under the same operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Again {
    /// The `mutation` records of its transcript.
    pub applied: usize,
    pub mutant: Option<String>,
}

/// The runs to make next: first runs of mutants (indices into the ledger's runs), and second
/// runs of killing ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Round {
    pub runs: Vec<usize>,
    pub again: Vec<usize>,
}

/// Where one operator (on one driver) stands between rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Standing {
    /// A second run killed again: settled.
    Confirmed,
    /// This killing run is to be made again.
    ToConfirm(usize),
    /// Its second runs are spent and none killed: settled as unsteady.
    Spent,
    /// No kill holds (yet): its runs go on.
    Open,
}

/// The book of one `harness mutate` over its rounds; `K` names an operator on a driver (what
/// one kill settles).
pub struct Ledger<K> {
    keys: Vec<K>,
    /// How long each first run took: the cheapest kill is the one made again.
    took: Vec<Duration>,
    first_kill: bool,
    first: Vec<Option<CellMutant>>,
    again: BTreeMap<usize, Again>,
    /// Runs not made: every one at the start, then those a kill left out.
    waiting: BTreeSet<usize>,
}

impl<K: Ord + Clone> Ledger<K> {
    /// `keys[i]`: run `i`'s operator on its driver. `first_kill`: an operator's runs are left
    /// out once one killed it.
    pub fn new(keys: Vec<K>, first_kill: bool) -> Self {
        Self {
            first: vec![None; keys.len()],
            took: vec![Duration::ZERO; keys.len()],
            waiting: (0..keys.len()).collect(),
            keys,
            first_kill,
            again: BTreeMap::new(),
        }
    }

    pub fn key(&self, run: usize) -> &K {
        &self.keys[run]
    }

    /// Whether runs of this operator are left out once one killed it.
    pub fn first_kill(&self) -> bool {
        self.first_kill
    }

    /// What the next round runs; `None` when every operator is settled or has nothing left to
    /// run. A run's first outcome and its second run never share a round, nor do an operator's
    /// first runs and a second run of its.
    pub fn next_round(&mut self) -> Option<Round> {
        let unsteady = self.unsteady_cells();
        let mut round = Round::default();
        let mut open = BTreeSet::new();
        let keys: BTreeSet<&K> = self.keys.iter().collect();
        for key in keys {
            match self.standing(key, &unsteady) {
                Standing::ToConfirm(run) => round.again.push(run),
                Standing::Open => {
                    open.insert(key.clone());
                }
                Standing::Confirmed | Standing::Spent => {}
            }
        }
        round.runs = self
            .waiting
            .iter()
            .copied()
            .filter(|&run| open.contains(&self.keys[run]))
            .collect();
        for run in &round.runs {
            self.waiting.remove(run);
        }
        (!round.runs.is_empty() || !round.again.is_empty()).then_some(round)
    }

    /// Run `run`'s first outcome and how long it took; `None`: it was left out (its operator
    /// killed in this round).
    pub fn ran(&mut self, run: usize, judged: Option<(CellMutant, Duration)>) {
        match judged {
            Some((judged, took)) => {
                self.first[run] = Some(judged);
                self.took[run] = took;
            }
            None => {
                self.waiting.insert(run);
            }
        }
    }

    /// Run `run`'s second outcome.
    pub fn ran_again(&mut self, run: usize, again: Again) {
        self.again.insert(run, again);
    }

    /// Every run's first outcome with its second attached (`None`: never run), and the second
    /// runs made.
    pub fn finish(self) -> (Vec<Option<CellMutant>>, usize) {
        let made = self.again.len();
        let mut again = self.again;
        let judged = self
            .first
            .into_iter()
            .enumerate()
            .map(|(run, judged)| {
                judged.map(|mut judged| {
                    judged.again = again.remove(&run);
                    judged
                })
            })
            .collect();
        (judged, made)
    }

    /// Cells that changed in a run where nothing was rewritten: their kills count for nothing.
    fn unsteady_cells(&self) -> BTreeSet<String> {
        self.with_again()
            .filter(|c| c.unsteady())
            .map(|c| c.cell.clone())
            .collect()
    }

    /// Each first outcome, its second attached.
    fn with_again(&self) -> impl Iterator<Item = CellMutant> + '_ {
        self.first.iter().enumerate().filter_map(|(run, judged)| {
            judged.clone().map(|mut judged| {
                judged.again = self.again.get(&run).cloned();
                judged
            })
        })
    }

    fn standing(&self, key: &K, unsteady: &BTreeSet<String>) -> Standing {
        let mut untried: Vec<usize> = Vec::new();
        let mut tried = 0;
        for (run, judged) in self.first.iter().enumerate() {
            let Some(judged) = judged else { continue };
            if &self.keys[run] != key || !judged.kills() || unsteady.contains(&judged.cell) {
                continue;
            }
            let mut judged = judged.clone();
            judged.again = self.again.get(&run).cloned();
            if judged.confirmed() {
                return Standing::Confirmed;
            }
            if judged.again.is_some() {
                tried += 1;
            } else {
                untried.push(run);
            }
        }
        if tried >= MAX_CONFIRMATIONS {
            return Standing::Spent;
        }
        // The cheapest kill first (stable: equal costs keep the runs' order).
        untried.sort_by_key(|&run| self.took[run]);
        untried
            .first()
            .map_or(Standing::Open, |&run| Standing::ToConfirm(run))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutate::{Mutant, Status};
    use tap::mutation::Operator;

    /// A scripted run: `cell` rewrote once and ended with `outcome` (the reference: `pass`).
    fn first_run(cell: &str, outcome: &str) -> CellMutant {
        CellMutant {
            cell: cell.into(),
            applied: 1,
            reference: Some("pass".into()),
            mutant: Some(outcome.into()),
            again: None,
        }
    }

    /// The pool's part, played in order: each round's second runs, then its first runs (left
    /// out once the round saw their operator kill, under first kill). `script(run, attempt)`
    /// is the outcome of a run's first (1) or second (2) making. What was made, in order.
    fn play(
        ledger: &mut Ledger<Operator>,
        cells: &[&str],
        took: &[u64],
        script: impl Fn(usize, u8) -> &'static str,
    ) -> Vec<(usize, u8)> {
        let mut made = Vec::new();
        while let Some(round) = ledger.next_round() {
            for &run in &round.again {
                made.push((run, 2));
                let again = second_run(script(run, 2));
                ledger.ran_again(run, again);
            }
            let mut killed_now = BTreeSet::new();
            for &run in &round.runs {
                let key = *ledger.key(run);
                if ledger.first_kill() && killed_now.contains(&key) {
                    ledger.ran(run, None);
                    continue;
                }
                made.push((run, 1));
                let judged = first_run(cells[run], script(run, 1));
                if judged.kills() {
                    killed_now.insert(key);
                }
                ledger.ran(run, Some((judged, Duration::from_millis(took[run]))));
            }
        }
        made
    }

    fn second_run(outcome: &str) -> Again {
        Again {
            applied: 1,
            mutant: Some(outcome.into()),
        }
    }

    fn judge(operator: Operator, judged: &[Option<CellMutant>], of: &[Operator]) -> Mutant {
        let cells = judged
            .iter()
            .zip(of)
            .filter(|(_, o)| **o == operator)
            .filter_map(|(j, _)| j.clone())
            .collect();
        Mutant::judge(operator, cells, Vec::new(), &BTreeSet::new())
    }

    #[test]
    fn a_kill_counts_once_a_second_run_of_its_cell_kills_again() {
        use Operator::{ApprovalNever as Steady, DropAnswers as Flaky, WidenSandbox as Rescued};
        // Runs 0–1: `Flaky`, whose only kill (cell a) does not come back. Runs 2–4: `Rescued`,
        // killed first by the flaky cell a, then (in the runs that kill left out) steadily by
        // c. Runs 5–6: `Steady`, killed by a every time.
        let of = [Flaky, Flaky, Rescued, Rescued, Rescued, Steady, Steady];
        let cells = ["a", "b", "a", "b", "c", "a", "b"];
        let mut ledger = Ledger::new(of.to_vec(), true);
        let took = [1, 2, 1, 2, 3, 1, 2];
        let made = play(&mut ledger, &cells, &took, |run, attempt| {
            match (run, attempt) {
                (0 | 2, 1) => "fail: answered",
                (0 | 2, 2) => "pass",
                (4, _) => "incomplete",
                (5, _) => "fail: exit-status",
                _ => "pass",
            }
        });
        let (judged, second_runs) = ledger.finish();

        let flaky = judge(Flaky, &judged, &of);
        assert_eq!(flaky.status, Status::Unsteady);
        assert!(flaky.killed_by.is_empty());
        assert_eq!(flaky.unconfirmed.len(), 1);
        assert_eq!(
            flaky.unconfirmed[0].describe(),
            "a (pass → fail: answered, then pass)",
            "the cell and both outcomes are named"
        );

        let rescued = judge(Rescued, &judged, &of);
        assert_eq!(rescued.status, Status::Killed, "{made:?}");
        assert_eq!(rescued.killed_by.len(), 1);
        assert_eq!(
            rescued.killed_by[0].describe(),
            "c (pass → incomplete, again incomplete)"
        );
        assert_eq!(rescued.unconfirmed[0].cell, "a");

        let steady = judge(Steady, &judged, &of);
        assert_eq!(steady.status, Status::Killed);
        assert!(steady.unconfirmed.is_empty());
        assert!(
            !made.contains(&(6, 1)),
            "a confirmed kill leaves the operator's other runs out: {made:?}"
        );
        // One second run per kill tried: a (Flaky), a then c (Rescued), a (Steady).
        assert_eq!(second_runs, 4, "{made:?}");
        assert!(made.contains(&(1, 1)) && made.contains(&(3, 1)), "{made:?}");

        let score = crate::mutate::score([&flaky, &rescued, &steady]);
        assert_eq!(score, Some(1.0), "an unsteady operator is not in the score");
    }

    #[test]
    fn the_cheapest_kill_is_confirmed_and_second_runs_are_bounded() {
        // Every run of one operator kills once and never again (--all-kills: all run first).
        let of = [Operator::DropAnswers; 5];
        let cells = ["a", "b", "c", "d", "e"];
        let mut ledger = Ledger::new(of.to_vec(), false);
        let made = play(&mut ledger, &cells, &[5, 1, 4, 2, 3], |_, attempt| {
            if attempt == 1 {
                "fail: answered"
            } else {
                "pass"
            }
        });
        let again: Vec<usize> = made.iter().filter(|m| m.1 == 2).map(|m| m.0).collect();
        assert_eq!(
            again,
            vec![1, 3, 4],
            "the quickest first runs first, {MAX_CONFIRMATIONS} at most"
        );
        let (judged, _) = ledger.finish();
        let mutant = judge(Operator::DropAnswers, &judged, &of);
        assert_eq!(mutant.status, Status::Unsteady);
        assert_eq!(
            mutant.unconfirmed.len(),
            5,
            "every kill is named, none counts"
        );
    }

    #[test]
    fn a_survivor_and_an_operator_that_applied_nowhere_get_no_second_run() {
        let of = [Operator::DropAnswers, Operator::ExitZero];
        let mut ledger = Ledger::new(of.to_vec(), true);
        let made = play(&mut ledger, &["a", "a"], &[0, 0], |_, _| "pass");
        assert_eq!(made, vec![(0, 1), (1, 1)]);
        let (judged, second_runs) = ledger.finish();
        assert_eq!(second_runs, 0);
        assert_eq!(
            judge(Operator::DropAnswers, &judged, &of).status,
            Status::Survived
        );
    }
}
