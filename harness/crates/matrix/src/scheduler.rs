//! Running many cells: as many at once as the concurrency allows ([`crate::concurrency`]), the
//! costliest first, until the end or a stop. A stop (a cancelled token: the binary's signal
//! handler, or a panic in a cell) keeps new cells from starting and drops the running ones —
//! dropping a cell is its teardown (its guard, [`crate::guard::CellGuard`]). The scheduler
//! neither handles signals nor writes reports: `harness::shutdown` does, with what it returns.

use crate::cell::run_cell;
use crate::concurrency::Concurrency;
use crate::context::CellContext;
use graders::events::CellId;
use report::outcome::CellResult;
use std::sync::Arc;
use suites::Cell;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Progress of a matrix run, for live output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    pub total: usize,
    pub done: usize,
    pub running: usize,
    pub failed: usize,
    pub ignored: usize,
}

/// What a matrix run produced: the results of the cells that finished (in the cells' order),
/// and the cells a stop cut short or never started.
#[derive(Debug, Clone, Default)]
pub struct MatrixRun {
    pub finished: Vec<CellResult>,
    /// Running when the stop came: torn down, no result.
    pub interrupted: Vec<CellId>,
    /// Not started before the stop came.
    pub not_started: Vec<CellId>,
    /// The message of a panic in a cell's task, which stopped the run.
    pub panic: Option<String>,
}

/// Run `cells`, as many at once as `jobs` allows; `on_event` sees every start and finish.
/// Results come back in the cells' order. A panic in a cell is raised again here.
pub async fn run_cells(
    cells: &[Cell],
    ctx: &CellContext,
    jobs: Concurrency,
    on_event: impl Fn(&Progress, Option<&CellResult>) + Send + Sync + 'static,
) -> Vec<CellResult> {
    let run = run_cells_until(cells, ctx, jobs, CancellationToken::new(), on_event).await;
    if let Some(message) = run.panic {
        panic!("{message}");
    }
    run.finished
}

/// [`run_cells`], until `stop` is cancelled: then no cell starts any more, the running ones are
/// dropped (their guards tear down what they started), and what finished is returned. A panic
/// in a cell's task cancels `stop` too and is returned, not raised.
pub async fn run_cells_until(
    cells: &[Cell],
    ctx: &CellContext,
    jobs: Concurrency,
    stop: CancellationToken,
    on_event: impl Fn(&Progress, Option<&CellResult>) + Send + Sync + 'static,
) -> MatrixRun {
    let runs: Vec<(CellContext, Cell)> = cells.iter().map(|c| (ctx.clone(), c.clone())).collect();
    run_each_until(&runs, jobs, stop, on_event).await
}

/// [`run_cells_until`], each cell with its own context, all in one pool: `harness mutate` runs
/// the same cell under several operators at once, each into its own out folder. Results come
/// back in the order of `runs`.
pub async fn run_each_until(
    runs: &[(CellContext, Cell)],
    jobs: Concurrency,
    stop: CancellationToken,
    on_event: impl Fn(&Progress, Option<&CellResult>) + Send + Sync + 'static,
) -> MatrixRun {
    let semaphore = Arc::new(Semaphore::new(jobs.slots() as usize));
    let progress = Arc::new(std::sync::Mutex::new(Progress {
        total: runs.len(),
        ..Progress::default()
    }));
    let on_event = Arc::new(on_event);
    let mut tasks = tokio::task::JoinSet::new();
    // The costliest cells queue first (the semaphore is fair), so the long ones do not start
    // last and stretch the run's tail.
    let mut order: Vec<usize> = (0..runs.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(jobs.cost(&runs[i].1)));
    for index in order {
        let (ctx, cell) = runs[index].clone();
        let cost = jobs.cost(&cell);
        let semaphore = semaphore.clone();
        let progress = progress.clone();
        let on_event = on_event.clone();
        let stop = stop.clone();
        tasks.spawn(async move {
            let _permit = tokio::select! {
                biased;
                _ = stop.cancelled() => return (index, Ran::NotStarted),
                permit = semaphore.acquire_many_owned(cost) => permit.expect("semaphore open"),
            };
            if stop.is_cancelled() {
                return (index, Ran::NotStarted);
            }
            {
                let mut p = progress.lock().expect("progress");
                p.running += 1;
                on_event(&p, None);
            }
            let result = tokio::select! {
                biased;
                _ = stop.cancelled() => None,
                result = run_cell(&ctx, &cell) => Some(result),
            };
            let mut p = progress.lock().expect("progress");
            p.running -= 1;
            match result {
                Some(result) => {
                    p.done += 1;
                    p.failed += usize::from(result.is_failure());
                    p.ignored += usize::from(result.is_ignored());
                    on_event(&p, Some(&result));
                    (index, Ran::Finished(Box::new(result)))
                }
                None => (index, Ran::Interrupted),
            }
        });
    }
    let mut ran: Vec<Option<Ran>> = vec![None; runs.len()];
    let mut panic = None;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((index, outcome)) => ran[index] = Some(outcome),
            Err(e) if e.is_panic() => {
                let payload = e.into_panic();
                let message = payload
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "a cell's task panicked".into());
                panic.get_or_insert(message);
                stop.cancel();
            }
            Err(_) => {}
        }
    }
    let mut run = MatrixRun {
        panic,
        ..MatrixRun::default()
    };
    for ((_, cell), outcome) in runs.iter().zip(ran) {
        match outcome {
            Some(Ran::Finished(result)) => run.finished.push(*result),
            Some(Ran::NotStarted) => run.not_started.push(cell.id.clone()),
            // A panicked task left no outcome: it was running.
            Some(Ran::Interrupted) | None => run.interrupted.push(cell.id.clone()),
        }
    }
    run
}

#[derive(Debug, Clone)]
enum Ran {
    Finished(Box<CellResult>),
    Interrupted,
    NotStarted,
}
