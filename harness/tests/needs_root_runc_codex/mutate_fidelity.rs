//! `harness mutate --fidelity`: the same operators against the fake and the real Codex (the
//! pinned one, with the mock model API) over the cells the two pair, compared per operator. The
//! minimal example driver, declared once in a drivers file (so its fake and real-Codex runners
//! are one driver), with a fixed idle timeout.
//!
//! Needs the pinned Codex and bubblewrap (`local`): without them the trial is reported as
//! ignored with the reason; under `CI=true` it fails instead.

use crate::common;

use common::prereq;

pub fn trials() -> Vec<libtest_mimic::Trial> {
    let trials = vec![prereq::trial(
        "a_dropped_initialized_is_killed_on_both_app_servers_needs_real_codex",
        prereq::codex_missing().or_else(|| prereq::environment_missing("local")),
        || {
            a_dropped_initialized_is_killed_on_both_app_servers();
            Ok(())
        },
    )];
    trials
}

fn a_dropped_initialized_is_killed_on_both_app_servers() {
    let dir = tempfile::tempdir().unwrap();
    let (code, said) = common::mutate::run(
        &common::mutate::minimal_driver("mini", 60),
        dir.path(),
        &[
            "--fidelity",
            "--environment",
            "local",
            "--operator",
            "drop-initialized",
            "protocol-handshake.mini-fake.local.handshake",
            "protocol-handshake.mini-codex.local.handshake",
        ],
    );
    let report = common::mutate::report(dir.path(), &said);
    let statuses: Vec<(&str, &str)> = report["drivers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["driver"].as_str().unwrap(),
                d["operators"][0]["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        [("mini-codex", "killed"), ("mini-fake", "killed")],
        "{said}"
    );
    assert_eq!(
        report["fidelity"]["pairs"],
        serde_json::json!([["mini-fake", "mini-codex"]]),
        "{said}"
    );
    assert_eq!(
        report["fidelity"]["findings"],
        serde_json::json!([]),
        "{said}"
    );
    assert!(
        said.contains("the fake and the real Codex agree on every operator"),
        "{said}"
    );
    assert_eq!(code, Some(0), "{said}");
}
