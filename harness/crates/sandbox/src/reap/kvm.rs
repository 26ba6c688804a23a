//! The virtual machines a killed harness left behind: a state folder of the kvm runtime
//! (`crate::kvm::machine`) whose recorded owner is gone has its QEMU killed (when the pid in it
//! is still a QEMU of that folder) and is removed. A folder of a live harness, or without an
//! owner record, is left alone. QEMU dies with its harness on its own (parent-death signal):
//! this covers what that cannot, a QEMU whose keeper thread was not its harness's.

use super::ReapReport;
use crate::kvm::machine::{PID_FILE, STATE_PREFIX};
use crate::owner;
use std::path::Path;
use std::time::{Duration, Instant};

/// Bound on one pass.
const REAP_DEADLINE: Duration = Duration::from_secs(10);

/// One pass over `folder` (the temporary folder).
pub fn reap_stale(folder: &Path) -> ReapReport {
    let deadline = Instant::now() + REAP_DEADLINE;
    let mut report = ReapReport::default();
    let Ok(entries) = std::fs::read_dir(folder) else {
        return report;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with(STATE_PREFIX) || !entry.path().is_dir() {
            continue;
        }
        if Instant::now() >= deadline {
            report.incomplete = Some(format!(
                "the {}s bound ran out before every machine was checked",
                REAP_DEADLINE.as_secs()
            ));
            return report;
        }
        let state = entry.path();
        let Some(recorded) = owner::read(&state) else {
            report.left_alone.push((name, "no owner record".into()));
            continue;
        };
        if let Err(why) = recorded.gone() {
            report.left_alone.push((name, why));
            continue;
        }
        if let Some(pid) = qemu_of(&state) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            report.containers.push(format!("qemu {pid} of {name}"));
        }
        if std::fs::remove_dir_all(&state).is_ok() {
            report.bundles.push(state);
        }
    }
    report
}

/// The pid in the state folder, when that process is a QEMU whose command line names the folder
/// (a pid reused by another program is not killed).
fn qemu_of(state: &Path) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(state.join(PID_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let cmdline = String::from_utf8_lossy(&cmdline);
    let names_folder = cmdline.contains(&*state.to_string_lossy());
    (cmdline.starts_with("qemu-system") || cmdline.contains("/qemu-system"))
        .then_some(pid)
        .filter(|_| names_folder)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_of_a_gone_owner_is_removed_and_a_live_ones_stays() {
        let temp = tempfile::tempdir().unwrap();
        let live = temp.path().join(format!("{STATE_PREFIX}live"));
        std::fs::create_dir(&live).unwrap();
        owner::record(&live, "live").unwrap();
        let gone = temp.path().join(format!("{STATE_PREFIX}gone"));
        std::fs::create_dir(&gone).unwrap();
        let mut record = owner::Owner::current("gone").unwrap();
        record.start_time += 1;
        std::fs::write(
            gone.join(owner::OWNER_FILE),
            serde_json::to_vec(&record).unwrap(),
        )
        .unwrap();
        // A pid file naming a process that is no QEMU of this folder: it is not killed.
        std::fs::write(gone.join(PID_FILE), std::process::id().to_string()).unwrap();
        let report = reap_stale(temp.path());
        assert_eq!(report.bundles, vec![gone.clone()]);
        assert!(report.containers.is_empty(), "{report:?}");
        assert!(live.exists() && !gone.exists());
    }
}
