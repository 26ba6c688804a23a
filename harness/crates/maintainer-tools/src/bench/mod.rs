//! Benchmarks behind `harness bench`: one module per subject. Each returns its report as a
//! value and renders the text the command line prints; what one tells as it measures (a line
//! per step) it hands to a callback of the command line. None prints.

pub mod fake;
pub mod gate;
pub mod graders;
pub mod matrix;
pub mod tap;

/// Run `cells` to their end with the executor alone — no run's signal handling or reports, whose
/// work is not what a benchmark measures — and return their results in the cells' order; a
/// panic in a cell is raised again.
pub(crate) fn run_cells(
    runtime: &tokio::runtime::Runtime,
    ctx: &::matrix::context::CellContext,
    cells: &[suites::Cell],
    jobs: ::matrix::concurrency::Concurrency,
) -> Vec<report::outcome::CellResult> {
    let batch = ::matrix::scheduler::Batch::of_cells(ctx, cells, jobs);
    // Nobody listens: the events go nowhere.
    let (events, _) = tokio::sync::mpsc::unbounded_channel();
    let run = runtime.block_on(::matrix::scheduler::execute(
        &batch,
        jobs,
        tokio_util::sync::CancellationToken::new(),
        events,
    ));
    if let Some(message) = run.panic {
        panic!("{message}");
    }
    run.finished
}
