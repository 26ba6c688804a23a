//! Expansion of the suites into named cells, and every check that keeps the matrix honest.
//!
//! The matrix is built at run time: the shipped `suites.toml` and `baseline.toml`, plus what
//! `harness run` adds ([`Extras`]: a user's drivers file, `--codex` versions; see
//! [`crate::generate`]).

use crate::baseline::{
    parse_verdict, Baseline, BaselineEntry, BaselineFile, CellPattern, Expectation, VerdictKind,
    SIGNED_VERDICTS,
};
use crate::cell::{check_case, expand_blocks, Cell};
use crate::generate::Extras;
use crate::names::check_name;
use crate::source::{BASELINE_FILE, SUITES_FILE};
use crate::spec::SuitesFile;
use crate::SuitesError;
use std::collections::{BTreeMap, BTreeSet};

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
        let from_drivers_file: BTreeSet<String> = cells
            .iter()
            .filter(|c| {
                extended.declared_runners.contains(&c.id.runner)
                    || user_cases.contains(&(c.id.suite.as_str(), c.id.case.as_str()))
            })
            .map(Cell::name)
            .collect();
        // Each file expects only its own cells: the shipped baseline the shipped matrix's, a
        // drivers file the cells it adds (a shipped pattern never reaches a user's driver).
        let (shipped, added): (Vec<Cell>, Vec<Cell>) = cells
            .iter()
            .cloned()
            .partition(|c| !from_drivers_file.contains(&c.name()));
        let mut entries = BTreeMap::new();
        check_baseline(
            &shipped,
            baseline_file.expected,
            BASELINE_FILE,
            &mut entries,
        )?;
        if let Some(drivers) = &extras.drivers {
            let shipped_names: BTreeSet<String> = shipped.iter().map(Cell::name).collect();
            if let Some(entry) = drivers
                .expected
                .iter()
                .find(|e| shipped_names.contains(&e.cell))
            {
                return Err(match entries.get(&entry.cell) {
                    Some((_, other)) => SuitesError::DuplicateBaselineCell {
                        file: drivers.name.clone(),
                        cell: entry.cell.clone(),
                        other: other.clone(),
                    },
                    None => SuitesError::UnknownBaselineCell {
                        file: drivers.name.clone(),
                        cell: entry.cell.clone(),
                        why: "it is a cell of the shipped matrix, not one this drivers file adds; suites/baseline.toml decides its expectation".into(),
                    },
                });
            }
            check_baseline(
                &added,
                drivers.expected.clone(),
                &drivers.name,
                &mut entries,
            )?;
        }
        let baseline = Baseline {
            entries: entries.into_iter().map(|(k, (e, _))| (k, e)).collect(),
        };
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

/// Check one file's baseline entries against the cells and add them to `entries` (cell →
/// expectation and the entry that listed it). An entry names one cell, or a pattern of them
/// (`*` in a part stands for any text without a dot): one reason for every cell it matches.
/// Within a file a later entry overrides an earlier one for the cells both match (a pattern
/// first, its exceptions after it); an entry that decides no cell — it matches none, or every
/// cell it matches is listed again later — is an error, so no entry is dead. A cell another file
/// already lists is an error: a drivers file cannot override the shipped baseline.
fn check_baseline(
    cells: &[Cell],
    listed: Vec<BaselineEntry>,
    source: &str,
    entries: &mut BTreeMap<String, (Expectation, String)>,
) -> Result<(), SuitesError> {
    let file = || source.to_string();
    // cell name → (index of the entry deciding it, its expectation)
    let mut decided: BTreeMap<String, (usize, Expectation)> = BTreeMap::new();
    let mut patterns = Vec::with_capacity(listed.len());
    for (index, entry) in listed.iter().enumerate() {
        let pattern =
            CellPattern::parse(&entry.cell).map_err(|why| SuitesError::UnknownBaselineCell {
                file: file(),
                cell: entry.cell.clone(),
                why,
            })?;
        let matched: Vec<&Cell> = cells.iter().filter(|c| pattern.matches(&c.id)).collect();
        let applicable: Vec<&Cell> = matched
            .iter()
            .copied()
            .filter(|c| c.not_applicable.is_none())
            .collect();
        if applicable.is_empty() {
            let why = match (pattern.is_exact(), matched.first()) {
                (true, None) => "no suite's matrix expands to it".to_string(),
                (false, None) => "the pattern matches no cell of the matrix".to_string(),
                (true, Some(cell)) => format!(
                    "the cell is not applicable, so it has no verdict to expect: {}",
                    cell.not_applicable.as_deref().unwrap_or_default()
                ),
                (false, Some(_)) => "every cell the pattern matches is not applicable, so none has a verdict to expect".to_string(),
            };
            return Err(SuitesError::UnknownBaselineCell {
                file: file(),
                cell: entry.cell.clone(),
                why,
            });
        }
        let expectation = check_entry_verdict(entry, source)?;
        for cell in applicable {
            let name = cell.name();
            if let Some((_, other)) = entries.get(&name) {
                return Err(SuitesError::DuplicateBaselineCell {
                    file: file(),
                    cell: name,
                    other: other.clone(),
                });
            }
            decided.insert(name, (index, expectation.clone()));
        }
        patterns.push(pattern);
    }
    for (index, entry) in listed.iter().enumerate() {
        if !decided.values().any(|(by, _)| *by == index) {
            let later = listed[index + 1..]
                .iter()
                .zip(&patterns[index + 1..])
                .filter(|(_, p)| {
                    cells
                        .iter()
                        .any(|c| patterns[index].matches(&c.id) && p.matches(&c.id))
                })
                .map(|(e, _)| format!("`{}`", e.cell))
                .collect::<Vec<_>>()
                .join(", ");
            return Err(SuitesError::DeadBaselineEntry {
                file: file(),
                entry: entry.cell.clone(),
                later,
            });
        }
    }
    for (name, (index, expectation)) in decided {
        let by = if patterns[index].is_exact() {
            file()
        } else {
            format!("{} (pattern `{}`)", file(), listed[index].cell)
        };
        entries.insert(name, (expectation, by));
    }
    Ok(())
}

/// The expectation one entry states, checked: a real verdict other than `pass`, a reason, and
/// the signature where a signature decides the verdict.
fn check_entry_verdict(entry: &BaselineEntry, source: &str) -> Result<Expectation, SuitesError> {
    let bad = |verdict: &str, why: &str| SuitesError::BadBaselineVerdict {
        file: source.to_string(),
        cell: entry.cell.clone(),
        verdict: verdict.to_string(),
        why: why.to_string(),
    };
    let Some(verdict) = parse_verdict(&entry.verdict) else {
        return Err(bad(
            &entry.verdict,
            "not a verdict name (see graders::verdict::VerdictKind)",
        ));
    };
    if verdict == VerdictKind::Pass {
        return Err(bad(
            &entry.verdict,
            "pass is the default; list only cells expected not to pass",
        ));
    }
    if entry.reason.trim().is_empty() {
        return Err(bad(
            &entry.verdict,
            "the reason is empty; say why this verdict is expected",
        ));
    }
    if SIGNED_VERDICTS.contains(&verdict) && entry.signature.is_none() {
        return Err(bad(
            &entry.verdict,
            "a signature decides this verdict; name the one expected (`signature = \"…\"`, a row of graders::signatures::SIGNATURES)",
        ));
    }
    if let Some(name) = &entry.signature {
        if !graders::signatures::SIGNATURES
            .iter()
            .any(|s| s.name == name)
        {
            return Err(bad(
                &entry.verdict,
                &format!("signature `{name}` is not a row of graders::signatures::SIGNATURES"),
            ));
        }
    }
    Ok(Expectation {
        verdict,
        reason: Some(entry.reason.clone()),
        signature: entry.signature.clone(),
        declarations: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
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
