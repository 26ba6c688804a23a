//! How a mutation run is shown: the terminal's table and report.html's mutation section.

use super::{CellMutant, MutationReport, Status};

impl MutationReport {
    /// What report.html's mutation section shows.
    pub fn section(&self) -> report::html::MutationSection {
        let changes = |cells: &[CellMutant]| -> Vec<(String, String)> {
            cells.iter().map(|c| (c.cell.clone(), c.change())).collect()
        };
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
                            killed_by: changes(&m.killed_by),
                            unconfirmed: changes(&m.unconfirmed),
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
                "{} ({} cells): score {} — {} killed, {} survived, {} unsteady (not counted), {} not applicable\n",
                driver.driver,
                driver.cells,
                percent(driver.score),
                driver.killed,
                driver.survived,
                driver.unsteady,
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
                    Status::Unsteady => {
                        "killed once, not again in a second run: neither killed nor survived"
                            .to_string()
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
                for unconfirmed in &mutant.unconfirmed {
                    out.push_str(&format!(
                        "  {:<width$}  {:<14}  {}: its kill is not reproduced\n",
                        "",
                        "unconfirmed",
                        unconfirmed.describe()
                    ));
                }
                for unsteady in &mutant.unsteady {
                    out.push_str(&format!(
                        "  {:<width$}  {:<14}  {} changed without a rewrite ({} → {}): it kills nothing\n",
                        "",
                        "unsteady cell",
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
                out.push_str(
                    "the fake and the real Codex agree on every operator (confirmed statuses)\n",
                );
            }
        }
        out.push_str(&format!(
            "mutation score {} ({} killed, {} survived; {} unsteady, not counted); {} mutants run, {} second runs of killing cells, {} predicted from the reference (nothing to rewrite there), not run{}\n",
            percent(self.score),
            self.killed(),
            self.survivors(),
            self.unsteady(),
            self.mutant_runs,
            self.confirmation_runs,
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
