//! `harness mutate`: how many realistic bugs of a driver the selected cells would notice. The
//! cells run once as they are (the reference), then once per mutation operator
//! (`tap::mutation`), the driver's bytes rewritten by the recorder on their way to the
//! app-server. Per driver, per operator: **killed** when some cell where the operator applied
//! ends otherwise (its verdict, or the check that failed) than in the reference; **survived**
//! when it applied somewhere and nothing changed; **not applicable** when it applied nowhere.
//! The score is killed / (killed + survived). See `docs/mutate.md`.
//!
//! Whether an operator applied in a cell is read from the cell's transcript (its `mutation`
//! records), the evidence the recorder wrote: the same file a reader of the mutant's evidence
//! sees. Whether it would apply at all is read from the reference first ([`predict`]): a
//! mutant whose reference holds nothing to rewrite is not run.

use anyhow::{Context, Result};
use report::layout::CellEvidence;
use report::outcome::{CellOutcome, CellResult};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use tap::mutation::Operator;

pub mod confirm;
pub mod expect;
pub(crate) mod fidelity;
pub mod predict;
mod table;

pub(crate) use confirm::Again;
pub use fidelity::{disagreements, Disagreement, FidelityChecked};

/// The folder of the reference run below the out folder (each operator's is its name).
pub const REFERENCE: &str = "unmutated";

/// The folder of the second runs of killing cells below the out folder (then one per operator).
pub const AGAIN: &str = "again";

/// How a cell ended, as `harness mutate` compares it: the verdict, and the check that failed
/// (`check \`NAME\` failed: …`, what `verdict.json` records), or why it has none.
pub fn outcome(result: &CellResult) -> Option<String> {
    match &result.outcome {
        CellOutcome::Graded { verdict, .. } => {
            let check = verdict
                .reason
                .strip_prefix("check `")
                .and_then(|rest| rest.split_once('`'))
                .map(|(check, _)| check);
            Some(match check {
                Some(check) => format!("{}: {check}", verdict.verdict),
                None => verdict.verdict.to_string(),
            })
        }
        // The harness could not grade the run: an outcome too (a mutant may cause it).
        CellOutcome::Error { .. } => Some("error".into()),
        // Never ran here: nothing to compare.
        CellOutcome::Ignored { .. } | CellOutcome::NotApplicable { .. } => None,
    }
}

/// How many `mutation` records the cell's transcript holds (0 when it has none, or no
/// transcript: the cell never reached its driver). Only lines naming a mutation are parsed: a
/// streamed turn's transcript runs to tens of megabytes, and the graders have read it whole.
pub fn applications(out_root: &Path, cell: &str) -> Result<usize> {
    #[derive(serde::Deserialize)]
    struct Kind {
        kind: Option<String>,
    }
    let path = CellEvidence::of(out_root, cell).transcript();
    let Some(text) =
        graders::evidence_file::read(&path, graders::evidence_file::MAX_STREAMED_BYTES)?
    else {
        return Ok(0);
    };
    let mut count = 0;
    let mut next_line = 0;
    for hit in memchr::memmem::find_iter(&text, b"mutation") {
        if hit < next_line {
            continue;
        }
        let start = memchr::memrchr(b'\n', &text[..hit]).map_or(0, |at| at + 1);
        let end = memchr::memchr(b'\n', &text[hit..]).map_or(text.len(), |at| hit + at);
        next_line = end;
        let record: Kind = serde_json::from_slice(&text[start..end])
            .with_context(|| format!("{}: a line at byte {start}", path.display()))?;
        count += usize::from(record.kind.as_deref() == Some("mutation"));
    }
    Ok(count)
}

/// One cell under one operator, run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CellMutant {
    pub cell: String,
    /// The `mutation` records of its transcript.
    pub applied: usize,
    pub reference: Option<String>,
    pub mutant: Option<String>,
    /// Its second run, made when this one killed ([`confirm`]): the kill counts only when the
    /// second run kills too.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub again: Option<Again>,
}

impl CellMutant {
    /// `CELL (unmutated → mutated[, again → …])`.
    pub(crate) fn describe(&self) -> String {
        format!("{} ({})", self.cell, self.change())
    }

    /// `unmutated → mutated` (`-`: no outcome), and the second run's outcome when it was made.
    pub(crate) fn change(&self) -> String {
        let mut change = format!(
            "{} → {}",
            self.reference.as_deref().unwrap_or("-"),
            self.mutant.as_deref().unwrap_or("-")
        );
        if let Some(again) = &self.again {
            let how = if self.confirmed() { "again" } else { "then" };
            change.push_str(&format!(
                ", {how} {}",
                again.mutant.as_deref().unwrap_or("-")
            ));
        }
        change
    }

    /// The operator applied here and the cell noticed: its outcome changed.
    pub fn kills(&self) -> bool {
        changed(self.applied, &self.reference, &self.mutant)
    }

    /// It killed, and its second run killed too.
    pub(crate) fn confirmed(&self) -> bool {
        self.kills()
            && self
                .again
                .as_ref()
                .is_some_and(|again| changed(again.applied, &self.reference, &again.mutant))
    }

    /// The outcome changed though nothing was rewritten (in either run): the cell is not
    /// deterministic.
    pub fn unsteady(&self) -> bool {
        let without_rewrite = |applied: usize, mutant: &Option<String>| {
            applied == 0 && changed(1, &self.reference, mutant)
        };
        without_rewrite(self.applied, &self.mutant)
            || self
                .again
                .as_ref()
                .is_some_and(|again| without_rewrite(again.applied, &again.mutant))
    }
}

/// Whether a run that rewrote `applied` lines ended otherwise than the reference.
fn changed(applied: usize, reference: &Option<String>, mutant: &Option<String>) -> bool {
    applied > 0 && reference.is_some() && mutant.is_some() && reference != mutant
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Status {
    Killed,
    Survived,
    NotApplicable,
    /// Some cell killed it once, and no second run of a killing cell killed it again: neither
    /// killed nor survived, and not in the score.
    Unsteady,
}

impl Status {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Killed => "killed",
            Status::Survived => "survived",
            Status::NotApplicable => "not applicable",
            Status::Unsteady => "unsteady",
        }
    }
}

/// One operator against one driver's cells.
#[derive(Debug, Clone, Serialize)]
pub struct Mutant {
    pub(crate) operator: String,
    pub(crate) bug: String,
    pub(crate) status: Status,
    /// The cells whose outcome changed where it applied, when one of them changed again in a
    /// second run (the others were not run again; [`confirm`]).
    pub(crate) killed_by: Vec<CellMutant>,
    /// Cells that killed it once and not in their second run (or, when it is unsteady, were
    /// not run again): no kill of theirs counts.
    pub(crate) unconfirmed: Vec<CellMutant>,
    /// The cells where it applied.
    pub(crate) applied_in: Vec<String>,
    /// Cells whose outcome changed where it did not apply: a cell that varies from run to
    /// run, whose changes kill no operator.
    pub(crate) unsteady: Vec<CellMutant>,
    /// Cells where it was not run: their reference holds nothing it rewrites, so the mutant's
    /// run would have been the reference's ([`predict`]).
    pub(crate) predicted_untouched: Vec<String>,
    /// Cells where it would have run but was not: a cell had killed it already (first kill,
    /// the default; `--all-kills` runs them all).
    pub not_run_after_kill: Vec<String>,
}

impl Mutant {
    /// `operator` over the `cells` it ran in (`predicted_untouched`: those it was not run in).
    /// A kill counts when its cell's second run killed too; a cell in `unsteady` (its outcome
    /// changed in some run where nothing was rewritten) kills nothing: its change proves
    /// nothing about the operator.
    pub fn judge(
        operator: Operator,
        cells: Vec<CellMutant>,
        predicted_untouched: Vec<String>,
        unsteady: &BTreeSet<String>,
    ) -> Self {
        let applied_in: Vec<String> = cells
            .iter()
            .filter(|c| c.applied > 0)
            .map(|c| c.cell.clone())
            .collect();
        let killers: Vec<&CellMutant> = cells
            .iter()
            .filter(|c| c.kills() && !unsteady.contains(&c.cell))
            .collect();
        let status = if killers.iter().any(|c| c.confirmed()) {
            Status::Killed
        } else if !killers.is_empty() {
            Status::Unsteady
        } else if applied_in.is_empty() {
            Status::NotApplicable
        } else {
            Status::Survived
        };
        // Killed: every killer but those whose second run did not kill (the others were not
        // run again). Unsteady: no killer counts.
        let (killed_by, unconfirmed): (Vec<CellMutant>, Vec<CellMutant>) = killers
            .into_iter()
            .cloned()
            .partition(|c| status == Status::Killed && (c.confirmed() || c.again.is_none()));
        Self {
            operator: operator.name().into(),
            bug: operator.bug().into(),
            status,
            killed_by,
            unconfirmed,
            applied_in,
            unsteady: cells.into_iter().filter(CellMutant::unsteady).collect(),
            predicted_untouched,
            not_run_after_kill: Vec::new(),
        }
    }

    /// How a killed operator's detail ends: which kill this is, when a first kill left cells
    /// out (empty otherwise: every cell ran, the list is complete).
    pub(crate) fn first_kill_note(&self) -> String {
        if self.not_run_after_kill.is_empty() {
            String::new()
        } else {
            format!(
                " (first kill; {} cells not run)",
                self.not_run_after_kill.len()
            )
        }
    }
}

/// The order of the mutants' runs when an operator stops at its first kill: each operator's
/// runs shortest first (by the reference's duration: as PIT orders a mutant's covering tests
/// by speed, a kill found early costs the least), the operators interleaved (each one's first,
/// then each one's second, …) so that every operator's likeliest quick killer runs before any
/// operator's slow tail. `runs` are (operator, the cell's reference duration); the answer is
/// indices into them.
pub fn first_kill_order(runs: &[(Operator, std::time::Duration)]) -> Vec<usize> {
    let mut queues: BTreeMap<Operator, Vec<usize>> = BTreeMap::new();
    for (index, (operator, _)) in runs.iter().enumerate() {
        queues.entry(*operator).or_default().push(index);
    }
    for queue in queues.values_mut() {
        // Stable: cells as long as each other keep the caller's order.
        queue.sort_by_key(|&i| runs[i].1);
    }
    let rounds = queues.values().map(Vec::len).max().unwrap_or(0);
    (0..rounds)
        .flat_map(|round| {
            queues
                .values()
                .filter_map(move |queue| queue.get(round).copied())
        })
        .collect()
}

/// Killed / (killed + survived); `None` when no operator applied. An unsteady operator is in
/// neither (its count is beside the score).
pub fn score<'a>(mutants: impl IntoIterator<Item = &'a Mutant>) -> Option<f64> {
    let (mut killed, mut survived) = (0usize, 0usize);
    for mutant in mutants {
        match mutant.status {
            Status::Killed => killed += 1,
            Status::Survived => survived += 1,
            Status::NotApplicable | Status::Unsteady => {}
        }
    }
    (killed + survived > 0).then(|| killed as f64 / (killed + survived) as f64)
}

/// One driver (a runner of the matrix) under every operator.
#[derive(Debug, Clone, Serialize)]
pub struct DriverMutants {
    pub(crate) driver: String,
    pub(crate) cells: usize,
    pub(crate) score: Option<f64>,
    pub(crate) killed: usize,
    pub(crate) survived: usize,
    pub(crate) not_applicable: usize,
    /// Operators whose kills no second run reproduced: not in the score.
    pub(crate) unsteady: usize,
    pub operators: Vec<Mutant>,
}

impl DriverMutants {
    pub fn new(driver: &str, cells: usize, operators: Vec<Mutant>) -> Self {
        let count = |status| operators.iter().filter(|m| m.status == status).count();
        Self {
            driver: driver.into(),
            cells,
            score: score(&operators),
            killed: count(Status::Killed),
            survived: count(Status::Survived),
            not_applicable: count(Status::NotApplicable),
            unsteady: count(Status::Unsteady),
            operators,
        }
    }
}

/// `mutation.json`.
#[derive(Debug, Clone, Serialize)]
pub struct MutationReport {
    pub app_server: Option<String>,
    pub operators: Vec<String>,
    pub cells: usize,
    /// Every driver's operators together.
    pub score: Option<f64>,
    pub drivers: Vec<DriverMutants>,
    /// Wall time of the reference run (`unmutated`) and of the mutants' pool (`mutants`), in ms.
    pub runs_ms: BTreeMap<String, u64>,
    /// Mutants run (operator × cell), and those not run because their reference holds nothing
    /// the operator rewrites.
    pub mutant_runs: usize,
    pub predicted_untouched: usize,
    /// Second runs of killing cells ([`confirm`]): what confirming the kills cost.
    pub confirmation_runs: usize,
    /// Whether an operator stopped at its first kill (the default), and the mutants that left
    /// out (each operator's `not_run_after_kill`).
    pub first_kill: bool,
    pub not_run_after_kill: usize,
    /// `--fidelity`: the fake and real-Codex runners compared (each pair `[fake, real]`), and
    /// every operator killed on one and survived on the other: a finding about the fake.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fidelity: Option<FidelityChecked>,
    /// The expectations checked (`--expect`): what was not met, and operators killed that none
    /// names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expectations: Option<ExpectationsChecked>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ExpectationsChecked {
    pub file: String,
    pub unmet: Vec<String>,
    pub unclaimed: Vec<String>,
}

impl MutationReport {
    pub fn survivors(&self) -> usize {
        self.drivers.iter().map(|d| d.survived).sum()
    }

    pub fn killed(&self) -> usize {
        self.drivers.iter().map(|d| d.killed).sum()
    }

    pub fn unsteady(&self) -> usize {
        self.drivers.iter().map(|d| d.unsteady).sum()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A cell run under an operator; when it killed, its second run killed alike (a steady
    /// cell).
    pub(crate) fn cell(name: &str, applied: usize, reference: &str, mutant: &str) -> CellMutant {
        let mut cell = CellMutant {
            cell: name.into(),
            applied,
            reference: Some(reference.into()),
            mutant: Some(mutant.into()),
            again: None,
        };
        if cell.kills() {
            cell.again = Some(Again {
                applied,
                mutant: cell.mutant.clone(),
            });
        }
        cell
    }

    #[test]
    fn an_operator_is_killed_only_by_a_cell_where_it_applied() {
        let steady = BTreeSet::new();
        let killed = Mutant::judge(
            Operator::DropAnswers,
            vec![
                cell("a", 1, "pass", "fail: session-continued"),
                cell("b", 0, "pass", "pass"),
            ],
            Vec::new(),
            &steady,
        );
        assert_eq!(killed.status, Status::Killed);
        assert_eq!(killed.killed_by.len(), 1);
        let survived = Mutant::judge(
            Operator::DropAnswers,
            vec![
                cell("a", 2, "pass", "pass"),
                cell("b", 0, "pass", "incomplete"),
            ],
            Vec::new(),
            &steady,
        );
        assert_eq!(
            survived.status,
            Status::Survived,
            "b changed without a rewrite"
        );
        assert_eq!(survived.unsteady.len(), 1);
        let none = Mutant::judge(
            Operator::DropAnswers,
            vec![cell("a", 0, "pass", "pass")],
            vec!["b".into()],
            &steady,
        );
        let unsteady = BTreeSet::from(["a".to_string()]);
        let doubtful = Mutant::judge(
            Operator::DropAnswers,
            vec![cell("a", 1, "pass", "incomplete")],
            Vec::new(),
            &unsteady,
        );
        assert_eq!(
            doubtful.status,
            Status::Survived,
            "a cell seen changing on its own kills nothing"
        );
        assert_eq!(none.status, Status::NotApplicable);
        assert_eq!(score([&killed, &survived, &none]), Some(0.5));
        assert_eq!(score([&none]), None);
    }

    #[test]
    fn first_kill_runs_each_operators_shortest_cells_first_operators_interleaved() {
        use std::time::Duration;
        let ms = Duration::from_millis;
        let runs = [
            (Operator::DropAnswers, ms(900)),
            (Operator::DropAnswers, ms(100)),
            (Operator::ExitZero, ms(500)),
            (Operator::DropAnswers, ms(300)),
            (Operator::ApproveEverything, ms(50)),
        ];
        // Operators in their own order (approve-everything, drop-answers, exit-zero), each
        // one's shortest cell in the first round.
        assert_eq!(first_kill_order(&runs), vec![4, 1, 2, 3, 0]);
        assert!(first_kill_order(&[]).is_empty());
    }

    #[test]
    fn a_killed_operator_says_when_its_list_stops_at_the_first_kill() {
        let mut killed = Mutant::judge(
            Operator::DropAnswers,
            vec![cell("a", 1, "pass", "fail: answered")],
            Vec::new(),
            &BTreeSet::new(),
        );
        assert_eq!(
            killed.first_kill_note(),
            "",
            "every cell ran: the list is whole"
        );
        killed.not_run_after_kill = vec!["b".into(), "c".into()];
        assert_eq!(killed.first_kill_note(), " (first kill; 2 cells not run)");
    }

    #[test]
    fn the_outcome_is_the_verdict_and_the_check_that_failed() {
        use graders::verdict::{Verdict, VerdictKind};
        let graded = |kind, reason: &str| CellResult {
            cell: "s.r.local.c".parse().unwrap(),
            expected: suites::Expectation::pass(),
            outcome: CellOutcome::Graded {
                verdict: Verdict::new(kind, reason, Vec::new()),
                agreement: suites::Agreement::AsExpected,
            },
            duration: std::time::Duration::ZERO,
            evidence_dir: std::path::PathBuf::new(),
            earlier_attempts: Vec::new(),
            profile: None,
        };
        let failed = graded(
            VerdictKind::Fail,
            "check `exit-status` failed: status 0 after x",
        );
        assert_eq!(outcome(&failed).as_deref(), Some("fail: exit-status"));
        let passed = graded(VerdictKind::Pass, "refused as it should");
        assert_eq!(outcome(&passed).as_deref(), Some("pass"));
    }
}
