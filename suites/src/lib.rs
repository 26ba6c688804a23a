//! The conformance suites, declared as data.
//!
//! `suites.toml` declares runners, environments, suites with their cases, and the matrix each
//! suite expects; `baseline.toml` lists the cells whose expected verdict is not `pass`. This
//! crate parses both, expands the matrix into named cells ([`CellId`]) and checks everything a
//! typo could break: unknown names, a matrix whose size differs from the declared one, a
//! baseline entry for a cell that does not exist. At run time a user's drivers file and more
//! Codex versions join the shipped matrix ([`load_with`], [`generate`]): a declared driver's
//! command line filled for a cell ([`declared`]), the cases it cannot express
//! ([`applicability`]). The files' shape is [`spec`]. Executing a cell is the `matrix` crate's
//! job (harness/crates/matrix).

// Library code prints nothing: it returns values, or emits a `tracing` notice the command line
// shows (`harness::cli::notices`). Unit tests may print.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![deny(unreachable_pub)]

pub mod applicability;
mod baseline;
mod cell;
pub mod declared;
mod drivers;
pub mod generate;
mod matrix;
mod names;
mod partition;
// Only its test uses it: it holds docs/profiles/ to suites.toml, and rewrites their tables.
#[cfg(test)]
mod profile_pages;
mod source;
pub mod spec;

pub use baseline::{Agreement, Baseline, Expectation};
pub use cell::Cell;
pub use drivers::DriversFile;
pub use generate::Extras;
pub use graders::events::CellId;
pub use matrix::Matrix;
pub use partition::Partition;

pub use source::{scenario_file, BASELINE_FILE, SUITES_FILE};

/// Everything that can be wrong with the suites, the baseline or a drivers file. Each message
/// names the file (`suites.toml`, `baseline.toml`, or the drivers file's path) and the entry at
/// fault.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SuitesError {
    #[error("{file}: {message}")]
    Parse { file: String, message: String },
    #[error("{file}: name `{name}` ({what}) must be non-empty lowercase kebab-case without dots, since it is one part of a cell name")]
    BadName {
        file: String,
        what: &'static str,
        name: String,
    },
    #[error("{file}: suite `{suite}` names unknown {what} `{name}` in its matrix")]
    UnknownInMatrix {
        file: String,
        suite: String,
        what: &'static str,
        name: String,
    },
    #[error("{file}: suite `{suite}` expects {expected} cells but its matrix expands to {actual}")]
    WrongSize {
        file: String,
        suite: String,
        expected: usize,
        actual: usize,
    },
    #[error("{file}: cell `{cell}` appears twice in the matrix")]
    DuplicateCell { file: String, cell: String },
    #[error("{file}: case `{suite}.{case}` is declared but no matrix block uses it")]
    UnusedCase {
        file: String,
        suite: String,
        case: String,
    },
    #[error("{file}: {message}")]
    Invalid { file: String, message: String },
    #[error("{file}: `{cell}` is not a cell of the matrix ({why})")]
    UnknownBaselineCell {
        file: String,
        cell: String,
        why: String,
    },
    #[error("{file}: baseline entry `{entry}` decides no cell: every cell it matches is listed again by a later entry ({later}); remove it or narrow the later one")]
    DeadBaselineEntry {
        file: String,
        entry: String,
        later: String,
    },
    #[error("{file}: `{cell}` is listed twice (also in {other})")]
    DuplicateBaselineCell {
        file: String,
        cell: String,
        other: String,
    },
    #[error("{file}: `{cell}` lists verdict `{verdict}`: {why}")]
    BadBaselineVerdict {
        file: String,
        cell: String,
        verdict: String,
        why: String,
    },
    #[error("drivers file `{path}` cannot be read: {message}")]
    DriversFileUnreadable { path: String, message: String },
}

/// The shipped matrix with the shipped baseline, validated.
pub fn load() -> Result<Matrix, SuitesError> {
    load_with(&Extras::default())
}

/// The shipped matrix plus the run-time extras (a drivers file, more Codex versions).
pub fn load_with(extras: &Extras) -> Result<Matrix, SuitesError> {
    let shipped = source::shipped();
    Matrix::build(shipped.suites, shipped.baseline, extras)
}
