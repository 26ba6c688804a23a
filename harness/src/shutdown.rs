//! The one way a matrix run ends, whether it ran to the end, got SIGINT or SIGTERM, or a cell
//! panicked: stop scheduling (the running cells are dropped, and their guards tear down what
//! they started), write the report of the cells that finished, and exit — 0 or 1 at the normal
//! end, 130 after SIGINT, 143 after SIGTERM, 101 after a panic.
//!
//! One signal handler serves the whole process; the binaries install it (library code never
//! does). While a matrix runs, a signal only cancels the scheduler; a second signal, a stop that
//! overruns [`GRACE`], or a signal while no matrix runs (other subcommands, tests) removes what
//! `sandbox::teardown` lists at once and exits.

use matrix::concurrency::Concurrency;
use matrix::context::CellContext;
use matrix::scheduler::{self, MatrixRun, Progress};
use report::outcome::{CellOutcome, CellResult};
use std::process::ExitCode;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};
use suites::Cell;
use tokio_util::sync::CancellationToken;

/// How long the orderly stop may take before the handler removes what is left and exits.
pub const GRACE: Duration = driver::bounds::RUN_STOP_GRACE;

/// The signal that stopped the run (0: none yet; [`OUTCOME_DECIDED`]: the run's exit code is
/// settled, so a signal now ends the process at once, as when no matrix runs).
static STOPPED_BY: AtomicI32 = AtomicI32::new(0);

/// Set in [`STOPPED_BY`] once the exit code of a run that no signal stopped is settled: a signal
/// landing after that must not print "stopping" and then be ignored by an exit 0.
const OUTCOME_DECIDED: i32 = -1;

/// The signal that stopped the current run, if any.
fn stopping_signal() -> Option<i32> {
    Some(STOPPED_BY.load(Ordering::SeqCst)).filter(|signal| *signal > 0)
}

/// Settle the run's outcome: the signal that stopped it, or none — after which every signal
/// exits at once.
fn decide_outcome() -> Option<i32> {
    match STOPPED_BY.compare_exchange(0, OUTCOME_DECIDED, Ordering::SeqCst, Ordering::SeqCst) {
        Ok(_) => None,
        Err(signal) => Some(signal).filter(|signal| *signal > 0),
    }
}

fn current_run() -> &'static Mutex<Option<CancellationToken>> {
    static RUN: OnceLock<Mutex<Option<CancellationToken>>> = OnceLock::new();
    RUN.get_or_init(Default::default)
}

/// The start of a test binary that runs cells (the suites' `cells`, the legitimate population):
/// it is also the hidden subcommands of its cells — their fake app-server, tap and reference
/// driver — and, as the harness binary does, tears down what its running cells started on a
/// signal. `Some(code)`: the process ran a hidden subcommand and is done.
pub fn start_cells_binary() -> Option<ExitCode> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some(code) = matrix::hidden::dispatch(&args) {
        return Some(code);
    }
    install_signal_handler();
    None
}

/// Install the process's SIGINT/SIGTERM handler (once; later calls do nothing).
pub fn install_signal_handler() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let mut signals = match signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) {
            Ok(signals) => signals,
            Err(err) => {
                eprintln!("harness: cannot install the SIGINT/SIGTERM handler: {err}");
                return;
            }
        };
        let spawned = std::thread::Builder::new()
            .name("shutdown-signals".into())
            .spawn(move || {
                for signal in signals.forever() {
                    let run = current_run()
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .clone();
                    match run.filter(|_| stops_the_run(signal)) {
                        Some(token) => {
                            eprintln!(
                                "harness: {}: stopping — no new cell starts, the running ones are torn down, the report lists what finished (again to exit at once)",
                                signal_name(signal)
                            );
                            token.cancel();
                            arm_watchdog(signal);
                        }
                        None => exit_now(signal),
                    }
                }
            });
        if let Err(err) = spawned {
            eprintln!("harness: cannot start the signal thread: {err}");
        }
    });
}

/// Whether `signal` starts the orderly stop of the running matrix (the first signal of a run
/// whose outcome is still open) rather than ending the process at once.
fn stops_the_run(signal: i32) -> bool {
    STOPPED_BY
        .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
}

fn arm_watchdog(signal: i32) {
    let _ = std::thread::Builder::new()
        .name("shutdown-watchdog".into())
        .spawn(move || {
            std::thread::sleep(GRACE);
            eprintln!(
                "harness: the orderly stop took longer than {}s; removing what is left",
                GRACE.as_secs()
            );
            exit_now(signal);
        });
}

fn exit_now(signal: i32) -> ! {
    sandbox::teardown::tear_down_everything();
    std::process::exit(128 + signal);
}

fn signal_name(signal: i32) -> &'static str {
    match signal {
        signal_hook::consts::SIGINT => "SIGINT",
        signal_hook::consts::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

/// Run `cells` (see [`scheduler::run_cells_until`]) to the end or to a stop, then write the
/// reports of what finished; the exit code says how it ended.
pub fn run_matrix(
    cells: &[Cell],
    ctx: &CellContext,
    jobs: Concurrency,
    on_event: impl Fn(&Progress, Option<&CellResult>) + Send + Sync + 'static,
) -> anyhow::Result<ExitCode> {
    let _owned = matrix::out_lock::OutLock::take(&ctx.out_root)?;
    let (run, wall) = run_cells(cells, ctx, jobs, on_event)?;
    let code = finish(cells, &run, ctx, wall);
    *current_run().lock().unwrap_or_else(|p| p.into_inner()) = None;
    code
}

/// Run `cells` to the end or to a stop under the process's signal handling, tearing down what
/// is left; no report (`harness mutate` runs the same cells several times). After a stop,
/// [`stopped_by`] names the signal.
pub fn run_cells(
    cells: &[Cell],
    ctx: &CellContext,
    jobs: Concurrency,
    on_event: impl Fn(&Progress, Option<&CellResult>) + Send + Sync + 'static,
) -> anyhow::Result<(MatrixRun, Duration)> {
    matrix::prereq::check_named(ctx, cells)?;
    let runs: Vec<(CellContext, Cell)> = cells.iter().map(|c| (ctx.clone(), c.clone())).collect();
    run_each(&runs, jobs, on_event)
}

/// [`run_cells`], each cell with its own context, in one pool (`harness mutate`: every
/// operator's cells at once; see [`scheduler::run_each_until`]). The caller has checked the
/// cells' named prerequisites.
pub fn run_each(
    runs: &[(CellContext, Cell)],
    jobs: Concurrency,
    on_event: impl Fn(&Progress, Option<&CellResult>) + Send + Sync + 'static,
) -> anyhow::Result<(MatrixRun, Duration)> {
    let cells: Vec<Cell> = runs.iter().map(|(_, cell)| cell.clone()).collect();
    let pool = scheduler::Pool {
        order: scheduler::start_order(&cells, jobs),
        skip: std::sync::Arc::new(|_| false),
        finished: std::sync::Arc::new(|_, _| {}),
    };
    run_pool(runs, jobs, pool, on_event)
}

/// [`run_each`] in `pool`'s order, leaving out what it skips (`harness mutate`'s first kill;
/// see [`scheduler::run_pool_until`]).
pub fn run_pool(
    runs: &[(CellContext, Cell)],
    jobs: Concurrency,
    pool: scheduler::Pool,
    on_event: impl Fn(&Progress, Option<&CellResult>) + Send + Sync + 'static,
) -> anyhow::Result<(MatrixRun, Duration)> {
    install_signal_handler();
    let stop = CancellationToken::new();
    STOPPED_BY.store(0, Ordering::SeqCst);
    *current_run().lock().unwrap_or_else(|p| p.into_inner()) = Some(stop.clone());
    // A panic outside the cells' tasks (those are caught by the scheduler) still tears down.
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous_hook(info);
        if tokio::runtime::Handle::try_current().is_err() {
            sandbox::teardown::tear_down_everything();
        }
    }));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let started = Instant::now();
    let run = runtime.block_on(scheduler::run_pool_until(
        runs,
        jobs,
        pool,
        stop.clone(),
        on_event,
    ));
    let wall = started.elapsed();
    drop(runtime);
    sandbox::teardown::tear_down_everything();
    Ok((run, wall))
}

/// The signal that stopped the last [`run_cells`], if one did; settles the outcome when none
/// did (a signal from now on exits at once).
pub fn stopped_by() -> Option<i32> {
    let signal = decide_outcome();
    *current_run().lock().unwrap_or_else(|p| p.into_inner()) = None;
    signal
}

/// Write and print the reports (every selected cell: those a stop left unfinished as ignored,
/// with why); the exit code.
fn finish(
    cells: &[Cell],
    run: &MatrixRun,
    ctx: &CellContext,
    wall: Duration,
) -> anyhow::Result<ExitCode> {
    let reported = with_unfinished(cells, run, ctx);
    let paths = report::write_all(&ctx.out_root, &reported, wall)?;
    let mut markdown = std::fs::read_to_string(&paths.markdown)?;
    if let Some(note) = stop_note(run) {
        // The matrix covers the cells that finished; a stopped run says so at its top.
        markdown = format!("{note}\n\n{markdown}");
        report::write_atomically(&paths.markdown, markdown.as_bytes())?;
    }
    println!("{markdown}");
    if let Err(why) = report::append_job_summary(&markdown) {
        eprintln!("{why}");
    }
    eprintln!("reports:");
    eprintln!("  html:     {}", paths.html.display());
    eprintln!("  markdown: {}", paths.markdown.display());
    eprintln!("  junit:    {}", paths.junit.display());
    eprintln!("  json:     {}", paths.json.display());
    let signal = decide_outcome();
    if let Some(note) = stop_note(run) {
        eprintln!("{note}");
    }
    let failures = run.finished.iter().filter(|r| r.is_failure()).count();
    if failures > 0 {
        eprintln!("{failures} cells differ from their expectation");
        // Named last, where a CI log's tail (all a reader of a truncated log sees) still shows
        // which cells and why.
        for result in run.finished.iter().filter(|r| r.is_failure()) {
            eprintln!(
                "  {}: {} (evidence: {})",
                result.cell,
                result.describe(),
                result.evidence_dir.display()
            );
        }
    }
    Ok(if run.panic.is_some() {
        ExitCode::from(101)
    } else if let Some(signal) = signal {
        ExitCode::from(u8::try_from(128 + signal).unwrap_or(1))
    } else if failures > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Why the run stopped early, or `None` when it ran to its end.
fn stop_cause(run: &MatrixRun) -> Option<String> {
    match (&run.panic, stopping_signal()) {
        (Some(message), _) => Some(format!("a cell panicked ({message})")),
        (None, Some(signal)) => Some(signal_name(signal).to_string()),
        (None, None) => None,
    }
}

/// The finished results and, in the cells' order, one ignored result for each cell the stop
/// interrupted or kept from starting, so summary.json and junit.xml (skipped, with the reason)
/// account for every cell selected — a consumer of a stopped run's JUnit sees what is missing.
/// Not failures: the run's exit code (130, 143, 101) already says it did not finish.
fn with_unfinished(cells: &[Cell], run: &MatrixRun, ctx: &CellContext) -> Vec<CellResult> {
    let Some(cause) = stop_cause(run) else {
        return run.finished.clone();
    };
    let mut finished: std::collections::HashMap<String, &CellResult> = run
        .finished
        .iter()
        .map(|r| (r.cell.to_string(), r))
        .collect();
    let interrupted: std::collections::HashSet<String> =
        run.interrupted.iter().map(|id| id.to_string()).collect();
    cells
        .iter()
        .map(|cell| {
            let name = cell.name();
            if let Some(result) = finished.remove(&name) {
                return result.clone();
            }
            let reason = if interrupted.contains(&name) {
                format!("interrupted: the run was stopped by {cause} while this cell ran; it was torn down")
            } else {
                format!("not started: the run was stopped by {cause} first")
            };
            CellResult {
                cell: cell.id.clone(),
                profile: Some(cell.profile),
                expected: cell.expected.clone(),
                outcome: CellOutcome::Ignored { reason },
                duration: Duration::ZERO,
                evidence_dir: ctx.out_root.join(&name),
            }
        })
        .collect()
}

/// What a stopped run did not finish, or `None` when it was not stopped.
fn stop_note(run: &MatrixRun) -> Option<String> {
    let cause = stop_cause(run)?;
    let names = |ids: &[graders::events::CellId]| {
        ids.iter()
            .map(|id| id.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some(format!(
        "**stopped by {cause}**: {} cells finished, {} interrupted{}, {} not started (the last two listed as ignored)",
        run.finished.len(),
        run.interrupted.len(),
        if run.interrupted.is_empty() {
            String::new()
        } else {
            format!(" ({})", names(&run.interrupted))
        },
        run.not_started.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal_hook::consts::{SIGINT, SIGTERM};

    // One test, in sequence: the state is the process's (no other unit test touches it).
    #[test]
    fn a_signal_stops_a_run_only_while_its_outcome_is_open() {
        STOPPED_BY.store(0, Ordering::SeqCst);
        assert!(stops_the_run(SIGTERM), "the first signal of a run stops it");
        assert!(!stops_the_run(SIGINT), "a second signal exits at once");
        assert_eq!(
            decide_outcome(),
            Some(SIGTERM),
            "the exit code says SIGTERM"
        );
        assert_eq!(stopping_signal(), Some(SIGTERM));

        STOPPED_BY.store(0, Ordering::SeqCst);
        assert_eq!(decide_outcome(), None, "no signal: the normal exit code");
        assert_eq!(
            stopping_signal(),
            None,
            "the settled outcome is not a signal"
        );
        assert!(
            !stops_the_run(SIGTERM),
            "a signal after the outcome is settled exits at once, not 'stopping' then exit 0"
        );
        assert_eq!(decide_outcome(), None);
        STOPPED_BY.store(0, Ordering::SeqCst);
    }
}
