//! Deliberately broken copies of the minimal example driver (`harness/examples/minimal_driver.py`),
//! one per realistic driver bug of issue 20: each must turn at least one protocol cell red whose
//! twin of the unmodified driver is green. Each copy is the original with a small textual patch
//! applied here — every patched text must occur exactly once, so when the original changes this
//! test names the patch that no longer applies, and no copy drifts from it.
//!
//! All copies and the unmodified driver are declared in one drivers file (with the unmodified
//! driver's documented findings as every driver's baseline, so a red cell is a verdict the
//! unmodified driver does not have) and run by `harness run`, as a user runs their driver:
//! against the fake (every protocol cell, local), and in `…_real_codex` against the pinned real
//! Codex for the cases the mock model API can make it play.
//!
//! Beside the bugs, one copy learns what the wire cannot tell (a SIGINT interrupts the turn, a
//! stdin line steers it; docs/driver-contract.md section 7), declared `interrupt = "sigint"`
//! and `steer = "stdin-line"`: its interrupt and steer cells pass, and a copy of it that leaves
//! out the ids fails them — the harness's telling is exercised end to end.

use crate::common;

use common::driver_copies::{apply, minimal_driver, run};
use common::prereq;

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;
use std::path::{Path, PathBuf};

/// The unmodified driver's name in the drivers file.
const ORIGINAL: &str = "minimal";

/// A copy of the minimal driver with one bug.
struct Copy {
    /// Its driver name (`NAME-fake`, `NAME-codex` cells).
    name: &'static str,
    /// The bug, in words.
    bug: &'static str,
    /// Each `(text, replacement)`: the text occurs exactly once in the original.
    patch: &'static [(&'static str, &'static str)],
    /// Extra drivers-file keys.
    declares: &'static str,
    /// The driver whose green cells this copy's red cells are held against: the unmodified
    /// driver, or for a copy of the controllable fixture that fixture.
    twin: &'static str,
    /// `suite.case` cells the bug must turn red against the fake.
    red_on_fake: &'static [&'static str],
    /// `suite.case` cells it must turn red against the real Codex (each is run there).
    red_on_codex: &'static [&'static str],
}

const DECLINE: &str = r#"send({"id": msg["id"], "result": {"decision": "decline"}})"#;

/// What the minimal driver needs to act on a SIGINT (interrupt the turn) and a stdin line
/// (steer the turn with it), as a CLI would for Ctrl-C and typed input.
const CONTROL: &[(&str, &str)] = &[
    (
        "import argparse, json, os, queue, subprocess, sys, threading",
        "import argparse, json, os, queue, signal, subprocess, sys, threading",
    ),
    (
        "    while True:\n        msg = receive()\n        method, params",
        r#"    asked = []  # what the user asked while the turn runs: Ctrl-C interrupts, a line steers
    signal.signal(signal.SIGINT, lambda *_: asked.append(None))
    threading.Thread(target=lambda: [asked.append(l.rstrip("\n")) for l in sys.stdin], daemon=True).start()
    while True:
        while asked:
            text, next_id = asked.pop(0), next_id + 1
            if text is None:
                send({"id": next_id, "method": "turn/interrupt", "params": {"threadId": turn["threadId"], "turnId": turn_id}})
            else:
                send({"id": next_id, "method": "turn/steer", "params": {"threadId": turn["threadId"], "expectedTurnId": turn_id, "input": [{"type": "text", "text": text}]}})
        try:
            msg = json.loads(inbox.get(timeout=0.1) or "null")
        except queue.Empty:
            continue
        if msg is None:
            raise EOFError("codex app-server closed its output")
        method, params"#,
    ),
];

const CONTROL_DECLARES: &str = "interrupt = \"sigint\"\nsteer = \"stdin-line\"\n";

fn copies() -> Vec<Copy> {
    vec![
        Copy {
            name: "accepts-every-approval",
            bug: "accepts every approval request, whatever its user agreed to",
            patch: &[(DECLINE, r#"send({"id": msg["id"], "result": {"decision": "accept"}})"#)],
            declares: "",
            twin: ORIGINAL,
            red_on_fake: &[
                "protocol-safe-default.command-escalation-refused",
                "protocol-safe-default.file-change-refused",
            ],
            red_on_codex: &["protocol-safe-default.command-escalation-refused"],
        },
        Copy {
            name: "never-answers-server-requests",
            bug: "never answers a server request (no handler: the request is dropped)",
            patch: &[(
                r#"            if method.endswith("requestApproval"):
                send({"id": msg["id"], "result": {"decision": "decline"}})
            else:
                send({"id": msg["id"], "error": {"code": -32601, "message": "unsupported"}})"#,
                "            pass",
            )],
            declares: "",
            twin: ORIGINAL,
            red_on_fake: &[
                "protocol-server-requests.command-approval",
                "protocol-server-requests.unknown-request",
                "protocol-server-requests.mcp-elicitation",
            ],
            red_on_codex: &[
                "protocol-server-requests.command-approval",
                "protocol-server-requests.mcp-tool-elicitation",
            ],
        },
        Copy {
            name: "answers-off-schema",
            bug: "answers approvals in a shape the schema rejects (`{\"approved\": false}`)",
            patch: &[(DECLINE, r#"send({"id": msg["id"], "result": {"approved": False}})"#)],
            declares: "",
            twin: ORIGINAL,
            red_on_fake: &[
                "protocol-server-requests.command-approval",
                "protocol-server-requests.file-change-approval",
            ],
            red_on_codex: &["protocol-server-requests.command-approval"],
        },
        Copy {
            name: "failed-turn-succeeds",
            bug: "reports a failed or interrupted turn as success (exit 0)",
            patch: &[(
                r#"sys.exit(0 if status == "completed" else 1)"#,
                "sys.exit(0)",
            )],
            declares: "",
            twin: ORIGINAL,
            red_on_fake: &[
                "protocol-turn-outcomes.failed-turn",
                "protocol-turn-outcomes.failed-turn-no-error",
                "protocol-turn-outcomes.interrupted-turn",
            ],
            red_on_codex: &["protocol-turn-outcomes.failed-turn"],
        },
        Copy {
            name: "retries-thread-start",
            bug: "retries a failed thread/start (an error answer or none in time) twenty times, waiting a second longer after each",
            patch: &[
                (
                    "import argparse, json, os, queue, subprocess, sys, threading",
                    "import argparse, json, os, queue, subprocess, sys, threading, time",
                ),
                (
                    r#"    thread = request("thread/start", {"cwd": args.cwd})"#,
                    r#"    for attempt in range(20):
        try:
            thread = request("thread/start", {"cwd": args.cwd})
            break
        except (RuntimeError, queue.Empty):
            time.sleep(attempt + 1)"#,
                ),
            ],
            declares: "",
            twin: ORIGINAL,
            // Only through the run's bound: the protocol does not bound retries
            // (docs/profiles/protocol.md), but a driver must end within its own bound.
            red_on_fake: &["protocol-control.no-answer"],
            // An unanswered or refused thread/start is scripted: the fake's only.
            red_on_codex: &[],
        },
        Copy {
            name: "leaks-its-environment",
            bug: "hands its whole environment (its secrets included) to codex app-server",
            patch: &[(
                "                        env={k: v for k, v in os.environ.items() if k in keep},\n",
                "",
            )],
            declares: "",
            twin: ORIGINAL,
            red_on_fake: &["protocol-credentials.secrets-not-forwarded"],
            red_on_codex: &["protocol-credentials.secrets-not-forwarded"],
        },
        Copy {
            name: "skips-initialized",
            bug: "never sends the initialized notification",
            patch: &[("    send({\"method\": \"initialized\"})\n", "")],
            declares: "",
            twin: ORIGINAL,
            red_on_fake: &["protocol-handshake.handshake"],
            red_on_codex: &["protocol-handshake.handshake"],
        },
        Copy {
            name: "ends-on-any-turn-completed",
            bug: "ends its run on the first turn/completed it reads, another thread's or turn's too",
            patch: &[(
                r#"elif method == "turn/completed" and params["turn"].get("id") == turn_id:  # not another's"#,
                r#"elif method == "turn/completed":"#,
            )],
            declares: "",
            twin: ORIGINAL,
            red_on_fake: &[
                "protocol-binding.foreign-thread-events",
                "protocol-binding.foreign-turn-events",
                "protocol-forward-compat.every-notification",
            ],
            // The real Codex's own other thread: a sub-agent's turn, which completes before
            // the driver's (`suites/scenarios/sub-agent-turn.toml`).
            red_on_codex: &["protocol-binding.sub-agent-turn"],
        },
        Copy {
            name: "interrupts-without-ids",
            bug: "interrupts and steers without the live ids (turn/interrupt without turnId, turn/steer without expectedTurnId)",
            patch: &[],
            declares: CONTROL_DECLARES,
            twin: "controllable",
            red_on_fake: &["protocol-control.interrupt", "protocol-control.steer"],
            // The real Codex's turn would need to run long enough to be interrupted: the matrix
            // has no real-Codex interrupt or steer cell.
            red_on_codex: &[],
        },
    ]
}

/// The patches of `copy` applied to `original` (the control patch first for the copy that
/// breaks it); a patch whose text does not occur exactly once is an error naming it.
fn patched(original: &str, copy: &Copy) -> Result<String, String> {
    let mut patches: Vec<(&str, &str)> = copy.patch.to_vec();
    if copy.name == "interrupts-without-ids" {
        patches = CONTROL.to_vec();
    }
    let mut text = apply(original, &patches, copy.name)?;
    if copy.name == "interrupts-without-ids" {
        text = apply(
            &text,
            &[
                (r#", "turnId": turn_id}})"#, "}})"),
                (r#", "expectedTurnId": turn_id, "#, ", "),
            ],
            copy.name,
        )?;
    }
    Ok(text)
}

/// The minimal driver's documented findings (suites/baseline.toml), for every driver of the
/// file: a cell is red only where a copy's verdict differs from the unmodified driver's.
const FINDINGS: &str = r#"
[[expected]]
cell = "protocol-server-requests.*.*.permissions-approval"
verdict = "fail"
reason = "the minimal driver answers every *requestApproval with a decision, which PermissionsRequestApprovalResponse rejects"

[[expected]]
cell = "protocol-binding.*.*.events-before-answer"
verdict = "fail"
reason = "the minimal driver discards every line while it waits for the turn/start answer"
"#;

/// Write every copy, the unmodified driver and the control fixture into `dir` (each waits at
/// most 5 s for a line, below the harness's 10 s idle bound on the fake, above what a busy
/// machine takes to relay a 2 MiB line), and a drivers
/// file declaring them; the file's path.
fn drivers_file(dir: &Path) -> PathBuf {
    let original = minimal_driver();
    let mut file = String::new();
    let mut declare = |name: &str, text: &str, declares: &str| {
        std::fs::write(dir.join(format!("{name}.py")), text).unwrap();
        let _ = write!(
            file,
            "[drivers.{name}]\ncommand = \"python3 {name}.py --cwd {{workspace}} --prompt {{prompt}} --mode {{mode}} --timeout 5\"\ncodex = \"env:CODEX_PATH\"\nmodes = [\"planning\", \"standard\", \"ask\"]\noutcome = \"exit-status\"\n{declares}\n"
        );
    };
    declare(ORIGINAL, &original, "");
    let controllable = apply(&original, CONTROL, "controllable").unwrap();
    declare("controllable", &controllable, CONTROL_DECLARES);
    for copy in copies() {
        let text = patched(&original, &copy).unwrap_or_else(|e| panic!("{e}"));
        declare(copy.name, &text, copy.declares);
    }
    file.push_str(FINDINGS);
    let path = dir.join("drivers.toml");
    std::fs::write(&path, file).unwrap();
    path
}

fn is_red(cell: &Value) -> bool {
    matches!(cell["status"].as_str(), Some("differs" | "stale" | "error"))
}

fn is_green(cell: &Value) -> bool {
    cell["status"] == "as-expected"
}

/// The red cells (`suite.case`) of `driver` whose twin of `twin` (same suite, environment and
/// case) is green.
fn red_where_green(
    cells: &BTreeMap<String, Value>,
    driver: &str,
    twin: &str,
    app_server: &str,
) -> BTreeSet<String> {
    let runner = format!("{driver}-{app_server}");
    cells
        .values()
        .filter(|cell| cell["runner"] == runner.as_str() && is_red(cell))
        .filter(|cell| {
            let twin = format!(
                "{}.{twin}-{app_server}.{}.{}",
                cell["suite"].as_str().unwrap(),
                cell["environment"].as_str().unwrap(),
                cell["case"].as_str().unwrap()
            );
            cells.get(&twin).is_some_and(is_green)
        })
        .map(|cell| {
            format!(
                "{}.{}",
                cell["suite"].as_str().unwrap(),
                cell["case"].as_str().unwrap()
            )
        })
        .collect()
}

/// Every copy's expected cells are red where its twin is green; the unmodified driver has no
/// red cell.
fn check(
    cells: &BTreeMap<String, Value>,
    app_server: &str,
    expected: impl Fn(&Copy) -> &'static [&'static str],
) {
    let unmodified_red: Vec<&String> = cells
        .iter()
        .filter(|(name, cell)| name.contains(&format!(".{ORIGINAL}-{app_server}.")) && is_red(cell))
        .map(|(name, _)| name)
        .collect();
    assert!(
        unmodified_red.is_empty(),
        "the unmodified minimal driver has red cells beyond its documented findings: {unmodified_red:?}"
    );
    let mut report = String::new();
    let mut failures = Vec::new();
    for copy in copies() {
        let shown = red_where_green(cells, copy.name, copy.twin, app_server);
        let _ = writeln!(report, "{} ({}): red {shown:?}", copy.name, copy.bug);
        let missing: Vec<&&str> = expected(&copy)
            .iter()
            .filter(|c| !shown.contains(**c))
            .collect();
        if !missing.is_empty() {
            failures.push(format!(
                "`{}` ({}) must turn {missing:?} red against the {app_server}; it turned {shown:?} red",
                copy.name, copy.bug
            ));
        }
    }
    eprintln!("{report}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn broken_copies_turn_a_protocol_cell_red_on_the_fake() {
    let dir = tempfile::tempdir().unwrap();
    let drivers = drivers_file(dir.path());
    // Every protocol cell of the unmodified driver and of the controllable fixture (each must be
    // green but for its documented findings), and of each copy the cells its bug must turn red:
    // a copy's other cells assert nothing, and running them all (44 per copy) was most of this
    // test's time.
    let mut filters = vec![
        format!(".{ORIGINAL}-fake.local."),
        ".controllable-fake.local.".to_string(),
    ];
    for copy in copies() {
        for cell in copy.red_on_fake {
            let (suite, case) = cell.split_once('.').unwrap();
            filters.push(format!("{suite}.{}-fake.local.{case}", copy.name));
        }
    }
    let mut args = vec!["--app-server", "fake", "--environment", "local", "--"];
    args.extend(filters.iter().map(String::as_str));
    let cells = run(&drivers, &dir.path().join("out"), &args);
    check(&cells, "fake", |copy| copy.red_on_fake);
    let controllable_red: Vec<&String> = cells
        .iter()
        .filter(|(name, cell)| name.contains(".controllable-fake.") && is_red(cell))
        .map(|(name, _)| name)
        .collect();
    assert!(
        controllable_red.is_empty(),
        "the minimal driver taught to interrupt and steer: {controllable_red:?}"
    );
    for case in ["interrupt", "steer"] {
        let cell = &cells[&format!("protocol-control.controllable-fake.local.{case}")];
        assert_eq!(cell["verdict"], "pass", "{cell}");
    }
}

fn broken_copies_turn_a_protocol_cell_red_real_codex() {
    let dir = tempfile::tempdir().unwrap();
    // The cases the mock model API makes the real Codex play: the shipped matrix gives every
    // declared driver these cells against the pinned Codex (`NAME-codex`), so the file adds
    // none; the filters select them, local only.
    let cases: BTreeSet<&str> = copies()
        .iter()
        .flat_map(|c| c.red_on_codex.iter().copied())
        .collect();
    let filters: Vec<String> = cases
        .iter()
        .map(|cell| {
            let (_, case) = cell.split_once('.').unwrap();
            format!("-codex.local.{case}")
        })
        .collect();
    let drivers = drivers_file(dir.path());
    // The filters start with `-`: after `--`, so they are not read as options.
    let mut args = vec!["--app-server", "codex", "--environment", "local", "--"];
    args.extend(filters.iter().map(String::as_str));
    let cells = run(&drivers, &dir.path().join("out"), &args);
    check(&cells, "codex", |copy| copy.red_on_codex);
}

pub fn trials() -> Vec<libtest_mimic::Trial> {
    let trials = vec![
        libtest_mimic::Trial::test(
            "broken_copies_of_the_minimal_driver_turn_a_protocol_cell_red_on_the_fake",
            || {
                broken_copies_turn_a_protocol_cell_red_on_the_fake();
                Ok(())
            },
        ),
        prereq::trial(
            "broken_copies_of_the_minimal_driver_turn_a_protocol_cell_red_real_codex",
            prereq::codex_missing(),
            || {
                broken_copies_turn_a_protocol_cell_red_real_codex();
                Ok(())
            },
        ),
        libtest_mimic::Trial::test("every_patch_applies_to_the_minimal_driver_once", || {
            let original = minimal_driver();
            apply(&original, CONTROL, "controllable")?;
            for copy in copies() {
                let text = patched(&original, &copy)?;
                if text == original {
                    return Err(format!("`{}` changes nothing", copy.name).into());
                }
            }
            Ok(())
        }),
    ];
    trials
}
