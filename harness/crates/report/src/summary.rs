//! The report's data model: one row per cell, serializable as the JSON summary.

pub use crate::outcome::Status;
use crate::outcome::{CellOutcome, CellResult, EarlierAttempt};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
use suites::spec::Profile;

/// Names in first-appearance order (cells come in matrix order, which is the declared order).
pub(crate) fn ordered<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen: Vec<&str> = Vec::new();
    for item in items {
        if !seen.contains(&item) {
            seen.push(item);
        }
    }
    seen
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellSummary {
    pub cell: String,
    /// The profile of the cell's suite; absent when not known (evidence from before profiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    pub suite: String,
    pub runner: String,
    pub environment: String,
    pub case: String,
    pub status: Status,
    pub expected: String,
    /// Why a non-pass verdict is expected (from the baseline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_reason: Option<String>,
    /// What the driver's declarations make of the cell, when they change what passes
    /// (`suites::Expectation::declarations`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_declarations: Option<String>,
    /// The verdict, when the cell was graded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    /// The grader's reason, the ignore or not-applicable reason, or the error.
    pub reason: String,
    #[serde(default)]
    pub duration_ms: u64,
    #[serde(default)]
    pub evidence_dir: String,
    /// The attempts `harness run --retries` made before the one this row reports, which
    /// failed, oldest first; absent when there were none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_attempts: Vec<EarlierAttempt>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Totals {
    pub cells: usize,
    pub as_expected: usize,
    pub differs: usize,
    pub stale: usize,
    pub errors: usize,
    pub ignored: usize,
    /// Absent in summaries written before not-applicable cells existed.
    #[serde(default)]
    pub not_applicable: usize,
    /// Of the cells above that do not fail, those that failed first and not when run again
    /// (`harness run --retries`); absent in summaries written before retries existed.
    #[serde(default)]
    pub flaky: usize,
}

impl Totals {
    /// The totals of `cells`.
    pub fn count(cells: &[CellSummary]) -> Self {
        let mut totals = Totals {
            cells: cells.len(),
            ..Totals::default()
        };
        for cell in cells {
            match cell.status {
                Status::AsExpected => totals.as_expected += 1,
                Status::Differs => totals.differs += 1,
                Status::Stale => totals.stale += 1,
                Status::Error => totals.errors += 1,
                Status::Ignored => totals.ignored += 1,
                Status::NotApplicable => totals.not_applicable += 1,
            }
            totals.flaky += usize::from(cell.is_flaky());
        }
        totals
    }

    pub fn failures(&self) -> usize {
        self.differs + self.stale + self.errors
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub totals: Totals,
    /// The totals of each profile's cells (cells whose profile is not known are only in
    /// `totals`).
    #[serde(default)]
    pub profiles: BTreeMap<Profile, Totals>,
    pub wall_ms: u64,
    /// The run whose cells these are (`crate::run_id::this_run`), which each cell's
    /// verdict.json must name; absent when the cells are of several runs (merged shards, a
    /// folder two runs wrote) or it is not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    pub cells: Vec<CellSummary>,
}

/// How reports name a profile's cells, and what the profile holds them to.
pub(crate) fn profile_heading(profile: Option<Profile>) -> (&'static str, &'static str) {
    match profile {
        Some(Profile::Protocol) => (
            "protocol",
            "what every client of `codex app-server` owes the protocol (docs/profiles/protocol.md)",
        ),
        Some(Profile::RunnerContract) => (
            "runner-contract",
            "the incident runner's own contract, opt-in for declared drivers (docs/profiles/runner-contract.md)",
        ),
        None => (
            "profile not recorded",
            "cells read back from evidence that does not name its profile",
        ),
    }
}

/// The profiles of `cells` in report order (the protocol first, unknown last), each with its
/// cells in matrix order.
pub(crate) fn by_profile(cells: &[CellSummary]) -> Vec<(Option<Profile>, Vec<&CellSummary>)> {
    Profile::ALL
        .iter()
        .copied()
        .map(Some)
        .chain([None])
        .map(|profile| {
            let of: Vec<&CellSummary> = cells.iter().filter(|c| c.profile == profile).collect();
            (profile, of)
        })
        .filter(|(_, of)| !of.is_empty())
        .collect()
}

impl CellSummary {
    /// Failed, was run again, and then did not fail ([`CellResult::is_flaky`]).
    pub fn is_flaky(&self) -> bool {
        !self.status.is_failure() && !self.earlier_attempts.is_empty()
    }

    /// The expected verdict, with what the driver's declarations make of the cell when they
    /// change what passes: `pass (the driver declares no max_line_bytes, so …)`.
    pub fn expected_with_declarations(&self) -> String {
        match &self.expected_declarations {
            Some(note) => format!("{} ({note})", self.expected),
            None => self.expected.clone(),
        }
    }

    pub fn from_result(result: &CellResult) -> Self {
        let status = result.status();
        let (verdict, reason) = match &result.outcome {
            CellOutcome::Graded { verdict, .. } => {
                (Some(verdict.verdict.to_string()), verdict.reason.clone())
            }
            CellOutcome::Ignored { reason } | CellOutcome::NotApplicable { reason } => {
                (None, reason.clone())
            }
            CellOutcome::Error { message } => (None, message.clone()),
        };
        Self {
            cell: result.cell.to_string(),
            profile: result.profile,
            suite: result.cell.suite.clone(),
            runner: result.cell.runner.clone(),
            environment: result.cell.environment.clone(),
            case: result.cell.case.clone(),
            status,
            expected: result.expected.verdict.to_string(),
            expected_reason: result.expected.reason.clone(),
            expected_declarations: result.expected.declarations.clone(),
            verdict,
            reason,
            duration_ms: u64::try_from(result.duration.as_millis()).unwrap_or(u64::MAX),
            evidence_dir: result.evidence_dir.display().to_string(),
            earlier_attempts: result.earlier_attempts.clone(),
        }
    }
}

impl Summary {
    pub fn from_results(results: &[CellResult], wall: Duration) -> Self {
        let cells: Vec<CellSummary> = results.iter().map(CellSummary::from_result).collect();
        Self {
            run_id: Some(crate::run_id::this_run().to_string()),
            ..Self::from_cells(cells, u64::try_from(wall.as_millis()).unwrap_or(u64::MAX))
        }
    }

    /// The summary of `cells`: the totals, and each profile's; of no run named.
    pub fn from_cells(cells: Vec<CellSummary>, wall_ms: u64) -> Self {
        let profiles = Profile::ALL
            .iter()
            .filter_map(|profile| {
                let of: Vec<CellSummary> = cells
                    .iter()
                    .filter(|c| c.profile == Some(*profile))
                    .cloned()
                    .collect();
                (!of.is_empty()).then(|| (*profile, Totals::count(&of)))
            })
            .collect();
        Self {
            totals: Totals::count(&cells),
            profiles,
            wall_ms,
            run_id: None,
            cells,
        }
    }
}
