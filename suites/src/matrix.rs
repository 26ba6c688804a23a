//! Expansion of the suites into named cells, and every check that keeps the matrix honest.
//!
//! The matrix is built at run time: the shipped `suites.toml` and `baseline.toml`, plus what
//! `harness run` adds ([`Extras`]: a user's drivers file, `--codex` versions; see
//! [`crate::generate`]).

use crate::baseline::{Baseline, BaselineFile, Expectation};
use crate::cell::{check_case, expand_blocks, Cell};
use crate::generate::Extras;
use crate::names::check_name;
use crate::source::{BASELINE_FILE, SUITES_FILE};
use crate::spec::SuitesFile;
use crate::SuitesError;
use std::collections::{BTreeMap, BTreeSet};

mod expectations;

/// The longest file name Linux file systems take.
const MAX_CELL_NAME_BYTES: usize = 255;

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
        let (mut file, baseline_file) = parse_files(suites_toml, baseline_toml)?;
        check_runners(&file)?;
        let mut per_suite = expand_suites(&file)?;
        let extended = crate::generate::extend(&mut file, extras, &mut per_suite)?;
        let user_cases: BTreeSet<(&str, &str)> = extras
            .drivers
            .iter()
            .flat_map(|d| &d.suites)
            .flat_map(|(suite, user)| user.cases.keys().map(move |c| (suite.as_str(), c.as_str())))
            .collect();
        let mut cells: Vec<Cell> = per_suite.into_values().flatten().collect();
        check_cells(&mut cells, extras)?;
        let from_drivers_file: BTreeSet<String> = cells
            .iter()
            .filter(|c| {
                extended.declared_runners.contains(&c.id.runner)
                    || user_cases.contains(&(c.id.suite.as_str(), c.id.case.as_str()))
            })
            .map(Cell::name)
            .collect();
        let baseline = expectations::baseline(&cells, &from_drivers_file, baseline_file, extras)?;
        for cell in &mut cells {
            cell.expected = Expectation {
                declarations: crate::applicability::graded_with(cell),
                ..baseline.expectation(&cell.name())
            };
        }
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

/// The two files, parsed: the suites and the shipped baseline.
fn parse_files(
    suites_toml: &str,
    baseline_toml: &str,
) -> Result<(SuitesFile, BaselineFile), SuitesError> {
    let file: SuitesFile = toml::from_str(suites_toml).map_err(|e| SuitesError::Parse {
        file: SUITES_FILE.into(),
        message: e.to_string(),
    })?;
    let baseline_file: BaselineFile =
        toml::from_str(baseline_toml).map_err(|e| SuitesError::Parse {
            file: BASELINE_FILE.into(),
            message: e.to_string(),
        })?;
    Ok((file, baseline_file))
}

/// Each shipped suite's cells, its names and cases checked.
fn expand_suites(file: &SuitesFile) -> Result<BTreeMap<String, Vec<Cell>>, SuitesError> {
    let mut per_suite: BTreeMap<String, Vec<Cell>> = BTreeMap::new();
    for (suite_name, suite) in &file.suites {
        check_name(SUITES_FILE, "suite", suite_name)?;
        for (case_name, case) in &suite.cases {
            check_case(SUITES_FILE, suite_name, case_name, case)?;
        }
        let cells = expand_blocks(
            SUITES_FILE,
            file,
            suite_name,
            &suite.matrix,
            suite.expected_cells,
            suite.cases.keys(),
        )?;
        per_suite.insert(suite_name.clone(), cells);
    }
    Ok(per_suite)
}

/// Every cell's name checked (a folder name, unique) and its applicability decided.
fn check_cells(cells: &mut [Cell], extras: &Extras) -> Result<(), SuitesError> {
    let mut seen = BTreeSet::new();
    for cell in cells.iter_mut() {
        // The cell's name is its evidence folder's name.
        if cell.name().len() > MAX_CELL_NAME_BYTES {
            return Err(SuitesError::Invalid {
                file: extras
                    .drivers
                    .as_ref()
                    .map_or(SUITES_FILE.to_string(), |d| d.name.clone()),
                message: format!(
                    "cell `{}` has a name of {} bytes; a cell name is a folder name, at most {MAX_CELL_NAME_BYTES} bytes: shorten the driver's, suite's or case's name",
                    cell.name(),
                    cell.name().len()
                ),
            });
        }
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
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baseline::VerdictKind;
    use graders::events::{CellId, Target};

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
profile = "runner-contract"
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
    fn the_shipped_matrix_loads_and_its_cells_are_the_reviewed_list() {
        let matrix = crate::load().expect("shipped suites and baseline are valid");
        for cell in &matrix.cells {
            assert_eq!(cell.name().parse::<CellId>().unwrap(), cell.id);
        }
        let names: BTreeSet<_> = matrix.cells.iter().map(Cell::name).collect();
        assert_eq!(names.len(), matrix.cells.len());
        // Suite sizes are derived from the blocks; this reviewed list is what keeps a cell from
        // vanishing (or appearing) unnoticed.
        let mut listing = Vec::new();
        for suite in matrix.suite_names() {
            let cells: Vec<&Cell> = matrix
                .cells
                .iter()
                .filter(|c| c.id.suite == suite)
                .collect();
            let profile = cells.first().map_or("-", |c| c.profile.as_str());
            listing.push(format!("{suite} ({profile}, {} cells)", cells.len()));
            listing.extend(cells.iter().map(|c| match &c.not_applicable {
                Some(_) => format!("  {} not applicable", c.name()),
                None => format!("  {} expect {}", c.name(), c.expected.verdict.as_str()),
            }));
        }
        insta::assert_snapshot!("shipped_cells", listing.join("\n"));
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
        // The same cell twice in one file: the first entry decides nothing, so it is dead.
        let twice = format!("{}{}", entry("incomplete", "r"), entry("incomplete", "r"));
        assert!(matches!(
            Matrix::parse(MINI, &twice),
            Err(SuitesError::DeadBaselineEntry { .. })
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
