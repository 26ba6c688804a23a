use super::*;
use crate::outcome::{CellOutcome, CellResult};
use graders::events::CellId;
use graders::verdict::{EvidenceRef, Verdict, VerdictKind};
use suites::{Agreement, Expectation};

fn result(name: &str, expected: Expectation, outcome: CellOutcome) -> CellResult {
    let cell: CellId = name.parse().unwrap();
    let profile = if cell.suite.starts_with("protocol-") {
        suites::spec::Profile::Protocol
    } else {
        suites::spec::Profile::RunnerContract
    };
    CellResult {
        profile: Some(profile),
        evidence_dir: format!("target/conformance/{name}").into(),
        cell,
        expected,
        outcome,
        duration: Duration::from_millis(120),
        earlier_attempts: Vec::new(),
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
        ..Expectation::pass()
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
        graded(
            "protocol-credentials.my-runner-fake.local.secrets-not-forwarded",
            &pass,
            VerdictKind::Fail,
            "check `secrets-not-forwarded` failed: a canary secret from the driver's own environment appears in what the model's command printed",
        ),
        graded(
            "protocol-handshake.my-runner-fake.local.handshake",
            &pass,
            VerdictKind::Pass,
            "initialize first, initialized before any other request",
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
            Status::Error,
            Status::Differs,
            Status::AsExpected,
        ]
    );
    assert_eq!(summary.totals.failures(), 4);
    let protocol = &summary.profiles[&suites::spec::Profile::Protocol];
    assert_eq!((protocol.cells, protocol.differs), (2, 1));
    assert_eq!(
        summary.profiles[&suites::spec::Profile::RunnerContract].cells,
        8
    );
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
    let summary = Summary {
        run_id: Some("the-run".into()),
        ..Summary::from_results(&sample(), Duration::from_millis(1500))
    };
    insta::assert_json_snapshot!("json_summary_of_the_sample", summary);
}

#[test]
fn write_all_writes_four_files() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_all(dir.path(), &sample(), Duration::from_secs(1)).unwrap();
    for path in [&paths.junit, &paths.json, &paths.markdown, &paths.html] {
        assert!(
            std::fs::metadata(path).unwrap().len() > 0,
            "{}",
            path.display()
        );
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&paths.json).unwrap()).unwrap();
    assert_eq!(json["totals"]["cells"], 10);
    assert_eq!(json["profiles"]["protocol"]["cells"], 2);
    assert_eq!(json["cells"][8]["profile"], "protocol");
}

fn names(summary: &Summary) -> Vec<&str> {
    summary.cells.iter().map(|c| c.cell.as_str()).collect()
}

#[test]
fn a_run_folder_reads_back_into_the_same_summary() {
    let dir = tempfile::tempdir().unwrap();
    write_all(dir.path(), &sample(), Duration::from_millis(1500)).unwrap();
    let loaded = folders::load(&[dir.path().to_path_buf()], &[]).unwrap();
    assert_eq!(
        loaded.summary,
        Summary::from_results(&sample(), Duration::from_millis(1500))
    );
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}

#[test]
fn shards_merge_in_matrix_order_and_must_not_overlap() {
    let all = sample();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // Striped like `--partition K/N`: every other cell in each shard.
    let odd: Vec<CellResult> = all.iter().skip(1).step_by(2).cloned().collect();
    let even: Vec<CellResult> = all.iter().step_by(2).cloned().collect();
    write_all(a.path(), &odd, Duration::from_millis(900)).unwrap();
    write_all(b.path(), &even, Duration::from_millis(1200)).unwrap();
    let order: Vec<String> = all.iter().map(|r| r.cell.to_string()).collect();
    let dirs = [a.path().to_path_buf(), b.path().to_path_buf()];
    let merged = folders::load(&dirs, &order).unwrap().summary;
    assert_eq!(
        names(&merged),
        order.iter().map(String::as_str).collect::<Vec<_>>()
    );
    assert_eq!(merged.wall_ms, 1200, "shards run side by side");
    assert_eq!(
        merged.totals,
        Summary::from_results(&all, Duration::ZERO).totals
    );
    // Without a known order, a suite's cells still stay together.
    let unordered = folders::load(&dirs, &[]).unwrap().summary;
    let suites: Vec<&str> = unordered.cells.iter().map(|c| c.suite.as_str()).collect();
    let last_planning = suites
        .iter()
        .rposition(|s| *s == "codex-planning-read-only")
        .unwrap();
    assert!(suites[..=last_planning]
        .iter()
        .all(|s| *s == "codex-planning-read-only"));

    let err = folders::load(&[a.path().to_path_buf(), a.path().to_path_buf()], &order).unwrap_err();
    assert!(
        format!("{err:#}").contains("shards must not overlap"),
        "{err:#}"
    );
}

#[test]
fn cell_folders_without_a_summary_are_read_and_unfinished_cells_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let finished = "transport-faults.runner-fake.local.hang";
    let cut_off = "transport-faults.runner-fake.local.garbage-line";
    std::fs::create_dir_all(dir.path().join(finished)).unwrap();
    std::fs::create_dir_all(dir.path().join(cut_off)).unwrap();
    std::fs::create_dir_all(dir.path().join("_probes")).unwrap();
    let text = r#"{"cell":"transport-faults.runner-fake.local.hang","status":"differs","expected":"pass","expected_reason":null,"verdict":{"verdict":"fail","reason":"r","evidence":[]},"message":"hung","duration_ms":7}"#;
    let evidence = crate::layout::CellEvidence::of(dir.path(), finished);
    crate::verdict_file::VerdictFile::parse(text.as_bytes(), &evidence.verdict())
        .unwrap()
        .bind(&evidence)
        .unwrap()
        .write(&evidence)
        .unwrap();
    std::fs::write(dir.path().join("summary.json"), "{\"totals\": ").unwrap();
    let loaded = folders::load(&[dir.path().to_path_buf()], &[]).unwrap();
    let cells = &loaded.summary.cells;
    assert_eq!(cells.len(), 2);
    let by_name = |name: &str| cells.iter().find(|c| c.cell == name).unwrap();
    assert_eq!(by_name(finished).status, Status::Differs);
    assert_eq!(by_name(finished).verdict.as_deref(), Some("fail"));
    assert_eq!(by_name(finished).reason, "hung");
    assert_eq!(by_name(cut_off).status, Status::Error);
    assert!(by_name(cut_off).reason.contains("did not finish"));
    assert_eq!(loaded.summary.totals.failures(), 2);
    assert_eq!(
        by_name(finished).profile,
        None,
        "a verdict file without a profile"
    );
    assert!(
        loaded.warnings.iter().any(|w| w.contains("summary.json")),
        "{:?}",
        loaded.warnings
    );

    let empty = tempfile::tempdir().unwrap();
    let err = folders::load(&[empty.path().to_path_buf()], &[]).unwrap_err();
    assert!(
        format!("{err:#}").contains("holds no conformance evidence"),
        "{err:#}"
    );
    let err = folders::load(&[empty.path().join("nope")], &[]).unwrap_err();
    assert!(format!("{err:#}").contains("does not exist"), "{err:#}");
}

#[test]
fn the_job_summary_links_the_html_report() {
    let summary = Summary::from_results(&sample(), Duration::from_millis(1500));
    let env = |name: &str| {
        match name {
            "GITHUB_SERVER_URL" => Some("https://github.com"),
            "GITHUB_REPOSITORY" => Some("o/r"),
            "GITHUB_RUN_ID" => Some("42"),
            _ => None,
        }
        .map(str::to_string)
    };
    let text = job_summary(&markdown(&summary), env);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("## Conformance matrix"));
    assert_eq!(lines.next(), Some(""));
    let link = lines.next().unwrap();
    assert!(
        link.contains("(https://github.com/o/r/actions/runs/42#artifacts)")
            && link.contains("`conformance-report`"),
        "{link}"
    );
    let named = job_summary("x\n", |name| {
        (name == "HARNESS_REPORT_URL").then(|| "https://a/b".to_string())
    });
    assert!(
        named.contains("(https://a/b)") && named.ends_with("x\n"),
        "{named}"
    );
    assert!(!job_summary("x\n", |_| None).contains("]("));
}

#[test]
fn a_report_is_written_whole_under_its_name_and_a_failure_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("matrix.md");
    crate::write_atomically(&path, b"first").unwrap();
    crate::write_atomically(&path, b"second").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "second");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o644
    );
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("matrix.md")]);
    let missing = dir.path().join("gone/report.html");
    let err = format!("{:#}", crate::write_atomically(&missing, b"x").unwrap_err());
    assert!(
        err.contains("writing") && err.contains("gone/report.html"),
        "{err}"
    );
}

#[test]
fn a_complete_load_reads_each_verdict_and_names_every_cell_that_did_not_run() {
    let matrix = suites::load().unwrap();
    let mut runnable = matrix.cells.iter().filter(|c| c.not_applicable.is_none());
    let (ran, never_ran) = (runnable.next().unwrap(), runnable.next().unwrap());
    let not_applicable = matrix
        .cells
        .iter()
        .find(|c| c.not_applicable.is_some())
        .expect("the suites' matrix has a not-applicable cell");
    let chosen = [not_applicable.clone(), ran.clone(), never_ran.clone()];
    let dir = tempfile::tempdir().unwrap();
    // An earlier run's summary.json says the cell was as expected; its evidence has since been
    // written again by a run that failed.
    let earlier = graded(&ran.name(), &ran.expected, ran.expected.verdict, "earlier");
    write_all(dir.path(), &[earlier], Duration::from_millis(900)).unwrap();
    let again = result(
        &ran.name(),
        ran.expected.clone(),
        CellOutcome::Error {
            message: "the later run failed".into(),
        },
    );
    let evidence = crate::layout::CellEvidence::of(dir.path(), &ran.name());
    crate::verdict_file::VerdictFile::from_result(&again)
        .bind(&evidence)
        .unwrap()
        .write(&evidence)
        .unwrap();

    let loaded = folders::load_complete(&[dir.path().to_path_buf()], &chosen).unwrap();
    let cells = &loaded.summary.cells;
    let order: Vec<String> = chosen.iter().map(suites::Cell::name).collect();
    assert_eq!(names(&loaded.summary), order);
    assert_eq!(cells[0].status, Status::NotApplicable);
    assert_eq!(cells[1].status, Status::Error);
    assert_eq!(cells[1].reason, "the later run failed");
    assert_eq!(cells[2].status, Status::Error);
    assert!(
        cells[2].reason.contains("it did not run"),
        "{}",
        cells[2].reason
    );
    assert_eq!(loaded.summary.totals.failures(), 2);
    assert_eq!(
        loaded.summary.wall_ms, 0,
        "no run's wall time describes these cells"
    );
}

/// A cell graded with the driver's declarations (a legal line above or without a declared
/// `max_line_bytes`) says so in every report — beside its expected verdict in the Markdown's
/// differences and a section of its own, in the JUnit failure's message, in summary.json, in
/// verdict.json (and back), and on report.html — not only in `harness run --list`.
#[test]
fn what_the_declarations_make_of_a_cell_is_said_in_every_report() {
    let note = "the driver declares no max_line_bytes, so its line of over 1048576 bytes must work";
    let expected = Expectation {
        declarations: Some(note.into()),
        ..Expectation::pass()
    };
    let results = vec![
        graded(
            "protocol-size.my-runner-fake.local.line-1m",
            &expected,
            VerdictKind::Fail,
            "check `line-read-whole` failed: the run ended transport-lost",
        ),
        graded(
            "protocol-size.my-runner-fake.local.line-64k",
            &Expectation {
                declarations: Some("within the declared max_line_bytes = 65536".into()),
                ..Expectation::pass()
            },
            VerdictKind::Pass,
            "the session went on",
        ),
    ];
    let summary = Summary::from_results(&results, Duration::from_millis(10));
    assert_eq!(
        summary.cells[0].expected_declarations.as_deref(),
        Some(note)
    );

    let matrix = markdown(&summary);
    assert!(
        matrix.contains(&format!(
            "| `protocol-size.my-runner-fake.local.line-1m` | pass ({note}) | fail |"
        )),
        "{matrix}"
    );
    assert!(matrix.contains("### What the driver's declarations make of these cells"));
    assert!(matrix.contains(
        "- `protocol-size.my-runner-fake.local.line-64k` expects pass (within the declared max_line_bytes = 65536)"
    ));
    let junit = junit_xml(&summary).unwrap();
    assert!(
        junit.contains(&format!(
            "message=\"expected `pass`, got `fail`; declarations: {note}\""
        )),
        "{junit}"
    );
    let json = serde_json::to_value(&summary).unwrap();
    assert_eq!(json["cells"][0]["expected_declarations"], note);
    assert!(json["cells"][0].get("expected_reason").is_none());

    let dir = tempfile::tempdir().unwrap();
    let evidence = crate::layout::CellEvidence::new(dir.path());
    let file = crate::verdict_file::VerdictFile::from_result(&results[0]);
    file.write(&evidence).unwrap();
    let read = crate::verdict_file::VerdictFile::read(&evidence)
        .unwrap()
        .unwrap();
    assert_eq!(read.expected_declarations.as_deref(), Some(note));
    let row = read.summary(&results[0].cell, &evidence);
    assert_eq!(row.expected_declarations.as_deref(), Some(note));

    let page = crate::html::render(&summary);
    assert!(page.contains(note), "the page's data holds the note");
    assert!(page.contains("expected with the driver's declarations"));
}

/// `result`, which `harness run --retries` ran after a first attempt ending as `first` did.
fn after_a_failed_attempt(result: CellResult, first: CellResult) -> CellResult {
    CellResult {
        earlier_attempts: vec![crate::outcome::EarlierAttempt::of(1, &first)],
        ..result
    }
}

/// A flaky cell (incomplete, then pass) and one that differed on both attempts.
fn retried() -> Vec<CellResult> {
    let pass = Expectation::pass();
    let flaky = "protocol-handshake.published-codex.local.handshake";
    let red = "protocol-handshake.published-codex.daytona.handshake";
    let incomplete = |name| {
        graded(
            name,
            &pass,
            VerdictKind::Incomplete,
            "the driver exited with status 1",
        )
    };
    vec![
        after_a_failed_attempt(
            graded(flaky, &pass, VerdictKind::Pass, "initialize came first"),
            incomplete(flaky),
        ),
        after_a_failed_attempt(incomplete(red), incomplete(red)),
        graded(
            "protocol-handshake.published-fake.local.handshake",
            &pass,
            VerdictKind::Pass,
            "initialize came first",
        ),
    ]
}

#[test]
fn markdown_matrix_with_a_flaky_cell() {
    let summary = Summary::from_results(&retried(), Duration::from_millis(1500));
    insta::assert_snapshot!("markdown_matrix_with_a_flaky_cell", markdown(&summary));
}

#[test]
fn a_flaky_cell_is_counted_and_its_attempts_are_written_and_read_back() {
    let results = retried();
    assert!(results[0].is_flaky() && !results[0].is_failure());
    assert!(results[1].is_failure() && !results[1].is_flaky());
    let summary = Summary::from_results(&results, Duration::from_millis(1500));
    assert_eq!(
        (
            summary.totals.flaky,
            summary.totals.as_expected,
            summary.totals.differs
        ),
        (1, 2, 1)
    );
    let junit = junit_xml(&summary).unwrap();
    assert_eq!(junit.matches("<flakyFailure").count(), 1, "{junit}");
    assert_eq!(junit.matches("<rerunFailure").count(), 1, "{junit}");
    assert!(
        junit.contains("<system-out>flaky: failed, then as expected"),
        "{junit}"
    );
    let html = html::render(&summary);
    assert!(html.contains("⚠ 1 flaky") && html.contains("id=\"flaky\""));

    let json = serde_json::to_string(&summary).unwrap();
    let read: Summary = serde_json::from_str(&json).unwrap();
    assert_eq!(read, summary);
    let older: Summary = serde_json::from_str(&json.replace("\"flaky\":", "\"unknown\":")).unwrap();
    assert_eq!(
        older.totals.flaky, 0,
        "a summary written before retries reads"
    );

    // verdict.json keeps the attempts: `harness report` rebuilds the same rows from it.
    let dir = tempfile::tempdir().unwrap();
    let evidence = layout::CellEvidence::new(dir.path());
    let file = verdict_file::VerdictFile::from_result(&results[0]);
    file.write(&evidence).unwrap();
    let row = verdict_file::VerdictFile::read(&evidence)
        .unwrap()
        .unwrap()
        .summary(&results[0].cell, &evidence);
    assert!(row.is_flaky(), "{row:?}");
    assert_eq!(row.earlier_attempts, results[0].earlier_attempts);
}
