//! The conformance suites, declared as data.
//!
//! `suites.toml` declares runners, environments, suites with their cases, and the matrix each
//! suite expects; `baseline.toml` lists the cells whose expected verdict is not `pass`. This
//! crate parses both, expands the matrix into named cells ([`CellId`]) and checks everything a
//! typo could break: unknown names, a matrix whose size differs from the declared one, a
//! baseline entry for a cell that does not exist. Executing a cell is `harness::matrix`'s job.

pub mod baseline;
pub mod declared;
pub mod matrix;
pub mod spec;

pub use baseline::{Agreement, Baseline, Expectation};
pub use graders::events::CellId;
pub use matrix::{Cell, Matrix};

/// The suites file shipped with this crate.
pub const SUITES_TOML: &str = include_str!("../suites.toml");
/// The baseline shipped with this crate.
pub const BASELINE_TOML: &str = include_str!("../baseline.toml");

/// Scenario files that cases name as `file:NAME`, embedded so a binary never depends on the
/// source tree being present.
pub const SCENARIO_FILES: &[(&str, &str)] = &[(
    "transient-startup-failure.toml",
    include_str!("../scenarios/transient-startup-failure.toml"),
)];

/// The text of a scenario file named by a case (`file:NAME`), if it is one of [`SCENARIO_FILES`].
pub fn scenario_file(name: &str) -> Option<&'static str> {
    SCENARIO_FILES
        .iter()
        .find(|(file, _)| *file == name)
        .map(|(_, text)| *text)
}

/// Everything that can be wrong with the suites or the baseline. Each message names the file
/// and the entry at fault.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SuitesError {
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    #[error("suites.toml: name `{name}` ({what}) must be non-empty lowercase kebab-case without dots, since it is one part of a cell name")]
    BadName { what: &'static str, name: String },
    #[error("suites.toml: suite `{suite}` names unknown {what} `{name}` in its matrix")]
    UnknownInMatrix {
        suite: String,
        what: &'static str,
        name: String,
    },
    #[error(
        "suites.toml: suite `{suite}` expects {expected} cells but its matrix expands to {actual}"
    )]
    WrongSize {
        suite: String,
        expected: usize,
        actual: usize,
    },
    #[error("suites.toml: cell `{0}` appears twice in its suite's matrix")]
    DuplicateCell(String),
    #[error("suites.toml: case `{suite}.{case}` is declared but no matrix block uses it")]
    UnusedCase { suite: String, case: String },
    #[error("suites.toml: {0}")]
    Invalid(String),
    #[error("baseline.toml: `{cell}` is not a cell of the matrix ({why})")]
    UnknownBaselineCell { cell: String, why: String },
    #[error("baseline.toml: `{0}` is listed twice")]
    DuplicateBaselineCell(String),
    #[error("baseline.toml: `{cell}` lists verdict `{verdict}`: {why}")]
    BadBaselineVerdict {
        cell: String,
        verdict: String,
        why: String,
    },
}

/// The shipped matrix with the shipped baseline, validated.
pub fn load() -> Result<Matrix, SuitesError> {
    Matrix::parse(SUITES_TOML, BASELINE_TOML)
}
