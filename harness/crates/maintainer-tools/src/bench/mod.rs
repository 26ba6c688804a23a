//! Benchmarks behind `harness bench`: one module per subject.

pub mod fake;
// These three print as they measure (a line per step, then the table): their output is a
// stream, not one value at the end; they move out with the other maintainer tools (issue 40,
// item 5) and are left printing until then.
#[allow(clippy::print_stdout, clippy::print_stderr)]
pub mod gate;
#[allow(clippy::print_stdout, clippy::print_stderr)]
pub mod graders;
#[allow(clippy::print_stdout, clippy::print_stderr)]
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
