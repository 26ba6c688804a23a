//! Differential fidelity for the published drivers (drivers/published.toml: the official Python
//! SDK and codex-acp, unmodified): for every pair of the matrix in `local` and `daytona`, `NAME-fake` against
//! `NAME-codex` (the pinned Codex 0.169.0 with the mock model API), both sides reach the same
//! verdict and the driver sees the same normalised message sequence — the comparison `harness
//! fidelity --drivers drivers/published.toml` prints, asserted. A pair its driver cut short
//! itself (codex-acp's title side thread, whose start races the client's exit on either side)
//! compares up to the earlier of the two closings of stdin, as there (see
//! `maintainer_tools::fidelity::cut`).
//!
//! Every trial needs the pinned real Codex, bubblewrap and the published driver packages
//! (`harness provision` installs them): without them a trial is ignored with the reason; under
//! `CI=true` it fails. Pairs run two at a time (each cell takes seconds; the machine is small).
//! No snapshots: the point where codex-acp's run is cut varies from run to run.

use crate::common;

use codex::driver_packages::{self, DriverPackage};
use codex::provision::PINNED;
use common::prereq;
use libtest_mimic::{Failed, Trial};
use maintainer_tools::fidelity::{self, Pair};
use matrix::context::CellContext;
use std::path::Path;
use std::sync::Arc;

/// Pairs run at once.
pub const PARALLEL_PAIRS: usize = 2;

/// Where the pairs run: on the host and in the restricted container the incident came from
/// (`harness fidelity --drivers drivers/published.toml` compares every environment; measured:
/// 123 of 123 pairs agree).
const ENVIRONMENTS: &[&str] = &["local", "daytona"];

fn package_of(pair: &Pair) -> Option<DriverPackage> {
    driver_packages::ALL
        .into_iter()
        .find(|package| pair.real.id.runner.starts_with(&format!("{}-", package.id)))
}

fn driver_missing(package: DriverPackage) -> Option<String> {
    if let Err(e) = package.resolve() {
        return Some(format!("driver package {}: {e:#}", package.id));
    }
    package.runtime_missing()
}

fn run_trial(pair: &Pair, options: &CellContext) -> Result<(), Failed> {
    let outcome = common::fidelity::agreeing(pair, options)?;
    if let Some(truncated) = &outcome.truncated {
        eprintln!("{}: {}", outcome.pair, truncated.describe());
    }
    Ok(())
}

pub fn trials() -> Vec<Trial> {
    let drivers = Path::new(env!("CARGO_MANIFEST_DIR")).join("../drivers/published.toml");
    let matrix = matrix::load::load_matrix(Some(&drivers), &[], None).expect("matrix loads");
    let mut options = CellContext::from_env().expect("the cell context");
    options.harness_binary = env!("CARGO_BIN_EXE_harness").into();
    // Not below target/conformance: that is the run's evidence CI uploads, and this test's
    // pairs made it 140 MB larger.
    options.out_root = Path::new(env!("CARGO_TARGET_TMPDIR")).join("published-fidelity-test");
    let options = Arc::new(options);
    let pairs: Vec<(Pair, DriverPackage)> = fidelity::pairs(&matrix, &[])
        .into_iter()
        // The pinned Codex's pairs only: each fake cell is then in one pair, so two trials
        // running at once never share a cell folder.
        .filter(|pair| {
            ENVIRONMENTS.contains(&pair.real.id.environment.as_str())
                && pair.real.runner.codex_version.as_deref() == Some(PINNED)
        })
        .filter_map(|pair| package_of(&pair).map(|package| (pair, package)))
        .collect();
    for package in driver_packages::ALL {
        assert!(
            pairs.iter().any(|(_, p)| *p == package),
            "the published drivers file pairs {} locally",
            package.id
        );
    }
    let trials = pairs
        .into_iter()
        .map(|(pair, package)| {
            let needs = if pair.real.id.environment == "local" {
                "needs_real_codex"
            } else {
                "needs_root_runc_real_codex"
            };
            let name = format!(
                "{needs}_and_{}::{}",
                package.id.replace('-', "_"),
                pair.name()
            );
            let missing = prereq::environment_missing(&pair.real.id.environment)
                .or_else(prereq::codex_missing)
                .or_else(|| driver_missing(package))
                .or_else(|| common::fidelity::cells_missing(&pair, &options));
            let options = options.clone();
            prereq::trial(name, missing, move || run_trial(&pair, &options))
        })
        .collect();
    trials
}

/// After the last trial: whatever a failed pair left running goes.
pub fn tear_down() {
    sandbox::teardown::tear_down_everything();
}
