//! One cgroup v2 folder: create it, make a forked child join it, list and kill everything in its
//! subtree, remove it.
//!
//! Hand-written over `/sys/fs/cgroup` files rather than through a cgroups crate: the harness
//! needs five file operations (`mkdir`, `cgroup.procs`, `cgroup.kill`, `cgroup.events`, `rmdir`),
//! and the join must run between fork and exec, where only raw system calls are safe.

use anyhow::{Context, Result};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a kill waits for the subtree to empty.
const KILL_DEADLINE: Duration = Duration::from_secs(5);

/// The mount point of the cgroup v2 hierarchy: `/sys/fs/cgroup/unified` on a hybrid machine,
/// `/sys/fs/cgroup` on a pure v2 one; `None` without one.
pub fn unified_mount() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    // Field 5 is the mount point; after the ` - ` separator comes the filesystem type.
    let found = mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        if right.split(' ').next()? != "cgroup2" {
            return None;
        }
        left.split(' ').nth(4).map(PathBuf::from)
    })?;
    Some(found)
}

/// The folders of the v1 hierarchies (a hybrid machine) that mirror `relative`, a path below
/// this process's own cgroup of each, and below each hierarchy's root: runc creates a
/// container's v1 cgroups at its relative `cgroupsPath` below its own v1 cgroups, and the
/// parents it creates there are never removed by it.
pub fn v1_mirrors(relative: &Path) -> Vec<PathBuf> {
    let (Ok(mountinfo), Ok(own)) = (
        std::fs::read_to_string("/proc/self/mountinfo"),
        std::fs::read_to_string("/proc/self/cgroup"),
    ) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mut fields = right.split(' ');
        if fields.next() != Some("cgroup") {
            continue;
        }
        let options: Vec<&str> = fields.nth(1).unwrap_or_default().split(',').collect();
        let Some(mount) = left.split(' ').nth(4).map(PathBuf::from) else {
            continue;
        };
        // `/proc/self/cgroup`: `ID:CONTROLLERS:PATH`, matched to a mount by its controllers.
        let own_path = own.lines().find_map(|entry| {
            let mut parts = entry.splitn(3, ':');
            let controllers = parts.nth(1)?;
            let path = parts.next()?;
            (!controllers.is_empty() && controllers.split(',').all(|c| options.contains(&c)))
                .then(|| path.trim_start_matches('/').to_string())
        });
        if let Some(own_path) = own_path.filter(|path| !path.is_empty()) {
            found.push(mount.join(own_path).join(relative));
        }
        found.push(mount.join(relative));
    }
    found
}

/// Remove `folder` and the folders below it, deepest first, in a v1 hierarchy; what does not
/// exist is skipped.
pub fn remove_tree(folder: &Path) -> Result<()> {
    Cgroup {
        path: folder.to_path_buf(),
    }
    .remove()
}

/// A cgroup folder in the v2 hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    pub path: PathBuf,
}

impl Cgroup {
    /// Create `path` (and its parents). A kernel without `cgroup.kill` (before Linux 5.14) is an
    /// error: without it a subtree cannot be killed at once.
    pub fn create(path: &Path) -> Result<Cgroup> {
        std::fs::create_dir_all(path)
            .with_context(|| format!("creating the cgroup {}", path.display()))?;
        if !path.join("cgroup.kill").exists() {
            let _ = std::fs::remove_dir(path);
            anyhow::bail!(
                "{} has no cgroup.kill (needs Linux 5.14 or later)",
                path.display()
            );
        }
        Ok(Cgroup {
            path: path.to_path_buf(),
        })
    }

    /// What a child runs between fork and exec to move itself into this cgroup: the path is
    /// converted here, before the fork, so the child only makes system calls.
    pub fn joiner(&self) -> Result<Joiner> {
        let procs = self.path.join("cgroup.procs");
        Ok(Joiner {
            procs: CString::new(procs.as_os_str().as_bytes())
                .context("a cgroup path with a NUL byte")?,
        })
    }

    /// Every process in this cgroup and below it, with its command name.
    pub fn processes(&self) -> Vec<(i32, String)> {
        let mut found = Vec::new();
        for folder in subtree(&self.path) {
            let Ok(text) = std::fs::read_to_string(folder.join("cgroup.procs")) else {
                continue;
            };
            for pid in text
                .lines()
                .filter_map(|line| line.trim().parse::<i32>().ok())
            {
                let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .map(|comm| comm.trim().to_string())
                    .unwrap_or_default();
                found.push((pid, name));
            }
        }
        found
    }

    /// Is any process left in the subtree? (`populated` of `cgroup.events`.)
    pub fn populated(&self) -> bool {
        std::fs::read_to_string(self.path.join("cgroup.events"))
            .map(|events| events.lines().any(|line| line.trim() == "populated 1"))
            .unwrap_or(false)
    }

    /// SIGKILL everything in the subtree (`cgroup.kill` reaches processes forked meanwhile,
    /// unlike a walk over pids), then wait, bounded, until it is empty. Returns what was there.
    pub fn kill_all(&self) -> Result<Vec<(i32, String)>> {
        let before = self.processes();
        if !self.path.exists() {
            return Ok(before);
        }
        std::fs::write(self.path.join("cgroup.kill"), "1")
            .with_context(|| format!("writing {}/cgroup.kill", self.path.display()))?;
        let deadline = Instant::now() + KILL_DEADLINE;
        while self.populated() {
            if Instant::now() >= deadline {
                anyhow::bail!(
                    "processes {:?} were still in {} {}s after cgroup.kill",
                    self.processes(),
                    self.path.display(),
                    KILL_DEADLINE.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(before)
    }

    /// Remove the cgroup and every cgroup below it, deepest first (a cgroup folder with a
    /// process in it cannot be removed: kill first).
    pub fn remove(&self) -> Result<()> {
        let mut folders = subtree(&self.path);
        folders.sort_by_key(|folder| std::cmp::Reverse(folder.components().count()));
        for folder in folders {
            match std::fs::remove_dir(&folder) {
                Ok(()) => {}
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => {
                    return Err(err).with_context(|| format!("removing {}", folder.display()))
                }
            }
        }
        Ok(())
    }
    /// Kill everything in the subtree and remove it, with its v1 mirrors (see [`v1_mirrors`]).
    /// Returns what was killed.
    pub fn destroy(&self) -> Result<Vec<(i32, String)>> {
        let killed = self.kill_all()?;
        self.remove()?;
        if let Some(relative) = relative_to_mount(&self.path) {
            for mirror in v1_mirrors(&relative) {
                remove_tree(&mirror)?;
            }
        }
        Ok(killed)
    }
}

/// `path` relative to the cgroup v2 mount, when it is below it.
pub fn relative_to_mount(path: &Path) -> Option<PathBuf> {
    let mount = unified_mount()?;
    path.strip_prefix(mount).ok().map(Path::to_path_buf)
}

/// `folder` and every folder below it (cgroup trees are shallow and small).
pub fn subtree(folder: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![folder.to_path_buf()];
    while let Some(next) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&next) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                pending.push(entry.path());
            }
        }
        found.push(next);
    }
    found
}

/// `name (pid N), …` for a log line.
pub fn describe(processes: &[(i32, String)]) -> String {
    processes
        .iter()
        .map(|(pid, name)| format!("{name} (pid {pid})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Moves the calling process into a cgroup; see [`Cgroup::joiner`].
#[derive(Debug, Clone)]
pub struct Joiner {
    procs: CString,
}

impl Joiner {
    /// Write `0` (the writer itself) to `cgroup.procs`. Async-signal-safe: open, write, close.
    pub fn join(&self) -> std::io::Result<()> {
        // SAFETY: a NUL-terminated path that outlives the call, and a static two-byte buffer.
        unsafe {
            let fd = libc::open(self.procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let written = libc::write(fd, b"0\n".as_ptr().cast(), 2);
            let error = std::io::Error::last_os_error();
            libc::close(fd);
            if written < 0 {
                return Err(error);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;

    fn scratch_cgroup(name: &str) -> Option<Cgroup> {
        let mount = unified_mount()?;
        if !nix::unistd::geteuid().is_root() {
            return None;
        }
        let path = mount
            .join("ccf-harness-unit")
            .join(format!("{name}-{}", std::process::id()));
        Some(Cgroup::create(&path).expect("create"))
    }

    #[test]
    fn a_joined_child_and_its_detached_grandchild_are_listed_and_killed_needs_root_cgroup2() {
        let Some(cgroup) = scratch_cgroup("kill") else {
            // Loud, and a failure where every prerequisite must be there.
            assert_ne!(
                std::env::var("CI").as_deref(),
                Ok("true"),
                "CI=true: needs root and a cgroup v2 hierarchy with cgroup.kill"
            );
            eprintln!("ignored: needs root and a cgroup v2 hierarchy with cgroup.kill");
            return;
        };
        let joiner = cgroup.joiner().unwrap();
        let mut command = std::process::Command::new("sh");
        // The grandchild leaves the session and the process group: only the cgroup holds it.
        command
            .args(["-c", "setsid sleep 60 & exec sleep 60"])
            .env_remove("TMPDIR");
        unsafe {
            command.pre_exec(move || joiner.join());
        }
        let mut child = command.spawn().unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while cgroup.processes().len() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(cgroup.processes().len(), 2, "{:?}", cgroup.processes());
        let killed = cgroup.kill_all().unwrap();
        assert_eq!(killed.len(), 2, "{killed:?}");
        assert!(!cgroup.populated());
        let _ = child.wait();
        cgroup.remove().unwrap();
        assert!(!cgroup.path.exists());
        let _ = std::fs::remove_dir(cgroup.path.parent().unwrap());
    }
}
