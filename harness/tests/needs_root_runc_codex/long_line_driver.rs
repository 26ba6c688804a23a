//! A driver whose line reader dies on a long line (issue 21): a copy of the minimal example
//! driver (`harness/examples/minimal_driver.py`) whose reader keeps asyncio's rule — a
//! `StreamReader`'s default limit is 64 KiB, and a line longer than that (its newline excluded)
//! raises instead of being read — and which exits 1 when it does. Against long legal lines its
//! cells must not pass and their transcripts must hold the line it died on (cut off where the
//! driver let go of it, or whole), and the cell must end `transport-lost` with a size the
//! recording holds in its reason (the line's, or how far into it the driver stopped reading): the recorder writes to the driver's own pipe (the tap hands
//! it over), so no relay's buffers hold a 1 MB line on the driver's behalf. The unmodified driver
//! passes the same cells, and the copy passes the 64 KiB line (at its limit, not over it), so
//! the failure is the limit's.
//!
//! A third copy declares its bound (`max_line_bytes = 65536`): dying on a longer line is then a
//! classified failure, which passes. A fourth counts the newline in its limit, so it dies on the
//! 64 KiB line, which fits whole in the pipes with the rest of the turn: the wire shows a turn
//! that completed and a driver that exited 1 (`failed-permanently`, the cell `fail`): how far a
//! driver read into its own buffers is not on the wire. The copies are patched here as
//! `broken_drivers.rs` patches its own (every patched text occurs exactly once in the original).
//!
//! The real Codex sends its long line when the mock model API answers with a 1,000,000-byte
//! agent message (`suites/scenarios/long-message.toml`, a case this test's drivers file adds,
//! graded as `line-1m`); the fake plays the same case beside its own long lines.

use crate::common;

use common::{driver_copies, prereq};

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The unmodified driver.
const ORIGINAL: &str = "minimal";
/// The copy whose reader dies on a line over 64 KiB.
const LIMITED: &str = "limited";
/// The same copy, declaring its bound.
const DECLARED: &str = "limited-declared";
/// How long each driver waits for a line of its app-server. Five seconds (below the harness's
/// default idle bound on the fake) let a driver on a loaded CI machine (the published matrix
/// beside the tests, load around 15 on two cores) give up before a 2 MiB line's first bytes
/// reached it: the run then shows a driver that timed out, not its reader's limit. Declared as
/// `idle_timeout_seconds`, the harness waits for it, as `legitimate_population` does.
const DRIVER_IDLE_SECONDS: u64 = 20;
/// A copy whose limit counts the newline, as a hand-written `readline(65536)` check does: it
/// dies on the 64 KiB line too.
const STRICT: &str = "limited-strict";

/// asyncio's `StreamReader` rule (`readuntil`: a separator found past the limit, or none within
/// it, is `LimitOverrunError`, which `readline` raises as `ValueError`), with its message; the
/// reader hands the error to the main loop, which exits 1 with it.
const READER_WITH_A_LIMIT: &[(&str, &str)] = &[
    (
        "threading.Thread(target=lambda: [inbox.put(l) for l in proc.stdout] + [inbox.put(None)], daemon=True).start()\n",
        r#"LIMIT = 2 ** 16  # asyncio.StreamReader's default limit


def read_lines():  # asyncio's readline: a line longer than LIMIT (newline excluded) raises
    try:
        for line in iter(lambda: proc.stdout.readline(LIMIT + 2), ""):
            if len(line.rstrip("\n")) > LIMIT:
                raise ValueError("Separator is not found, and chunk exceed the limit")
            inbox.put(line)
        inbox.put(None)
    except Exception as e:  # noqa: BLE001 - the reader's death ends the run
        inbox.put(e)


threading.Thread(target=read_lines, daemon=True).start()
"#,
    ),
    (
        "        raise EOFError(\"codex app-server closed its output\")\n    return json.loads(line)",
        "        raise EOFError(\"codex app-server closed its output\")\n    if isinstance(line, Exception):\n        raise line\n    return json.loads(line)",
    ),
];

/// The long lines of `protocol-size`, and whether they are over the copy's limit.
const CASES: &[(&str, Line)] = &[
    ("line-64k", Line::AtTheLimit),
    ("line-1m", Line::Over),
    ("line-2m", Line::Over),
];

/// The real Codex's long line, and the fake's of the same case (a longer message would make
/// `turn/completed`, which carries it, a line past the recorder's bound: no turn would complete
/// on the wire).
const LONG_MESSAGE_CASE: (&str, Line) = ("long-message-limited", Line::Over);

/// How a case's long line meets the copy's 64 KiB limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// At it, not over: read.
    AtTheLimit,
    /// Over it: the cell is never `pass`, and the line is cut off where the driver let go of
    /// it, so the ending is `transport-lost`. (Until the tap handed its pipes to the recorder, a
    /// line of about 1 MiB still fit whole in the relay's socket and pipes, up to 950,272 bytes
    /// measured, and such a cell ended as the driver's own failure.)
    Over,
}

/// The copy whose reader dies on a line over 64 KiB; an error when the patch no longer applies.
fn limited(original: &str) -> Result<String, String> {
    driver_copies::apply(original, READER_WITH_A_LIMIT, LIMITED)
}

/// [`limited`], its limit counting the newline.
fn strict(original: &str) -> Result<String, String> {
    driver_copies::apply(
        &limited(original)?,
        &[(
            r#"if len(line.rstrip("\n")) > LIMIT:"#,
            "if len(line) > LIMIT:",
        )],
        STRICT,
    )
}

/// A case of the drivers file: the real Codex's long line (a 1,000,000-byte agent message
/// the mock model API has it send), graded as `line-1m`.
const LONG_MESSAGE: &str = r#"[suites.protocol-size.cases.long-message-limited]
about = "a 1,000,000-byte agent message (its delta line and its item/completed line) is read whole"
scenario = "file:long-message.toml"
grade_as = "line-1m"
mode = "standard"
network = false
task = { prompt = "Summarise the README." }
"#;

/// The drivers and a drivers file declaring them, then `extra` (cases, matrix blocks); the
/// file's path. Each waits at most [`DRIVER_IDLE_SECONDS`] for a line and declares that wait, so
/// the harness's idle bound follows it.
fn drivers_file(dir: &Path, extra: &str) -> PathBuf {
    let original = driver_copies::minimal_driver();
    let limited = limited(&original).unwrap_or_else(|e| panic!("{e}"));
    let strict = strict(&original).unwrap_or_else(|e| panic!("{e}"));
    let mut file = String::new();
    for (name, text, declares) in [
        (ORIGINAL, &original, ""),
        (LIMITED, &limited, ""),
        (DECLARED, &limited, "max_line_bytes = 65536\n"),
        (STRICT, &strict, ""),
    ] {
        std::fs::write(dir.join(format!("{name}.py")), text).unwrap();
        let _ = write!(
            file,
            "[drivers.{name}]\ncommand = \"python3 {name}.py --cwd {{workspace}} --prompt {{prompt}} --mode {{mode}} --timeout {DRIVER_IDLE_SECONDS}\"\ncodex = \"env:CODEX_PATH\"\nmodes = [\"planning\", \"standard\", \"ask\"]\noutcome = \"exit-status\"\nidle_timeout_seconds = {DRIVER_IDLE_SECONDS}\n{declares}\n"
        );
    }
    file.push_str(extra);
    let path = dir.join("drivers.toml");
    std::fs::write(&path, file).unwrap();
    path
}

/// A matrix block giving every driver's `app_server` runner `cases` in `environments`.
fn block(app_server: &str, environments: &[&str], cases: &[(&str, Line)]) -> String {
    let quoted = |names: &mut dyn Iterator<Item = String>| {
        names
            .map(|n| format!("\"{n}\""))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "[[suites.protocol-size.matrix]]\nrunners = [{}]\nenvironments = [{}]\ncases = [{}]\n",
        quoted(
            &mut [ORIGINAL, LIMITED, DECLARED, STRICT]
                .iter()
                .map(|d| format!("{d}-{app_server}"))
        ),
        quoted(&mut environments.iter().map(|e| e.to_string())),
        quoted(&mut cases.iter().map(|(c, _)| c.to_string()))
    )
}

/// `harness run` of `cases` for `app_server` in `environment`; the JSON summary's cells by
/// name.
fn run(
    drivers: &Path,
    out: &Path,
    app_server: &str,
    environment: &str,
    cases: &[(&str, Line)],
) -> BTreeMap<String, Value> {
    let filters: Vec<String> = cases
        .iter()
        .map(|(case, _)| format!(".{environment}.{case}"))
        .collect();
    let mut args = vec!["--app-server", app_server, "--environment", environment];
    args.extend(filters.iter().map(String::as_str));
    driver_copies::run(drivers, out, &args)
}

/// Each line of a JSON Lines file.
fn json_lines(path: &Path) -> Vec<Value> {
    let text = common::evidence::read_text(path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

/// The cell's `run.ended` payload.
fn run_ended(cell_dir: &Path) -> Value {
    json_lines(&cell_dir.join("events.jsonl"))
        .into_iter()
        .rev()
        .find(|e| e["kind"] == "run.ended")
        .map(|e| e["payload"].clone())
        .unwrap_or_else(|| panic!("no run.ended in {}", cell_dir.display()))
}

/// The app-server's lines over the limit as the transcript holds them: cut off where the driver
/// let go of it (a `partial` line), whole, or — past the recorder's bound — a note with its
/// size; their sizes in bytes.
fn long_lines_kept(cell_dir: &Path) -> Vec<u64> {
    json_lines(&cell_dir.join("transcript.jsonl"))
        .iter()
        .filter(|r| r["direction"] == "out")
        .filter_map(|r| {
            if let Some(raw) = r["raw"].as_str() {
                (r["partial"] == true && raw.contains("item/agentMessage/delta"))
                    .then_some(raw.len() as u64)
            } else if let Some(message) = r.get("message") {
                Some(message.to_string().len() as u64)
            } else {
                r["bytes"].as_u64()
            }
        })
        .filter(|bytes| *bytes > 64 << 10)
        .collect()
}

/// The recorder's notes that the driver stopped reading in the middle of a line: how many bytes
/// of it the driver had taken.
fn let_go_notes(cell_dir: &Path) -> Vec<u64> {
    json_lines(&cell_dir.join("transcript.jsonl"))
        .iter()
        .filter(|r| r["direction"] == "out")
        .filter_map(|r| r["delivered"].as_u64())
        .collect()
}

/// The drivers' `cases` against `app_server` in `environment`: the checks of the module's
/// header; every failure is listed, then the test fails.
fn check(
    cells: &BTreeMap<String, Value>,
    out: &Path,
    app_server: &str,
    environment: &str,
    cases: &[(&str, Line)],
) {
    let mut failures = Vec::new();
    let mut report = String::new();
    for &(case, line) in cases {
        let name =
            |driver: &str| format!("protocol-size.{driver}-{app_server}.{environment}.{case}");
        let verdict = |driver: &str| {
            cells
                .get(&name(driver))
                .map_or("missing", |c| c["verdict"].as_str().unwrap_or("none"))
                .to_string()
        };
        let verdict_reason = |driver: &str| {
            cells
                .get(&name(driver))
                .and_then(|c| c["reason"].as_str())
                .unwrap_or("no reason")
                .to_string()
        };
        let _ = writeln!(
            report,
            "{app_server} {environment} {case}: {ORIGINAL} {}, {LIMITED} {}, {DECLARED} {}, {STRICT} {}",
            verdict(ORIGINAL),
            verdict(LIMITED),
            verdict(DECLARED),
            verdict(STRICT)
        );
        // The 64 KiB line and what follows it fit in the pipes between the app-server and the
        // driver, so the recording holds the whole turn: the wire cannot show the line was not
        // taken (the ending is the driver's failure, not a lost transport), but the cell never
        // passes.
        if verdict(STRICT) == "pass" {
            failures.push(format!("{}: passed", name(STRICT)));
        }
        if verdict(ORIGINAL) != "pass" {
            failures.push(format!(
                "{}: the unmodified driver (the control) got {}",
                name(ORIGINAL),
                verdict(ORIGINAL)
            ));
        }
        if line == Line::AtTheLimit {
            if verdict(LIMITED) != "pass" {
                failures.push(format!(
                    "{}: a line at the limit, not over it, got {}",
                    name(LIMITED),
                    verdict(LIMITED)
                ));
            }
            continue;
        }
        let dir = out.join(name(LIMITED));
        let ended = run_ended(&dir);
        let reason = ended["reason"].as_str().unwrap_or_default();
        let _ = writeln!(report, "  {LIMITED}: ended {} ({reason})", ended["ending"]);
        if verdict(LIMITED) == "pass" {
            failures.push(format!("{}: passed", name(LIMITED)));
        }
        let kept = long_lines_kept(&dir);
        let _ = writeln!(
            report,
            "  the transcript holds lines over 64 KiB of {kept:?} bytes"
        );
        if kept.is_empty() {
            failures.push(format!(
                "{}: the transcript holds no line over 64 KiB (neither cut off nor whole)",
                name(LIMITED)
            ));
        }
        // The size in the reason is the recording's own: the line's, or how far into it the
        // driver stopped reading (the recorder's note, when the app-server finished writing the
        // line before it was stopped and the line is recorded whole).
        let sized = kept
            .iter()
            .chain(&let_go_notes(&dir))
            .any(|b| reason.contains(&format!("{b} bytes")));
        if ended["ending"] != "transport-lost" || !sized {
            failures.push(format!(
                "{}: ended {ended}, not transport-lost naming the size of a line the transcript holds",
                name(LIMITED)
            ));
        }
        if verdict(DECLARED) != "pass" {
            failures.push(format!(
                "{}: dying on a line over its declared max_line_bytes is a classified failure, got {} ({})",
                name(DECLARED),
                verdict(DECLARED),
                verdict_reason(DECLARED)
            ));
        }
        let declared = run_ended(&out.join(name(DECLARED)));
        if declared["ending"] != "transport-lost" {
            failures.push(format!(
                "{}: ended {declared}, not transport-lost",
                name(DECLARED)
            ));
        }
    }
    eprintln!("{report}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The long lines of the fake and the real Codex's long message, each in `environments`.
fn long_lines(app_server: &str, environments: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let mut cases: Vec<(&str, Line)> = Vec::new();
    if app_server == "fake" {
        cases.extend(CASES);
    }
    cases.push(LONG_MESSAGE_CASE);
    // The shipped matrix has the fake's long lines in `local` already.
    let shipped = |e: &&str| app_server == "fake" && *e == "local";
    let mut extra = LONG_MESSAGE.to_string();
    extra.push_str(&block(app_server, environments, &[LONG_MESSAGE_CASE]));
    let elsewhere: Vec<&str> = environments
        .iter()
        .copied()
        .filter(|e| !shipped(e))
        .collect();
    if app_server == "fake" && !elsewhere.is_empty() {
        extra.push_str(&block(app_server, &elsewhere, CASES));
    }
    let drivers = drivers_file(dir.path(), &extra);
    for environment in environments {
        let out = dir.path().join(format!("out-{environment}"));
        let cells = run(&drivers, &out, app_server, environment, &cases);
        check(&cells, &out, app_server, environment, &cases);
    }
}

pub fn trials() -> Vec<libtest_mimic::Trial> {
    let containers = ["container", "daytona"];
    let missing = containers
        .iter()
        .find_map(|env| prereq::environment_missing(env));
    let trials = vec![
        libtest_mimic::Trial::test(
            "a_driver_whose_reader_dies_on_a_long_line_loses_its_transport_on_the_fake",
            || {
                long_lines("fake", &["local"]);
                Ok(())
            },
        ),
        prereq::trial(
            "a_driver_whose_reader_dies_on_a_long_line_loses_its_transport_in_containers_needs_root_runc",
            missing,
            move || {
                long_lines("fake", &containers);
                Ok(())
            },
        ),
        prereq::trial(
            "a_driver_whose_reader_dies_on_a_long_line_loses_its_transport_real_codex",
            prereq::codex_missing(),
            || {
                long_lines("codex", &["local"]);
                Ok(())
            },
        ),
        libtest_mimic::Trial::test("the_reader_patch_applies_to_the_minimal_driver_once", || {
            let original = driver_copies::minimal_driver();
            let limited = limited(&original)?;
            if limited == original || strict(&original)? == limited {
                return Err("a reader patch changes nothing".into());
            }
            Ok(())
        }),
    ];
    trials
}
