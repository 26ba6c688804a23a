//! What a cell left behind after its run.
//!
//! Everything a cell started is in the cell's cgroup ([`crate::containment`]), which is
//! emptied and removed here. Without containment (not root, no cgroup v2) only the sweep below
//! remains:
//!
//! The real Codex runs its filesystem helper under bubblewrap with `--new-session` and a new pid
//! namespace, so the helper escapes the app-server's process group; when Codex exits while a
//! helper is still up, bubblewrap's pid-1 stays behind, reparented to init (it ignores the
//! parent-death signal as a namespace init). Containers take such processes down with them; on
//! the host, the harness finds them by the one thing Codex passes to every helper: the cell's
//! own `TMPDIR`, which lives below the cell's folder, so nothing outside the cell can match.

use crate::containment::CellCgroup;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::path::Path;
use std::time::Duration;

/// Passes over `/proc` at most: a killed process's own leftovers show up on the next pass.
const MAX_PASSES: usize = 3;
const PAUSE_BETWEEN_PASSES: Duration = Duration::from_millis(50);

/// Kill every process left in the cell's cgroup (and remove it), and every process (other than
/// this one) whose environment has a `TMPDIR` inside `cell_root`; returns the pids killed, with
/// their command names.
pub fn after_cell(cgroup: Option<CellCgroup>, cell_root: &Path) -> Vec<(i32, String)> {
    let mut killed = match cgroup.map(CellCgroup::release).transpose() {
        Ok(killed) => killed.unwrap_or_default(),
        Err(err) => {
            tracing::warn!(target: "notice",
                "harness: emptying the cgroup of {}: {err:#}",
                cell_root.display()
            );
            Vec::new()
        }
    };
    killed.extend(reap_by_tmpdir(cell_root));
    killed
}

fn reap_by_tmpdir(cell_root: &Path) -> Vec<(i32, String)> {
    let Some(root) = cell_root.to_str() else {
        return Vec::new();
    };
    let prefix = format!("TMPDIR={}/", root.trim_end_matches('/'));
    let own = std::process::id() as i32;
    let mut killed = Vec::new();
    for pass in 0..MAX_PASSES {
        let found: Vec<(i32, String)> = processes_with_env_prefix(&prefix)
            .into_iter()
            .filter(|(pid, _)| *pid != own)
            .collect();
        if found.is_empty() {
            break;
        }
        for (pid, name) in found {
            if kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok() {
                killed.push((pid, name));
            }
        }
        if pass + 1 < MAX_PASSES {
            std::thread::sleep(PAUSE_BETWEEN_PASSES);
        }
    }
    killed
}

fn processes_with_env_prefix(prefix: &str) -> Vec<(i32, String)> {
    crate::system::process_ids()
        .into_iter()
        .filter_map(|pid| {
            // Processes that exit meanwhile, or that are not ours to read, are simply skipped.
            let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            let matches = environ
                .split(|byte| *byte == 0)
                .any(|var| var.starts_with(prefix.as_bytes()));
            matches.then(|| {
                let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .map(|comm| comm.trim().to_string())
                    .unwrap_or_default();
                (pid, name)
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kills_a_process_left_with_the_cells_tmpdir_and_nothing_else() {
        let cell = tempfile::tempdir().unwrap();
        let tmp = cell.path().join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        let other = tempfile::tempdir().unwrap();
        let mut left_behind = std::process::Command::new("sleep")
            .arg("30")
            .env("TMPDIR", &tmp)
            .spawn()
            .unwrap();
        let mut unrelated = std::process::Command::new("sleep")
            .arg("30")
            .env("TMPDIR", other.path())
            .spawn()
            .unwrap();
        // `spawn` returns once the child is in execve, before the kernel has laid out the new
        // image's environment; until then `/proc/PID/environ` reads empty.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        for dir in [cell.path(), other.path()] {
            let prefix = format!("TMPDIR={}", dir.display());
            while processes_with_env_prefix(&prefix).is_empty()
                && std::time::Instant::now() < deadline
            {
                std::thread::sleep(Duration::from_millis(5));
            }
        }

        let killed = super::after_cell(None, cell.path());

        assert_eq!(killed.len(), 1, "{killed:?}");
        assert_eq!(killed[0].0, left_behind.id() as i32);
        assert!(!left_behind.wait().unwrap().success());
        assert!(
            unrelated.try_wait().unwrap().is_none(),
            "a process of another cell was killed"
        );
        unrelated.kill().unwrap();
        unrelated.wait().unwrap();
    }
}
