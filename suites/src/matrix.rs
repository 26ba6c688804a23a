//! Expansion of the suites into named cells, and every check that keeps the matrix honest.
//!
//! The matrix is built at run time: the shipped `suites.toml` and `baseline.toml`, plus what
//! `harness run` adds ([`Extras`]: a user's drivers file, `--codex` versions; see
//! [`crate::generate`]).

use crate::baseline::{
    parse_verdict, Baseline, BaselineEntry, BaselineFile, Expectation, VerdictKind, SIGNED_VERDICTS,
};
use crate::drivers::DriversFile;
use crate::spec::{CaseSpec, EnvironmentSpec, MatrixBlock, RunnerSpec, ScenarioRef, SuitesFile};
use crate::{scenario_file, SuitesError};
use graders::events::{CellId, Mode, Target};
use std::collections::{BTreeMap, BTreeSet};

/// How messages name the shipped files.
pub const SUITES_FILE: &str = "suites.toml";
pub const BASELINE_FILE: &str = "baseline.toml";

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

/// What is added to the shipped suites at run time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Extras {
    /// The user's drivers file (`harness run --drivers FILE`).
    pub drivers: Option<DriversFile>,
    /// More real-Codex versions (`harness run --codex VERSION`, repeatable).
    pub codex_versions: Vec<String>,
}

/// The validated matrix: every cell of every suite, in a stable order (suite; then the shipped
/// cells as declared, the generated ones, the drivers file's own).
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    /// The suites as run: the shipped file plus the generated runners and the user's cases.
    pub file: SuitesFile,
    pub baseline: Baseline,
    pub cells: Vec<Cell>,
    /// Every real-Codex version some runner uses, the pin first.
    pub codex_versions: Vec<String>,
    /// The cells the drivers file added: its drivers' cells and its own cases' cells.
    pub from_drivers_file: BTreeSet<String>,
}

pub(crate) fn check_name(file: &str, what: &'static str, name: &str) -> Result<(), SuitesError> {
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
            file: file.to_string(),
            what,
            name: name.to_string(),
        })
    }
}

/// A mode as the suites files spell it.
pub fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Planning => "planning",
        Mode::Standard => "standard",
        Mode::Ask => "ask",
    }
}

impl Matrix {
    /// Parse and validate a suites file and a baseline file.
    pub fn parse(suites_toml: &str, baseline_toml: &str) -> Result<Self, SuitesError> {
        Self::build(suites_toml, baseline_toml, &Extras::default())
    }

    /// Parse and validate a suites file and a baseline file, plus the run-time extras.
    pub fn build(
        suites_toml: &str,
        baseline_toml: &str,
        extras: &Extras,
    ) -> Result<Self, SuitesError> {
        let mut file: SuitesFile = toml::from_str(suites_toml).map_err(|e| SuitesError::Parse {
            file: SUITES_FILE.into(),
            message: e.to_string(),
        })?;
        let baseline_file: BaselineFile =
            toml::from_str(baseline_toml).map_err(|e| SuitesError::Parse {
                file: BASELINE_FILE.into(),
                message: e.to_string(),
            })?;
        check_runners(&file)?;
        let mut per_suite: BTreeMap<String, Vec<Cell>> = BTreeMap::new();
        for (suite_name, suite) in &file.suites {
            check_name(SUITES_FILE, "suite", suite_name)?;
            for (case_name, case) in &suite.cases {
                check_case(SUITES_FILE, suite_name, case_name, case)?;
            }
            let cells = expand_blocks(
                SUITES_FILE,
                &file,
                suite_name,
                &suite.matrix,
                suite.expected_cells,
                suite.cases.keys(),
            )?;
            per_suite.insert(suite_name.clone(), cells);
        }
        let extended = crate::generate::extend(&mut file, extras, &mut per_suite)?;
        let user_cases: BTreeSet<(&str, &str)> = extras
            .drivers
            .iter()
            .flat_map(|d| &d.suites)
            .flat_map(|(suite, user)| user.cases.keys().map(move |c| (suite.as_str(), c.as_str())))
            .collect();
        let mut cells: Vec<Cell> = per_suite.into_values().flatten().collect();
        let mut seen = BTreeSet::new();
        for cell in &mut cells {
            if !seen.insert(cell.id.clone()) {
                return Err(SuitesError::DuplicateCell {
                    file: extras
                        .drivers
                        .as_ref()
                        .map_or(SUITES_FILE.to_string(), |d| d.name.clone()),
                    cell: cell.name(),
                });
            }
            cell.not_applicable = crate::applicability::not_applicable(cell);
        }
        let mut entries = BTreeMap::new();
        check_baseline(&cells, baseline_file.expected, BASELINE_FILE, &mut entries)?;
        if let Some(drivers) = &extras.drivers {
            check_baseline(
                &cells,
                drivers.expected.clone(),
                &drivers.name,
                &mut entries,
            )?;
        }
        let baseline = Baseline {
            entries: entries.into_iter().map(|(k, (e, _))| (k, e)).collect(),
        };
        for cell in &mut cells {
            cell.expected = baseline.expectation(&cell.name());
        }
        let from_drivers_file = cells
            .iter()
            .filter(|c| {
                extended.declared_runners.contains(&c.id.runner)
                    || user_cases.contains(&(c.id.suite.as_str(), c.id.case.as_str()))
            })
            .map(Cell::name)
            .collect();
        Ok(Self {
            file,
            baseline,
            cells,
            codex_versions: extended.codex_versions,
            from_drivers_file,
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

fn check_runners(file: &SuitesFile) -> Result<(), SuitesError> {
    for name in file.runners.keys() {
        check_name(SUITES_FILE, "runner", name)?;
    }
    for name in file.environments.keys() {
        check_name(SUITES_FILE, "environment", name)?;
    }
    let invalid = |message: String| SuitesError::Invalid {
        file: SUITES_FILE.into(),
        message,
    };
    for (name, runner) in &file.runners {
        use crate::spec::{AppServerKind, DriverKind};
        if (runner.app_server == AppServerKind::Codex) != runner.codex_version.is_some() {
            return Err(invalid(format!(
                "runner `{name}`: `codex_version` is required for app_server = \"codex\" and only there"
            )));
        }
        if runner.plays.is_some() && runner.app_server != AppServerKind::Fake {
            return Err(invalid(format!(
                "runner `{name}`: `plays` names the release the fake plays; it is for app_server = \"fake\" only"
            )));
        }
        if (runner.driver == DriverKind::Declared) != runner.declared.is_some() {
            return Err(invalid(format!(
                "runner `{name}`: `declared` is required for driver = \"declared\" and only there"
            )));
        }
        if (runner.driver == DriverKind::External) != runner.driver_cmd.is_some() {
            return Err(invalid(format!(
                "runner `{name}`: `driver_cmd` is required for driver = \"external\" and only there"
            )));
        }
    }
    Ok(())
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
                    "scenario file `{path}` is not one of suites/scenarios (see suites::SCENARIO_FILES)"
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
    expected: usize,
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
    if cells.len() != expected {
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

/// Check one file's baseline entries against the cells and add them to `entries` (cell →
/// expectation and the file that listed it).
fn check_baseline(
    cells: &[Cell],
    listed: Vec<BaselineEntry>,
    source: &str,
    entries: &mut BTreeMap<String, (Expectation, String)>,
) -> Result<(), SuitesError> {
    let by_name: BTreeMap<String, &Cell> = cells.iter().map(|c| (c.name(), c)).collect();
    let file = || source.to_string();
    for entry in listed {
        if let Err(e) = entry.cell.parse::<CellId>() {
            return Err(SuitesError::UnknownBaselineCell {
                file: file(),
                cell: entry.cell,
                why: e.to_string(),
            });
        }
        let Some(cell) = by_name.get(&entry.cell) else {
            return Err(SuitesError::UnknownBaselineCell {
                file: file(),
                why: "no suite's matrix expands to it".into(),
                cell: entry.cell,
            });
        };
        if let Some(why) = &cell.not_applicable {
            return Err(SuitesError::UnknownBaselineCell {
                file: file(),
                why: format!("the cell is not applicable, so it has no verdict to expect: {why}"),
                cell: entry.cell,
            });
        }
        let bad = |verdict: String, why: &str| SuitesError::BadBaselineVerdict {
            file: file(),
            cell: entry.cell.clone(),
            verdict,
            why: why.to_string(),
        };
        let Some(verdict) = parse_verdict(&entry.verdict) else {
            return Err(bad(
                entry.verdict,
                "not a verdict name (see graders::verdict::VerdictKind)",
            ));
        };
        if verdict == VerdictKind::Pass {
            return Err(bad(
                entry.verdict,
                "pass is the default; list only cells expected not to pass",
            ));
        }
        if entry.reason.trim().is_empty() {
            return Err(bad(
                entry.verdict,
                "the reason is empty; say why this verdict is expected",
            ));
        }
        if let Some((_, other)) = entries.get(&entry.cell) {
            return Err(SuitesError::DuplicateBaselineCell {
                file: file(),
                cell: entry.cell.clone(),
                other: other.clone(),
            });
        }
        if SIGNED_VERDICTS.contains(&verdict) && entry.signature.is_none() {
            return Err(bad(
                entry.verdict,
                "a signature decides this verdict; name the one expected (`signature = \"…\"`, a row of graders::signatures::SIGNATURES)",
            ));
        }
        if let Some(name) = &entry.signature {
            if !graders::signatures::SIGNATURES
                .iter()
                .any(|s| s.name == name)
            {
                return Err(bad(
                    entry.verdict.clone(),
                    &format!("signature `{name}` is not a row of graders::signatures::SIGNATURES"),
                ));
            }
        }
        let expectation = Expectation {
            verdict,
            reason: Some(entry.reason),
            signature: entry.signature,
        };
        entries.insert(entry.cell, (expectation, file()));
    }
    Ok(())
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

[suites.transport-faults]
about = "s"
expected_cells = 2

[suites.transport-faults.cases.hang]
about = "c"
scenario = "builtin:healthy"
mode = "planning"
network = false

[[suites.transport-faults.matrix]]
runners = ["runner-fake"]
environments = ["local", "daytona"]
cases = ["hang"]
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
                file: "suites.toml".into(),
                suite: "transport-faults".into(),
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
            Err(SuitesError::DuplicateCell {
                file: "suites.toml".into(),
                cell: "transport-faults.runner-fake.local.hang".into()
            })
        );
    }

    #[test]
    fn an_unused_case_fails() {
        let text = format!(
            "{MINI}\n[suites.transport-faults.cases.crash-mid-turn]\nabout = \"o\"\nscenario = \"builtin:healthy\"\nmode = \"ask\"\nnetwork = false\n"
        );
        assert!(matches!(
            Matrix::parse(&text, ""),
            Err(SuitesError::UnusedCase { .. })
        ));
    }

    #[test]
    fn a_baseline_entry_for_a_cell_that_does_not_exist_fails() {
        let baseline = "[[expected]]\ncell = \"transport-faults.runner-fake.container.hang\"\nverdict = \"incomplete\"\nreason = \"r\"\n";
        let err = Matrix::parse(MINI, baseline).unwrap_err();
        assert!(
            matches!(err, SuitesError::UnknownBaselineCell { .. }),
            "{err}"
        );
        let malformed = baseline.replace(
            "transport-faults.runner-fake.container.hang",
            "s.runner-fake",
        );
        assert!(matches!(
            Matrix::parse(MINI, &malformed),
            Err(SuitesError::UnknownBaselineCell { .. })
        ));
    }

    #[test]
    fn a_baseline_entry_must_name_a_real_non_pass_verdict_with_a_reason() {
        let entry = |verdict: &str, reason: &str| {
            format!("[[expected]]\ncell = \"transport-faults.runner-fake.daytona.hang\"\nverdict = \"{verdict}\"\nreason = \"{reason}\"\n")
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
            Err(SuitesError::DuplicateBaselineCell { .. })
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
        let expected = &good
            .cell("transport-faults.runner-fake.daytona.hang")
            .unwrap()
            .expected;
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
