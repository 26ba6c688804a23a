//! The `runc` processes a killed harness left making its containers. A harness starts each
//! container with `runc run --bundle B ID` in the foreground; SIGKILL ends the harness, not its
//! `runc run`, which goes on creating (and then running) the container. While it is still
//! creating, runc has a state folder without `state.json` (`runc list` does not show it) or no
//! folder at all, so a reaping pass that only lists containers misses it, and the container
//! appears after the pass. Killing those creators first leaves the pass a set of containers
//! that no longer changes.

use super::ReapReport;
use crate::owner;
use crate::runc::ID_PREFIX;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How long the killed creators get to end (a SIGKILLed process ends at once unless the kernel
/// holds it in an uninterruptible wait).
const CREATORS_END_BOUND: Duration = Duration::from_secs(10);

/// SIGKILL every `runc run` (or `runc create`) whose bundle's owner record is of `scope` and
/// gone, and wait (until `deadline`) until each has ended; one still running is a failure.
pub(super) fn kill_gone_creators(scope: &str, deadline: Instant, report: &mut ReapReport) {
    let mut killed = Vec::new();
    for (pid, bundle, id) in runc_creators() {
        let Some(record) = owner::read(&bundle) else {
            continue;
        };
        if record.scope != scope || record.container != id {
            continue;
        }
        let Ok(reason) = record.gone() else {
            continue;
        };
        let Some(started) = owner::started_at(pid as u32) else {
            continue;
        };
        if kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok() {
            tracing::warn!(target: "notice",
                "harness: killed runc (pid {pid}) still making container {id} of a killed harness ({reason})"
            );
            killed.push((pid, started, id));
        }
    }
    // Bounded on its own: a creator that outlives SIGKILL must not take the whole pass's time.
    let until = deadline.min(Instant::now() + CREATORS_END_BOUND);
    for (pid, started, id) in killed {
        let ended = || owner::has_ended(pid as u32, started);
        while !ended() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        if ended() {
            report.killed.push((pid, format!("runc making {id}")));
        } else {
            report.failed.push((
                format!("runc pid {pid}"),
                format!("still making container {id} after SIGKILL"),
            ));
        }
    }
}

/// `(pid, bundle, container id)` of every process running `runc … run|create … --bundle B … ID`
/// with an id of the harness's prefix.
fn runc_creators() -> Vec<(i32, PathBuf, String)> {
    crate::system::process_ids()
        .into_iter()
        .filter_map(|pid| {
            // A process that exits meanwhile reads empty: nothing to kill.
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let args: Vec<String> = cmdline
                .split(|byte| *byte == 0)
                .filter(|arg| !arg.is_empty())
                .map(|arg| String::from_utf8_lossy(arg).into_owned())
                .collect();
            let (bundle, id) = creator_target(&args)?;
            Some((pid, bundle, id))
        })
        .collect()
}

/// The bundle and container id of a `runc run|create` command line.
fn creator_target(args: &[String]) -> Option<(PathBuf, String)> {
    let program = std::path::Path::new(args.first()?).file_name()?;
    if program != "runc" {
        return None;
    }
    let rest = &args[1..];
    if !rest.iter().any(|arg| arg == "run" || arg == "create") {
        return None;
    }
    let bundle = rest
        .iter()
        .enumerate()
        .find_map(|(at, arg)| match arg.as_str() {
            "--bundle" | "-b" => rest.get(at + 1).cloned(),
            _ => arg.strip_prefix("--bundle=").map(str::to_string),
        })?;
    let id = rest.last().filter(|id| id.starts_with(ID_PREFIX))?;
    Some((PathBuf::from(bundle), id.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_string).collect()
    }

    #[test]
    fn only_a_runc_run_or_create_of_a_harness_container_is_a_creator() {
        assert_eq!(
            creator_target(&args("runc run --bundle /tmp/ccf-bundle-x ccf-1-2-3")),
            Some(("/tmp/ccf-bundle-x".into(), "ccf-1-2-3".into()))
        );
        assert_eq!(
            creator_target(&args("/usr/sbin/runc --root /r create --bundle=/b ccf-9")),
            Some(("/b".into(), "ccf-9".into()))
        );
        assert_eq!(creator_target(&args("runc init")), None);
        assert_eq!(
            creator_target(&args("runc run --bundle /b someone-elses")),
            None
        );
        assert_eq!(creator_target(&args("runc delete --force ccf-1")), None);
        assert_eq!(creator_target(&args("notrunc run --bundle /b ccf-1")), None);
    }
}
