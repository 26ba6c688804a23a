//! The time bounds of a run, in one place: the waits a driver is given against each kind of
//! app-server, the harness's bounds on a driver's process and on the ends of a cell's launches,
//! and the grace periods of a run's end. Each says why its value.
//!
//! Here because `driver` is the lowest crate that needs them (`codex` and `matrix` point down
//! to it). What stays beside its code: the sandbox's own mechanism bounds (`sandbox`: container
//! start and stop, cgroup kills, reaping), the tap's (`tap::session`), provisioning's (`codex`'s
//! installs), polling cadences, and the bounds of the maintainer tools (`harness`: bench, drift,
//! explore, repro).

use std::time::Duration;

/// Bounds on every wait of a run. The defaults suit the fake app-server; the real Codex runner
/// raises them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Waiting for the response to one request (`initialize`, `thread/start`, `turn/start`).
    pub request: Duration,
    /// Waiting for the next message during a turn.
    pub turn_idle: Duration,
    /// A whole turn.
    pub turn_total: Duration,
    /// The app-server's exit after its stdin is closed.
    pub shutdown: Duration,
    /// Same-run attempts to open a session after transient start-up failures.
    pub startup_attempts: u32,
}

impl Default for Timeouts {
    fn default() -> Self {
        DEFAULT_WAITS
    }
}

/// Same-run attempts to open a session after transient start-up failures: a helper pipe's race
/// or a slow first `initialize` passes on a second try; a third failure is the driver's.
const STARTUP_ATTEMPTS: u32 = 3;

/// The waits of a run when nothing raises them (`Timeouts::default`, the reference driver run
/// by hand): a request answered in seconds, a turn in a minute.
pub const DEFAULT_WAITS: Timeouts = Timeouts {
    request: Duration::from_secs(10),
    turn_idle: Duration::from_secs(10),
    turn_total: Duration::from_secs(60),
    shutdown: Duration::from_secs(5),
    startup_attempts: STARTUP_ATTEMPTS,
};

/// The waits against the fake app-server: it answers in milliseconds, so a hang is detected after
/// a short idle bound and the `hang` cells stay short.
pub const FAKE_WAITS: Timeouts = Timeouts {
    request: Duration::from_secs(5),
    turn_idle: Duration::from_secs(2),
    turn_total: Duration::from_secs(30),
    shutdown: Duration::from_secs(2),
    startup_attempts: STARTUP_ATTEMPTS,
};

/// The waits against the real Codex: it starts its sandbox and talks to the mock model API, so
/// a turn takes longer than with the fake (measured: 0.2 s a turn; the bounds leave wide margin).
pub const REAL_CODEX_WAITS: Timeouts = Timeouts {
    request: Duration::from_secs(30),
    turn_idle: Duration::from_secs(60),
    turn_total: Duration::from_secs(180),
    shutdown: Duration::from_secs(10),
    startup_attempts: STARTUP_ATTEMPTS,
};

/// How many times longer a driver waits for an app-server in a virtual machine
/// (`sandbox::kvm`): where `/dev/kvm` is paravirtual, QEMU emulates the guest, and every
/// process there is emulated (measured: a real-Codex session to its thread/start answer 36–57 s
/// there, against about 2 s on the host). A bound of the host's would fail the cell, not the
/// driver; the factor keeps a hang a hang (the real Codex's overall bound becomes 25 minutes).
pub const VIRTUAL_MACHINE_WAIT_FACTOR: u32 = 4;

impl Timeouts {
    /// These waits for an app-server in a virtual machine ([`VIRTUAL_MACHINE_WAIT_FACTOR`]).
    pub fn in_a_virtual_machine(self) -> Timeouts {
        let factor = VIRTUAL_MACHINE_WAIT_FACTOR;
        Timeouts {
            request: self.request * factor,
            turn_idle: self.turn_idle * factor,
            turn_total: self.turn_total * factor,
            shutdown: self.shutdown * factor,
            startup_attempts: self.startup_attempts,
        }
    }
}

/// Writing one line to an app-server's stdin: a pipe the child does not read fills in 64 KiB;
/// a child that has not read one line in this long is stuck, not slow.
pub const RPC_WRITE_LINE: Duration = Duration::from_secs(10);
/// The child's exit after the JSON-RPC client killed its group (a kill ends it at once; this
/// only covers a loaded machine's scheduling).
pub const RPC_EXIT_AFTER_KILL: Duration = Duration::from_secs(5);
/// How long the JSON-RPC client waits for a closed child's exit status before it describes the
/// end as "still running": the description is for a message, not a verdict.
pub const RPC_EXIT_STATUS: Duration = Duration::from_millis(500);
/// How long the JSON-RPC client gives its stderr copier to write what the child said last.
pub const RPC_STDERR_TAIL: Duration = Duration::from_millis(200);

/// Added to the overall bound on a driver's process past its start-ups, turns and shutdowns: an
/// interpreter's start and exit and a loaded machine's scheduling.
pub const DRIVER_OVERALL_MARGIN: Duration = Duration::from_secs(10);
/// Added to the idle bound before the driver's first wire byte: an interpreter's start-up is no
/// wait of the task (the published Python SDK takes 6 s to import on a loaded 2-core runner, so
/// its cells were killed before they began); past it, a silent driver whose process tree still
/// uses CPU is still starting (`matrix::stages::process`); the overall bound still holds.
pub const DRIVER_START_ALLOWANCE: Duration = Duration::from_secs(20);
/// What the idle bound allows past a driver's own wait and its shutdown: a loaded machine's
/// scheduling and an interpreter's exit.
pub const IDLE_MARGIN: Duration = Duration::from_secs(3);
/// The driver's stdout and stderr copies after its process group ended: the pipes close once
/// every process holding them is gone, so this is only reached by a holder that escaped.
pub const DRIVER_OUTPUT_COPIES: Duration = Duration::from_secs(5);
/// How long after the driver's turn is seen running the harness tells it something (interrupt,
/// steer): the driver has then read the lines the tap relayed (the turn's id among them).
pub const CONTROL_SETTLE: Duration = Duration::from_millis(200);
/// How long the launches still running when the driver ended get to end on their own (their
/// taps died with the driver's process group, so their app-servers are being killed already).
pub const LAUNCH_FINISH_GRACE: Duration = Duration::from_secs(5);
/// The mock model API's in-flight requests at its shutdown: the app-server it served is gone,
/// so what is still in flight answers nobody.
pub const MOCK_API_SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How long the orderly stop of a run (SIGINT, SIGTERM) may take before the signal handler
/// removes what is left and exits: each running cell's teardown takes seconds, and a second
/// signal ends the process at once.
pub const RUN_STOP_GRACE: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_virtual_machines_waits_are_the_hosts_times_the_factor_with_the_same_attempts() {
        let scaled = REAL_CODEX_WAITS.in_a_virtual_machine();
        let factor = VIRTUAL_MACHINE_WAIT_FACTOR;
        assert_eq!(scaled.request, REAL_CODEX_WAITS.request * factor);
        assert_eq!(scaled.turn_idle, REAL_CODEX_WAITS.turn_idle * factor);
        assert_eq!(scaled.turn_total, REAL_CODEX_WAITS.turn_total * factor);
        assert_eq!(scaled.shutdown, REAL_CODEX_WAITS.shutdown * factor);
        assert_eq!(scaled.startup_attempts, REAL_CODEX_WAITS.startup_attempts);
        // The slowest measured thread/start under QEMU's emulator (57 s) fits one request wait.
        assert!(scaled.request > Duration::from_secs(57));
    }
}
