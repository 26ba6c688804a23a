//! What the catalogue says about an environment decides what the baseline and the published
//! drivers file must say about its planning cells: a failing environment's cells expect the
//! failure, caused by the environment's own signature row, for the shipped runners and for every
//! published driver (each takes the reference driver's place in every shipped matrix block, so a
//! new environment gives them new cells); and no reason repeats an environment's message or
//! cause, which live in its spec.

use crate::published_drivers_file::with_published_drivers;
use graders::events::{PolicyGeneration, Target};
use graders::signatures::SIGNATURES;
use graders::verdict::VerdictKind;
use sandbox::catalogue;
use sandbox::spec::{EnvSpec, FailsAt};
use suites::{Cell, Matrix};

const SUITE: &str = "codex-planning-read-only";
/// The planning cases whose write runs in Codex's sandbox (with and without network).
const PLANNING_CASE: &str = "plan-write-refused";

fn shipped() -> Matrix {
    suites::load().expect("the shipped suites load")
}

/// What a planning cell in a failing environment must expect, if anything: a restricted-read
/// thread/start (the legacy policy's, and the current one's for a `local` target, as
/// `driver::launch` plans them) runs the fs helper, so the session never opens; otherwise every
/// sandboxed command fails. `None` where the environment's failure needs a network namespace
/// the cell's commands do not get (the loopback set-up, with the network on).
fn required_verdict(env: &EnvSpec, cell: &Cell) -> Option<VerdictKind> {
    let restricted_read =
        cell.runner.policy == PolicyGeneration::Legacy || cell.target != Target::ExternalSandbox;
    if restricted_read {
        return Some(VerdictKind::StartupRejected);
    }
    let needs_network_namespace = env.signature_row == Some("bwrap-loopback-rtm-newaddr");
    if needs_network_namespace && cell.case.network {
        return None;
    }
    Some(VerdictKind::SandboxFailedToStart)
}

fn failing(env: &EnvSpec) -> bool {
    matches!(env.fails_at, FailsAt::StartUp | FailsAt::PerCommand)
}

/// Every environment that fails Codex: each planning cell in it, of the shipped runners and of
/// the published drivers, has an expectation naming that failure and the environment's row.
fn missing_expectations(matrix: &Matrix) -> Vec<String> {
    let mut problems = Vec::new();
    for env in catalogue::all().into_iter().filter(failing) {
        let row = env
            .signature_row
            .unwrap_or_else(|| panic!("{} fails Codex but names no signature row", env.name));
        let cells = matrix.cells.iter().filter(|cell| {
            cell.id.suite == SUITE
                && cell.id.environment == env.name
                && cell.grader_case() == PLANNING_CASE
                && cell.not_applicable.is_none()
        });
        for cell in cells {
            let Some(verdict) = required_verdict(&env, cell) else {
                continue;
            };
            let expected = &cell.expected;
            if expected.verdict != verdict || expected.signature.as_deref() != Some(row) {
                problems.push(format!(
                    "{}: expects {} caused by {:?}, but the catalogue's `{}` fails Codex {}: \
                     list it as {verdict} with signature = \"{row}\" (suites/baseline.toml for \
                     the shipped runners, drivers/published.toml for the published drivers)",
                    cell.name(),
                    expected.verdict,
                    expected.signature,
                    env.name,
                    env.fails_at.describe(),
                ));
            }
        }
    }
    problems
}

#[test]
fn every_failing_environment_has_its_expected_verdicts_for_the_shipped_runners() {
    let problems = missing_expectations(&shipped());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_failing_environment_has_its_expected_verdicts_for_the_published_drivers() {
    let problems = missing_expectations(&with_published_drivers());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The texts of an environment a reason must not repeat: its message, its canaries' signatures
/// (also without the `bwrap: ` prefix), the text its signature row looks for, and its cause.
fn facts_of(env: &EnvSpec) -> Vec<String> {
    let mut facts: Vec<String> = [
        env.message,
        env.expected_probe.stderr_signature,
        env.expected_command.stderr_signature,
    ]
    .into_iter()
    .flatten()
    .flat_map(|text| [text, text.trim_start_matches("bwrap: ")])
    .map(str::to_string)
    .collect();
    if let Some(row) = SIGNATURES
        .iter()
        .find(|r| Some(r.name) == env.signature_row)
    {
        facts.extend(
            row.all_of
                .iter()
                .filter(|needle| **needle != "bwrap")
                .map(|needle| needle.to_string()),
        );
    }
    // Each sentence of the cause: a reason that copies one of them repeats the cause.
    facts.extend(
        env.cause
            .split(". ")
            .map(str::trim)
            .filter(|sentence| sentence.len() > 40)
            .map(str::to_string),
    );
    facts
}

fn repeated_facts(matrix: &Matrix) -> Vec<String> {
    let envs = catalogue::all();
    let mut problems = Vec::new();
    for cell in &matrix.cells {
        let Some(reason) = &cell.expected.reason else {
            continue;
        };
        let Some(env) = envs.iter().find(|e| e.name == cell.id.environment) else {
            continue;
        };
        for fact in facts_of(env) {
            if reason.contains(&fact) {
                problems.push(format!(
                    "{}: the reason repeats `{fact}` of environment `{}`: say \"the environment's \
                     message\" (or cause) instead; it lives in the spec",
                    cell.name(),
                    env.name
                ));
            }
        }
    }
    problems.sort();
    problems.dedup();
    problems
}

#[test]
fn no_reason_repeats_an_environments_message_or_cause() {
    let mut problems = repeated_facts(&shipped());
    problems.extend(repeated_facts(&with_published_drivers()));
    problems.sort();
    problems.dedup();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The check itself: a reason quoting the message, as baseline reasons once all did, is found.
#[test]
fn a_reason_quoting_the_message_is_found() {
    let env = catalogue::spec("initramfs-root").unwrap();
    let quoted = "every command fails (bwrap: pivot_root: Invalid argument)";
    assert!(facts_of(&env).iter().any(|fact| quoted.contains(fact)));
    let referred = "every command fails with the environment's message (its spec)";
    assert!(!facts_of(&env).iter().any(|fact| referred.contains(fact)));
}

/// suites.toml declares exactly the catalogue's environments: a spec without a declaration
/// has no cells, a declaration without a spec cannot run.
#[test]
fn the_suites_declare_exactly_the_catalogues_environments() {
    let declared: Vec<String> = shipped().file.environments.keys().cloned().collect();
    let mut specified: Vec<String> = catalogue::names().into_iter().map(str::to_string).collect();
    specified.sort();
    assert_eq!(declared, specified);
}
