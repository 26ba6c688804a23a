//! The wire tap. Two ends: the program a driver runs as `codex` ([`relay`], a thin relay that
//! carries its argv and the names of its environment over a Unix socket and hands over its stdin
//! and stdout, on which the recorder then reads and writes directly), and the
//! harness's recorder at the other end of that socket ([`session`]), which starts the cell's
//! app-server for each launch, relays every byte both ways and records it in the cell's
//! transcript (`transcript.jsonl`, see `docs/events.md`, "The transcript"): the driver's argv,
//! the names (never the values) of its environment, every line in both directions with a
//! timestamp, the app-server's stderr, stdout closing and exit. Retries and relaunches are
//! separate launches, so separate launch records in the same file. The transcript is written by
//! the harness only, where the driver cannot reach it. What the recorder plays on that wire
//! besides relaying it: a mutation operator's rewrite ([`mutation`]) and a scenario's transport
//! timing ([`timing`]); [`record`] is the transcript's writer, [`workspace`] the kernel's
//! account of what happened to the workspace (an inotify watch).
//!
//! The harness installs the tap per cell ([`install`]): a small `sh` shim named `codex` that
//! execs the binary embedding [`relay::main`] (`harness tap`) with the cell's socket. The
//! socket's path reaches the tap through the shim, never through the driver's environment.
//!
//! May use: `graders` (the transcript's bounds, stated once in `graders::wire::transcript`) and
//! third-party crates; it knows nothing else of the harness (where an app-server starts is a
//! [`session::Spawn`] the harness gives it). The binary that embeds [`relay::main`] dispatches
//! to it as a hidden subcommand (`matrix::hidden`).

// Library code prints nothing: it returns values, or emits a `tracing` notice the command line
// shows (`harness::cli::notices`). Unit tests may print.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![deny(unreachable_pub)]

mod argv;
mod frame;
pub mod mutation;
pub mod record;
pub mod relay;
pub mod session;
mod socket;
pub mod timing;
pub mod workspace;

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};

/// Relay chunk size, both ends.
pub const CHUNK: usize = 64 * 1024;

/// The binary that embeds [`relay::main`], and the arguments that select it
/// (`harness tap`: `["tap"]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapProgram {
    pub program: PathBuf,
    pub leading_args: Vec<String>,
}

/// A tap installed in a cell's folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstalledTap {
    /// The folder holding the `codex` shim (put first on a driver's `PATH`).
    pub bin_dir: PathBuf,
    /// The shim itself (`{codex}`, `$CODEX_PATH`, …).
    pub codex: PathBuf,
    /// The socket the recorder listens on.
    pub socket: PathBuf,
}

/// Install a tap below `dir` (created): `dir/bin/codex`, the shim, which runs `tap` with the
/// socket `dir/sock/codex.sock` (the recorder creates it: [`session::Recording::start`]).
pub fn install(dir: &Path, tap: &TapProgram) -> Result<InstalledTap> {
    let bin_dir = dir.join("bin");
    let sock_dir = dir.join("sock");
    for folder in [&bin_dir, &sock_dir] {
        std::fs::create_dir_all(folder)
            .with_context(|| format!("creating {}", folder.display()))?;
    }
    let socket = sock_dir.join("codex.sock");
    let quote = |s: &str| -> Result<String> {
        Ok(shlex::try_quote(s)
            .map_err(|e| anyhow::anyhow!("cannot quote `{s}` for the shim: {e}"))?
            .into_owned())
    };
    let mut words = vec![quote(&tap.program.to_string_lossy())?];
    for arg in &tap.leading_args {
        words.push(quote(arg)?);
    }
    words.push("--socket".into());
    words.push(quote(&socket.to_string_lossy())?);
    let shim = format!(
        "#!/bin/sh\n# The harness's wire tap standing in for codex (see harness/crates/tap).\nexec {} -- \"$@\"\n",
        words.join(" ")
    );
    let codex = bin_dir.join("codex");
    write_executable(&codex, &shim).with_context(|| format!("writing {}", codex.display()))?;
    Ok(InstalledTap {
        bin_dir,
        codex,
        socket,
    })
}

/// How long the child writing a shim may take.
const SHIM_WRITE_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

/// Write `content` to `path`, mode 0755, through a child process, never through a descriptor of
/// this one. The harness forks drivers from many threads at once; a child forked while this
/// process held the shim open for writing keeps that descriptor until its exec — long, past a
/// local cell's isolation set-up between fork and exec — and a driver exec'ing the shim
/// meanwhile fails with ETXTBSY (measured once: "codex app-server: Text file busy (os error 26)"
/// in the legitimate population beside the published matrix). The writing `sh` is a process of
/// its own: once it has exited, nothing holds the file open for writing.
fn write_executable(path: &Path, content: &str) -> Result<()> {
    use std::io::Write;
    let mut child = std::process::Command::new("/bin/sh")
        .args(["-c", "umask 022 && cat > \"$1\" && chmod 0755 \"$1\"", "sh"])
        .arg(path)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("starting /bin/sh to write the shim")?;
    let written = child
        .stdin
        .take()
        .context("the shim writer's stdin")?
        .write_all(content.as_bytes());
    let deadline = std::time::Instant::now() + SHIM_WRITE_BOUND;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("the shim writer did not end within {SHIM_WRITE_BOUND:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    };
    written.context("handing the shim to its writer")?;
    if !status.success() {
        let mut stderr = String::new();
        if let Some(mut pipe) = child.stderr.take() {
            use std::io::Read;
            let _ = pipe.read_to_string(&mut stderr);
        }
        anyhow::bail!("the shim writer failed ({status}): {}", stderr.trim());
    }
    Ok(())
}

#[cfg(test)]
mod shim_tests {
    use super::write_executable;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_shim_is_written_executable_and_this_process_never_held_it_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("codex");
        write_executable(&path, "#!/bin/sh\necho shim \"$@\"\n").unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        let held: Vec<_> = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
            .filter(|target| target == &path)
            .collect();
        assert!(held.is_empty(), "{held:?}");
        let output = std::process::Command::new(&path)
            .arg("ran")
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&output.stdout), "shim ran\n");
    }
}
