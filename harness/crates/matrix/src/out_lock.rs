//! A run owns its output folder: two runs with one `--out` would share cell folders (one run's
//! cleanup killing the other's driver, two sessions in one transcript, both graded from mixed
//! bytes). The second run is refused with a clear error instead.
//!
//! The lock is `flock(2)` on a file in the folder: the kernel releases it when the process
//! ends however it ends (SIGKILL included), so a killed run never leaves the folder locked.

use anyhow::{bail, Context, Result};
use nix::fcntl::{Flock, FlockArg};
use std::io::{Read, Seek, Write};
use std::path::Path;

/// The lock file in an output folder.
pub(crate) const LOCK_FILE: &str = ".harness-run.lock";

/// Held for as long as a run writes into its output folder.
#[derive(Debug)]
pub struct OutLock {
    _lock: Flock<std::fs::File>,
}

impl OutLock {
    /// Create `out` if needed and lock it for this process, or say which process holds it.
    pub fn take(out: &Path) -> Result<OutLock> {
        std::fs::create_dir_all(out)
            .with_context(|| format!("creating the output folder {}", out.display()))?;
        let path = out.join(LOCK_FILE);
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .with_context(|| format!("opening {}", path.display()))?;
        let mut lock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(lock) => lock,
            Err((mut file, nix::errno::Errno::EWOULDBLOCK)) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                bail!(
                    "another harness run is writing to {} ({}); give this run another --out, or wait for that one",
                    out.display(),
                    holder.trim().chars().take(200).collect::<String>()
                );
            }
            Err((_, errno)) => {
                return Err(errno).with_context(|| format!("locking {}", path.display()))
            }
        };
        // Who holds it, for the error above (the lock, not this text, is what excludes).
        let said = lock
            .set_len(0)
            .and_then(|()| lock.rewind())
            .and_then(|()| writeln!(lock, "pid {}", std::process::id()));
        said.with_context(|| format!("writing this run's pid into {}", path.display()))?;
        Ok(OutLock { _lock: lock })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_one_folder_is_refused_naming_the_holder_and_freed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let first = OutLock::take(&out).unwrap();
        let second = OutLock::take(&out).unwrap_err().to_string();
        assert!(
            second.contains("another harness run is writing to"),
            "{second}"
        );
        assert!(
            second.contains(&format!("pid {}", std::process::id())),
            "{second}"
        );
        assert!(out.join(LOCK_FILE).is_file());
        drop(first);
        OutLock::take(&out).expect("free again once the first run ended");
    }
}
