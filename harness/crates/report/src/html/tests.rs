use super::*;
use crate::summary::{CellSummary, Status, Summary};
use serde_json::json;
use std::path::Path;

const CELL: &str = "codex-planning-read-only.runner-fake.local.plan-write-refused";

fn event(seq: u64, source: &str, kind: &str, payload: serde_json::Value) -> String {
    json!({"v": 1, "seq": seq, "run": "r", "source": source, "kind": kind, "payload": payload})
        .to_string()
}

/// An evidence folder like a cell's (of the cell `name`), with one line of each kind the page
/// must tolerate.
fn evidence_folder(dir: &Path, name: &str) {
    let events = [
        event(
            0,
            "driver",
            "run.started",
            json!({"driver": "reference", "launch": {"mode": "planning", "argv": ["-c", "default_permissions=\":read-only\""], "thread_permissions": ":read-only", "turn_permissions": null, "identity": "abc"}}),
        ),
        event(
            1,
            "driver",
            "item.completed",
            json!({"turn_id": "t", "item": {"type": "command-execution", "command": "printf probe > plan-write-probe-1.txt", "status": "completed"}}),
        ),
        event(
            2,
            "driver",
            "session.relaunched",
            json!({"identity": "abc", "policy": "current", "argv": [], "thread_permissions": null, "resume_thread": "th"}),
        ),
        event(
            3,
            "model",
            "model.tool-output",
            json!({"call_id": "c", "output": "Read-only file system </script><!--"}),
        ),
        event(
            4,
            "harness",
            "run.ended",
            json!({"ending": "succeeded", "retry_offered": false, "error_code": null, "reason": null}),
        ),
    ];
    std::fs::write(dir.join("events.jsonl"), events.join("\n") + "\n").unwrap();
    let transcript = [
        json!({"direction": "in", "time": 1000, "message": {"id": 1, "method": "initialize", "params": {}}}).to_string(),
        json!({"direction": "out", "time": 1004, "message": {"id": 1, "result": {"ok": true}}}).to_string(),
        json!({"direction": "out", "time": 1005, "raw": "garbage"}).to_string(),
        json!({"kind": "launch", "launch": 1, "time": 999, "argv": ["app-server", "-c", "x=1"], "env_names": ["PATH"], "program": "/bin/codex", "added_args": ["-c", "model_provider=mock"], "pid": 7}).to_string(),
        json!({"kind": "exit", "launch": 1, "time": 1009, "status": 0}).to_string(),
        json!({"direction": "out", "time": 1010, "note": "end of stream"}).to_string(),
        "{\"direction\":\"out\",\"time\":10".to_string(),
    ];
    // The last line is cut off mid-way (no newline): the file is shown as truncated.
    std::fs::write(dir.join("transcript.jsonl"), transcript.join("\n")).unwrap();
    std::fs::write(dir.join("stderr.log"), "warning: something\n").unwrap();
    let verdict = json!({
        "cell": name,
        "status": "as-expected",
        "agreement": "as expected",
        "verdict": {"verdict": "pass", "reason": "refused", "evidence": [
            {"seq": 1, "excerpt": "command"}, {"seq": 4, "excerpt": "run.ended"}, {"seq": 9, "excerpt": "absent"}
        ]}
    });
    let evidence = crate::layout::CellEvidence::new(dir);
    crate::verdict_file::VerdictFile::parse(verdict.to_string().as_bytes(), &evidence.verdict())
        .unwrap()
        .bind(&evidence)
        .unwrap()
        .write(&evidence)
        .unwrap();
}

/// `dir`'s transcript replaced by `text`, its verdict bound to it again.
fn with_transcript(dir: &Path, text: &str) {
    std::fs::write(dir.join("transcript.jsonl"), text).unwrap();
    let evidence = crate::layout::CellEvidence::new(dir);
    crate::verdict_file::VerdictFile::parse(
        &std::fs::read(evidence.verdict()).unwrap(),
        &evidence.verdict(),
    )
    .unwrap()
    .bind(&evidence)
    .unwrap()
    .write(&evidence)
    .unwrap();
}

fn summary_cell(name: &str, dir: &Path, status: Status, verdict: Option<&str>) -> CellSummary {
    let id: graders::events::CellId = name.parse().unwrap();
    CellSummary {
        cell: name.to_string(),
        profile: Some(suites::spec::Profile::RunnerContract),
        suite: id.suite,
        runner: id.runner,
        environment: id.environment,
        case: id.case,
        status,
        expected: "pass".into(),
        expected_reason: None,
        expected_declarations: None,
        verdict: verdict.map(str::to_string),
        reason: "the write was refused".into(),
        duration_ms: 12,
        evidence_dir: dir.display().to_string(),
        earlier_attempts: Vec::new(),
    }
}

#[test]
fn a_protocol_cell_that_did_not_pass_opens_with_its_finding_and_the_events_it_cites() {
    let dir = tempfile::tempdir().unwrap();
    let name = "protocol-server-requests.my-runner-fake.local.command-approval";
    evidence_folder(dir.path(), name);
    let mut cell = summary_cell(name, dir.path(), Status::Differs, Some("fail"));
    cell.profile = Some(suites::spec::Profile::Protocol);
    cell.reason = "check `answered` failed: the driver never answered item/commandExecution/requestApproval (id 7) within 10 s; every server request must be answered (ServerRequest.json)".into();
    let page = CellPage::load(&cell);
    let finding = page.finding.expect("a finding");
    assert_eq!(finding.check.as_deref(), Some("answered"));
    assert!(
        finding.what.starts_with("the driver never answered"),
        "{}",
        finding.what
    );
    let seqs: Vec<Option<u64>> = finding.lines.iter().map(|l| l.seq).collect();
    assert_eq!(seqs, vec![Some(1), Some(4)], "the events the verdict cites");
    assert_eq!(finding.lines[0].title, "item.completed");
    // A passing protocol cell, or a runner-contract cell, has none.
    cell.verdict = Some("pass".into());
    assert!(CellPage::load(&cell).finding.is_none());
    let contract = summary_cell(CELL, dir.path(), Status::Differs, Some("fail"));
    let page = CellPage::load(&contract);
    assert!(page.finding.is_none());
    // The folder's verdict is the other cell's: what it cites is not marked on this cell's page.
    assert!(
        page.notes.iter().any(|n| n.contains(&format!(
            "verdict.json names cell {name}, not this folder's {CELL}"
        ))),
        "{:?}",
        page.notes
    );
    assert!(page.timeline.iter().all(|e| !e.cited));
}

#[test]
fn a_cell_page_reads_every_file_tolerantly_and_marks_what_the_verdict_cites() {
    let dir = tempfile::tempdir().unwrap();
    evidence_folder(dir.path(), CELL);
    let page = CellPage::load(&summary_cell(
        CELL,
        dir.path(),
        Status::AsExpected,
        Some("pass"),
    ));
    let cited: Vec<u64> = page
        .timeline
        .iter()
        .filter(|e| e.cited)
        .filter_map(|e| e.seq)
        .collect();
    assert_eq!(cited, vec![1, 4]);
    assert!(
        page.notes.iter().any(|n| n.contains("event #9")),
        "{:?}",
        page.notes
    );
    assert!(!page.timed, "v1 events carry no times");
    assert_eq!(page.launch.as_ref().unwrap()["driver"], "reference");
    assert_eq!(page.relaunches.len(), 1);
    assert_eq!(page.tap_launches.len(), 1, "the launch record is a launch");
    assert_eq!(
        page.tap_launches[0]["exit"]["status"], 0,
        "its exit is shown with it"
    );
    let exit = page.timeline.iter().find(|e| e.title == "exit #1").unwrap();
    assert_eq!(exit.text, "status 0 signal null");
    let sources: Vec<&str> = page.timeline.iter().map(|e| e.src).collect();
    assert_eq!(
        sources,
        vec![
            "driver", "driver", "driver", "model", "harness", "in", "out", "raw", "record",
            "record", "note", "raw"
        ]
    );
    let response = page.timeline.iter().find(|e| e.src == "out").unwrap();
    assert_eq!(response.title, "result ← initialize");
    let states: Vec<(&str, &str)> = page
        .files
        .iter()
        .map(|f| (f.name.as_str(), f.state))
        .collect();
    assert_eq!(
        states,
        vec![
            ("verdict.json", "ok"),
            ("events.jsonl", "ok"),
            ("transcript.jsonl", "truncated"),
            ("model-log.jsonl", "missing")
        ]
    );
    assert_eq!(page.stderr_tail.as_deref(), Some("warning: something\n"));
}

#[test]
fn timed_events_are_merged_with_the_wire_in_time_order() {
    let dir = tempfile::tempdir().unwrap();
    let events = [
        json!({"v": 2, "seq": 0, "ts_ms": 1002, "run": "r", "source": "driver", "kind": "session.started", "payload": {}}).to_string(),
        json!({"v": 2, "seq": 1, "ts_ms": 1020, "run": "r", "source": "harness", "kind": "run.ended", "payload": {}}).to_string(),
    ];
    std::fs::write(dir.path().join("events.jsonl"), events.join("\n") + "\n").unwrap();
    let wire = [
        json!({"direction": "in", "time": 1000, "message": {"id": 1, "method": "thread/start"}})
            .to_string(),
        json!({"direction": "out", "time": 1002, "message": {"id": 1, "result": {}}}).to_string(),
        json!({"direction": "out", "time": 1010, "message": {"method": "turn/started"}})
            .to_string(),
    ];
    std::fs::write(dir.path().join("transcript.jsonl"), wire.join("\n") + "\n").unwrap();
    let page = CellPage::load(&summary_cell(
        CELL,
        dir.path(),
        Status::AsExpected,
        Some("pass"),
    ));
    assert!(page.timed);
    let titles: Vec<&str> = page.timeline.iter().map(|e| e.title.as_str()).collect();
    assert_eq!(
        titles,
        vec![
            "thread/start",
            "result ← thread/start",
            "session.started",
            "turn/started",
            "run.ended"
        ]
    );
    assert!(page
        .notes
        .iter()
        .any(|n| n.contains("verdict.json is missing")));
}

#[test]
fn the_page_is_self_contained_and_its_data_cannot_end_a_script() {
    let dir = tempfile::tempdir().unwrap();
    evidence_folder(dir.path(), CELL);
    let cells = vec![
        summary_cell(CELL, dir.path(), Status::AsExpected, Some("pass")),
        summary_cell(
            "codex-planning-read-only.runner-fake.daytona.plan-write-refused",
            &dir.path().join("absent"),
            Status::Differs,
            Some("sandbox-failed-to-start"),
        ),
    ];
    let summary = Summary::from_cells(cells, 1500);
    let page = render(&summary);
    for external in ["<link", "src=\"http", "href=\"http", "@import", "url("] {
        assert!(
            !page.contains(external),
            "the page refers outside itself: {external}"
        );
    }
    // The evidence holds `</script><!--`; inside the data blocks no `<` survives.
    assert_eq!(
        page.matches("</script>").count(),
        5,
        "index, the repository's base, two cells, the script"
    );
    assert_eq!(page.matches("data-cell=").count(), 2);
    assert!(page.contains("class=\"c v-sandbox-failed-to-start s-differs\""));
    assert!(page.contains("Differences from the baseline"));
    assert!(page.contains("the matrix differs from its expectation"));
    let start = page.find("id=\"cell-1\">").unwrap() + "id=\"cell-1\">".len();
    let end = start + page[start..].find("</script>").unwrap();
    let data: serde_json::Value = serde_json::from_str(&page[start..end]).unwrap();
    assert!(data["notes"][0].as_str().unwrap().contains("is not here"));
}

#[test]
fn escape_covers_markup_and_quotes() {
    assert_eq!(
        escape("<a href=\"x\">&'"),
        "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
    );
}

/// A delta burst's cell: 100 000 transcript lines (24 MB). Its page was 24.6 MB; now it keeps
/// the timeline's head and tail with a note saying what is left out, its cited events, and
/// bodies within the report's budget.
#[test]
fn a_cell_with_a_24_mb_transcript_renders_within_a_bound() {
    let dir = tempfile::tempdir().unwrap();
    evidence_folder(dir.path(), CELL);
    let delta = json!({"direction": "out", "time": 2000, "launch": 1, "message": {"method": "item/agentMessage/delta", "params": {"threadId": "01a24603-0ae5-74b8-857e-adab14104e10", "turnId": "01a24603-0ae6-732d-bd21-d62b4d47f9c9", "itemId": "01a24603-0ae7-734c-a652-edc0c9775362", "delta": "x".repeat(60)}}}).to_string();
    let mut transcript = (delta + "\n").repeat(100_000);
    transcript.push_str(&(json!({"direction": "out", "time": 3000, "message": {"method": "turn/completed", "params": {}}}).to_string() + "\n"));
    assert!(transcript.len() > 24_000_000, "{}", transcript.len());
    with_transcript(dir.path(), &transcript);
    let cell = summary_cell(CELL, dir.path(), Status::AsExpected, Some("pass"));
    let html = render(&Summary::from_cells(vec![cell], 0));
    let bound = 5 << 20;
    assert!(
        html.len() < bound,
        "report.html is {} bytes, over {bound}",
        html.len()
    );
    let data = cell_data(&html, 0);
    let rows = data["timeline"].as_array().unwrap();
    // Head and tail, the cited rows, and one note for the rest, naming the file's lines it
    // left out.
    let cited: Vec<_> = rows.iter().filter(|r| r[8] == 1).collect();
    assert_eq!(rows.len(), MAX_TIMELINE_ENTRIES + cited.len() + 1);
    let note = rows
        .iter()
        .find(|r| r[1] == "note" && r[5] == "not in the report")
        .expect("a note where the entries left out were");
    let text = note[6].as_str().unwrap();
    assert!(
        text == "not in the report: transcript.jsonl lines 998–99001 (48003 entries); the evidence files hold them",
        "{text}"
    );
    // The tail is the file's: its last line is the last row.
    let last = rows.last().unwrap();
    assert_eq!(
        (last[3].as_str(), last[4].as_u64()),
        (Some("transcript.jsonl"), Some(100_001)),
        "{last}"
    );
    assert_eq!(data["files"][2]["lines"], 100_001);
    assert_eq!(data["files"][2]["state"], "cut");
    // Cited rows keep their whole message.
    assert!(!cited.is_empty());
    assert!(cited
        .iter()
        .all(|r| r[7].as_str().unwrap().contains("\"seq\"")));
}

/// The report's budget goes to the red cells first: a red cell keeps its whole timeline, the
/// others share what is left, and the whole report stays bounded however many cells there are.
#[test]
fn the_timeline_budget_goes_to_red_cells_first_and_bounds_the_report() {
    let root = tempfile::tempdir().unwrap();
    let filler = "y".repeat(2000);
    let lines: Vec<String> = (0..100)
        .map(|i| json!({"direction": "out", "time": 2000 + i, "message": {"method": "item/agentMessage/delta", "params": {"delta": filler}}}).to_string())
        .collect();
    let mut cells = Vec::new();
    let count = 150;
    for i in 0..count {
        let name = format!("core-compatibility.runner-fake.local.case-{i}");
        let dir = root.path().join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        evidence_folder(&dir, &name);
        with_transcript(&dir, &(lines.join("\n") + "\n"));
        let (status, verdict) = if i == 7 {
            (Status::Differs, "fail")
        } else {
            (Status::AsExpected, "pass")
        };
        cells.push(summary_cell(&name, &dir, status, Some(verdict)));
    }
    let html = render(&Summary::from_cells(cells, 0));
    let rows = |index: usize| {
        cell_data(&html, index)["timeline"]
            .as_array()
            .unwrap()
            .clone()
    };
    let with_body = |rows: &[serde_json::Value]| rows.iter().filter(|r| r[7] != "").count();
    let red = rows(7);
    assert_eq!(red.len(), 105, "the red cell keeps every entry");
    assert_eq!(with_body(&red), 105, "and every body");
    let green = rows(8);
    assert!(with_body(&green) < 20, "{} bodies", with_body(&green));
    assert!(green.len() >= 2 * MIN_ENTRIES_EACH_END, "{}", green.len());
    let bound = REPORT_TIMELINE_BYTES + count * 8 * 1024;
    assert!(html.len() < bound, "report.html is {} bytes", html.len());
}

/// The JSON data block of cell `index` in `html`.
fn cell_data(html: &str, index: usize) -> serde_json::Value {
    let marker = format!("id=\"cell-{index}\">");
    let start = html.find(&marker).unwrap() + marker.len();
    let end = start + html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..end]).unwrap()
}

#[test]
fn a_red_cells_page_carries_its_cause_its_stderr_and_what_the_case_checks() {
    let dir = tempfile::tempdir().unwrap();
    let name = "protocol-server-requests.my-runner-fake.local.command-approval";
    evidence_folder(dir.path(), name);
    let evidence = crate::layout::CellEvidence::new(dir.path());
    let cause = "the driver exited with status 1, saying on stderr (the end of its 20 bytes of stderr.log): `warning: something`";
    let grader =
        "check `answered` failed: the driver never answered item/commandExecution/requestApproval";
    let file = crate::verdict_file::VerdictFile::parse(
        &std::fs::read(evidence.verdict()).unwrap(),
        &evidence.verdict(),
    )
    .unwrap()
    .with_cause(Some(cause.into()));
    file.write(&evidence).unwrap();
    let mut cell = summary_cell(name, dir.path(), Status::Differs, Some("fail"));
    cell.profile = Some(suites::spec::Profile::Protocol);
    cell.reason = crate::cause::lead(cause, grader);
    let page = CellPage::load(&cell);
    assert_eq!(page.cause.as_deref(), Some(cause));
    assert_eq!(page.stderr_tail.as_deref(), Some("warning: something\n"));
    let finding = page.finding.expect("a finding");
    assert_eq!(
        finding.check.as_deref(),
        Some("answered"),
        "the check is found behind the cause"
    );
    let about = page.about.expect("a shipped case");
    assert!(about.case.contains("ServerRequest.json"), "{}", about.case);
    assert_eq!(
        about.page,
        "docs/profiles/protocol.md#protocol-server-requests"
    );
    let html = render_pages(
        &Summary::from_cells(vec![cell.clone()], 0),
        vec![CellPage::load(&cell)],
    );
    assert!(html.contains("id=\"repository-base\""));
}
