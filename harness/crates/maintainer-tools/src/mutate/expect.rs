//! Expected mutation scores, as data (`harness mutate --expect FILE`; this project's own:
//! `drivers/mutation.toml`): per driver, the operators that must be killed and the lowest score
//! accepted. A gate that requires them fails when a new case or grader, or a change of the
//! driver, lets one of those bugs through.
//!
//! Fails closed: an unknown operator, a driver the run does not select, an operator the run
//! leaves out, a score outside 0..=1 or an unknown key is an error before anything runs; an
//! operator expected killed that survived, applied nowhere (the gate lost that power either
//! way) **or is unsteady** (its kill did not come back in a second run: a power that does not
//! reproduce is none) is an unmet expectation.

use super::{MutationReport, Status};
use anyhow::{Context, Result};
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use tap::mutation::Operator;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    drivers: BTreeMap<String, RawDriver>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDriver {
    #[serde(default)]
    killed: Vec<String>,
    score: Option<f64>,
}

/// What one driver's mutation run must show.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DriverExpectation {
    /// Operators that must be killed.
    pub(crate) killed: BTreeSet<Operator>,
    /// The lowest score accepted.
    pub(crate) score: Option<f64>,
}

/// Expectations by driver (the runner's name, as `mutation.json` names it).
#[derive(Debug, Clone, PartialEq)]
pub struct Expectations {
    pub(crate) drivers: BTreeMap<String, DriverExpectation>,
}

impl Expectations {
    pub fn load(path: &Path) -> Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Self::parse(&text).with_context(|| format!("{}", path.display()))
    }

    pub(crate) fn parse(text: &str) -> Result<Self> {
        let file: File = toml::from_str(text)?;
        anyhow::ensure!(!file.drivers.is_empty(), "no [drivers.NAME] expectation");
        let mut drivers = BTreeMap::new();
        for (name, raw) in file.drivers {
            let killed = raw
                .killed
                .iter()
                .map(|op| op.parse::<Operator>())
                .collect::<Result<BTreeSet<_>, _>>()
                .map_err(|e| anyhow::anyhow!("drivers.{name}.killed: {e}"))?;
            if let Some(score) = raw.score {
                anyhow::ensure!(
                    (0.0..=1.0).contains(&score),
                    "drivers.{name}.score: {score} is not between 0 and 1"
                );
            }
            anyhow::ensure!(
                !killed.is_empty() || raw.score.is_some(),
                "drivers.{name}: expects nothing (give `killed` or `score`)"
            );
            drivers.insert(
                name,
                DriverExpectation {
                    killed,
                    score: raw.score,
                },
            );
        }
        Ok(Self { drivers })
    }

    /// Before the run: every driver expected is selected, every operator expected is run.
    pub fn check_selection(
        &self,
        drivers: &BTreeSet<String>,
        operators: &[Operator],
    ) -> Result<()> {
        for (name, expected) in &self.drivers {
            anyhow::ensure!(
                drivers.contains(name),
                "an expectation names driver `{name}`, which the selection does not run (it runs: {})",
                drivers.iter().cloned().collect::<Vec<_>>().join(", ")
            );
            if let Some(missing) = expected.killed.iter().find(|op| !operators.contains(op)) {
                anyhow::bail!(
                    "driver `{name}` is expected to kill `{missing}`, which this run leaves out (--operator)"
                );
            }
        }
        Ok(())
    }

    /// After the run: each unmet expectation, in words (none: every one is met).
    pub fn unmet(&self, report: &MutationReport) -> Vec<String> {
        let mut unmet = Vec::new();
        for (name, expected) in &self.drivers {
            let Some(driver) = report.drivers.iter().find(|d| &d.driver == name) else {
                unmet.push(format!(
                    "{name}: no outcome to compare (no cell of it ran to an outcome)"
                ));
                continue;
            };
            for operator in &expected.killed {
                let status = driver
                    .operators
                    .iter()
                    .find(|m| m.operator == operator.name())
                    .map(|m| m.status);
                match status {
                    Some(Status::Killed) => {}
                    Some(Status::Survived) => unmet.push(format!(
                        "{name}: `{operator}` is expected killed but survived: the selected cells no longer notice that {}",
                        operator.bug()
                    )),
                    Some(Status::Unsteady) => unmet.push(format!(
                        "{name}: `{operator}` is expected killed but is unsteady: no cell that killed it killed it again in a second run ({})",
                        unconfirmed(driver, *operator)
                    )),
                    Some(Status::NotApplicable) | None => unmet.push(format!(
                        "{name}: `{operator}` is expected killed but applied in no cell: the selection no longer exercises it"
                    )),
                }
            }
            if let Some(floor) = expected.score {
                match driver.score {
                    Some(score) if score + 1e-9 >= floor => {}
                    Some(score) => unmet.push(format!(
                        "{name}: score {:.0}% is below the expected {:.0}%",
                        score * 100.0,
                        floor * 100.0
                    )),
                    None => unmet.push(format!(
                        "{name}: no score (no operator applied), {:.0}% expected",
                        floor * 100.0
                    )),
                }
            }
        }
        unmet
    }

    /// Unsteady operators that no expectation names: not failed, but said (their cells vary
    /// from run to run).
    pub fn unsteady_unnamed(&self, report: &MutationReport) -> Vec<String> {
        let mut out = Vec::new();
        for driver in &report.drivers {
            let expected = self.drivers.get(&driver.driver);
            for mutant in &driver.operators {
                let named = expected
                    .is_some_and(|e| e.killed.iter().any(|op| op.name() == mutant.operator));
                if mutant.status == Status::Unsteady && !named {
                    out.push(format!(
                        "{}: `{}` ({})",
                        driver.driver,
                        mutant.operator,
                        mutant
                            .unconfirmed
                            .iter()
                            .map(|c| c.describe())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
            }
        }
        out
    }

    /// Operators killed that no expectation names: the expectation could be raised.
    pub fn unclaimed(&self, report: &MutationReport) -> Vec<String> {
        let mut out = Vec::new();
        for driver in &report.drivers {
            let Some(expected) = self.drivers.get(&driver.driver) else {
                continue;
            };
            for mutant in &driver.operators {
                let named = expected
                    .killed
                    .iter()
                    .any(|op| op.name() == mutant.operator);
                if mutant.status == Status::Killed && !named {
                    out.push(format!("{}: {}", driver.driver, mutant.operator));
                }
            }
        }
        out
    }
}

/// The cells that killed `operator` once and not again, with both outcomes.
fn unconfirmed(driver: &super::DriverMutants, operator: Operator) -> String {
    driver
        .operators
        .iter()
        .filter(|m| m.operator == operator.name())
        .flat_map(|m| &m.unconfirmed)
        .map(|c| c.describe())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutate::{CellMutant, DriverMutants, Mutant};

    fn report(status: &[(Operator, usize, bool)]) -> MutationReport {
        let operators: Vec<Mutant> = status
            .iter()
            .map(|&(op, applied, changed)| {
                let cell = CellMutant {
                    cell: "s.mini.local.c".into(),
                    applied,
                    reference: Some("pass".into()),
                    mutant: Some(if changed { "fail: x" } else { "pass" }.into()),
                    again: changed.then(|| crate::mutate::confirm::Again {
                        applied,
                        mutant: Some("fail: x".into()),
                    }),
                };
                Mutant::judge(op, vec![cell], Vec::new(), &BTreeSet::new())
            })
            .collect();
        let driver = DriverMutants::new("mini", 1, operators);
        MutationReport {
            app_server: Some("fake".into()),
            operators: Vec::new(),
            cells: 1,
            score: driver.score,
            drivers: vec![driver],
            runs_ms: BTreeMap::new(),
            mutant_runs: 0,
            predicted_untouched: 0,
            confirmation_runs: 0,
            first_kill: false,
            not_run_after_kill: 0,
            fidelity: None,
            expectations: None,
        }
    }

    #[test]
    fn bad_expectations_are_refused_by_name() {
        let unknown = Expectations::parse("[drivers.mini]\nkilled = [\"approve-all\"]\n");
        assert!(
            format!("{:#}", unknown.unwrap_err()).contains("approve-all"),
            "an unknown operator is named"
        );
        for bad in [
            "[drivers.mini]\nscore = 1.5\n",
            "[drivers.mini]\n",
            "[drivers.mini]\nkiled = [\"drop-answers\"]\n",
            "drivers = {}\n",
        ] {
            assert!(Expectations::parse(bad).is_err(), "{bad}");
        }
        let expected =
            Expectations::parse("[drivers.mini]\nkilled = [\"drop-answers\"]\n").unwrap();
        let selected = BTreeSet::from(["other".to_string()]);
        let err = expected
            .check_selection(&selected, &Operator::ALL)
            .unwrap_err();
        assert!(format!("{err:#}").contains("`mini`"), "{err:#}");
        let selected = BTreeSet::from(["mini".to_string()]);
        assert!(expected
            .check_selection(&selected, &[Operator::ExitZero])
            .is_err());
        expected.check_selection(&selected, &Operator::ALL).unwrap();
    }

    #[test]
    fn a_survivor_or_an_unexercised_operator_expected_killed_is_unmet() {
        let expected = Expectations::parse(
            "[drivers.mini]\nkilled = [\"drop-answers\", \"approval-never\", \"drop-initialized\"]\nscore = 1.0\n",
        )
        .unwrap();
        let all_killed = report(&[
            (Operator::DropAnswers, 1, true),
            (Operator::ApprovalNever, 1, true),
            (Operator::DropInitialized, 1, true),
            (Operator::ExitZero, 1, true),
        ]);
        assert_eq!(expected.unmet(&all_killed), Vec::<String>::new());
        assert_eq!(expected.unclaimed(&all_killed), vec!["mini: exit-zero"]);
        let weaker = report(&[
            (Operator::DropAnswers, 1, true),
            (Operator::ApprovalNever, 1, false),
            (Operator::DropInitialized, 0, false),
        ]);
        let unmet = expected.unmet(&weaker);
        assert_eq!(unmet.len(), 3, "{unmet:?}");
        assert!(unmet[0].contains("`approval-never`") && unmet[0].contains("survived"));
        assert!(unmet[1].contains("`drop-initialized`") && unmet[1].contains("no cell"));
        assert!(unmet[2].contains("below"), "{unmet:?}");
    }

    #[test]
    fn an_unsteady_operator_expected_killed_is_unmet_and_one_unnamed_is_said() {
        let expected =
            Expectations::parse("[drivers.mini]\nkilled = [\"drop-answers\"]\nscore = 1.0\n")
                .unwrap();
        let mut flaky = report(&[
            (Operator::DropAnswers, 1, true),
            (Operator::ApprovalNever, 1, true),
        ]);
        let rejudged = flaky.drivers[0]
            .operators
            .iter()
            .map(|mutant| {
                let mut cells = mutant.killed_by.clone();
                cells[0].again = Some(crate::mutate::confirm::Again {
                    applied: 1,
                    mutant: Some("pass".into()),
                });
                let operator = mutant.operator.parse().unwrap();
                Mutant::judge(operator, cells, Vec::new(), &BTreeSet::new())
            })
            .collect();
        flaky.drivers[0] = DriverMutants::new("mini", 1, rejudged);
        let unmet = expected.unmet(&flaky);
        assert_eq!(unmet.len(), 2, "{unmet:?}");
        assert!(
            unmet[0].contains("`drop-answers` is expected killed but is unsteady")
                && unmet[0].contains("s.mini.local.c (pass → fail: x, then pass)"),
            "{unmet:?}"
        );
        assert!(unmet[1].contains("no score"), "nothing counted: {unmet:?}");
        assert_eq!(
            expected.unsteady_unnamed(&flaky),
            vec!["mini: `approval-never` (s.mini.local.c (pass → fail: x, then pass))"]
        );
    }
}
