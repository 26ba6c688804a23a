//! A run is one owned value, [`Run`]: the dispatcher that owns a run's signals (its
//! registration with the process's one handler, [`signals`]), its scheduling (the executor,
//! `matrix::scheduler::execute`, fed a [`Batch`] and a stop), its progress (the fold of the
//! executor's typed events) and its reports — and prints nothing. [`Run::execute`] is its one
//! entry: the command line is told what happens as [`RunEvent`]s through its [`Observer`], and
//! handed back the written reports ([`Executed`]) and then, once settled, how the run ended
//! ([`Settled`]: the cause, the note, the exit code — 0 or 1 at the normal end, 130 after
//! SIGINT, 143 after SIGTERM, 101 after a panic), which it prints.
//!
//! Whether it ran to the end, got SIGINT or SIGTERM, or a cell panicked, a run ends one way:
//! scheduling stops (the running cells are dropped, and their guards tear down what they
//! started), what is left is torn down, and the reports list the cells that finished.

mod outcome;
mod signals;

pub use outcome::CancelReason;
pub use signals::{install_signal_handler, start_cells_binary, GRACE};

use matrix::concurrency::Concurrency;
use matrix::out_lock::OutLock;
use matrix::scheduler::{self, Batch, CellEvent, MatrixRun, Progress};
use report::outcome::CellResult;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// What the command line is told while a run runs.
#[derive(Debug)]
pub enum RunEvent {
    /// A cell ended with `result`; `progress` counts it. `index`: its run's in the batch.
    CellFinished {
        index: usize,
        progress: Progress,
        result: Box<CellResult>,
    },
    /// The run's first signal started the orderly stop: no new cell starts, the running ones
    /// are torn down (a second signal exits at once).
    Stopping(CancelReason),
}

/// Who is told a run's [`RunEvent`]s, in order, on the thread that called [`Run::execute`].
pub trait Observer {
    fn observe(&mut self, event: RunEvent);
}

/// One run: what it runs, how many at once, and where its reports go (if it writes them).
pub struct Run {
    batch: Batch,
    jobs: Concurrency,
    reports: Option<(PathBuf, OutLock)>,
}

/// The reports a run wrote, for the command line to print.
#[derive(Debug)]
pub struct WrittenReports {
    /// `matrix.md`, a stopped run's note at its top.
    pub markdown: String,
    pub paths: report::ReportPaths,
    /// Whether `$GITHUB_STEP_SUMMARY` (when set) took the matrix.
    pub job_summary: Result<(), String>,
}

/// A run that executed, its outcome still open: a signal now still stops it (its exit code
/// says so) rather than ending the process at once.
pub struct Executed {
    pub run: MatrixRun,
    pub wall: Duration,
    /// Written when the run was asked to ([`Run::reporting_to`]).
    pub reports: Option<WrittenReports>,
    registration: signals::Registration,
    stopping: Announcement,
    out_lock: Option<OutLock>,
}

/// A run whose outcome is settled: from now on a signal exits at once.
pub struct Settled {
    pub run: MatrixRun,
    pub wall: Duration,
    /// Why it stopped before its end, if it did.
    pub cause: Option<CancelReason>,
    _out_lock: Option<OutLock>,
}

impl Run {
    /// A run of `batch`, as many cells at once as `jobs` allows; no reports.
    pub fn new(batch: Batch, jobs: Concurrency) -> Run {
        Run {
            batch,
            jobs,
            reports: None,
        }
    }

    /// Take `out` for this run (no other process may run into it meanwhile) and write the
    /// reports there at the end: every cell of the batch, those a stop left unfinished as
    /// ignored, with why.
    pub fn reporting_to(mut self, out: &Path) -> anyhow::Result<Run> {
        let lock = OutLock::take(out)?;
        self.reports = Some((out.to_path_buf(), lock));
        Ok(self)
    }

    /// Run the batch to its end or to a stop (a signal, a panic in a cell), telling `observer`
    /// each cell's end and the stop; tear down what is left; write the reports.
    pub fn execute(self, observer: &mut dyn Observer) -> anyhow::Result<Executed> {
        self.execute_registered(signals::Registration::open(), observer)
    }

    fn execute_registered(
        self,
        registration: signals::Registration,
        observer: &mut dyn Observer,
    ) -> anyhow::Result<Executed> {
        let teardown_on_panic = signals::TeardownOnPanic::install();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let stop = registration.stop();
        let started = Instant::now();
        let (events, mut received) = tokio::sync::mpsc::unbounded_channel();
        let mut progress = Progress::of(self.batch.runs.len());
        let mut stopping = Announcement::default();
        let run = runtime.block_on(async {
            // The scheduler's own stop (a panic cancels it) is a child: a signal stops both.
            let executing =
                scheduler::execute(&self.batch, self.jobs, stop.signalled.child_token(), events);
            let observing = async {
                loop {
                    tokio::select! {
                        _ = stop.signalled.cancelled(), if !stopping.made => {
                            stopping.make(stop.signal(), observer);
                        }
                        received = received.recv() => match received {
                            Some((index, event, receipt)) => {
                                progress.count(&event);
                                if let CellEvent::Finished(result) = event {
                                    observer.observe(RunEvent::CellFinished { index, progress, result });
                                }
                                // Handled: the executor may free the run's slots.
                                drop(receipt);
                            }
                            // The executor is done: every sender is gone.
                            None => break,
                        },
                    }
                }
            };
            tokio::join!(executing, observing).0
        });
        // A signal between the executor's end and here is still this run's.
        stopping.make(stop.signal(), observer);
        let wall = started.elapsed();
        drop(runtime);
        sandbox::teardown::tear_down_everything();
        drop(teardown_on_panic);
        let (reports, out_lock) = match self.reports {
            Some((out, lock)) => {
                let cause = CancelReason::of(&run, stop.signal());
                let written = write_reports(&out, &self.batch, &run, cause.as_ref(), wall)?;
                (Some(written), Some(lock))
            }
            None => (None, None),
        };
        Ok(Executed {
            run,
            wall,
            reports,
            registration,
            stopping,
            out_lock,
        })
    }
}

/// The run's "stopping" event, told once.
#[derive(Default)]
struct Announcement {
    made: bool,
}

impl Announcement {
    fn make(&mut self, signal: Option<i32>, observer: &mut dyn Observer) {
        if let Some(signal) = signal.filter(|_| !self.made) {
            self.made = true;
            observer.observe(RunEvent::Stopping(CancelReason::Signal(signal)));
        }
    }
}

impl Executed {
    /// Settle the run's outcome: the signal that stopped it, if one did, is final (and told
    /// `observer`, if it came after the executor's end), and from now on a signal exits at
    /// once.
    pub fn settle(mut self, observer: &mut dyn Observer) -> Settled {
        let signal = self.registration.stop().settle();
        self.stopping.make(signal, observer);
        drop(self.registration);
        Settled {
            cause: CancelReason::of(&self.run, signal),
            run: self.run,
            wall: self.wall,
            _out_lock: self.out_lock,
        }
    }
}

impl Settled {
    /// What a stopped run did not finish, or `None` when it ran to its end.
    pub fn stop_note(&self) -> Option<String> {
        outcome::stop_note(&self.run, self.cause.as_ref())
    }

    /// The cells that differ from their expectation, in the cells' order.
    pub fn failures(&self) -> impl Iterator<Item = &CellResult> {
        self.run.finished.iter().filter(|r| r.is_failure())
    }

    /// The cells that failed and then, run again, did not (`harness run --retries`), in the
    /// cells' order: no failure of the run, but said.
    pub fn flaky(&self) -> impl Iterator<Item = &CellResult> {
        self.run.finished.iter().filter(|r| r.is_flaky())
    }

    /// 101 after a panic, 128 + the signal after one, 1 when a cell differs, else 0.
    pub fn exit_code(&self) -> ExitCode {
        match &self.cause {
            Some(cause) => cause.exit_code(),
            None if self.failures().next().is_some() => ExitCode::from(1),
            None => ExitCode::SUCCESS,
        }
    }
}

/// Write the four reports of `run` into `out` (a stopped run's matrix.md led by its note) and
/// hand the matrix to `$GITHUB_STEP_SUMMARY`.
fn write_reports(
    out: &Path,
    batch: &Batch,
    run: &MatrixRun,
    cause: Option<&CancelReason>,
    wall: Duration,
) -> anyhow::Result<WrittenReports> {
    let reported = outcome::with_unfinished(batch.cells(), run, cause, out);
    let paths = report::write_all(out, &reported, wall)?;
    let mut markdown = std::fs::read_to_string(&paths.markdown)?;
    if let Some(note) = outcome::stop_note(run, cause) {
        // The matrix covers the cells that finished; a stopped run says so at its top.
        markdown = format!("{note}\n\n{markdown}");
        report::write_atomically(&paths.markdown, markdown.as_bytes())?;
    }
    let job_summary = report::append_job_summary(&markdown);
    Ok(WrittenReports {
        markdown,
        paths,
        job_summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal_hook::consts::SIGTERM;

    #[derive(Default)]
    struct Collected(Vec<String>);

    impl Observer for Collected {
        fn observe(&mut self, event: RunEvent) {
            self.0.push(match event {
                RunEvent::CellFinished { result, .. } => format!("finished {}", result.cell),
                RunEvent::Stopping(cause) => format!("stopping: {cause}"),
            });
        }
    }

    fn nothing() -> Batch {
        Batch {
            runs: Vec::new(),
            order: Vec::new(),
            withdrawn: Vec::new(),
            retries: 0,
        }
    }

    #[test]
    fn a_run_owns_its_signal_and_says_it_once_as_a_typed_event() {
        let _serial = signals::one_run_at_a_time();
        let out = tempfile::tempdir().unwrap();
        let run = Run::new(nothing(), Concurrency::Cells(1))
            .reporting_to(out.path())
            .unwrap();
        let registration = signals::Registration::open();
        assert!(registration.stop().stops_the_run(SIGTERM));
        let mut observer = Collected::default();
        let executed = run.execute_registered(registration, &mut observer).unwrap();
        assert_eq!(observer.0, ["stopping: SIGTERM"]);
        let markdown = &executed.reports.as_ref().unwrap().markdown;
        assert!(
            markdown.starts_with("**stopped by SIGTERM**: 0 cells finished"),
            "{markdown}"
        );
        let settled = executed.settle(&mut observer);
        assert_eq!(observer.0, ["stopping: SIGTERM"], "said once");
        assert_eq!(settled.cause, Some(CancelReason::Signal(SIGTERM)));
        assert_eq!(settled.exit_code(), ExitCode::from(143));

        let mut observer = Collected::default();
        let executed = Run::new(nothing(), Concurrency::Cells(1))
            .execute(&mut observer)
            .unwrap();
        assert!(executed.reports.is_none(), "not asked to report");
        let settled = executed.settle(&mut observer);
        assert!(observer.0.is_empty(), "{:?}", observer.0);
        assert_eq!(settled.cause, None);
        assert_eq!(settled.exit_code(), ExitCode::SUCCESS);

        // A signal after the executor's end, before the outcome is settled (while the reports
        // are printed), still stops the run, and is said when it settles.
        let mut observer = Collected::default();
        let executed = Run::new(nothing(), Concurrency::Cells(1))
            .execute(&mut observer)
            .unwrap();
        assert!(executed.registration.stop().stops_the_run(SIGTERM));
        assert!(observer.0.is_empty(), "{:?}", observer.0);
        let settled = executed.settle(&mut observer);
        assert_eq!(observer.0, ["stopping: SIGTERM"]);
        assert_eq!(settled.exit_code(), ExitCode::from(143));
    }
}
