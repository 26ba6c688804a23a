//! Expansion of the suites into named cells, and every check that keeps the matrix honest.

use crate::baseline::{
    parse_verdict, Baseline, BaselineFile, Expectation, VerdictKind, SIGNED_VERDICTS,
};
use crate::spec::{CaseSpec, EnvironmentSpec, RunnerSpec, ScenarioRef, SuitesFile};
use crate::{scenario_file, SuitesError};
use graders::events::{CellId, Target};
use std::collections::{BTreeMap, BTreeSet};

/// One cell: its name and everything needed to run it.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    pub id: CellId,
    pub runner: RunnerSpec,
    pub environment: EnvironmentSpec,
    pub case: CaseSpec,
    /// The execution target the driver is told: the case's override, else the environment's.
    pub target: Target,
    pub expected: Expectation,
}

impl Cell {
    pub fn name(&self) -> String {
        self.id.to_string()
    }
}

/// The validated matrix: every cell of every suite, in a stable order (suite, runner,
/// environment, case as declared).
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    pub file: SuitesFile,
    pub baseline: Baseline,
    pub cells: Vec<Cell>,
}

fn check_name(what: &'static str, name: &str) -> Result<(), SuitesError> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(SuitesError::BadName {
            what,
            name: name.to_string(),
        })
    }
}

impl Matrix {
    /// Parse and validate a suites file and a baseline file.
    pub fn parse(suites_toml: &str, baseline_toml: &str) -> Result<Self, SuitesError> {
        let file: SuitesFile = toml::from_str(suites_toml).map_err(|e| SuitesError::Parse {
            file: "suites.toml".into(),
            message: e.to_string(),
        })?;
        let baseline_file: BaselineFile =
            toml::from_str(baseline_toml).map_err(|e| SuitesError::Parse {
                file: "baseline.toml".into(),
                message: e.to_string(),
            })?;
        let cells = expand(&file)?;
        let baseline = check_baseline(&cells, baseline_file)?;
        let cells = cells
            .into_iter()
            .map(|mut cell| {
                cell.expected = baseline.expectation(&cell.name());
                cell
            })
            .collect();
        Ok(Self {
            file,
            baseline,
            cells,
        })
    }

    pub fn cell(&self, name: &str) -> Option<&Cell> {
        self.cells.iter().find(|c| c.name() == name)
    }

    /// Cells whose name contains any of the filters (all cells when there is none), the way
    /// `cargo test FILTER` selects tests.
    pub fn select(&self, filters: &[String]) -> Vec<&Cell> {
        self.cells
            .iter()
            .filter(|cell| {
                let name = cell.name();
                filters.is_empty() || filters.iter().any(|f| name.contains(f.as_str()))
            })
            .collect()
    }

    pub fn suite_names(&self) -> impl Iterator<Item = &str> {
        self.file.suites.keys().map(String::as_str)
    }
}

fn expand(file: &SuitesFile) -> Result<Vec<Cell>, SuitesError> {
    for name in file.runners.keys() {
        check_name("runner", name)?;
    }
    for name in file.environments.keys() {
        check_name("environment", name)?;
    }
    for (name, runner) in &file.runners {
        use crate::spec::{AppServerKind, DriverKind};
        if (runner.app_server == AppServerKind::Codex) != runner.codex_version.is_some() {
            return Err(SuitesError::Invalid(format!(
                "runner `{name}`: `codex_version` is required for app_server = \"codex\" and only there"
            )));
        }
        if (runner.driver == DriverKind::Declared) != runner.declared.is_some() {
            return Err(SuitesError::Invalid(format!(
                "runner `{name}`: `declared` is required for driver = \"declared\" and only there"
            )));
        }
        if (runner.driver == DriverKind::External) != runner.driver_cmd.is_some() {
            return Err(SuitesError::Invalid(format!(
                "runner `{name}`: `driver_cmd` is required for driver = \"external\" and only there"
            )));
        }
    }
    let mut cells = Vec::new();
    for (suite_name, suite) in &file.suites {
        check_name("suite", suite_name)?;
        for (case_name, case) in &suite.cases {
            check_name("case", case_name)?;
            for scenario in std::iter::once(&case.scenario).chain(&case.codex_scenario) {
                match ScenarioRef::parse(scenario) {
                    Ok(ScenarioRef::File(path)) if scenario_file(&path).is_none() => {
                        return Err(SuitesError::Invalid(format!(
                            "case `{suite_name}.{case_name}`: scenario file `{path}` is not one of suites/scenarios (see suites::SCENARIO_FILES)"
                        )))
                    }
                    Ok(_) => {}
                    Err(e) => {
                        return Err(SuitesError::Invalid(format!(
                            "case `{suite_name}.{case_name}`: {e}"
                        )))
                    }
                }
            }
        }
        let mut seen = BTreeSet::new();
        let mut used_cases = BTreeSet::new();
        let before = cells.len();
        for block in &suite.matrix {
            for runner_name in &block.runners {
                let runner =
                    file.runners
                        .get(runner_name)
                        .ok_or_else(|| SuitesError::UnknownInMatrix {
                            suite: suite_name.clone(),
                            what: "runner",
                            name: runner_name.clone(),
                        })?;
                for env_name in &block.environments {
                    let environment = file.environments.get(env_name).ok_or_else(|| {
                        SuitesError::UnknownInMatrix {
                            suite: suite_name.clone(),
                            what: "environment",
                            name: env_name.clone(),
                        }
                    })?;
                    for case_name in &block.cases {
                        let case = suite.cases.get(case_name).ok_or_else(|| {
                            SuitesError::UnknownInMatrix {
                                suite: suite_name.clone(),
                                what: "case",
                                name: case_name.clone(),
                            }
                        })?;
                        let id = CellId::new(suite_name, runner_name, env_name, case_name);
                        if !seen.insert(id.clone()) {
                            return Err(SuitesError::DuplicateCell(id.to_string()));
                        }
                        used_cases.insert(case_name.clone());
                        cells.push(Cell {
                            id,
                            runner: runner.clone(),
                            environment: environment.clone(),
                            target: case.target.unwrap_or(environment.target),
                            case: case.clone(),
                            expected: Expectation::pass(),
                        });
                    }
                }
            }
        }
        let actual = cells.len() - before;
        if actual != suite.expected_cells {
            return Err(SuitesError::WrongSize {
                suite: suite_name.clone(),
                expected: suite.expected_cells,
                actual,
            });
        }
        if let Some(unused) = suite.cases.keys().find(|c| !used_cases.contains(*c)) {
            return Err(SuitesError::UnusedCase {
                suite: suite_name.clone(),
                case: unused.clone(),
            });
        }
    }
    Ok(cells)
}

fn check_baseline(cells: &[Cell], file: BaselineFile) -> Result<Baseline, SuitesError> {
    let names: BTreeSet<String> = cells.iter().map(Cell::name).collect();
    let mut entries = BTreeMap::new();
    for entry in file.expected {
        if let Err(e) = entry.cell.parse::<CellId>() {
            return Err(SuitesError::UnknownBaselineCell {
                cell: entry.cell,
                why: e.to_string(),
            });
        }
        if !names.contains(&entry.cell) {
            return Err(SuitesError::UnknownBaselineCell {
                why: "no suite's matrix expands to it".into(),
                cell: entry.cell,
            });
        }
        let Some(verdict) = parse_verdict(&entry.verdict) else {
            return Err(SuitesError::BadBaselineVerdict {
                cell: entry.cell,
                why: "not a verdict name (see graders::verdict::VerdictKind)".into(),
                verdict: entry.verdict,
            });
        };
        if verdict == VerdictKind::Pass {
            return Err(SuitesError::BadBaselineVerdict {
                cell: entry.cell,
                verdict: entry.verdict,
                why: "pass is the default; list only cells expected not to pass".into(),
            });
        }
        if entry.reason.trim().is_empty() {
            return Err(SuitesError::BadBaselineVerdict {
                cell: entry.cell,
                verdict: entry.verdict,
                why: "the reason is empty; say why this verdict is expected".into(),
            });
        }
        if SIGNED_VERDICTS.contains(&verdict) && entry.signature.is_none() {
            return Err(SuitesError::BadBaselineVerdict {
                cell: entry.cell,
                verdict: entry.verdict,
                why: "a signature decides this verdict; name the one expected (`signature = \"…\"`, a row of graders::signatures::SIGNATURES)".into(),
            });
        }
        if let Some(name) = &entry.signature {
            if !graders::signatures::SIGNATURES
                .iter()
                .any(|s| s.name == name)
            {
                return Err(SuitesError::BadBaselineVerdict {
                    cell: entry.cell.clone(),
                    verdict: entry.verdict.clone(),
                    why: format!(
                        "signature `{name}` is not a row of graders::signatures::SIGNATURES"
                    ),
                });
            }
        }
        let expectation = Expectation {
            verdict,
            reason: Some(entry.reason),
            signature: entry.signature,
        };
        if entries.insert(entry.cell.clone(), expectation).is_some() {
            return Err(SuitesError::DuplicateBaselineCell(entry.cell));
        }
    }
    Ok(Baseline { entries })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINI: &str = r#"
[runners.runner-fake]
about = "r"
driver = "reference"
app_server = "fake"
policy = "current"

[environments.local]
about = "e"
target = "local"

[environments.daytona]
about = "e"
target = "external-sandbox"

[suites.s]
about = "s"
expected_cells = 2

[suites.s.cases.c]
about = "c"
scenario = "builtin:healthy"
mode = "planning"
network = false

[[suites.s.matrix]]
runners = ["runner-fake"]
environments = ["local", "daytona"]
cases = ["c"]
"#;

    #[test]
    fn the_shipped_matrix_loads_and_every_suite_has_its_declared_size() {
        let matrix = crate::load().expect("shipped suites and baseline are valid");
        for (name, suite) in &matrix.file.suites {
            let n = matrix.cells.iter().filter(|c| &c.id.suite == name).count();
            assert_eq!(n, suite.expected_cells, "suite {name}");
        }
        for cell in &matrix.cells {
            assert_eq!(cell.name().parse::<CellId>().unwrap(), cell.id);
        }
        let names: BTreeSet<_> = matrix.cells.iter().map(Cell::name).collect();
        assert_eq!(names.len(), matrix.cells.len());
    }

    #[test]
    fn the_shipped_baseline_expects_the_documented_failures() {
        let matrix = crate::load().unwrap();
        let expect = |name: &str| matrix.cell(name).unwrap().expected.verdict.as_str();
        assert_eq!(
            expect("codex-planning-read-only.runner-fake-legacy.daytona.plan-write-refused"),
            "startup-rejected"
        );
        assert_eq!(
            expect("codex-planning-read-only.runner-fake.daytona-uidmap.plan-write-refused"),
            "sandbox-failed-to-start"
        );
        assert_eq!(
            expect("codex-planning-read-only.runner-fake.daytona.plan-write-refused"),
            "pass"
        );
    }

    #[test]
    fn targets_come_from_the_environment_unless_the_case_overrides_them() {
        let matrix = Matrix::parse(MINI, "").unwrap();
        let targets: Vec<_> = matrix.cells.iter().map(|c| c.target).collect();
        assert_eq!(targets, vec![Target::Local, Target::ExternalSandbox]);
        let shipped = crate::load().unwrap();
        let launch = shipped
            .cell("external-sandbox-launch.runner-fake.local.standard-launch")
            .unwrap();
        assert_eq!(launch.target, Target::ExternalSandbox);
    }

    #[test]
    fn a_matrix_of_another_size_than_declared_fails() {
        let text = MINI.replace("expected_cells = 2", "expected_cells = 3");
        assert_eq!(
            Matrix::parse(&text, ""),
            Err(SuitesError::WrongSize {
                suite: "s".into(),
                expected: 3,
                actual: 2
            })
        );
    }

    #[test]
    fn unknown_names_in_a_matrix_fail_naming_them() {
        let text = MINI.replace(
            r#"environments = ["local", "daytona"]"#,
            r#"environments = ["local", "dayton"]"#,
        );
        let err = Matrix::parse(&text, "").unwrap_err();
        assert!(
            err.to_string().contains("unknown environment `dayton`"),
            "{err}"
        );
    }

    #[test]
    fn a_dotted_name_fails_because_it_would_break_cell_names() {
        let text = MINI
            .replace("[runners.runner-fake]", "[runners.\"runner-codex-0.160\"]")
            .replace(
                r#"runners = ["runner-fake"]"#,
                r#"runners = ["runner-codex-0.160"]"#,
            );
        let err = Matrix::parse(&text, "").unwrap_err();
        assert!(matches!(err, SuitesError::BadName { .. }), "{err}");
    }

    #[test]
    fn a_duplicate_cell_fails() {
        let text = MINI
            .replace("expected_cells = 2", "expected_cells = 3")
            .replace(
                r#"["local", "daytona"]"#,
                r#"["local", "daytona", "local"]"#,
            );
        assert_eq!(
            Matrix::parse(&text, ""),
            Err(SuitesError::DuplicateCell("s.runner-fake.local.c".into()))
        );
    }

    #[test]
    fn an_unused_case_fails() {
        let text = format!(
            "{MINI}\n[suites.s.cases.orphan]\nabout = \"o\"\nscenario = \"builtin:healthy\"\nmode = \"ask\"\nnetwork = false\n"
        );
        assert!(matches!(
            Matrix::parse(&text, ""),
            Err(SuitesError::UnusedCase { .. })
        ));
    }

    #[test]
    fn a_baseline_entry_for_a_cell_that_does_not_exist_fails() {
        let baseline = "[[expected]]\ncell = \"s.runner-fake.container.c\"\nverdict = \"incomplete\"\nreason = \"r\"\n";
        let err = Matrix::parse(MINI, baseline).unwrap_err();
        assert!(
            matches!(err, SuitesError::UnknownBaselineCell { .. }),
            "{err}"
        );
        let malformed = baseline.replace("s.runner-fake.container.c", "s.runner-fake");
        assert!(matches!(
            Matrix::parse(MINI, &malformed),
            Err(SuitesError::UnknownBaselineCell { .. })
        ));
    }

    #[test]
    fn a_baseline_entry_must_name_a_real_non_pass_verdict_with_a_reason() {
        let entry = |verdict: &str, reason: &str| {
            format!("[[expected]]\ncell = \"s.runner-fake.daytona.c\"\nverdict = \"{verdict}\"\nreason = \"{reason}\"\n")
        };
        for bad in [
            entry("passed", "r"),
            entry("pass", "r"),
            entry("incomplete", " "),
        ] {
            assert!(matches!(
                Matrix::parse(MINI, &bad),
                Err(SuitesError::BadBaselineVerdict { .. })
            ));
        }
        let twice = format!("{}{}", entry("incomplete", "r"), entry("incomplete", "r"));
        assert!(matches!(
            Matrix::parse(MINI, &twice),
            Err(SuitesError::DuplicateBaselineCell(_))
        ));
        // A verdict a signature decides must name the signature, and a real one.
        for bad in [
            entry("startup-rejected", "because"),
            entry("sandbox-failed-to-start", "because")
                .replace("reason =", "signature = \"no-such-row\"\nreason ="),
        ] {
            assert!(
                matches!(
                    Matrix::parse(MINI, &bad),
                    Err(SuitesError::BadBaselineVerdict { .. })
                ),
                "{bad}"
            );
        }
        let pinned = entry("startup-rejected", "because")
            .replace("reason =", "signature = \"bwrap-uid-map\"\nreason =");
        let good = Matrix::parse(MINI, &pinned).unwrap();
        let expected = &good.cell("s.runner-fake.daytona.c").unwrap().expected;
        assert_eq!(expected.verdict, VerdictKind::StartupRejected);
        assert_eq!(expected.signature.as_deref(), Some("bwrap-uid-map"));
    }

    #[test]
    fn unknown_keys_fail_to_parse() {
        let text = MINI.replace("about = \"c\"", "about = \"c\"\nscenarioo = \"x\"");
        assert!(matches!(
            Matrix::parse(&text, ""),
            Err(SuitesError::Parse { .. })
        ));
    }

    #[test]
    fn selecting_works_like_a_cargo_test_filter() {
        let matrix = crate::load().unwrap();
        let exact_daytona = matrix.select(&[".daytona.".into()]);
        assert!(!exact_daytona.is_empty());
        assert!(exact_daytona.iter().all(|c| c.id.environment == "daytona"));
        let both = matrix.select(&["daytona".into()]);
        assert!(both.len() > exact_daytona.len());
        assert_eq!(matrix.select(&[]).len(), matrix.cells.len());
    }
}
