//! The process's one SIGINT/SIGTERM handler and the [`Stop`] of the run it serves. While a run
//! is registered ([`Registration`]), its first signal only starts the orderly stop; a second
//! signal, a stop that overruns [`GRACE`], or a signal while no run is registered (other
//! subcommands, tests, a run whose outcome is settled) removes what `sandbox::teardown` lists
//! at once and exits with 128 + the signal.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long the orderly stop may take before the handler removes what is left and exits.
pub const GRACE: Duration = driver::bounds::RUN_STOP_GRACE;

/// The run a signal stops, if one is registered. A process-wide static because the signal
/// thread, started once per process, can reach nothing else; it holds only which run is
/// current — the run's own state (its signal, its settled outcome) is in its [`Stop`].
static CURRENT_RUN: Mutex<Option<Arc<Stop>>> = Mutex::new(None);

/// What the handler may do to one run: the signal that stopped it, once, before its outcome is
/// settled.
#[derive(Debug, Default)]
pub(crate) struct Stop {
    phase: Mutex<Phase>,
    /// Cancelled by the signal that stopped the run (the scheduler's token is its child).
    pub(crate) signalled: CancellationToken,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Running, no signal yet: the next signal stops the run.
    #[default]
    Open,
    /// This signal stopped the run; a second one exits at once.
    Signalled(i32),
    /// The exit code of a run no signal stopped is settled: a signal now must not say
    /// "stopping" and then be ignored by an exit 0, so it exits at once.
    Settled,
}

impl Stop {
    /// Whether `signal` starts the orderly stop (the first signal of a run whose outcome is
    /// still open) rather than ending the process at once.
    pub(super) fn stops_the_run(&self, signal: i32) -> bool {
        let mut phase = self.phase.lock().unwrap_or_else(|p| p.into_inner());
        if *phase != Phase::Open {
            return false;
        }
        *phase = Phase::Signalled(signal);
        drop(phase);
        self.signalled.cancel();
        true
    }

    /// The signal that stopped the run, if one did (so far).
    pub(crate) fn signal(&self) -> Option<i32> {
        match *self.phase.lock().unwrap_or_else(|p| p.into_inner()) {
            Phase::Signalled(signal) => Some(signal),
            Phase::Open | Phase::Settled => None,
        }
    }

    /// Settle the run's outcome: the signal that stopped it, or none — after which every
    /// signal exits at once.
    pub(crate) fn settle(&self) -> Option<i32> {
        let mut phase = self.phase.lock().unwrap_or_else(|p| p.into_inner());
        if *phase == Phase::Open {
            *phase = Phase::Settled;
        }
        match *phase {
            Phase::Signalled(signal) => Some(signal),
            Phase::Open | Phase::Settled => None,
        }
    }
}

/// A run registered with the handler: a signal reaches its [`Stop`] until this is dropped
/// (which also settles it).
pub(crate) struct Registration(Arc<Stop>);

impl Registration {
    /// Register a new, open stop as the process's current run (replacing any earlier one).
    pub(crate) fn open() -> Registration {
        install_signal_handler();
        let stop = Arc::new(Stop::default());
        *current_run() = Some(stop.clone());
        Registration(stop)
    }

    pub(crate) fn stop(&self) -> &Stop {
        &self.0
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.0.settle();
        let mut current = current_run();
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &self.0)) {
            *current = None;
        }
    }
}

/// Unit tests that register runs take turns: the current run is the process's.
#[cfg(test)]
pub(crate) fn one_run_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn current_run() -> std::sync::MutexGuard<'static, Option<Arc<Stop>>> {
    CURRENT_RUN.lock().unwrap_or_else(|p| p.into_inner())
}

/// The start of a test binary that runs cells (the suites' `cells`, the legitimate population):
/// it is also the hidden subcommands of its cells — their fake app-server, tap and reference
/// driver — and, as the harness binary does, tears down what its running cells started on a
/// signal. `Some(code)`: the process ran a hidden subcommand and is done.
pub fn start_cells_binary() -> Option<std::process::ExitCode> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some(code) = matrix::hidden::dispatch(&args) {
        return Some(code);
    }
    install_signal_handler();
    None
}

/// Install the process's SIGINT/SIGTERM handler (once; later calls do nothing). Its failures
/// are notices: no caller could do more than say them.
pub fn install_signal_handler() {
    // A process has one handler thread: a second would act on every signal twice.
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let mut signals = match signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) {
            Ok(signals) => signals,
            Err(err) => {
                tracing::warn!(target: "notice", "harness: cannot install the SIGINT/SIGTERM handler: {err}");
                return;
            }
        };
        let spawned = std::thread::Builder::new()
            .name("shutdown-signals".into())
            .spawn(move || {
                for signal in signals.forever() {
                    let run = current_run().clone();
                    if run.is_some_and(|stop| stop.stops_the_run(signal)) {
                        // The run's dispatcher says "stopping" (an event its command line
                        // prints) and tears down the running cells.
                        arm_watchdog(signal);
                    } else {
                        exit_now(signal);
                    }
                }
            });
        if let Err(err) = spawned {
            tracing::warn!(target: "notice", "harness: cannot start the signal thread: {err}");
        }
    });
}

fn arm_watchdog(signal: i32) {
    let _ = std::thread::Builder::new()
        .name("shutdown-watchdog".into())
        .spawn(move || {
            std::thread::sleep(GRACE);
            tracing::warn!(target: "notice",
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

/// A panic outside the cells' tasks (those the scheduler catches) still tears down, for as
/// long as this lives; then the process's earlier hook is back alone.
pub(crate) struct TeardownOnPanic(Arc<PanicHook>);

type PanicHook = Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Send + Sync + 'static>;

impl TeardownOnPanic {
    pub(crate) fn install() -> TeardownOnPanic {
        let previous: Arc<PanicHook> = Arc::new(std::panic::take_hook());
        let chained = previous.clone();
        std::panic::set_hook(Box::new(move |info| {
            chained(info);
            if tokio::runtime::Handle::try_current().is_err() {
                sandbox::teardown::tear_down_everything();
            }
        }));
        TeardownOnPanic(previous)
    }
}

impl Drop for TeardownOnPanic {
    fn drop(&mut self) {
        let previous = self.0.clone();
        std::panic::set_hook(Box::new(move |info| previous(info)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use signal_hook::consts::{SIGINT, SIGTERM};

    #[test]
    fn a_signal_stops_a_run_only_while_its_outcome_is_open() {
        let stop = Stop::default();
        assert!(
            stop.stops_the_run(SIGTERM),
            "the first signal of a run stops it"
        );
        assert!(stop.signalled.is_cancelled(), "and cancels the run");
        assert!(!stop.stops_the_run(SIGINT), "a second signal exits at once");
        assert_eq!(stop.settle(), Some(SIGTERM), "the exit code says SIGTERM");
        assert_eq!(stop.signal(), Some(SIGTERM));

        let stop = Stop::default();
        assert_eq!(stop.settle(), None, "no signal: the normal exit code");
        assert_eq!(stop.signal(), None, "the settled outcome is not a signal");
        assert!(
            !stop.stops_the_run(SIGTERM),
            "a signal after the outcome is settled exits at once, not 'stopping' then exit 0"
        );
        assert!(!stop.signalled.is_cancelled());
        assert_eq!(stop.settle(), None);
    }

    #[test]
    fn a_run_is_the_handlers_only_while_its_registration_lives() {
        let _serial = one_run_at_a_time();
        let registration = Registration::open();
        let registered = |stop: &Stop| {
            current_run()
                .as_ref()
                .is_some_and(|current| std::ptr::eq(current.as_ref(), stop))
        };
        assert!(registered(registration.stop()));
        let stop = registration.0.clone();
        drop(registration);
        assert!(!registered(&stop), "a dropped run is no signal's any more");
        assert!(
            !stop.stops_the_run(SIGINT),
            "and its outcome is settled: a late signal exits at once"
        );
    }
}
