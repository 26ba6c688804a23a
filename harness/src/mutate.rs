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

pub mod expect;
pub mod fidelity;
pub mod predict;

pub use fidelity::{disagreements, Disagreement, FidelityChecked};

/// The folder of the reference run below the out folder (each operator's is its name).
pub const REFERENCE: &str = "unmutated";

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
}

impl CellMutant {
    /// `CELL (unmutated → mutated)`.
    pub fn describe(&self) -> String {
        format!("{} ({})", self.cell, self.change())
    }

    /// `unmutated → mutated` (`-`: no outcome).
    pub fn change(&self) -> String {
        format!(
            "{} → {}",
            self.reference.as_deref().unwrap_or("-"),
            self.mutant.as_deref().unwrap_or("-")
        )
    }

    /// The operator applied here and the cell noticed: its outcome changed.
    pub fn kills(&self) -> bool {
        self.applied > 0
            && self.reference.is_some()
            && self.mutant.is_some()
            && self.reference != self.mutant
    }

    /// The outcome changed though nothing was rewritten: the cell is not deterministic.
    pub fn unsteady(&self) -> bool {
        self.applied == 0
            && self.reference.is_some()
            && self.mutant.is_some()
            && self.reference != self.mutant
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Killed,
    Survived,
    NotApplicable,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Killed => "killed",
            Status::Survived => "survived",
            Status::NotApplicable => "not applicable",
        }
    }
}

/// One operator against one driver's cells.
#[derive(Debug, Clone, Serialize)]
pub struct Mutant {
    pub operator: String,
    pub bug: String,
    pub status: Status,
    /// The cells whose outcome changed where it applied.
    pub killed_by: Vec<CellMutant>,
    /// The cells where it applied.
    pub applied_in: Vec<String>,
    /// Cells whose outcome changed where it did not apply: a cell that varies from run to
    /// run, whose changes kill no operator.
    pub unsteady: Vec<CellMutant>,
    /// Cells where it was not run: their reference holds nothing it rewrites, so the mutant's
    /// run would have been the reference's ([`predict`]).
    pub predicted_untouched: Vec<String>,
    /// Cells where it would have run but was not: a cell had killed it already (first kill,
    /// the default; `--all-kills` runs them all).
    pub not_run_after_kill: Vec<String>,
}

impl Mutant {
    /// `operator` over the `cells` it ran in (`predicted_untouched`: those it was not run in);
    /// a cell in `unsteady` (its outcome changed in some run where nothing was rewritten) kills
    /// nothing: its change proves nothing about the operator.
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
        let killed_by: Vec<CellMutant> = cells
            .iter()
            .filter(|c| c.kills() && !unsteady.contains(&c.cell))
            .cloned()
            .collect();
        let status = if !killed_by.is_empty() {
            Status::Killed
        } else if applied_in.is_empty() {
            Status::NotApplicable
        } else {
            Status::Survived
        };
        Self {
            operator: operator.name().into(),
            bug: operator.bug().into(),
            status,
            killed_by,
            applied_in,
            unsteady: cells.into_iter().filter(CellMutant::unsteady).collect(),
            predicted_untouched,
            not_run_after_kill: Vec::new(),
        }
    }

    /// How a killed operator's detail ends: which kill this is, when a first kill left cells
    /// out (empty otherwise: every cell ran, the list is complete).
    pub fn first_kill_note(&self) -> String {
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

/// Killed / (killed + survived); `None` when no operator applied.
pub fn score<'a>(mutants: impl IntoIterator<Item = &'a Mutant>) -> Option<f64> {
    let (mut killed, mut survived) = (0usize, 0usize);
    for mutant in mutants {
        match mutant.status {
            Status::Killed => killed += 1,
            Status::Survived => survived += 1,
            Status::NotApplicable => {}
        }
    }
    (killed + survived > 0).then(|| killed as f64 / (killed + survived) as f64)
}

/// One driver (a runner of the matrix) under every operator.
#[derive(Debug, Clone, Serialize)]
pub struct DriverMutants {
    pub driver: String,
    pub cells: usize,
    pub score: Option<f64>,
    pub killed: usize,
    pub survived: usize,
    pub not_applicable: usize,
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

    /// What report.html's mutation section shows.
    pub fn section(&self) -> report::html::MutationSection {
        report::html::MutationSection {
            score: self.score,
            drivers: self
                .drivers
                .iter()
                .map(|d| report::html::MutationDriver {
                    driver: d.driver.clone(),
                    score: d.score,
                    operators: d
                        .operators
                        .iter()
                        .map(|m| report::html::MutationRow {
                            operator: m.operator.clone(),
                            bug: m.bug.clone(),
                            status: m.status.as_str().into(),
                            killed_by: m
                                .killed_by
                                .iter()
                                .map(|c| (c.cell.clone(), c.change()))
                                .collect(),
                            applied_in: m.applied_in.len(),
                            predicted_untouched: m.predicted_untouched.len(),
                            not_run_after_kill: m.not_run_after_kill.len(),
                        })
                        .collect(),
                })
                .collect(),
            fidelity: self
                .fidelity
                .as_ref()
                .map(|f| report::html::MutationFidelity {
                    pairs: f.pairs.clone(),
                    findings: f.findings.iter().map(|d| d.describe()).collect(),
                }),
        }
    }

    /// The terminal table: one row per driver per operator.
    pub fn table(&self) -> String {
        let mut out = String::new();
        for driver in &self.drivers {
            out.push_str(&format!(
                "{} ({} cells): score {} — {} killed, {} survived, {} not applicable\n",
                driver.driver,
                driver.cells,
                percent(driver.score),
                driver.killed,
                driver.survived,
                driver.not_applicable
            ));
            let width = driver
                .operators
                .iter()
                .map(|m| m.operator.len())
                .max()
                .unwrap_or(0);
            for mutant in &driver.operators {
                let detail = match mutant.status {
                    Status::Killed => {
                        let cells: Vec<String> =
                            mutant.killed_by.iter().map(CellMutant::describe).collect();
                        format!("by {}{}", cells.join(", "), mutant.first_kill_note())
                    }
                    Status::Survived => format!(
                        "applied in {} cells, no outcome changed: {}",
                        mutant.applied_in.len(),
                        mutant.bug
                    ),
                    Status::NotApplicable => format!(
                        "applied in no cell (in {} of them predicted from the reference, not run)",
                        mutant.predicted_untouched.len()
                    ),
                };
                out.push_str(&format!(
                    "  {:<width$}  {:<14}  {detail}\n",
                    mutant.operator,
                    mutant.status.as_str()
                ));
                for unsteady in &mutant.unsteady {
                    out.push_str(&format!(
                        "  {:<width$}  {:<14}  {} changed without a rewrite ({} → {}): it kills nothing\n",
                        "",
                        "unsteady",
                        unsteady.cell,
                        unsteady.reference.as_deref().unwrap_or("-"),
                        unsteady.mutant.as_deref().unwrap_or("-")
                    ));
                }
            }
        }
        if let Some(fidelity) = &self.fidelity {
            for [fake, real] in &fidelity.pairs {
                out.push_str(&format!("compared per operator: {fake} with {real}\n"));
            }
            for finding in &fidelity.findings {
                out.push_str(&finding.describe());
                out.push('\n');
            }
            if fidelity.findings.is_empty() {
                out.push_str("the fake and the real Codex agree on every operator\n");
            }
        }
        out.push_str(&format!(
            "mutation score {} ({} killed, {} survived); {} mutants run, {} predicted from the reference (nothing to rewrite there), not run{}\n",
            percent(self.score),
            self.killed(),
            self.survivors(),
            self.mutant_runs,
            self.predicted_untouched,
            if self.first_kill {
                format!(
                    ", {} not run after their operator's first kill (--all-kills runs them)",
                    self.not_run_after_kill
                )
            } else {
                String::new()
            }
        ));
        out
    }
}

fn percent(score: Option<f64>) -> String {
    score.map_or_else(|| "n/a".into(), |s| format!("{:.0}%", s * 100.0))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn cell(name: &str, applied: usize, reference: &str, mutant: &str) -> CellMutant {
        CellMutant {
            cell: name.into(),
            applied,
            reference: Some(reference.into()),
            mutant: Some(mutant.into()),
        }
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
