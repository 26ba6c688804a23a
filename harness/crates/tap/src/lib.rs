//! The wire tap. Two ends: the program a driver runs as `codex` ([`relay`], a thin relay that
//! carries its argv and the names of its environment over a Unix socket and hands over its stdin
//! and stdout, on which the recorder then reads and writes directly), and the
//! harness's recorder at the other end of that socket ([`session`]), which starts the cell's
//! app-server for each launch, relays every byte both ways and records it in the cell's
//! transcript (`transcript.jsonl`, see `docs/events.md`, "The transcript"): the driver's argv,
//! the names (never the values) of its environment, every line in both directions with a
//! timestamp, the app-server's stderr, stdout closing and exit. Retries and relaunches are
//! separate launches, so separate launch records in the same file. The transcript is written by
//! the harness only, where the driver cannot reach it.
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

pub mod argv;
pub mod frame;
pub mod mutation;
pub mod record;
pub mod relay;
pub mod session;
pub mod socket;
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
    std::fs::write(&codex, shim).with_context(|| format!("writing {}", codex.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&codex, std::fs::Permissions::from_mode(0o755))?;
    Ok(InstalledTap {
        bin_dir,
        codex,
        socket,
    })
}
