//! The terminal of a run graded from the wire: how the driver's process ended, read together
//! with what the wire shows of the app-server at that moment (`docs/events.md`, "Events from
//! the wire"). The wire cannot show whether the driver offered its user a Retry, so
//! `retry_offered` is `false` unless the driver's own events (the `events` contract) say so.

use crate::events::{Ending, RunEnded};

/// How the app-server of one launch ended, as the tap recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    pub time: u64,
    pub status: Option<i64>,
    pub signal: Option<i64>,
    pub error: Option<String>,
}

/// What one launch left open or broke.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LaunchEnd {
    /// The first transport fault the app-server committed (a line that is not JSON-RPC, an
    /// oversized line).
    pub fault: Option<String>,
    /// The driver closed the app-server's stdin (unix ms).
    pub stdin_closed: Option<u64>,
    /// The driver sent its `codex` a signal, passed on to the app-server (unix ms): the
    /// app-server's exit after it is the driver's doing, as after a closed stdin.
    pub driver_signal: Option<u64>,
    /// The app-server closed its stdout before the driver closed its stdin (in the recorder's
    /// order, which milliseconds cannot tell: the driver is told of the close after it is
    /// recorded). Its exit then was its own, whenever it was recorded.
    pub output_ended_first: bool,
    pub exit: Option<Exit>,
    /// The app-server's output ended inside a line: the bytes of it the harness read (a lower
    /// bound of the line's size).
    pub cut_line: Option<u64>,
    /// The driver stopped taking the app-server's output this many bytes into a line (the
    /// recorder's note): the line's end never reached it, even when the app-server wrote it.
    pub let_go_mid_line: Option<u64>,
    /// Methods of the driver's requests the app-server never answered.
    pub pending: Vec<String>,
    /// Turns started and never completed.
    pub open_turns: Vec<String>,
    pub messages: u64,
    /// When the app-server's last JSON-RPC message of this launch went through the tap (unix
    /// ms): a driver that let go soon after waited for it too briefly to have timed out. (The
    /// driver's own last line does not count: a driver may send `turn/interrupt` as it gives up
    /// on a silent app-server.)
    pub last_from_server: Option<u64>,
}

impl LaunchEnd {
    /// The app-server went away on its own: it exited before the driver closed its stdin.
    fn exited_on_its_own(&self) -> Option<&Exit> {
        let exit = self.exit.as_ref()?;
        if self.output_ended_first {
            return Some(exit);
        }
        let ended_by_driver = [self.stdin_closed, self.driver_signal]
            .into_iter()
            .flatten()
            .any(|at| at <= exit.time);
        (!ended_by_driver).then_some(exit)
    }

    /// How long the driver went on after the app-server's last message before it closed the
    /// app-server's stdin, when the wire shows both.
    fn quiet_before_letting_go(&self) -> Option<u64> {
        Some(self.stdin_closed?.saturating_sub(self.last_from_server?))
    }

    fn waiting(&self) -> Option<String> {
        if let Some(turn) = self.open_turns.first() {
            return Some(format!("turn {turn} never completed"));
        }
        self.pending
            .first()
            .map(|method| format!("`{method}` was never answered"))
    }
}

/// What the wire shows across the run's launches.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WireTerminal {
    pub launches: Vec<LaunchEnd>,
    pub opens: u32,
    pub rejections: u32,
    pub sessions: u32,
}

/// How the driver's process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DriverEnd {
    Exited {
        code: i32,
    },
    Signaled {
        signal: i32,
    },
    /// The harness killed it at the run's bound: the driver classified nothing.
    KilledAtBound {
        reason: String,
    },
    /// It could not be started.
    NotStarted {
        error: String,
    },
}

/// The shortest wait a driver is given or may declare (`idle_timeout_seconds` is at least 1):
/// a driver that let go of a live app-server sooner did not time out.
pub const SHORTEST_BOUND_MS: u64 = 1_000;

fn ended(ending: Ending, code: &str, reason: String) -> RunEnded {
    RunEnded {
        ending,
        retry_offered: false,
        error_code: Some(code.into()),
        reason: Some(reason),
    }
}

fn describe_exit(exit: &Exit) -> String {
    match (exit.status, exit.signal, &exit.error) {
        (_, _, Some(error)) => error.clone(),
        (Some(code), _, _) => format!("exit status {code}"),
        (_, Some(signal), _) => format!("signal {signal}"),
        _ => "an unknown status".into(),
    }
}

/// The run's terminal from the driver's end and the wire.
pub fn terminal(wire: &WireTerminal, driver: &DriverEnd) -> RunEnded {
    let how = match driver {
        DriverEnd::Exited { code: 0 } => {
            return RunEnded {
                ending: Ending::Succeeded,
                retry_offered: false,
                error_code: None,
                reason: None,
            }
        }
        DriverEnd::Exited { code } => format!("the driver exited with status {code}"),
        DriverEnd::Signaled { signal } => format!("the driver was killed by signal {signal}"),
        DriverEnd::KilledAtBound { reason } => {
            return ended(Ending::FailedPermanently, "driver_hung", reason.clone())
        }
        DriverEnd::NotStarted { error } => {
            return ended(
                Ending::FailedPermanently,
                "driver_not_started",
                error.clone(),
            )
        }
    };
    // The launch the driver was using last: the last one that talked.
    let last = wire.launches.iter().rev().find(|l| l.messages > 0);
    if let Some(run_ended) = last.and_then(|last| last_launch_ending(last, driver, &how)) {
        return run_ended;
    }
    if wire.sessions == 0 && wire.rejections > 0 {
        return if wire.rejections == 1 && wire.opens == 1 {
            ended(
                Ending::FailedPermanently,
                "provider_startup_rejected",
                format!("{how} after thread/start was rejected"),
            )
        } else {
            ended(
                Ending::RetriesExhausted,
                "retry_exhausted",
                format!("{how} after {} rejected start-up attempts", wire.rejections),
            )
        };
    }
    ended(Ending::FailedPermanently, "driver_failed", how)
}

/// How the launch the driver was using last explains its end: a broken line, an exit while the
/// driver waited, or a wait that ran out; `None` when it shows nothing.
fn last_launch_ending(last: &LaunchEnd, driver: &DriverEnd, how: &str) -> Option<RunEnded> {
    if let Some(fault) = &last.fault {
        return Some(ended(
            Ending::TransportLost,
            "transport_lost",
            format!("{how} after {fault}"),
        ));
    }
    if let Some(bytes) = last.cut_line {
        let cause = match last.exited_on_its_own() {
            Some(exit) => format!(
                "the app-server exited ({}) in the middle of a line, {bytes} bytes into it",
                describe_exit(exit)
            ),
            // It was still writing the line when it was stopped: its driver had let go of
            // its `codex` (or the cell ended) before taking the rest.
            None => format!(
                "the app-server's output stopped in the middle of a line of at least {bytes} bytes: the driver let go of its `codex` before the line's end was delivered"
            ),
        };
        return Some(ended(
            Ending::TransportLost,
            "transport_lost",
            format!("{how} after {cause}"),
        ));
    }
    if let Some(bytes) = last.let_go_mid_line {
        return Some(ended(
            Ending::TransportLost,
            "transport_lost",
            format!(
                "{how} after it stopped reading the app-server's output {bytes} bytes into a line: the driver let go of its `codex` before the line's end was delivered"
            ),
        ));
    }
    if let (Some(exit), Some(waiting)) = (last.exited_on_its_own(), last.waiting()) {
        return Some(ended(
            Ending::TransportLost,
            "transport_lost",
            format!(
                "{how} after the app-server exited ({}) while {waiting}",
                describe_exit(exit)
            ),
        ));
    }
    if let Some(waiting) = last.waiting() {
        // Exiting on its own this soon after the app-server's last message, the driver gave
        // up on what it had just been sent: no bound of its can have expired by then.
        if let (DriverEnd::Exited { .. }, Some(quiet)) = (driver, last.quiet_before_letting_go()) {
            if quiet < SHORTEST_BOUND_MS {
                return Some(ended(
                    Ending::FailedPermanently,
                    "driver_failed",
                    format!(
                        "{how}, {quiet} ms after the app-server's last message, while {waiting} by a live app-server: too soon for any wait of its to have expired"
                    ),
                ));
            }
        }
        return Some(ended(
            Ending::TimedOut,
            "timed_out",
            format!("{how} while {waiting} by a live app-server"),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(
        fault: Option<&str>,
        exit_at: Option<u64>,
        closed_at: Option<u64>,
        open: bool,
    ) -> LaunchEnd {
        LaunchEnd {
            fault: fault.map(str::to_string),
            stdin_closed: closed_at,
            driver_signal: None,
            output_ended_first: false,
            cut_line: None,
            let_go_mid_line: None,
            exit: exit_at.map(|time| Exit {
                time,
                status: Some(101),
                signal: None,
                error: None,
            }),
            pending: vec![],
            open_turns: if open { vec!["t1".into()] } else { vec![] },
            messages: 4,
            last_from_server: None,
        }
    }

    fn wire(launches: Vec<LaunchEnd>) -> WireTerminal {
        WireTerminal {
            launches,
            opens: 1,
            rejections: 0,
            sessions: 1,
        }
    }

    #[test]
    fn the_ending_follows_the_driver_and_what_the_wire_shows() {
        let failed = DriverEnd::Exited { code: 1 };
        let case = |w: &WireTerminal, d: &DriverEnd| terminal(w, d).ending;
        assert_eq!(
            case(
                &wire(vec![launch(None, None, None, true)]),
                &DriverEnd::Exited { code: 0 }
            ),
            Ending::Succeeded
        );
        assert_eq!(
            case(
                &wire(vec![launch(Some("garbage"), None, None, true)]),
                &failed
            ),
            Ending::TransportLost
        );
        assert_eq!(
            case(&wire(vec![launch(None, Some(5), None, true)]), &failed),
            Ending::TransportLost,
            "crash"
        );
        assert_eq!(
            case(&wire(vec![launch(None, Some(9), Some(5), true)]), &failed),
            Ending::TimedOut,
            "stdin closed first: hang"
        );
        let mut crashed = launch(None, Some(9), Some(5), true);
        crashed.output_ended_first = true;
        assert_eq!(
            case(&wire(vec![crashed]), &failed),
            Ending::TransportLost,
            "its output ended before the driver closed its stdin: a crash, whenever its exit was recorded"
        );
        assert_eq!(
            case(&wire(vec![launch(None, None, None, true)]), &failed),
            Ending::TimedOut,
            "killed with the driver"
        );
        assert_eq!(
            case(&wire(vec![launch(None, None, None, false)]), &failed),
            Ending::FailedPermanently
        );
        let mut cut = launch(None, None, Some(5), true);
        cut.cut_line = Some(524_287);
        let lost = terminal(&wire(vec![cut.clone()]), &failed);
        assert_eq!(
            (lost.ending, lost.error_code.as_deref()),
            (Ending::TransportLost, Some("transport_lost")),
            "a line cut off when the driver let go: not the live app-server's hang"
        );
        let reason = lost.reason.unwrap();
        assert!(
            reason.contains("at least 524287 bytes") && reason.contains("let go"),
            "{reason}"
        );
        // The app-server finished the line after the driver stopped reading it (recorded whole):
        // the recorder's note still says the driver let go with the line in flight.
        let mut let_go = launch(None, None, Some(5), true);
        let_go.let_go_mid_line = Some(65_536);
        let lost = terminal(&wire(vec![let_go]), &failed);
        assert_eq!(
            lost.ending,
            Ending::TransportLost,
            "not the live app-server's hang"
        );
        let reason = lost.reason.unwrap();
        assert!(
            reason.contains("65536 bytes into a line") && reason.contains("let go"),
            "{reason}"
        );
        let mut crashed_mid_line = launch(None, Some(5), None, false);
        crashed_mid_line.cut_line = Some(10);
        let reason = terminal(&wire(vec![crashed_mid_line]), &failed)
            .reason
            .unwrap();
        assert!(
            reason.contains(
                "the app-server exited (exit status 101) in the middle of a line, 10 bytes into it"
            ),
            "{reason}"
        );
        assert_eq!(
            case(&wire(vec![cut.clone()]), &DriverEnd::Exited { code: 0 }),
            Ending::Succeeded,
            "the driver's own success stands (the graders judge the session)"
        );
        assert_eq!(
            terminal(
                &wire(vec![cut.clone()]),
                &DriverEnd::KilledAtBound { reason: "r".into() }
            )
            .error_code
            .as_deref(),
            Some("driver_hung"),
            "a driver killed at its bound classified nothing, whatever the wire shows"
        );
        let mut relaunched = launch(None, None, None, false);
        relaunched.messages = 2;
        assert_eq!(
            case(&wire(vec![cut, relaunched]), &failed),
            Ending::FailedPermanently,
            "a line cut on an earlier launch is not the last launch's transport"
        );
        let hung = terminal(
            &wire(vec![]),
            &DriverEnd::KilledAtBound { reason: "r".into() },
        );
        assert_eq!(
            (hung.ending, hung.error_code.as_deref()),
            (Ending::FailedPermanently, Some("driver_hung"))
        );
        let mut rejected = wire(vec![launch(None, None, None, false)]);
        rejected.sessions = 0;
        rejected.rejections = 1;
        let t = terminal(&rejected, &failed);
        assert_eq!(
            (t.ending, t.error_code.as_deref(), t.retry_offered),
            (
                Ending::FailedPermanently,
                Some("provider_startup_rejected"),
                false
            )
        );
        rejected.opens = 3;
        rejected.rejections = 3;
        assert_eq!(
            terminal(&rejected, &failed).ending,
            Ending::RetriesExhausted
        );
    }

    #[test]
    fn a_driver_that_exits_soon_after_the_last_message_did_not_time_out() {
        let failed = DriverEnd::Exited { code: 1 };
        let quiet_for = |ms: u64| {
            let mut open = launch(None, None, Some(10_000 + ms), true);
            open.last_from_server = Some(10_000);
            terminal(&wire(vec![open]), &failed)
        };
        let quick = quiet_for(400);
        assert_eq!(
            (quick.ending, quick.error_code.as_deref()),
            (Ending::FailedPermanently, Some("driver_failed")),
            "{quick:?}"
        );
        let reason = quick.reason.unwrap();
        assert!(
            reason.contains("400 ms after the app-server's last message")
                && reason.contains("turn t1"),
            "{reason}"
        );
        assert_eq!(
            quiet_for(2_500).ending,
            Ending::TimedOut,
            "a driver that waited out a bound on a silent app-server timed out"
        );
        let mut killed = launch(None, None, Some(10_400), true);
        killed.last_from_server = Some(10_000);
        assert_eq!(
            terminal(&wire(vec![killed]), &DriverEnd::Signaled { signal: 9 }).ending,
            Ending::TimedOut,
            "only a driver's own exit is its giving up"
        );
    }
}
