//! Running many cells — the executor of a run: as many at once as the concurrency allows
//! ([`crate::concurrency`]), in the order its [`Batch`] gives (by default the longest expected
//! first, [`start_order`]), until the end or a stop. A stop (a cancelled token: the run's
//! dispatcher on a signal, or a panic in a cell) keeps new cells from starting and drops the
//! running ones — dropping a cell is its teardown (its guard, [`crate::guard::CellGuard`]). The
//! executor neither handles signals, counts progress nor writes reports: it sends a typed
//! [`CellEvent`] for each start and end, and `harness::dispatch` (the run's owner) does the rest
//! with those and what [`execute`] returns.

use crate::attempts::run_cell_retried;
use crate::concurrency::Concurrency;
use crate::context::CellContext;
use crate::stages::{app_server, driver};
use fake_app_server::scenario::{Scenario, ServerAction, TurnFaultKind};
use graders::events::CellId;
use report::outcome::CellResult;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use suites::spec::{AppServerKind, ScenarioRef};
use suites::Cell;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// Progress of a matrix run, for live output: the fold of its [`CellEvent`]s
/// ([`Progress::count`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    pub total: usize,
    pub done: usize,
    pub running: usize,
    pub failed: usize,
    pub ignored: usize,
}

impl Progress {
    /// The progress of `total` runs, none started.
    pub fn of(total: usize) -> Progress {
        Progress {
            total,
            ..Progress::default()
        }
    }

    /// Count one event of the executor.
    pub fn count(&mut self, event: &CellEvent) {
        match event {
            CellEvent::Started => self.running += 1,
            CellEvent::Skipped => self.total -= 1,
            CellEvent::Finished(result) => {
                self.running -= 1;
                self.done += 1;
                self.failed += usize::from(result.is_failure());
                self.ignored += usize::from(result.is_ignored());
            }
            CellEvent::Interrupted => self.running -= 1,
        }
    }
}

/// What the executor says of one run of its batch, by the run's index, as it happens.
#[derive(Debug, Clone)]
pub enum CellEvent {
    /// Its slots taken, the cell starts.
    Started,
    /// Its turn came and it had been withdrawn ([`Batch::withdrawn`]): it never starts.
    Skipped,
    /// The cell ran to its result.
    Finished(Box<CellResult>),
    /// The stop came while it ran: it was dropped (torn down), no result.
    Interrupted,
}

/// Where the executor sends its events: each run's index in the batch, what happened, and the
/// event's [`Receipt`].
pub type CellEvents = UnboundedSender<(usize, CellEvent, Receipt)>;

/// Dropped by whoever receives an event once it has handled it. The executor keeps a finished
/// run's slots until then: a run its consumer withdraws on that result ([`Batch::withdrawn`])
/// cannot have started in them meanwhile. A receiver that is gone handled everything.
#[derive(Debug)]
pub struct Receipt {
    /// Never sent on: its drop is the signal.
    _handled: Option<oneshot::Sender<()>>,
}

impl Receipt {
    /// A receipt nobody waits for.
    fn unawaited() -> Receipt {
        Receipt { _handled: None }
    }

    /// A receipt, and what resolves once it is dropped.
    fn awaited() -> (Receipt, oneshot::Receiver<()>) {
        let (handled, dropped) = oneshot::channel();
        (
            Receipt {
                _handled: Some(handled),
            },
            dropped,
        )
    }
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
    /// Indices (in the batch's runs) of those left out when their turn came: they had been
    /// withdrawn ([`Batch::withdrawn`]).
    pub skipped: Vec<usize>,
}

/// What [`execute`] runs: cells, each with its context (`harness mutate` runs the same cell
/// under several operators at once, each into its own out folder), the order they start in and
/// a handle on each the caller may withdraw it by (`harness mutate`: each operator's likeliest
/// killers first, an operator's queued runs withdrawn once one of its runs killed it).
pub struct Batch {
    pub runs: Vec<(CellContext, Cell)>,
    /// The order the runs start in (indices into the runs); every index exactly once.
    pub order: Vec<usize>,
    /// Each run's withdrawal, in the runs' order: a run whose token the caller cancelled before
    /// its turn came (its slots taken) is left out ([`CellEvent::Skipped`]). A caller that
    /// withdraws runs on what it is told of finished ones does so before the next run starts in
    /// their slots ([`Receipt`]).
    pub withdrawn: Vec<CancellationToken>,
    /// How many more times a run whose result fails runs again, from scratch, before its
    /// result is final (`harness run --retries`; `crate::attempts`).
    pub retries: usize,
}

impl Batch {
    /// `cells`, each with `ctx`, the longest expected first ([`start_order`]), none withdrawn.
    pub fn of_cells(ctx: &CellContext, cells: &[Cell], jobs: Concurrency) -> Batch {
        Batch {
            runs: cells.iter().map(|c| (ctx.clone(), c.clone())).collect(),
            order: start_order(cells, jobs),
            withdrawn: cells.iter().map(|_| CancellationToken::new()).collect(),
            retries: 0,
        }
    }

    /// The cells of the runs, in the runs' order.
    pub fn cells(&self) -> impl Iterator<Item = &Cell> {
        self.runs.iter().map(|(_, cell)| cell)
    }
}

/// Run `batch`, as many at once as `jobs` allows, sending each start and end to `events` (a
/// closed receiver is no error: nobody listens; a finished run's slots are freed once its
/// [`Receipt`] is dropped), until the end or until `stop` is cancelled:
/// then no cell starts any more, the running ones are dropped (their guards tear down what they
/// started), and what finished is returned, in the order of the batch's runs. A panic in a
/// cell's task cancels `stop` too and is returned, not raised.
pub async fn execute(
    batch: &Batch,
    jobs: Concurrency,
    stop: CancellationToken,
    events: CellEvents,
) -> MatrixRun {
    let runs = &batch.runs;
    assert_eq!(
        batch.withdrawn.len(),
        runs.len(),
        "a batch's withdrawals are its runs'"
    );
    let semaphore = Arc::new(Semaphore::new(jobs.slots() as usize));
    let mut tasks = tokio::task::JoinSet::new();
    // The semaphore is fair: cells get their permits in this order.
    for &index in &batch.order {
        let (ctx, cell) = runs[index].clone();
        let cost = jobs.cost(&cell);
        let semaphore = semaphore.clone();
        let events = events.clone();
        let stop = stop.clone();
        let withdrawn = batch.withdrawn[index].clone();
        let retries = batch.retries;
        tasks.spawn(async move {
            let _permit = tokio::select! {
                biased;
                _ = stop.cancelled() => return (index, Ran::NotStarted),
                permit = semaphore.acquire_many_owned(cost) => permit.expect("semaphore open"),
            };
            if stop.is_cancelled() {
                return (index, Ran::NotStarted);
            }
            let tell = |event| {
                let _ = events.send((index, event, Receipt::unawaited()));
            };
            if withdrawn.is_cancelled() {
                tell(CellEvent::Skipped);
                return (index, Ran::Skipped);
            }
            tell(CellEvent::Started);
            let result = tokio::select! {
                biased;
                _ = stop.cancelled() => None,
                result = run_cell_retried(&ctx, &cell, retries) => Some(result),
            };
            match result {
                Some(result) => {
                    let result = Box::new(result);
                    let (receipt, handled) = Receipt::awaited();
                    let finished = (index, CellEvent::Finished(result.clone()), receipt);
                    // Before the permit is released (at the task's end): what its consumer
                    // withdraws on this result, no later run starts. Dropped unsent when nobody
                    // listens, which resolves it too.
                    let _ = events.send(finished);
                    let _ = handled.await;
                    (index, Ran::Finished(result))
                }
                None => {
                    tell(CellEvent::Interrupted);
                    (index, Ran::Interrupted)
                }
            }
        });
    }
    drop(events);
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
    for (index, ((_, cell), outcome)) in runs.iter().zip(ran).enumerate() {
        match outcome {
            Some(Ran::Skipped) => run.skipped.push(index),
            Some(Ran::Finished(result)) => run.finished.push(*result),
            Some(Ran::NotStarted) => run.not_started.push(cell.id.clone()),
            // A panicked task left no outcome: it was running.
            Some(Ran::Interrupted) | None => run.interrupted.push(cell.id.clone()),
        }
    }
    run
}

/// The order cells start in: the longest expected first ([`expected_duration`]), then the
/// costliest, then the cells' own order — so a cell bounded by a long wait (a `hang` case, a
/// real Codex) does not start last and leave the run waiting on it alone.
pub fn start_order(cells: &[Cell], jobs: Concurrency) -> Vec<usize> {
    let mut loads = HashMap::new();
    let mut order: Vec<usize> = (0..cells.len()).collect();
    order.sort_by_cached_key(|&i| {
        let cell = &cells[i];
        (
            std::cmp::Reverse(expected_duration(cell, &mut loads)),
            std::cmp::Reverse(jobs.cost(cell)),
        )
    });
    order
}

/// What a fake cell takes, roughly (`harness bench matrix`: median ≈ 155 ms).
const FAKE_CELL: Duration = Duration::from_millis(150);
/// What a real-Codex cell takes, roughly (median ≈ 620 ms: docs/benchmarks.md).
const REAL_CODEX_CELL: Duration = Duration::from_millis(600);
/// What one line the app-server writes costs a cell, roughly: the tap records it, the driver
/// parses it (a 100 000-delta burst is the fake matrix's longest cell). Only an order: no
/// bound rests on it.
const WIRE_LINE: Duration = Duration::from_micros(30);
/// Bytes the app-server writes that cost a cell about a millisecond (the tap and the driver
/// each read them).
const WIRE_BYTES_PER_MS: u64 = 50_000;

/// What a scenario asks of the wire, as far as a cell's length goes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Load {
    /// The app-server goes silent: a turn's `hang` fault, or a method never answered.
    pub(crate) silent: bool,
    /// Lines and bytes it writes beyond an ordinary turn's.
    pub(crate) lines: u64,
    pub(crate) bytes: u64,
}

/// What `cell` is expected to take, at most: a cell whose app-server goes silent lasts until
/// its driver gives up or the harness's idle bound ends it ([`driver::idle_bound`], which a
/// driver's declared idle timeout sets); any other cell what its kind of app-server usually
/// takes, plus what its scenario writes beyond an ordinary turn; a cell that will not run,
/// nothing. `loads` remembers each scenario's load (one parse per scenario, not per cell).
pub(crate) fn expected_duration(cell: &Cell, loads: &mut HashMap<String, Load>) -> Duration {
    if cell.not_applicable.is_some() {
        return Duration::ZERO;
    }
    let (timeouts, usual) = match cell.runner.app_server {
        AppServerKind::Fake => (app_server::fake_timeouts(), FAKE_CELL),
        AppServerKind::Codex => (codex::runner::PreparedCodex::timeouts(), REAL_CODEX_CELL),
    };
    let scenario = match (cell.runner.app_server, &cell.case.codex_scenario) {
        (AppServerKind::Codex, Some(codex)) => codex,
        _ => &cell.case.scenario,
    };
    let load = *loads
        .entry(scenario.clone())
        .or_insert_with(|| scenario_load(scenario));
    if load.silent {
        return driver::idle_bound(&timeouts, cell.runner.declared.as_ref());
    }
    let lines = u32::try_from(load.lines).unwrap_or(u32::MAX);
    usual + WIRE_LINE * lines + Duration::from_millis(load.bytes / WIRE_BYTES_PER_MS)
}

/// What the scenario `named` asks of the wire. One that cannot be read asks nothing (the cell's
/// own stage reports why).
fn scenario_load(named: &str) -> Load {
    let scenario = match ScenarioRef::parse(named) {
        Ok(ScenarioRef::Builtin(name)) => Scenario::builtin(&name).ok(),
        Ok(ScenarioRef::File(name)) => suites::scenario_file(&name)
            .and_then(|text| Scenario::from_toml_str(text, std::path::Path::new(&name)).ok()),
        Err(_) => None,
    };
    let Some(scenario) = scenario else {
        return Load::default();
    };
    let mut load = Load {
        silent: scenario.methods.values().any(|method| method.hang),
        ..Load::default()
    };
    for turn in &scenario.turns {
        load.silent |= matches!(&turn.fault, Some(f) if f.kind == TurnFaultKind::Hang);
        for step in &turn.server_steps {
            match step.action {
                // Its `item/agentMessage/delta` and its `item/completed`.
                ServerAction::LongLine { bytes } => load.bytes += 2 * bytes,
                ServerAction::DeltaBurst { count } => load.lines += count,
                ServerAction::StderrFlood { bytes } => load.bytes += bytes,
                _ => {}
            }
        }
    }
    load
}

#[derive(Debug, Clone)]
enum Ran {
    Finished(Box<CellResult>),
    Interrupted,
    NotStarted,
    Skipped,
}

#[cfg(test)]
mod tests {
    use super::*;
    use suites::spec::DeclaredDriver;

    fn shipped() -> Vec<Cell> {
        suites::load().expect("the shipped suites load").cells
    }

    fn find(cells: &[Cell], what: &str, wanted: impl Fn(&Cell) -> bool) -> Cell {
        cells
            .iter()
            .find(|c| c.not_applicable.is_none() && wanted(c))
            .cloned()
            .unwrap_or_else(|| panic!("no shipped cell is {what}"))
    }

    /// A `hang` cell of a declared driver that gives up after `seconds` of silence.
    fn hang_of_a_driver_waiting(hang: &Cell, seconds: u64) -> Cell {
        let mut cell = hang.clone();
        let declared = DeclaredDriver {
            idle_timeout_seconds: Some(seconds),
            ..DeclaredDriver::harness_own("true".into())
        };
        cell.runner.driver = suites::spec::DriverKind::Declared;
        cell.runner.declared = Some(declared);
        cell
    }

    fn ended(cell: &Cell, outcome: report::outcome::CellOutcome) -> CellEvent {
        CellEvent::Finished(Box::new(CellResult {
            cell: cell.id.clone(),
            profile: Some(cell.profile),
            expected: cell.expected.clone(),
            outcome,
            duration: Duration::ZERO,
            evidence_dir: std::path::PathBuf::new(),
            earlier_attempts: Vec::new(),
        }))
    }

    #[test]
    fn progress_is_the_fold_of_the_executors_events() {
        use report::outcome::CellOutcome;
        let cells = shipped();
        let cell = &cells[0];
        let mut progress = Progress::of(5);
        let events = [
            CellEvent::Started,
            CellEvent::Started,
            CellEvent::Skipped,
            ended(
                cell,
                CellOutcome::Error {
                    message: "x".into(),
                },
            ),
            CellEvent::Started,
            ended(cell, CellOutcome::Ignored { reason: "y".into() }),
            CellEvent::Interrupted,
        ];
        let mut seen = Vec::new();
        for event in &events {
            progress.count(event);
            seen.push((progress.running, progress.done));
        }
        assert_eq!(
            seen,
            [(1, 0), (2, 0), (2, 0), (1, 1), (2, 1), (1, 2), (0, 2)]
        );
        assert_eq!(
            progress,
            Progress {
                total: 4,
                done: 2,
                running: 0,
                failed: 1,
                ignored: 1
            },
            "a skipped run leaves the total; an error fails, an ignored cell is ignored"
        );
    }

    /// A caller that withdraws runs on what it is told of a finished one does so before another
    /// run starts in the freed slot, however long it takes: the executor waits for the event's
    /// receipt. (Cells not applicable: their runs are quick and start nothing. Which run goes
    /// first is the runtime's: the tasks ask for their slots as they are first polled.)
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn runs_withdrawn_on_a_finished_runs_result_never_start_in_its_slot() {
        let out = tempfile::tempdir().unwrap();
        let mut ctx = CellContext::from_env().unwrap();
        ctx.out_root = out.path().to_path_buf();
        let cells: Vec<Cell> = shipped()
            .into_iter()
            .filter(|c| c.not_applicable.is_none())
            .take(3)
            .map(|mut c| {
                c.not_applicable = Some("not run by this test".into());
                c
            })
            .collect();
        let jobs = Concurrency::Cells(1);
        let batch = Batch::of_cells(&ctx, &cells, jobs);
        let withdrawn = batch.withdrawn.clone();
        let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
        let consuming = async move {
            let mut started = 0;
            while let Some((_, event, receipt)) = received.recv().await {
                match event {
                    CellEvent::Started => started += 1,
                    CellEvent::Finished(_) => {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        withdrawn.iter().for_each(CancellationToken::cancel);
                    }
                    _ => {}
                }
                drop(receipt);
            }
            started
        };
        let executing = execute(&batch, jobs, CancellationToken::new(), events);
        let (run, started) = tokio::join!(executing, consuming);
        assert_eq!(
            (started, run.finished.len(), run.skipped.len()),
            (1, 1, 2),
            "one run started and finished, the other two withdrawn on its result"
        );
    }

    #[test]
    fn silent_cells_then_heavy_then_real_codex_cells_start_before_the_other_fake_ones() {
        let cells = shipped();
        let fake = find(&cells, "a fake cell", |c| {
            c.runner.app_server == AppServerKind::Fake && c.id.case == "message-marker"
        });
        let codex = find(&cells, "a real-Codex cell", |c| {
            c.runner.app_server == AppServerKind::Codex && c.id.case == "message-marker"
        });
        let hang = find(&cells, "a fake hang cell", |c| {
            c.runner.app_server == AppServerKind::Fake && c.id.case == "hang"
        });
        let fake_case = |case: &str| {
            find(&cells, case, |c| {
                c.runner.app_server == AppServerKind::Fake && c.id.case == case
            })
        };
        let burst = fake_case("delta-burst");
        let no_answer = fake_case("no-answer");
        let mut not_applicable = fake.clone();
        not_applicable.not_applicable = Some("the driver declares no such mode".into());
        let run = [
            fake.clone(),
            not_applicable,
            codex,
            fake,
            hang.clone(),
            hang_of_a_driver_waiting(&hang, 30),
            hang_of_a_driver_waiting(&hang, 1),
            burst,
            no_answer,
        ];
        for jobs in [Concurrency::Cells(2), Concurrency::Weighed { cores: 2 }] {
            assert_eq!(
                start_order(&run, jobs),
                // The patient driver's hang; the default bound's hang and unanswered request
                // (in their own order); the quick driver's hang; 100 000 deltas; the real
                // Codex; the fake cells in their own order; what will not run, last.
                vec![5, 4, 8, 6, 7, 2, 0, 3, 1],
                "{jobs:?}"
            );
        }
    }

    #[test]
    fn a_hang_cell_is_expected_to_last_its_drivers_declared_wait_plus_the_margin() {
        let cells = shipped();
        let hang = find(&cells, "a fake hang cell", |c| {
            c.runner.app_server == AppServerKind::Fake && c.id.case == "hang"
        });
        let shutdown = app_server::fake_timeouts().shutdown;
        let mut loads = HashMap::new();
        assert_eq!(
            expected_duration(&hang_of_a_driver_waiting(&hang, 2), &mut loads),
            Duration::from_secs(2) + shutdown + ::driver::bounds::IDLE_MARGIN
        );
        assert!(loads[&hang.case.scenario].silent);
        assert_eq!(
            expected_duration(&hang, &mut loads),
            Duration::from_secs(10),
            "the harness's default idle bound against the fake"
        );
    }
}
