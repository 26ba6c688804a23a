//! JUnit XML: one `<testsuite>` per suite, named `PROFILE/SUITE` (so CI panels group a profile's
//! suites) with the profile as a property, one `<testcase>` per cell (named like the cargo
//! test). A cell run again (`harness run --retries`) carries its earlier attempts as Maven
//! Surefire and cargo-nextest write them: `<flakyFailure>`/`<flakyError>` in a test case that
//! then passed, `<rerunFailure>`/`<rerunError>` in one that failed every time.

use super::summary::{profile_heading, CellSummary, Status, Summary};
use anyhow::Result;
use quick_junit::{
    NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestRerun, TestSuite,
};
use std::collections::BTreeMap;
use std::time::Duration;

pub fn junit_xml(summary: &Summary) -> Result<String> {
    let mut report = Report::new("conformance");
    report.set_time(Duration::from_millis(summary.wall_ms));
    let mut suites: BTreeMap<String, TestSuite> = BTreeMap::new();
    for cell in &summary.cells {
        let mut status = match cell.status {
            Status::AsExpected => TestCaseStatus::success(),
            Status::Ignored | Status::NotApplicable => {
                let what = if cell.status == Status::Ignored {
                    "ignored"
                } else {
                    "not applicable"
                };
                let mut status = TestCaseStatus::skipped();
                status.set_message(format!("{what}: {}", cell.reason));
                status
            }
            Status::Differs | Status::Stale => {
                let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                let got = cell.verdict.as_deref().unwrap_or("none");
                let what = if cell.status == Status::Stale {
                    format!(
                        "stale baseline: expected `{}` but the cell now passes",
                        cell.expected
                    )
                } else {
                    format!("expected `{}`, got `{got}`", cell.expected)
                };
                let what = match &cell.expected_declarations {
                    Some(note) => format!("{what}; declarations: {note}"),
                    None => what,
                };
                status.set_message(what);
                status.set_type(got);
                status.set_description(format!("{}\nevidence: {}", cell.reason, cell.evidence_dir));
                status
            }
            Status::Error => {
                let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
                status.set_message(cell.reason.clone());
                status.set_description(format!("evidence: {}", cell.evidence_dir));
                status
            }
        };
        status.add_reruns(earlier_attempts(cell));
        let mut case = TestCase::new(cell.cell.clone(), status);
        if cell.is_flaky() {
            // A skipped test case keeps no reruns: said in its output too, for every reader.
            case.set_system_out(format!(
                "flaky: failed, then as expected when run again; {}",
                cell.earlier_attempts
                    .iter()
                    .map(|a| format!("attempt {}: {} ({})", a.attempt, a.describe, a.evidence))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        case.set_classname(format!("{}.{}", cell.suite, cell.runner));
        case.set_time(Duration::from_millis(cell.duration_ms));
        let profile = profile_heading(cell.profile).0;
        suites
            .entry(format!("{profile}/{}", cell.suite))
            .or_insert_with_key(|name| {
                let mut suite = TestSuite::new(name.clone());
                suite.add_property(Property::new("profile", profile));
                suite
            })
            .add_test_case(case);
    }
    report.add_test_suites(suites.into_values());
    Ok(report.to_string()?)
}

/// Each earlier attempt of `cell`, as a rerun: an error when the harness could not grade it, a
/// failure otherwise.
fn earlier_attempts(cell: &CellSummary) -> Vec<TestRerun> {
    cell.earlier_attempts
        .iter()
        .map(|attempt| {
            let kind = if attempt.status == Status::Error {
                NonSuccessKind::Error
            } else {
                NonSuccessKind::Failure
            };
            let mut rerun = TestRerun::new(kind);
            rerun.set_message(format!("attempt {}: {}", attempt.attempt, attempt.describe));
            rerun.set_type(attempt.verdict.as_deref().unwrap_or("error"));
            rerun.set_description(format!(
                "evidence: {}/{}",
                cell.evidence_dir, attempt.evidence
            ));
            rerun
        })
        .collect()
}
