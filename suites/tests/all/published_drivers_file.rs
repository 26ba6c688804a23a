//! The drivers file shipped for the published drivers (`drivers/published.toml`): it loads, its
//! drivers run every case whose semantics they can express (message-marker, the read-only write
//! probe, escalated writes under each approval handling they can be told), the rest is not
//! applicable with the reason, and the expected verdicts name their reasons.

use graders::verdict::VerdictKind;
use std::path::Path;
use suites::{DriversFile, Extras, Matrix};

/// The shipped suites with the published drivers file joined, as `--drivers
/// drivers/published.toml` loads them.
pub(crate) fn with_published_drivers() -> Matrix {
    with_drivers_file("drivers/published.toml")
}

/// The shipped suites with one of the repository's drivers files joined, as `--drivers FILE`
/// loads them.
pub(crate) fn with_drivers_file(file: &str) -> Matrix {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(file);
    let drivers = DriversFile::read(&path).unwrap_or_else(|e| panic!("{file} parses: {e}"));
    suites::load_with(&Extras {
        drivers: Some(drivers),
        codex_versions: vec![],
    })
    .unwrap_or_else(|e| panic!("{file} loads with the suites: {e}"))
}

fn cell<'m>(matrix: &'m Matrix, name: &str) -> &'m suites::Cell {
    matrix
        .cells
        .iter()
        .find(|c| c.name() == name)
        .unwrap_or_else(|| panic!("no cell {name}"))
}

#[test]
fn both_drivers_run_against_the_fake_and_the_real_codex_in_local_container_and_daytona() {
    let matrix = with_published_drivers();
    for driver in ["python-sdk", "codex-acp"] {
        for server in ["fake", "codex"] {
            for (suite, env, case) in [
                ("core-compatibility", "local", "message-marker"),
                ("core-compatibility", "container", "message-marker"),
                ("core-compatibility", "daytona", "message-marker-daytona"),
                ("codex-planning-read-only", "local", "plan-write-refused"),
                (
                    "codex-planning-read-only",
                    "container",
                    "plan-write-refused",
                ),
                ("codex-planning-read-only", "daytona", "plan-write-refused"),
                (
                    "codex-planning-read-only",
                    "daytona",
                    "escalated-write-user-accept",
                ),
            ] {
                let name = format!("{suite}.{driver}-{server}.{env}.{case}");
                let cell = cell(&matrix, &name);
                assert_eq!(cell.not_applicable, None, "{name}");
            }
        }
    }
}

#[test]
fn approvals_a_driver_cannot_be_told_make_the_cell_not_applicable_with_the_reason() {
    let matrix = with_published_drivers();
    let sdk = cell(
        &matrix,
        "codex-planning-read-only.python-sdk-codex.local.escalated-write-user-decline",
    );
    let reason = sdk.not_applicable.as_deref().expect("not applicable");
    assert!(reason.contains("`user-decline`"), "{reason}");
    let acp = cell(
        &matrix,
        "codex-planning-read-only.codex-acp-fake.container.escalated-write-never",
    );
    let reason = acp.not_applicable.as_deref().expect("not applicable");
    assert!(reason.contains("`never`"), "{reason}");
    for applicable in [
        "codex-planning-read-only.python-sdk-fake.local.escalated-write-never",
        "codex-planning-read-only.codex-acp-codex.daytona.escalated-write-user-decline",
    ] {
        assert_eq!(
            cell(&matrix, applicable).not_applicable,
            None,
            "{applicable}"
        );
    }
    // A case in a mode the drivers do not declare is not applicable either.
    let ask = cell(
        &matrix,
        "core-compatibility.python-sdk-codex.local.ask-question",
    );
    assert!(ask.not_applicable.is_some());
}

#[test]
fn each_escalated_write_is_graded_by_its_conforming_outcome_and_expected_to_pass() {
    // An allowed write under `user-accept` / a reviewer that allows is the driver doing what its
    // user asked: the allowed-write grader's `pass`; every refusal case has the refusal grader.
    let matrix = with_published_drivers();
    for (case, grader) in [
        ("escalated-write-user-accept", "escalated-write-allowed"),
        (
            "escalated-write-auto-review-allow",
            "escalated-write-allowed",
        ),
        ("escalated-write-user-decline", "escalated-write-refused"),
        ("escalated-write-never", "escalated-write-refused"),
        (
            "escalated-write-auto-review-deny",
            "escalated-write-refused",
        ),
    ] {
        for runner in [
            "python-sdk-fake",
            "python-sdk-codex",
            "codex-acp-fake",
            "codex-acp-codex",
        ] {
            for env in ["local", "container", "daytona"] {
                let c = cell(
                    &matrix,
                    &format!("codex-planning-read-only.{runner}.{env}.{case}"),
                );
                assert_eq!(c.grader_case(), grader, "{}", c.name());
                assert_eq!(c.expected.verdict, VerdictKind::Pass, "{}", c.name());
            }
        }
    }
}
