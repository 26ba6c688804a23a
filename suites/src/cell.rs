//! One cell of the matrix, and how matrix blocks expand into cells: every runner × environment
//! × case of a block, named `suite.runner.environment.case`, with the checks a case must pass
//! before it can become a cell (a name, scenarios that exist, a grader that knows it).

use crate::baseline::Expectation;
use crate::names::check_name;
use crate::spec::{
    CaseSpec, EnvironmentSpec, MatrixBlock, Profile, RunnerSpec, ScenarioRef, SuitesFile,
};
use crate::{scenario_file, SuitesError};
use graders::events::{CellId, Target};
use std::collections::BTreeSet;

/// One cell: its name and everything needed to run it.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub id: CellId,
    pub runner: RunnerSpec,
    pub environment: EnvironmentSpec,
    pub case: CaseSpec,
    /// The profile of the cell's suite: what a driver owes the protocol, or one runner's own
    /// contract.
    pub profile: Profile,
    /// The execution target the driver is told: the case's override, else the environment's.
    pub target: Target,
    pub expected: Expectation,
    /// Why the cell's driver cannot express its case (a mode it does not declare, a plan review
    /// loop or answers it cannot take), if so: the cell is reported not applicable with this
    /// reason — never run, never a pass, never dropped.
    pub not_applicable: Option<String>,
}

impl Cell {
    pub fn name(&self) -> String {
        self.id.to_string()
    }

    /// The case whose grader grades this cell: the case's `grade_as`, else its own name.
    pub fn grader_case(&self) -> &str {
        self.case.grade_as.as_deref().unwrap_or(&self.id.case)
    }
}

/// A case's name, its scenarios, and that a grader exists for it.
pub(crate) fn check_case(
    file: &str,
    suite_name: &str,
    case_name: &str,
    case: &CaseSpec,
) -> Result<(), SuitesError> {
    check_name(file, "case", case_name)?;
    let invalid = |message: String| SuitesError::Invalid {
        file: file.to_string(),
        message: format!("case `{suite_name}.{case_name}`: {message}"),
    };
    for scenario in std::iter::once(&case.scenario).chain(&case.codex_scenario) {
        match ScenarioRef::parse(scenario) {
            Ok(ScenarioRef::File(path)) if scenario_file(&path).is_none() => {
                return Err(invalid(format!(
                    "scenario file `{path}` is not one of suites/scenarios"
                )))
            }
            Ok(_) => {}
            Err(e) => return Err(invalid(e)),
        }
    }
    let grader = case.grade_as.as_deref().unwrap_or(case_name);
    if !graders::grade::CASES.contains(&(suite_name, grader)) {
        let known: Vec<&str> = graders::grade::CASES
            .iter()
            .filter(|(s, _)| *s == suite_name)
            .map(|(_, c)| *c)
            .collect();
        return Err(invalid(if known.is_empty() {
            format!("no grader knows suite `{suite_name}`")
        } else if case.grade_as.is_some() {
            format!(
                "grade_as = `{grader}` is not a case the graders know (known: {})",
                known.join(", ")
            )
        } else {
            format!(
                "the graders know no case `{grader}` in this suite: name a shipped case's grader with `grade_as` (known: {})",
                known.join(", ")
            )
        }));
    }
    Ok(())
}

/// Every runner × environment × case of one block of `suite_name`, named; an unknown name is
/// `(what, name)`.
pub(crate) fn cross(
    file: &SuitesFile,
    suite_name: &str,
    block: &MatrixBlock,
) -> Result<Vec<Cell>, (&'static str, String)> {
    let suite = &file.suites[suite_name];
    let mut cells = Vec::new();
    for runner_name in &block.runners {
        let runner = file
            .runners
            .get(runner_name)
            .ok_or(("runner", runner_name.clone()))?;
        for env_name in &block.environments {
            let environment = file
                .environments
                .get(env_name)
                .ok_or(("environment", env_name.clone()))?;
            for case_name in &block.cases {
                let case = suite
                    .cases
                    .get(case_name)
                    .ok_or(("case", case_name.clone()))?;
                cells.push(Cell {
                    id: CellId::new(suite_name, runner_name, env_name, case_name),
                    runner: runner.clone(),
                    environment: environment.clone(),
                    target: case.target.unwrap_or(environment.target),
                    case: case.clone(),
                    profile: suite.profile,
                    expected: Expectation::pass(),
                    not_applicable: None,
                });
            }
        }
    }
    Ok(cells)
}

/// Expand `blocks` of `suite_name` (its cases as declared in `file`) into cells, checking the
/// names, that they expand to `expected` cells, and that every case of `must_use` is used.
pub(crate) fn expand_blocks<'a>(
    source: &str,
    file: &SuitesFile,
    suite_name: &str,
    blocks: &[MatrixBlock],
    expected: Option<usize>,
    must_use: impl Iterator<Item = &'a String>,
) -> Result<Vec<Cell>, SuitesError> {
    let mut seen = BTreeSet::new();
    let mut cells = Vec::new();
    for block in blocks {
        let crossed = cross(file, suite_name, block).map_err(|(what, name)| {
            SuitesError::UnknownInMatrix {
                file: source.to_string(),
                suite: suite_name.to_string(),
                what,
                name,
            }
        })?;
        for cell in crossed {
            if !seen.insert(cell.id.clone()) {
                return Err(SuitesError::DuplicateCell {
                    file: source.to_string(),
                    cell: cell.name(),
                });
            }
            cells.push(cell);
        }
    }
    // The size is derived from the blocks; a declared size, where a file still gives one, is
    // checked (the cell list's snapshot is what keeps a cell from vanishing unnoticed).
    if let Some(expected) = expected.filter(|&n| n != cells.len()) {
        return Err(SuitesError::WrongSize {
            file: source.to_string(),
            suite: suite_name.to_string(),
            expected,
            actual: cells.len(),
        });
    }
    let used_cases: BTreeSet<&str> = cells.iter().map(|c| c.id.case.as_str()).collect();
    for case in must_use {
        if !used_cases.contains(case.as_str()) {
            return Err(SuitesError::UnusedCase {
                file: source.to_string(),
                suite: suite_name.to_string(),
                case: case.clone(),
            });
        }
    }
    Ok(cells)
}
