//! report.html in a real browser: Debian's `chromium`, headless. The grid renders, a cell's
//! page opens from its link, and the rows it highlights are exactly the events its verdict
//! cites; a cell timeline with thousands of messages keeps a bounded window of rows in the DOM
//! at every scroll position (virtualised) and the whole matrix's report opens. The page's own
//! timings are printed, never asserted: they depend on the machine's load. Screenshots are
//! kept under `target/conformance/report-screenshots/` for CI to upload.
//!
//! Needs chromium (`apt-get install -y chromium`): without it the trials are ignored with the
//! reason; under `CI=true` they fail.

use crate::common;

use common::harness_cli::{rebuild, run_cells};
use common::prereq;
use libtest_mimic::{Failed, Trial};
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use wait_timeout::ChildExt;

/// The cells the report is built from: the reference runner's fake cells on the host of five
/// suites, both profiles (22 cells, seconds). Not all of its 70: the protocol-size cells' megabyte
/// lines made `report.html` 30 MB, and each of the test's ten browser runs parsed it for about
/// 5 s.
const FILTERS: &[&str] = &[
    "codex-planning-read-only.runner-fake.local.",
    "core-compatibility.runner-fake.local.",
    "transport-faults.runner-fake.local.",
    "protocol-handshake.runner-fake.local.",
    "protocol-server-requests.runner-fake.local.",
];
/// A cell whose verdict cites several events.
const CITING_CELL: &str = "codex-planning-read-only.runner-fake.local.plan-write-refused";
/// Transcript lines of the large cell (its page keeps `report::html::MAX_TIMELINE_ENTRIES` of
/// them, head and tail, and a note for the rest).
const LARGE_TIMELINE: usize = 10_000;
/// Most timeline rows a virtualised page keeps in the DOM: a tall window's rows plus overscan
/// (report.js renders the visible rows and 12 either side).
const MAX_ROWS_IN_DOM: f64 = 200.0;
/// Height of one timeline row (report.js `ROW`).
const ROW_PX: f64 = 26.0;
/// Bound on one chromium run.
const CHROMIUM_TIMEOUT: Duration = Duration::from_secs(60);

/// The trials, run one at a time: the printed timings should not measure the other trial's
/// browser.
pub fn trials() -> Vec<Trial> {
    // $CHROMIUM naming a program that does not exist is an error, never a skip.
    let named_but_absent = std::env::var_os("CHROMIUM")
        .filter(|p| !p.is_empty())
        .and_then(|_| chromium().err());
    let missing = chromium().err();
    let trial = |name: &str, body: fn() -> Result<(), String>| match &named_but_absent {
        Some(error) => {
            let error = error.clone();
            libtest_mimic::Trial::test(name, move || Err(Failed::from(error)))
        }
        None => prereq::trial(name, missing.clone(), move || body().map_err(Failed::from)),
    };
    let trials = vec![
        trial(
            "report_grid_and_cell_page_render_in_headless_chromium_needs_chromium",
            grid_and_cell_page,
        ),
        trial(
            "report_large_timeline_stays_virtualised_and_whole_matrix_opens_in_headless_chromium_needs_chromium",
            large_timeline_virtualised_and_whole_matrix_opens,
        ),
        trial(
            "report_red_cell_page_leads_with_its_cause_and_folds_a_near_empty_timeline_in_headless_chromium_needs_chromium",
            red_cell_page_leads_with_its_cause,
        ),
    ];
    trials
}

/// The chromium binary: `$CHROMIUM`, else `chromium` or `chromium-browser` on PATH.
fn chromium() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("CHROMIUM").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!(
                "$CHROMIUM names {}, which does not exist",
                path.display()
            ))
        };
    }
    ["chromium", "chromium-browser"]
        .iter()
        .find_map(|name| sandbox::system::which(name))
        .ok_or_else(|| "chromium is not installed (apt-get install -y chromium)".to_string())
}

/// Where the screenshots stay after the test (CI uploads target/conformance/).
fn screenshot_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target/tmp has a parent")
        .join("conformance")
        .join("report-screenshots");
    std::fs::create_dir_all(&dir).expect("creating the screenshot folder");
    dir
}

/// Run headless chromium on `url` with `mode` (`--dump-dom`, or `--screenshot=…`) and return
/// its stdout. Its own process group, killed afterwards: no renderer or crash handler outlives
/// the test.
fn run_chromium(url: &str, mode: &str, window: &str) -> Result<String, String> {
    use std::os::unix::process::CommandExt;
    let profile = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut child = Command::new(chromium()?)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--window-size={window}"))
        .arg(mode)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("starting chromium: {e}"))?;
    let group = nix::unistd::Pid::from_raw(child.id() as i32);
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stdout.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let status = child
        .wait_timeout(CHROMIUM_TIMEOUT)
        .map_err(|e| format!("waiting for chromium: {e}"))?;
    let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
    let _ = child.wait();
    let (out, err) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    match status {
        None => Err(format!(
            "chromium did not finish within {CHROMIUM_TIMEOUT:?} on {url}"
        )),
        Some(status) if !status.success() => Err(format!(
            "chromium exited with {status} on {url}: {}",
            err.lines().rev().take(5).collect::<Vec<_>>().join(" | ")
        )),
        Some(_) => Ok(out),
    }
}

fn dump_dom(report: &Path, hash: &str) -> Result<String, String> {
    let url = format!("file://{}{hash}", report.display());
    let dom = run_chromium(&url, "--dump-dom", "1400,1000")?;
    if !dom.contains("data-ready=\"true\"") {
        return Err(format!("the page's script did not finish on {url}"));
    }
    Ok(dom)
}

fn screenshot(report: &Path, hash: &str, name: &str, window: &str) -> Result<PathBuf, String> {
    let path = screenshot_dir().join(name);
    let url = format!("file://{}{hash}", report.display());
    run_chromium(&url, &format!("--screenshot={}", path.display()), window)?;
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    if size < 10_000 {
        return Err(format!(
            "the screenshot {} is empty ({size} bytes)",
            path.display()
        ));
    }
    eprintln!("screenshot: {}", path.display());
    Ok(path)
}

/// Every opening tag in `dom` whose `class` attribute starts with `class_prefix`, as the text
/// between `<` and `>`.
fn tags_with_class<'a>(dom: &'a str, tag: &str, class_prefix: &str) -> Vec<&'a str> {
    let needle = format!("<{tag} class=\"{class_prefix}");
    dom.match_indices(&needle)
        .map(|(at, _)| {
            let end = at + dom[at..].find('>').unwrap_or(dom.len() - at);
            &dom[at..end]
        })
        .collect()
}

fn attribute<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let needle = format!(" {name}=\"");
    let start = tag.find(&needle)? + needle.len();
    let end = start + tag[start..].find('"')?;
    Some(&tag[start..end])
}

fn cited_seqs(cell_dir: &Path) -> Result<Vec<u64>, String> {
    let text = std::fs::read_to_string(cell_dir.join("verdict.json")).map_err(|e| e.to_string())?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    Ok(doc
        .pointer("/verdict/evidence")
        .and_then(Value::as_array)
        .ok_or("verdict.json has no evidence")?
        .iter()
        .filter_map(|e| e["seq"].as_u64())
        .collect())
}

fn grid_and_cell_page() -> Result<(), String> {
    let out = tempfile::tempdir().map_err(|e| e.to_string())?;
    run_cells(out.path(), FILTERS)?;
    let report = out.path().join("report.html");
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("summary.json")).map_err(|e| e.to_string())?,
    )
    .map_err(|e| e.to_string())?;
    let cells = summary["cells"]
        .as_array()
        .ok_or("summary without cells")?
        .len();

    // The grid: one linked cell per matrix cell, and the filters' count written by the script.
    let dom = dump_dom(&report, "")?;
    let grid_cells = tags_with_class(&dom, "td", "c v-");
    if grid_cells.len() != cells {
        return Err(format!(
            "the grid shows {} cells, the run has {cells}",
            grid_cells.len()
        ));
    }
    let shown = format!("{cells} of {cells} cells shown");
    if !dom.contains(&shown) {
        return Err(format!("the filters do not say `{shown}`"));
    }
    if !dom.contains(&format!("href=\"#/cell/{CITING_CELL}\"")) {
        return Err(format!("the grid has no link to {CITING_CELL}"));
    }
    screenshot(&report, "", "grid.png", "1400,1100")?;

    // The filters, set from the address as a shared link would.
    let transport = summary["cells"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["suite"] == "transport-faults")
        .count();
    let dom = dump_dom(&report, "#?suite=transport-faults")?;
    let shown = format!("{transport} of {cells} cells shown");
    if transport == 0 || !dom.contains(&shown) {
        return Err(format!("filtering by suite does not say `{shown}`"));
    }
    if !dom.contains("<section class=\"suite\" data-suite=\"core-compatibility\" data-profile=\"runner-contract\" hidden=\"\">") {
        return Err("filtering by suite leaves other suites shown".into());
    }
    let contract = summary["cells"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["profile"] == "runner-contract")
        .count();
    let dom = dump_dom(&report, "#?profile=runner-contract")?;
    let shown = format!("{contract} of {cells} cells shown");
    if contract == 0 || contract == cells || !dom.contains(&shown) {
        return Err(format!("filtering by profile does not say `{shown}`"));
    }
    if !dom.contains("<section class=\"profile\" data-profile=\"protocol\" hidden=\"\">") {
        return Err("filtering by profile leaves the other profile shown".into());
    }

    // One cell made to differ, the reports rebuilt from the folder: the grid marks it, lists it
    // under the differences, and "differences only" shows just that cell. The folder is put
    // back afterwards (the screenshots show the real run).
    let summary_path = out.path().join("summary.json");
    let mut edited = summary.clone();
    edited["cells"][0]["status"] = "differs".into();
    edited["cells"][0]["verdict"] = "write-succeeded".into();
    let differing = edited["cells"][0]["cell"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    // The row and the cell's verdict.json must agree (a row alone is not believed).
    let verdict_path = out.path().join(&differing).join("verdict.json");
    let verdict_text = std::fs::read_to_string(&verdict_path).map_err(|e| e.to_string())?;
    let mut verdict: Value = serde_json::from_str(&verdict_text).map_err(|e| e.to_string())?;
    verdict["status"] = "differs".into();
    verdict["verdict"]["verdict"] = "write-succeeded".into();
    std::fs::write(&verdict_path, verdict.to_string()).map_err(|e| e.to_string())?;
    std::fs::write(&summary_path, edited.to_string()).map_err(|e| e.to_string())?;
    rebuild(out.path())?;
    let dom = dump_dom(&report, "#?differences=1")?;
    let marked = tags_with_class(&dom, "td", "c v-write-succeeded s-differs");
    if marked.len() != 1 || attribute(marked[0], "data-cell") != Some(differing.as_str()) {
        return Err(format!("the differing cell is not marked: {marked:?}"));
    }
    if !dom.contains(&format!("1 of {cells} cells shown"))
        || !dom.contains("Differences from the baseline")
    {
        return Err("differences only does not show exactly the differing cell".into());
    }
    std::fs::write(&summary_path, summary.to_string()).map_err(|e| e.to_string())?;
    std::fs::write(&verdict_path, verdict_text).map_err(|e| e.to_string())?;
    rebuild(out.path())?;

    // The cell page: opened by its link; its highlighted rows are the events the verdict cites.
    let cited = cited_seqs(&out.path().join(CITING_CELL))?;
    if cited.len() < 2 {
        return Err(format!(
            "{CITING_CELL} cites {cited:?}: too few to test highlighting"
        ));
    }
    let hash = format!("#/cell/{CITING_CELL}");
    let dom = dump_dom(&report, &hash)?;
    if !dom.contains("<main id=\"cell-view\" data-open-ms=") {
        return Err("the cell page did not open".into());
    }
    let listed: Vec<u64> = dom_slice_after(&dom, "<ol class=\"cited\" id=\"cited\">")
        .split("</ol>")
        .next()
        .unwrap_or("")
        .split("<li data-seq=\"")
        .skip(1)
        .filter_map(|item| item.split('"').next()?.parse().ok())
        .collect();
    if listed != cited {
        return Err(format!(
            "the page lists evidence {listed:?}, the verdict cites {cited:?}"
        ));
    }
    let rows = tags_with_class(&dom, "div", "row ");
    if rows.is_empty() {
        return Err("the timeline rendered no rows".into());
    }
    for row in &rows {
        let seq: Option<u64> = attribute(row, "data-seq").and_then(|s| s.parse().ok());
        let highlighted =
            attribute(row, "class").is_some_and(|c| c.split(' ').any(|w| w == "cited"));
        let is_event = attribute(row, "class")
            .is_some_and(|c| !c.contains("src-in") && !c.contains("src-out"));
        let should = is_event && seq.is_some_and(|s| cited.contains(&s));
        if highlighted != should {
            return Err(format!(
                "row `{row}`: highlighted {highlighted}, cited by the verdict {should}"
            ));
        }
    }
    // Each cited event, followed from its evidence link, is selected and shown as cited.
    for seq in &cited {
        let dom = dump_dom(&report, &format!("{hash}@{seq}"))?;
        let shown = tags_with_class(&dom, "p", "where")
            .into_iter()
            .next()
            .ok_or(format!("event #{seq}: no detail shown"))?;
        let ok = attribute(shown, "data-seq") == Some(&seq.to_string())
            && attribute(shown, "data-cited") == Some("true");
        if !ok {
            return Err(format!("event #{seq}: the detail shows `{shown}`"));
        }
        let selected = tags_with_class(&dom, "div", "row ")
            .into_iter()
            .find(|row| attribute(row, "class").is_some_and(|c| c.contains("selected")))
            .ok_or(format!("event #{seq}: no row selected"))?;
        if attribute(selected, "data-seq") != Some(&seq.to_string()) || !selected.contains(" cited")
        {
            return Err(format!("event #{seq}: the selected row is `{selected}`"));
        }
    }
    screenshot(&report, &hash, "cell.png", "1400,1900")?;
    Ok(())
}

fn dom_slice_after<'a>(dom: &'a str, marker: &str) -> &'a str {
    dom.split(marker).nth(1).unwrap_or("")
}

/// Copy `from` (one folder level of files, compressed or not) to `to`.
fn copy_cell(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::create_dir_all(to).map_err(|e| e.to_string())?;
    let names = [
        "events.jsonl",
        "transcript.jsonl",
        "model-log.jsonl",
        "verdict.json",
        "stderr.log",
    ];
    for name in names
        .iter()
        .flat_map(|n| [n.to_string(), format!("{n}.gz")])
    {
        if from.join(&name).is_file() {
            std::fs::copy(from.join(&name), to.join(&name)).map_err(|e| format!("{name}: {e}"))?;
        }
    }
    Ok(())
}

fn large_timeline_virtualised_and_whole_matrix_opens() -> Result<(), String> {
    let run = tempfile::tempdir().map_err(|e| e.to_string())?;
    run_cells(run.path(), &[CITING_CELL])?;
    let source = run.path().join(CITING_CELL);

    // A cell whose transcript holds LARGE_TIMELINE messages (its real lines, repeated).
    let large = tempfile::tempdir().map_err(|e| e.to_string())?;
    let large_cell = large.path().join(CITING_CELL);
    copy_cell(&source, &large_cell)?;
    let lines: Vec<String> = common::evidence::read_text(&source.join("transcript.jsonl"))
        .map_err(|e| e.to_string())?
        .lines()
        .map(str::to_string)
        .collect();
    let repeated: Vec<&str> = lines
        .iter()
        .map(String::as_str)
        .cycle()
        .take(LARGE_TIMELINE)
        .collect();
    std::fs::write(
        large_cell.join("transcript.jsonl"),
        repeated.join("\n") + "\n",
    )
    .map_err(|e| e.to_string())?;
    let _ = std::fs::remove_file(large_cell.join("transcript.jsonl.gz"));
    rebuild(large.path())?;
    let dom = dump_dom(
        &large.path().join("report.html"),
        &format!("#/cell/{CITING_CELL}?measure"),
    )?;
    let measure: Value = serde_json::from_str(&html_unescape(
        attribute(dom_slice_after(&dom, "<body"), "data-measure")
            .ok_or("no measurement on the page")?,
    ))
    .map_err(|e| format!("the measurement: {e}"))?;
    eprintln!("large timeline ({LARGE_TIMELINE} transcript lines): {measure}");
    let number = |key: &str| measure[key].as_f64().unwrap_or(f64::INFINITY);
    let kept = report::html::MAX_TIMELINE_ENTRIES;
    // What the page leaves out it says, and it links the file that holds it.
    let left_out = dom_slice_after(&dom, "not in the report: ")
        .split('<')
        .next()
        .unwrap_or("");
    if !left_out.contains("transcript.jsonl lines ") {
        return Err("the page does not say which transcript lines it left out".into());
    }
    let link = format!("<a href=\"{CITING_CELL}/transcript.jsonl\">transcript.jsonl</a>");
    if !dom.contains(&link) {
        return Err(format!(
            "the page does not link the transcript: no `{link}`"
        ));
    }
    if number("entries") < kept as f64 {
        return Err(format!("the timeline holds {} entries", number("entries")));
    }
    // Deterministic: virtualised scrolling keeps a bounded window of rows in the DOM at every
    // scroll position (never none), while the scroll area spans every entry. The timings in the
    // measurement are printed above for a reader; they depend on the machine's load, so no test
    // asserts them (the project measures speed with benchmarks, not timed tests).
    let scroll_steps = number("scroll_renders");
    if !(scroll_steps >= 100.0 && scroll_steps.is_finite()) {
        return Err(format!(
            "the page scrolled {scroll_steps} times, not 100: {measure}"
        ));
    }
    let (fewest, most) = (
        number("rows_in_dom_min_while_scrolling"),
        number("rows_in_dom_max_while_scrolling"),
    );
    if !(1.0..=MAX_ROWS_IN_DOM).contains(&fewest) || !(1.0..=MAX_ROWS_IN_DOM).contains(&most) {
        return Err(format!(
            "between {fewest} and {most} rows in the DOM while scrolling (bound 1 to {MAX_ROWS_IN_DOM}): the timeline is not virtualised"
        ));
    }
    if !(1.0..=MAX_ROWS_IN_DOM).contains(&number("rows_in_dom")) {
        return Err(format!(
            "{} rows in the DOM after filtering: the timeline is not virtualised",
            number("rows_in_dom")
        ));
    }
    if number("scroll_height_px") < kept as f64 * ROW_PX {
        return Err(format!(
            "the timeline scrolls over {} px, less than {kept} rows of {ROW_PX} px",
            number("scroll_height_px")
        ));
    }

    // The whole shipped matrix's size, every cell with real evidence.
    let whole = tempfile::tempdir().map_err(|e| e.to_string())?;
    let matrix = suites::load().map_err(|e| e.to_string())?;
    for cell in &matrix.cells {
        copy_cell(&source, &whole.path().join(cell.name()))?;
    }
    rebuild(whole.path())?;
    let report = whole.path().join("report.html");
    let dom = dump_dom(&report, "")?;
    let ready: f64 = attribute(dom_slice_after(&dom, "<body"), "data-ready-ms")
        .and_then(|v| v.parse().ok())
        .ok_or("no ready time on the page")?;
    let bytes = std::fs::metadata(&report).map(|m| m.len()).unwrap_or(0);
    eprintln!(
        "whole matrix ({} cells, {bytes} bytes): ready after {ready} ms",
        matrix.cells.len()
    );
    // The time is for a reader (see above); the page reaching ready is the check.
    if !ready.is_finite() || ready < 0.0 {
        return Err(format!("the whole matrix's report's ready time is {ready}"));
    }
    screenshot(
        &large.path().join("report.html"),
        &format!("#/cell/{CITING_CELL}"),
        "large-timeline.png",
        "1400,1900",
    )?;
    Ok(())
}

/// A driver that gave up at once (the issue's SDK failing `thread/start`'s validation): its
/// evidence folder written as the harness writes one, its cause found from it, the report
/// built by `harness report`. No cell runs: the trial takes one browser run.
fn red_cell_page_leads_with_its_cause() -> Result<(), String> {
    use graders::events::{Body, DriverEnded, Ending, Event, RunEnded, Source};
    use graders::verdict::{Verdict, VerdictKind};
    use report::outcome::{CellOutcome, CellResult};
    const CELL: &str = "protocol-handshake.runner-sdk-fake.local.handshake";
    const SAID: &str =
        "response payload failed validation against ThreadStartResponse; method=thread/start";
    let out = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = out.path().join(CELL);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let ended = [
        Body::DriverEnded(DriverEnded::Exited { code: 1 }),
        Body::RunEnded(RunEnded {
            ending: Ending::FailedPermanently,
            retry_offered: false,
            error_code: Some("driver_failed".into()),
            reason: Some("the driver exited with status 1".into()),
        }),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, body)| serde_json::to_string(&Event::at(1, i as u64 + 1, "r", Source::Harness, body)))
    .collect::<Result<Vec<_>, _>>()
    .map_err(|e| e.to_string())?;
    let transcript = [
        serde_json::json!({"direction":"in","time":1000,"launch":1,"message":{"id":1,"method":"initialize","params":{}}}),
        serde_json::json!({"direction":"out","time":1001,"launch":1,"message":{"id":1,"result":{}}}),
        serde_json::json!({"direction":"in","time":1002,"launch":1,"message":{"id":2,"method":"thread/start","params":{}}}),
        serde_json::json!({"direction":"out","time":1003,"launch":1,"message":{"id":2,"result":{"thread":{"id":"th"}}}}),
        serde_json::json!({"kind":"stdin-closed","launch":1,"time":1400}),
    ]
    .map(|l| l.to_string());
    for (name, text) in [
        ("events.jsonl", ended.join("\n") + "\n"),
        ("transcript.jsonl", transcript.join("\n") + "\n"),
        (
            "stderr.log",
            format!("Traceback (most recent call last):\n{SAID}\n"),
        ),
    ] {
        std::fs::write(dir.join(name), text).map_err(|e| e.to_string())?;
    }
    // What the driver's declarations make of the cell is said at the top too.
    const DECLARED: &str = "graded against the declared max_line_bytes = 65536";
    let result = CellResult {
        cell: CELL.parse().map_err(|e| format!("{e}"))?,
        profile: Some(suites::spec::Profile::Protocol),
        expected: suites::Expectation {
            declarations: Some(DECLARED.into()),
            ..suites::Expectation::pass()
        },
        outcome: CellOutcome::Graded {
            verdict: Verdict::new(
                VerdictKind::Fail,
                "check `session-continued` failed: the run ended failed-permanently",
                vec![],
            ),
            agreement: suites::Expectation::pass().judge(VerdictKind::Fail),
        },
        duration: Duration::from_millis(500),
        evidence_dir: dir.clone(),
        earlier_attempts: Vec::new(),
    };
    let (result, cause) = report::cause::explain(result, None);
    let cause = cause.ok_or("no cause found in the folder")?;
    let evidence = report::layout::CellEvidence::new(&dir);
    report::verdict_file::VerdictFile::from_result(&result)
        .with_cause(Some(cause.clone()))
        .bind(&evidence)
        .and_then(|file| file.write(&evidence))
        .map_err(|e| format!("{e:#}"))?;
    rebuild(out.path())?;
    let report = out.path().join("report.html");
    let dom = dump_dom(&report, &format!("#/cell/{CELL}"))?;
    let why = dom
        .find("<section class=\"panel why\" id=\"why\">")
        .ok_or("no why section")?;
    let timeline = dom
        .find("<details class=\"panel timeline\"")
        .ok_or("no timeline")?;
    let launch = dom.find("<h3>Launch").unwrap_or(usize::MAX);
    if !(why < timeline && why < launch) {
        return Err(format!(
            "the why section (at {why}) does not come before the launch ({launch}) and the timeline ({timeline})"
        ));
    }
    // The verdict first, then the why section: the cause, and the driver's stderr tail itself.
    let verdict = dom
        .find("<span class=\"badge big v-fail\">fail</span>")
        .ok_or("no verdict badge")?;
    if verdict > why {
        return Err(format!(
            "the verdict (at {verdict}) comes after the why section ({why})"
        ));
    }
    let said = html_unescape(&dom[why..timeline]);
    let stderr = said
        .find("<pre class=\"stderr\">Traceback (most recent call last):")
        .ok_or("the why section shows no stderr tail")?;
    if !said[stderr..].contains(SAID) {
        return Err("the stderr tail does not end with what the driver said".into());
    }
    for text in [
        SAID,
        "cause: ",
        "then: </b>check `session-continued` failed",
        "the driver exited with status 1, 397 ms after",
        "docs/profiles/protocol.md#protocol-handshake",
        &format!("expected with the driver's declarations: </b>{DECLARED}"),
    ] {
        if !said.contains(text) {
            return Err(format!("the why section does not say `{text}`"));
        }
    }
    let details = &dom[timeline..timeline + dom[timeline..].find('>').unwrap_or(0)];
    if details.contains(" open") {
        return Err(format!("a near-empty timeline is open: `{details}`"));
    }
    screenshot(
        &report,
        &format!("#/cell/{CELL}"),
        "red-cell.png",
        "1400,900",
    )?;
    Ok(())
}

fn html_unescape(text: &str) -> String {
    text.replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}
