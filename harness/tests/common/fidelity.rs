//! Running one fidelity pair as a test trial.

use libtest_mimic::Failed;
use maintainer_tools::fidelity::{self, Pair, PairOutcome};
use matrix::context::CellContext;

/// Run `pair` on a runtime of its own; its outcome when both sides were compared and agree,
/// else the failure naming what differed.
pub fn agreeing(pair: &Pair, options: &CellContext) -> Result<PairOutcome, Failed> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("starting the runtime: {e}"))?;
    let outcome = runtime.block_on(fidelity::run_pair(pair, options));
    outcome.agreement()?;
    Ok(outcome)
}

/// Why either cell of `pair` cannot run here (the matrix's own check), if one cannot.
pub fn cells_missing(pair: &Pair, options: &CellContext) -> Option<String> {
    matrix::prereq::missing(&pair.real, options)
        .or_else(|| matrix::prereq::missing(&pair.fake, options))
}
