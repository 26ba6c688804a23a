//! `harness mutate` end to end: the minimal example driver (harness/examples/minimal_driver.py,
//! declared in a drivers file) against the fake app-server, on a few cells: the operators a
//! gate must notice are killed, and a selection too narrow to notice one leaves it a survivor
//! (exit 1). The recorder's rewrites are real: the driver's bytes go through the tap.

use crate::common;

use assert_cmd::Command;
use serde_json::Value;
use std::path::Path;

/// `harness mutate` of the minimal driver against the fake, `local`, into `dir/out`: its exit
/// code and its stdout and stderr.
fn run_mutate(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    run_mutate_without_app_server(dir, &[&["--app-server", "fake"], args].concat())
}

/// [`run_mutate`] over both app-servers' runners.
fn run_mutate_without_app_server(dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    common::mutate::run(
        &common::mutate::minimal_driver("mini", 2),
        dir,
        &[&["--environment", "local", "--jobs", "2"], args].concat(),
    )
}

/// [`run_mutate`], with its `mutation.json`.
fn mutate(dir: &Path, args: &[&str]) -> (Option<i32>, Value, String) {
    let (code, output) = run_mutate(dir, args);
    let report = common::mutate::report(dir, &output);
    (code, report, output)
}

/// The operator's entry in `mutation.json`.
fn operator<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["drivers"][0]["operators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["operator"] == name)
        .unwrap_or_else(|| panic!("{name} in {report:#}"))
}

fn status<'a>(report: &'a Value, name: &str) -> &'a str {
    operator(report, name)["status"].as_str().unwrap()
}

#[test]
fn approving_everything_and_widening_the_sandbox_are_killed() {
    let dir = tempfile::tempdir().unwrap();
    let (code, report, output) = mutate(
        dir.path(),
        &[
            "--operator",
            "approve-everything",
            "--operator",
            "widen-sandbox",
            "protocol-safe-default.mini-fake.local.file-change-refused",
        ],
    );
    assert_eq!(status(&report, "approve-everything"), "killed", "{output}");
    assert_eq!(status(&report, "widen-sandbox"), "killed", "{output}");
    assert_eq!(report["drivers"][0]["driver"], "mini-fake");
    assert_eq!(report["score"], 1.0);
    assert_eq!(code, Some(0), "{output}");
    // report.html: the reference's matrix with the mutation section.
    let html = std::fs::read_to_string(dir.path().join("out/report.html")).unwrap();
    assert!(
        html.contains("<section class=\"mutation\"")
            && html.contains("Mutation score 100%")
            && html.contains("escalation-not-granted"),
        "{html}"
    );
    // The mutant's evidence says it is one: the transcript records the rewrite.
    let transcript = common::evidence::read_text(
        &dir.path()
            .join("out/approve-everything/protocol-safe-default.mini-fake.local.file-change-refused/transcript.jsonl"),
    )
    .unwrap();
    assert!(
        transcript.contains("\"kind\":\"mutation\"") && transcript.contains("acceptForSession"),
        "{transcript}"
    );
}

#[test]
fn an_operator_the_selection_cannot_notice_survives() {
    let dir = tempfile::tempdir().unwrap();
    let (code, report, output) = mutate(
        dir.path(),
        &[
            "--operator",
            "approval-never",
            "protocol-handshake.mini-fake.local.handshake",
        ],
    );
    assert_eq!(status(&report, "approval-never"), "survived", "{output}");
    assert_eq!(report["score"], 0.0);
    assert_eq!(code, Some(1), "{output}");
    assert!(output.contains("survived"), "{output}");
}

#[test]
fn an_unknown_operator_is_refused_by_name() {
    let output = Command::cargo_bin("harness")
        .unwrap()
        .args(["mutate", "--operator", "approve-all"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("approve-everything"), "{stderr}");
}

/// `harness mutate --expect`: the expected-scores check (drivers/mutation.toml's format).
fn expect(dir: &Path, expectations: &str, args: &[&str]) -> (Option<i32>, String) {
    let expected = dir.join("expected.toml");
    std::fs::write(&expected, expectations).unwrap();
    let mut all = vec!["--expect", expected.to_str().unwrap()];
    all.extend_from_slice(args);
    run_mutate(dir, &all)
}

#[test]
fn an_expectation_naming_an_unknown_operator_or_driver_is_an_error() {
    let handshake = ["protocol-handshake.mini-fake.local.handshake"];
    let dir = tempfile::tempdir().unwrap();
    let (code, output) = expect(
        dir.path(),
        "[drivers.mini-fake]\nkilled = [\"approve-all\"]\n",
        &handshake,
    );
    assert_eq!(code, Some(2), "{output}");
    assert!(output.contains("approve-all"), "{output}");
    let (code, output) = expect(
        dir.path(),
        "[drivers.mini-codex]\nkilled = [\"drop-initialized\"]\n",
        &handshake,
    );
    assert_eq!(code, Some(2), "{output}");
    assert!(output.contains("`mini-codex`"), "{output}");
    assert!(
        !dir.path().join("out/mutation.json").exists(),
        "refused before anything ran"
    );
}

#[test]
fn a_survivor_against_an_expectation_is_exit_1_and_a_met_one_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--operator",
        "approval-never",
        "--operator",
        "drop-initialized",
        "protocol-handshake.mini-fake.local.handshake",
    ];
    let (code, output) = expect(
        dir.path(),
        "[drivers.mini-fake]\nkilled = [\"drop-initialized\", \"approval-never\"]\n",
        &args,
    );
    assert_eq!(code, Some(1), "{output}");
    assert!(
        output.contains("`approval-never` is expected killed but survived"),
        "{output}"
    );
    // The same survivor, not named by the expectation: tolerated.
    let (code, output) = expect(
        dir.path(),
        "[drivers.mini-fake]\nkilled = [\"drop-initialized\"]\n",
        &args,
    );
    assert_eq!(code, Some(0), "{output}");
    assert!(output.contains("every expectation"), "{output}");
    // A floor the score is below.
    let (code, output) = expect(
        dir.path(),
        "[drivers.mini-fake]\nkilled = [\"drop-initialized\"]\nscore = 1.0\n",
        &args,
    );
    assert_eq!(code, Some(1), "{output}");
    assert!(output.contains("below the expected 100%"), "{output}");
}

/// The operator's `killed_by` cells and how many of its runs its first kill left out.
fn kills(report: &Value, name: &str) -> (usize, usize) {
    let mutant = operator(report, name);
    (
        mutant["killed_by"].as_array().unwrap().len(),
        mutant["not_run_after_kill"].as_array().unwrap().len(),
    )
}

#[test]
fn an_operator_stops_at_its_first_kill_unless_all_kills_are_asked() {
    // Every server-request cell notices a dropped answer (each waits for its own answer).
    let args = [
        "--operator",
        "drop-answers",
        "protocol-server-requests.mini-fake.local.",
    ];
    let dir = tempfile::tempdir().unwrap();
    let (code, report, output) = mutate(dir.path(), &args);
    assert_eq!(status(&report, "drop-answers"), "killed", "{output}");
    assert_eq!(code, Some(0), "{output}");
    let (killers, left_out) = kills(&report, "drop-answers");
    // Two run at once (`--jobs 2`): at most the two running when the first kill came finish.
    assert!((1..=2).contains(&killers), "{output}");
    assert!(left_out >= 5, "{output}");
    assert_eq!(report["first_kill"], true);
    assert_eq!(report["not_run_after_kill"], left_out);
    assert!(
        output.contains(&format!("(first kill; {left_out} cells not run)")),
        "{output}"
    );

    let all = tempfile::tempdir().unwrap();
    let (code, report, output) = mutate(all.path(), &[&["--all-kills"], &args[..]].concat());
    assert_eq!(status(&report, "drop-answers"), "killed", "{output}");
    assert_eq!(code, Some(0), "{output}");
    let (every_killer, none_left_out) = kills(&report, "drop-answers");
    assert_eq!(every_killer, killers + left_out, "{output}");
    assert_eq!(none_left_out, 0);
    assert_eq!(report["first_kill"], false);
    assert!(!output.contains("first kill;"), "{output}");
}

#[test]
fn each_driver_stops_at_its_own_first_kill() {
    // Two drivers (the same script): a kill on one settles nothing about the other.
    let dir = tempfile::tempdir().unwrap();
    let twins = format!(
        "{}\n{}",
        common::mutate::minimal_driver("mini", 2),
        common::mutate::minimal_driver("twin", 2)
    );
    let (code, said) = common::mutate::run(
        &twins,
        dir.path(),
        &[
            "--app-server",
            "fake",
            "--environment",
            "local",
            "--jobs",
            "1",
            "--operator",
            "drop-answers",
            "protocol-server-requests.mini-fake.local.command-approval",
            "protocol-server-requests.twin-fake.local.command-approval",
        ],
    );
    let report = common::mutate::report(dir.path(), &said);
    let drivers = report["drivers"].as_array().unwrap();
    assert_eq!(drivers.len(), 2, "{said}");
    for driver in drivers {
        assert_eq!(driver["operators"][0]["status"], "killed", "{said}");
    }
    assert_eq!(code, Some(0), "{said}");
}

#[test]
fn fidelity_without_a_real_codex_counterpart_in_the_selection_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (code, output) = run_mutate_without_app_server(
        dir.path(),
        &["--fidelity", "protocol-handshake.mini-fake.local.handshake"],
    );
    assert_eq!(code, Some(2), "{output}");
    assert!(output.contains("real-Codex counterpart"), "{output}");
}

#[test]
fn a_kill_counts_once_a_second_run_of_its_cell_kills_again() {
    let dir = tempfile::tempdir().unwrap();
    let cell = "protocol-handshake.mini-fake.local.handshake";
    let (code, report, output) = mutate(dir.path(), &["--operator", "drop-initialized", cell]);
    let mutant = operator(&report, "drop-initialized");
    assert_eq!(mutant["status"], "killed", "{output}");
    let killer = &mutant["killed_by"][0];
    assert_eq!(killer["cell"], cell);
    assert_ne!(killer["mutant"], killer["reference"]);
    assert_eq!(
        killer["again"]["mutant"], killer["mutant"],
        "the second run killed alike: {output}"
    );
    assert!(killer["again"]["applied"].as_u64().unwrap() > 0);
    assert_eq!(report["confirmation_runs"], 1, "one second run: {output}");
    assert!(mutant["unconfirmed"].as_array().unwrap().is_empty());
    assert!(
        output.contains("(pass → fail: initialized-sent, again fail: initialized-sent)"),
        "{output}"
    );
    // The second run's evidence is kept beside the first's.
    let again = dir
        .path()
        .join("out/again/drop-initialized")
        .join(cell)
        .join("verdict.json");
    assert!(again.is_file(), "{}", again.display());
    assert_eq!(code, Some(0), "{output}");
}

/// `harness mutate --all-kills --operator NAME CELLS…`, `runs` times: in each run no kill is
/// unconfirmed, no cell unsteady, and the operator applies in every cell, and every run ends
/// each cell alike. Per run: the operator's status and how each cell ended (a survivor: as the
/// reference).
fn each_cell_ended(
    name: &str,
    cells: &[&str],
    runs: usize,
) -> Vec<(String, Vec<(String, String)>)> {
    let args = [&["--all-kills", "--operator", name][..], cells].concat();
    let seen = (0..runs)
        .map(|_| {
            let dir = tempfile::tempdir().unwrap();
            let (_, report, output) = mutate(dir.path(), &args);
            let mutant = operator(&report, name);
            assert!(
                mutant["unconfirmed"].as_array().unwrap().is_empty()
                    && mutant["unsteady"].as_array().unwrap().is_empty(),
                "{output}"
            );
            let killers = mutant["killed_by"].as_array().unwrap();
            let mut ended: Vec<(String, String)> = mutant["applied_in"]
                .as_array()
                .unwrap()
                .iter()
                .map(|cell| {
                    let killed = killers.iter().find(|k| k["cell"] == *cell);
                    let how = killed.map_or("survived".to_string(), |k| k["mutant"].to_string());
                    (cell.as_str().unwrap().to_string(), how)
                })
                .collect();
            ended.sort();
            assert_eq!(ended.len(), cells.len(), "it applies in each: {output}");
            (mutant["status"].as_str().unwrap().to_string(), ended)
        })
        .collect::<Vec<_>>();
    assert!(
        seen.windows(2).all(|pair| pair[0] == pair[1]),
        "the same outcome in every run: {seen:#?}"
    );
    seen
}

#[test]
fn close_after_turn_start_ends_each_cell_alike_in_every_run() {
    // Cells it was once killed in and then survived, or killed with another check: the fake's
    // turn raced the close of its stdin.
    let cells = [
        "protocol-turn-outcomes.mini-fake.local.failed-turn-no-error",
        "protocol-turn-outcomes.mini-fake.local.interrupted-turn",
        "protocol-safe-default.mini-fake.local.file-change-refused",
        "protocol-safe-default.mini-fake.local.command-escalation-refused",
    ];
    let seen = each_cell_ended("close-after-turn-start", &cells, 3);
    assert_eq!(seen[0].0, "killed", "{seen:#?}");
}

#[test]
fn duplicate_requests_ends_each_cell_alike_in_every_run() {
    // Cells whose copy of `turn/start` once landed in the turn or after it, or before the
    // scenario's first request or after it, depending on when the relay's second write came and
    // which of the fake's threads ran first (`pass → incomplete, then pass`; survived in one
    // run and killed in the next).
    let cells = [
        "protocol-safe-default.mini-fake.local.command-escalation-refused",
        "protocol-safe-default.mini-fake.local.file-change-refused",
        "protocol-turn-outcomes.mini-fake.local.failed-turn",
        "protocol-turn-outcomes.mini-fake.local.failed-turn-no-error",
        "protocol-turn-outcomes.mini-fake.local.retryable-error",
        "protocol-forward-compat.mini-fake.local.unknown-item-type",
    ];
    each_cell_ended("duplicate-requests", &cells, 3);
}
