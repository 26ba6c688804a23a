//! What the drivers send, held to the real protocol: the reference driver and the example
//! external driver run every fake-app-server cell of the suites (each mode × target × policy
//! combination they use, moved to the local environment: the wire does not depend on where the
//! app-server runs) and every built-in scenario the suites leave out, through the matrix's own
//! cell runner. Every message the driver sent — from the fake's transcript, direction `in` — is
//! validated against the schema the pinned real Codex generates at test time: requests against
//! their `ClientRequest` branch, notifications against `ClientNotification`, and answers to
//! server requests against that request's response schema (`JSONRPCErrorError` for an error).
//! A failure names the message, the driver, the cell and scenario, and the schema path.
//!
//! Needs the pinned real Codex (to generate the schema) and bubblewrap (the `local` environment
//! the cells run in): without them the test is reported as ignored with the reason; under
//! `CI=true` it fails instead.

use crate::common;

use common::codex_schema::{self, CodexSchema};
use common::fake_driver;
use common::prereq;
use futures_util::stream::{self, StreamExt};
use graders::events::{Mode, Target};
use matrix::cell::run_cell;
use matrix::context::CellContext;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use suites::spec::{AppServerKind, DriverKind};
use suites::Cell;

/// One driver run to check, and how a failure names it.
struct Planned {
    cell: Cell,
    label: String,
}

fn driver_name(cell: &Cell) -> &'static str {
    match cell.runner.driver {
        DriverKind::Reference => "reference driver",
        DriverKind::External => "example external driver",
        DriverKind::Declared => "declared driver",
    }
}

fn label(cell: &Cell, origin: &str) -> String {
    format!(
        "{} (runner `{}`), {origin}, scenario `{}`, {:?}/{:?}/network={}",
        driver_name(cell),
        cell.id.runner,
        cell.case.scenario,
        cell.case.mode,
        cell.target,
        cell.case.network,
    )
}

/// Every fake-app-server cell of the suites, run locally with the target it tells the driver;
/// then each built-in scenario no suite case uses, once per fake runner, as a standard run.
fn planned_runs() -> Vec<Planned> {
    let matrix = suites::load().expect("the shipped suites load");
    let local = matrix.file.environments["local"].clone();
    let fake_cells: Vec<&Cell> = matrix
        .cells
        .iter()
        .filter(|c| c.runner.app_server == AppServerKind::Fake)
        // A cell that is not applicable never runs: its driver sends nothing to check.
        .filter(|c| c.not_applicable.is_none())
        .collect();
    let mut planned = Vec::new();
    let mut seen = BTreeSet::new();
    for original in &fake_cells {
        // A driver that passes an unsafe-workspace case refuses before it launches anything:
        // nothing on the wire to check.
        if original.case.scenario == "builtin:unsafe-workspace" {
            continue;
        }
        // A cell whose baseline documents a finding about its driver (the minimal driver's
        // answer to a permissions request, say) is not held to the schema here: the finding is
        // that the driver's messages there are not what the protocol asks.
        if !original.expected.is_pass() {
            continue;
        }
        let key = (
            original.id.runner.clone(),
            original.id.suite.clone(),
            original.id.case.clone(),
            format!("{:?}", original.target),
        );
        if !seen.insert(key) {
            continue;
        }
        let mut cell = (*original).clone();
        cell.id.environment = "local".into();
        cell.environment = local.clone();
        let label = label(&cell, &format!("cell `{}`", original.name()));
        planned.push(Planned { cell, label });
    }
    let used: BTreeSet<&str> = fake_cells
        .iter()
        .map(|c| c.case.scenario.as_str())
        .collect();
    let mut templates: BTreeMap<&str, &Cell> = BTreeMap::new();
    for cell in &fake_cells {
        templates.entry(cell.id.runner.as_str()).or_insert(cell);
    }
    // A runner's documented findings, by scenario: a built-in scenario that only repeats one of
    // them (`permissions-approval-remembered` asks what `permissions-approval` asks) is not
    // held to the schema for that runner either.
    let documented: BTreeSet<(&str, &str)> = matrix
        .cells
        .iter()
        .filter(|c| c.runner.app_server == AppServerKind::Fake && !c.expected.is_pass())
        .map(|c| (c.id.runner.as_str(), c.case.scenario.as_str()))
        .collect();
    for name in fake_app_server::scenario::BUILTIN_NAMES {
        let scenario = format!("builtin:{name}");
        if used.contains(scenario.as_str()) {
            continue;
        }
        let repeated = format!("builtin:{}", name.trim_end_matches("-remembered"));
        for template in templates.values() {
            if documented.contains(&(template.id.runner.as_str(), repeated.as_str())) {
                continue;
            }
            let mut cell = (*template).clone();
            cell.id.environment = "local".into();
            cell.id.case = format!("builtin-{name}");
            cell.environment = local.clone();
            cell.case.scenario = scenario.clone();
            cell.case.codex_scenario = None;
            cell.case.mode = Mode::Standard;
            cell.case.target = None;
            cell.case.network = false;
            cell.case.task = toml::Table::new();
            cell.case
                .task
                .insert("prompt".into(), "Do the work.".into());
            cell.target = Target::Local;
            let label = label(&cell, "built-in scenario run");
            planned.push(Planned { cell, label });
        }
    }
    planned
}

/// No suite scenario asks for an approval or sends a tool call the driver must refuse: this one
/// does (an escalated write, bad then good `paperclip_finish` arguments, then a retry).
const ANSWERS_SCENARIO: &str = r#"name = "driver-answers"
[[turns]]
steps = [
  { step = "shell", cmd = "printf x > plan-write-probe-{probe_id}.txt", escalate = true, justification = "let me write" },
  { step = "tool-call", name = "paperclip_finish", arguments = { status = "maybe", summary = "bad" } },
  { step = "tool-call", name = "paperclip_finish", arguments = { status = "done", summary = "first" } },
  { step = "tool-call", name = "paperclip_finish", arguments = { status = "done", summary = "second" } },
]
"#;

/// Both drivers play [`ANSWERS_SCENARIO`]; returns (driver, its label, the fake's transcript).
async fn scripted_answer_runs(scratch: &Path) -> Vec<(&'static str, String, std::path::PathBuf)> {
    let scenario = scratch.join("driver-answers.toml");
    std::fs::write(&scenario, ANSWERS_SCENARIO).unwrap();
    let scenario = scenario.display().to_string();
    let mut runs = Vec::new();
    for driver in ["reference driver", "example external driver"] {
        let dir = scratch.join(driver.replace(' ', "-"));
        let task = driver::task::Task::new(Mode::Ask, "Write the probe, then finish.");
        let config = fake_driver::config(&dir, &scenario, task, Target::Local);
        let mut log = driver::event_log::EventLog::in_memory("driver-answers");
        let ended = if driver == "reference driver" {
            driver::reference::run_reference(&config, &mut log).await
        } else {
            driver::external::run_external(&fake_driver::script(), &config, &mut log).await
        };
        let label = format!("{driver}, scripted approval and tool answers [{ended:?}]");
        runs.push((driver, label, dir.join("transcript.jsonl")));
    }
    runs
}

/// What the drivers were seen to send, per driver, so the test cannot pass on nothing.
#[derive(Default)]
struct Coverage {
    requests: BTreeMap<&'static str, BTreeSet<String>>,
    notifications: BTreeMap<&'static str, BTreeSet<String>>,
    answers: BTreeMap<&'static str, BTreeSet<String>>,
}

/// Validate every message the driver sent in one transcript (the fake's, over every app-server
/// process of the run). Returns how many messages were checked.
fn validate_transcript(
    transcript: &Path,
    driver: &'static str,
    context: &str,
    schema: &mut CodexSchema,
    coverage: &mut Coverage,
    failures: &mut Vec<String>,
) -> usize {
    let text = match common::evidence::read_text(transcript) {
        Ok(text) => text,
        Err(e) => {
            failures.push(format!(
                "{context}: no transcript at {}: {e}",
                transcript.display()
            ));
            return 0;
        }
    };
    // Server request id → method; a relaunched process may reuse ids, so the latest wins.
    let mut server_requests: HashMap<String, String> = HashMap::new();
    let mut checked = 0;
    for (number, line) in text.lines().enumerate() {
        let entry: Value = serde_json::from_str(line).unwrap_or_else(|e| {
            panic!("{context}: transcript line {} is not JSON: {e}", number + 1)
        });
        let Some(message) = entry.get("message") else {
            if entry["direction"] == "in" {
                failures.push(format!(
                    "{context}: the driver sent a line that is not JSON: {entry}"
                ));
            }
            continue;
        };
        let method = message["method"].as_str();
        let id = message.get("id");
        if entry["direction"] == "out" {
            if let (Some(method), Some(id)) = (method, id) {
                server_requests.insert(id.to_string(), method.to_string());
            }
            continue;
        }
        checked += 1;
        match (method, id) {
            (Some(method), Some(_)) => {
                coverage
                    .requests
                    .entry(driver)
                    .or_default()
                    .insert(method.to_string());
                schema.check_by_method("ClientRequest.json", message, context, message, failures);
            }
            (Some(method), None) => {
                coverage
                    .notifications
                    .entry(driver)
                    .or_default()
                    .insert(method.to_string());
                schema.check_by_method(
                    "ClientNotification.json",
                    message,
                    context,
                    message,
                    failures,
                );
            }
            (None, Some(id)) => {
                let Some(answered) = server_requests.get(&id.to_string()).cloned() else {
                    failures.push(format!(
                        "{context}: message {message} answers no server request"
                    ));
                    continue;
                };
                coverage
                    .answers
                    .entry(driver)
                    .or_default()
                    .insert(answered.clone());
                let context = format!("{context}, answering `{answered}`");
                match (message.get("result"), message.get("error")) {
                    (Some(result), None) => match schema.server_request_response(&answered) {
                        Ok(file) => schema.check(&file, result, &context, message, failures),
                        Err(why) => failures.push(format!("{context}: {why}")),
                    },
                    (None, Some(error)) => {
                        schema.check("JSONRPCErrorError.json", error, &context, message, failures)
                    }
                    _ => failures.push(format!(
                        "{context}: message {message} has neither exactly a result nor an error"
                    )),
                }
            }
            (None, None) => failures.push(format!(
                "{context}: message {message} is not a JSON-RPC request, notification or response"
            )),
        }
    }
    checked
}

/// The validator is not vacuous: each of these is rejected, as the real server would.
fn assert_schema_rejects_bad_client_messages(schema: &mut CodexSchema) {
    let mut rejects = |kind: &str, instance: Value| {
        let mut failures = Vec::new();
        match kind {
            "request" => schema.check_by_method(
                "ClientRequest.json",
                &instance,
                "self-check",
                &instance,
                &mut failures,
            ),
            server_method => {
                let file = schema.server_request_response(server_method).unwrap();
                schema.check(&file, &instance, "self-check", &instance, &mut failures)
            }
        }
        assert!(
            !failures.is_empty(),
            "the schema accepted a bad {kind} message: {instance}"
        );
    };
    rejects(
        "request",
        json!({"id": 1, "method": "turn/start", "params": {"input": []}}),
    );
    rejects(
        "request",
        json!({"id": 2, "method": "thread/begin", "params": {}}),
    );
    rejects(
        "item/commandExecution/requestApproval",
        json!({"decision": "maybe"}),
    );
    rejects(
        "item/tool/call",
        json!({"contentItems": [], "success": "yes"}),
    );
}

pub fn trials() -> Vec<libtest_mimic::Trial> {
    let trials = vec![prereq::trial(
        "driver_messages_match_codex_schema_needs_real_codex",
        prereq::environment_missing("local")
            .or_else(prereq::codex_missing)
            .or_else(prereq::matrix_codex_missing),
        || prereq::block_on(driver_messages_match_codex_schema()),
    )];
    trials
}

async fn driver_messages_match_codex_schema() {
    let scratch = tempfile::tempdir().unwrap();
    // Every Codex version the matrix runs: a driver's messages must suit each of them.
    let mut schemas: Vec<(String, codex_schema::CodexSchema)> = codex_schema::matrix_versions()
        .into_iter()
        .map(|version| {
            let dir = scratch.path().join(format!("schema-{version}"));
            let schema = codex_schema::generate_version(&version, &dir);
            (version, schema)
        })
        .collect();
    for (_, schema) in &mut schemas {
        assert_schema_rejects_bad_client_messages(schema);
    }

    let mut options = CellContext::from_env().expect("the cell context");
    options.harness_binary = env!("CARGO_BIN_EXE_harness").into();
    let mut failures = Vec::new();
    let mut coverage = Coverage::default();
    let planned = planned_runs();
    // Cells at once, as `harness run` weighs fake cells (two per core): most of a run is its
    // driver's waits (a hang, a request never answered), which overlap.
    let at_once = 2 * std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut runs: Vec<_> = stream::iter(planned.iter().enumerate())
        .map(|(index, run)| {
            let mut options = options.clone();
            options.out_root = scratch.path().join(format!("run-{index}"));
            async move {
                let result = run_cell(&options, &run.cell).await;
                let context = format!("{} [{}]", run.label, result.describe());
                let transcript = result.evidence_dir.join("transcript.jsonl");
                (driver_name(&run.cell), context, transcript)
            }
        })
        .buffered(at_once)
        .collect()
        .await;
    runs.extend(scripted_answer_runs(scratch.path()).await);
    for (version, schema) in &mut schemas {
        for (driver, context, transcript) in &runs {
            let context = format!("Codex {version}: {context}");
            let checked = validate_transcript(
                transcript,
                driver,
                &context,
                schema,
                &mut coverage,
                &mut failures,
            );
            if checked == 0 {
                failures.push(format!("{context}: the driver sent nothing"));
            }
        }
    }
    eprintln!(
        "checked the messages of {} driver runs; requests {:?}; notifications {:?}; answers {:?}",
        runs.len(),
        coverage.requests,
        coverage.notifications,
        coverage.answers
    );
    for driver in ["reference driver", "example external driver"] {
        for method in ["initialize", "thread/start", "turn/start"] {
            assert!(
                coverage
                    .requests
                    .get(driver)
                    .is_some_and(|m| m.contains(method)),
                "the {driver} never sent `{method}`"
            );
        }
        assert!(
            coverage
                .answers
                .get(driver)
                .is_some_and(|m| m.contains("item/tool/call")),
            "the {driver} never answered `item/tool/call`"
        );
    }
    assert!(
        coverage
            .answers
            .values()
            .any(|m| m.contains("item/commandExecution/requestApproval")),
        "no driver answered an approval request"
    );
    assert!(
        failures.is_empty(),
        "{} messages the drivers sent do not match the real schema:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
