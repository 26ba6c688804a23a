//! Differential fidelity, one trial per pair of the matrix: the fake app-server and the real
//! Codex (0.169.0 with the mock model API) play the same scenario through the same driver (the
//! reference driver, the minimal example driver with and without feature flags)
//! in the same environment, and must reach the same verdict with the same normalised
//! driver-visible message sequence (`harness fidelity` runs the same comparison and prints a
//! table). Each pair's sequence is an insta snapshot named after the pair.
//!
//! Every trial needs the real Codex (installed from npm into the cache on first use) and
//! bubblewrap; the non-`local` ones also need root and runc, as their names say. A trial whose
//! prerequisites are missing is reported as ignored with the reason; under `CI=true` it fails.
//! Pairs run two at a time, as published_fidelity's do: a pair waits on its Codex and its
//! containers about half of its time (one at a time, the binary kept 1 of the 2 cores busy).

// Each test crate uses its own part of the shared helpers.
#[allow(dead_code)]
mod common;

use common::prereq;
use harness::fidelity::{self, Pair};
use libtest_mimic::{Arguments, Failed};
use matrix::context::CellContext;
use std::sync::Arc;

fn trial_name(pair: &Pair) -> String {
    let needs = if pair.real.id.environment == "local" {
        "needs_real_codex"
    } else {
        "needs_root_runc_real_codex"
    };
    format!("{needs}::{}", pair.name())
}

fn snapshot_name(pair: &Pair) -> String {
    let id = &pair.real.id;
    format!(
        "fidelity.{}.{}.{}.{}",
        id.suite, id.runner, id.environment, id.case
    )
}

fn run_trial(pair: &Pair, options: &CellContext) -> Result<(), Failed> {
    let outcome = common::fidelity::agreeing(pair, options)?;
    // insta reports a mismatch by panicking; libtest-mimic turns the panic into this trial's
    // failure.
    insta::assert_json_snapshot!(snapshot_name(pair), outcome.real.sequence);
    Ok(())
}

fn main() {
    let mut args = Arguments::from_args();
    if args.test_threads.is_none() {
        args.test_threads = Some(2);
    }
    let matrix = suites::load().expect("suites load");
    let mut options = CellContext::from_env().expect("the cell context");
    options.harness_binary = env!("CARGO_BIN_EXE_harness").into();
    options.out_root = matrix::paths::conformance_root().join("fidelity-test");
    let options = Arc::new(options);
    let pairs = fidelity::pairs(&matrix, &[]);
    assert!(!pairs.is_empty(), "the matrix has pairs to compare");
    let trials = pairs
        .into_iter()
        .map(|pair| {
            let name = trial_name(&pair);
            // The environment on runc and the installed Codex first (what the name promises),
            // then the matrix's own check of both cells.
            let missing = prereq::environment_missing(&pair.real.id.environment)
                .or_else(prereq::codex_missing)
                .or_else(|| common::fidelity::cells_missing(&pair, &options));
            let options = options.clone();
            prereq::trial(name, missing, move || run_trial(&pair, &options))
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    sandbox::teardown::tear_down_everything();
    conclusion.exit();
}
