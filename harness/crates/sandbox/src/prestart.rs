//! A container started before its process is known. A launch in a container costs a container
//! start (one `runc run`: about 19 ms on the idle 2-core machine), which a driver's session
//! waits for when its `codex` asks for the app-server. A cell can start that container while
//! its driver is still starting, with a stand-in process that waits to be told what to run:
//! [`told_exec`] reads one [`ProcessSpec`] (the program, its arguments, its whole environment and its
//! folder) from its stdin and execs it, in the container and as the process the launcher
//! started, so the process tree, stdio, namespaces, uid and cgroup are the ones a direct launch
//! gets. The stand-in reads exactly the spec's bytes (length first, unbuffered): whatever follows
//! on stdin is the program's.
//!
//! Only the harness writes the spec, on a pipe it holds from the spawn on; a stand-in that is
//! never told (the driver never launched) sees its stdin closed and exits 0 without running
//! anything.

use crate::launcher::{Launcher, ProcessSpec};
use anyhow::{bail, Context, Result};
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ExitCode};
use std::time::Duration;
use wait_timeout::ChildExt;

/// The longest spec the stand-in reads: an app-server's arguments and environment are a few
/// KiB; a longer length is a corrupt header, not a spec.
pub const MAX_SPEC_BYTES: u64 = 1 << 20;

/// The longest message told through the pipe: it fits the pipe's buffer (64 KiB on Linux), so
/// telling never waits on a stand-in whose container is still starting. A longer spec is
/// launched directly instead.
const TOLD_IN_ONE_WRITE: usize = 16 << 10;

/// How long an untold stand-in gets to exit after its stdin closed (its container may still be
/// starting) before it is killed.
const UNTOLD_EXIT: Duration = Duration::from_secs(5);

/// A stand-in started through a launcher, its stdio piped and in its own process group, as the
/// cell's recorder starts an app-server; ended (stdin closed, then killed past a bound) and its
/// launcher's guard dropped when it is dropped untold.
pub struct Prestarted {
    program: PathBuf,
    child: Option<Child>,
    guard: Option<Box<dyn Send + Sync>>,
}

impl Prestarted {
    /// Start `program` with `args` (which make it run [`told_exec`]) through `launcher`, in
    /// `cwd`: its container is set up for `program`, the program it will be told to run.
    pub fn start(
        launcher: &dyn Launcher,
        program: &Path,
        args: &[String],
        cwd: &Path,
    ) -> Result<Prestarted> {
        let prepared = launcher.prepare(&ProcessSpec {
            program: program.to_path_buf(),
            args: args.to_vec(),
            env: Vec::new(),
            cwd: cwd.to_path_buf(),
        })?;
        let (child, guard) = prepared
            .spawn_piped()
            .with_context(|| format!("prestarting a container for {}", program.display()))?;
        Ok(Prestarted {
            program: program.to_path_buf(),
            child: Some(child),
            guard: Some(guard),
        })
    }

    /// The program its container is set up for.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Tell the stand-in to run `told`: its process (the launcher's, now running `told`) and
    /// the launcher's guard; or why not, and the stand-in is ended.
    pub fn run(mut self, told: &ProcessSpec) -> Result<(Child, Box<dyn Send + Sync>)> {
        let message = message(told)?;
        if message.len() > TOLD_IN_ONE_WRITE {
            bail!(
                "a spec of {} bytes does not fit the pipe at once",
                message.len()
            );
        }
        let mut child = self.child.take().context("the stand-in was run already")?;
        let told = child
            .stdin
            .as_mut()
            .context("the stand-in's stdin is not piped")
            .and_then(|stdin| {
                stdin
                    .write_all(&message)
                    .context("telling the stand-in what to run")
            });
        match told {
            Ok(()) => Ok((child, self.guard.take().context("the guard is gone")?)),
            Err(e) => {
                self.child = Some(child);
                Err(e)
            }
        }
    }
}

impl Drop for Prestarted {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            drop(child.stdin.take());
            if !matches!(child.wait_timeout(UNTOLD_EXIT), Ok(Some(_))) {
                // Its own process group: the stand-in's runc and what it started.
                let _ = nix::sys::signal::killpg(
                    nix::unistd::Pid::from_raw(child.id() as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
                let _ = child.wait();
            }
        }
        drop(self.guard.take());
    }
}

fn message(told: &ProcessSpec) -> Result<Vec<u8>> {
    let spec = serde_json::to_vec(told).context("serializing the process spec")?;
    let mut message = (spec.len() as u64).to_le_bytes().to_vec();
    message.extend_from_slice(&spec);
    Ok(message)
}

/// Read a spec from `input`, exactly its bytes; `None`: `input` ended before any byte (the
/// stand-in was never told).
pub fn read_told(input: &mut impl Read) -> Result<Option<ProcessSpec>> {
    let mut header = [0u8; 8];
    let mut filled = 0;
    while filled < header.len() {
        match input.read(&mut header[filled..]) {
            Ok(0) if filled == 0 => return Ok(None),
            Ok(0) => bail!("the spec's length ended after {filled} of 8 bytes"),
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e).context("reading the spec's length"),
        }
    }
    let length = u64::from_le_bytes(header);
    if length > MAX_SPEC_BYTES {
        bail!("a spec of {length} bytes (at most {MAX_SPEC_BYTES})");
    }
    let mut spec = vec![0u8; length as usize];
    input
        .read_exact(&mut spec)
        .with_context(|| format!("reading a spec of {length} bytes"))?;
    serde_json::from_slice(&spec)
        .context("the spec is not a process spec")
        .map(Some)
}

/// The stand-in (a hidden subcommand of the harness binary): wait for the spec on stdin, then
/// exec it. Runc gives a process a `HOME` its environment lacks (the container user's); the
/// program gets the same.
pub fn told_exec() -> ExitCode {
    use std::os::fd::FromRawFd;
    // SAFETY: fd 0 is this process's stdin, open for its whole life; ManuallyDrop keeps it open
    // for the program. A `File`, not `std::io::stdin()`: that one buffers, and would take the
    // program's first bytes.
    let mut stdin = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(0) });
    let told = match read_told(&mut *stdin) {
        Ok(Some(told)) => told,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => {
            tracing::warn!(target: "notice", "harness: the prestarted process was told nothing it can run: {e:#}");
            return ExitCode::from(125);
        }
    };
    let mut env = told.env.clone();
    if !env.iter().any(|(name, _)| name == "HOME") {
        if let Ok(home) = std::env::var("HOME") {
            env.push(("HOME".into(), home));
        }
    }
    let error = std::process::Command::new(&told.program)
        .args(&told.args)
        .env_clear()
        .envs(env)
        .current_dir(&told.cwd)
        .exec();
    tracing::warn!(target: "notice",
        "harness: cannot run {} in the prestarted container: {error}",
        told.program.display()
    );
    ExitCode::from(127)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn told() -> ProcessSpec {
        ProcessSpec {
            program: "/bin/cat".into(),
            args: vec!["-u".into()],
            env: vec![("LANG".into(), "C".into())],
            cwd: "/".into(),
        }
    }

    #[test]
    fn the_spec_is_read_exactly_and_what_follows_stays() {
        let mut wire = message(&told()).unwrap();
        wire.extend_from_slice(b"{\"id\":1}\n");
        let mut input = std::io::Cursor::new(wire);
        assert_eq!(read_told(&mut input).unwrap(), Some(told()));
        let mut rest = String::new();
        input.read_to_string(&mut rest).unwrap();
        assert_eq!(rest, "{\"id\":1}\n");
    }

    #[test]
    fn a_closed_stdin_is_no_spec_and_a_cut_one_is_an_error() {
        assert_eq!(read_told(&mut std::io::empty()).unwrap(), None);
        let wire = message(&told()).unwrap();
        for cut in [3, 8, wire.len() - 1] {
            let error = read_told(&mut &wire[..cut]).unwrap_err();
            assert!(format!("{error:#}").contains("spec"), "{error:#}");
        }
    }

    #[test]
    fn an_oversized_length_is_refused_before_reading() {
        let mut wire = (MAX_SPEC_BYTES + 1).to_le_bytes().to_vec();
        wire.extend_from_slice(b"{}");
        let error = read_told(&mut &wire[..]).unwrap_err();
        assert!(format!("{error:#}").contains("at most"), "{error:#}");
    }
}
