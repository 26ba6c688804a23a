use super::*;
use crate::matrix::{CellOutcome, CellResult};
use graders::events::CellId;
use graders::verdict::{EvidenceRef, Verdict, VerdictKind};
use suites::{Agreement, Expectation};

fn result(name: &str, expected: Expectation, outcome: CellOutcome) -> CellResult {
    let cell: CellId = name.parse().unwrap();
    CellResult {
        evidence_dir: format!("target/conformance/{name}").into(),
        cell,
        expected,
        outcome,
        duration: Duration::from_millis(120),
    }
}

/// A cell that ran and was graded `verdict`, judged against `expected`.
fn graded(name: &str, expected: &Expectation, verdict: VerdictKind, reason: &str) -> CellResult {
    let outcome = CellOutcome::Graded {
        agreement: expected.judge(verdict),
        verdict: Verdict::new(verdict, reason, vec![EvidenceRef::at(3, reason)]),
    };
    result(name, expected.clone(), outcome)
}

/// A small matrix with one cell of every status.
fn sample() -> Vec<CellResult> {
    let pass = Expectation::pass();
    let rejected = Expectation {
        verdict: VerdictKind::StartupRejected,
        reason: Some("legacy planning runs the fs helper; loopback set-up is refused".into()),
    };
    vec![
        graded(
            "codex-planning-read-only.runner-fake.local.plan-write-refused",
            &pass,
            VerdictKind::Pass,
            "the write was refused: Read-only file system",
        ),
        graded(
            "codex-planning-read-only.runner-fake.daytona.plan-write-refused",
            &pass,
            VerdictKind::SandboxFailedToStart,
            "bwrap: loopback: Failed RTM_NEWADDR | x",
        ),
        graded(
            "codex-planning-read-only.runner-fake-legacy.local.plan-write-refused",
            &pass,
            VerdictKind::Pass,
            "the write was refused: Read-only file system",
        ),
        graded(
            "codex-planning-read-only.runner-fake-legacy.daytona.plan-write-refused",
            &rejected,
            VerdictKind::StartupRejected,
            "error creating thread: …",
        ),
        graded(
            "codex-planning-read-only.runner-codex-legacy.daytona.plan-write-refused",
            &rejected,
            VerdictKind::Pass,
            "the write was refused",
        ),
        result(
            "codex-planning-read-only.runner-codex.local.plan-write-refused",
            pass.clone(),
            CellOutcome::Ignored {
                reason: "Codex 0.169.0 is not installed".into(),
            },
        ),
        result(
            "core-compatibility.my-runner-fake.local.ask-question",
            pass.clone(),
            CellOutcome::NotApplicable {
                reason: "the case runs in mode `ask` and the driver declares only modes = [planning, standard]".into(),
            },
        ),
        result(
            "transport-faults.runner-fake.container.hang",
            pass.clone(),
            CellOutcome::Error {
                message: "environment `container` probe disagrees with its spec".into(),
            },
        ),
    ]
}

#[test]
fn statuses_and_totals_follow_the_agreement() {
    let summary = Summary::from_results(&sample(), Duration::from_millis(1500));
    let statuses: Vec<Status> = summary.cells.iter().map(|c| c.status).collect();
    assert_eq!(
        statuses,
        vec![
            Status::AsExpected,
            Status::Differs,
            Status::AsExpected,
            Status::AsExpected,
            Status::Stale,
            Status::Ignored,
            Status::NotApplicable,
            Status::Error
        ]
    );
    assert_eq!(summary.totals.failures(), 3);
    assert_eq!(summary.totals.ignored, 1);
    assert_eq!(summary.totals.not_applicable, 1);
    assert!(matches!(
        sample()[4].outcome,
        CellOutcome::Graded {
            agreement: Agreement::Stale { .. },
            ..
        }
    ));
}

#[test]
fn markdown_matrix_of_the_sample() {
    let summary = Summary::from_results(&sample(), Duration::from_millis(1500));
    insta::assert_snapshot!("markdown_matrix_of_the_sample", markdown(&summary));
}

#[test]
fn junit_of_the_sample() {
    let summary = Summary::from_results(&sample(), Duration::from_millis(1500));
    insta::assert_snapshot!("junit_of_the_sample", junit_xml(&summary).unwrap());
}

#[test]
fn json_summary_of_the_sample() {
    let summary = Summary::from_results(&sample(), Duration::from_millis(1500));
    insta::assert_json_snapshot!("json_summary_of_the_sample", summary);
}

#[test]
fn write_all_writes_three_files() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_all(dir.path(), &sample(), Duration::from_secs(1)).unwrap();
    for path in [&paths.junit, &paths.json, &paths.markdown] {
        assert!(
            std::fs::metadata(path).unwrap().len() > 0,
            "{}",
            path.display()
        );
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&paths.json).unwrap()).unwrap();
    assert_eq!(json["totals"]["cells"], 8);
}
