//! The wire tap: the program a driver runs as `codex`. It relays every byte between the driver
//! and the cell's app-server unchanged, and records each launch in the cell's transcript
//! (`transcript.jsonl`, see `docs/events.md`, "The transcript"): the driver's argv, the names
//! (never the values) of the environment it passed, start and end, exit status or signal, and
//! every line in both directions with a timestamp. Retries and relaunches are separate launches
//! of the tap, so separate launch records in the same file.
//!
//! The harness installs the tap per cell ([`install`]): a configuration file ([`TapConfig`]:
//! the real app-server program, what the cell adds after the driver's own arguments, the
//! app-server's environment) and a small `sh` shim named `codex` that execs the binary embedding
//! [`relay::main`] (`harness tap`) with that configuration. The shim sits in the cell's folder,
//! so it is visible inside the cell's container, where the driver runs it.
//!
//! May use: `fake_app_server` (the transcript's line format) and third-party crates; it knows
//! nothing else of the harness. The binary that embeds [`relay::main`] dispatches to it as a
//! hidden subcommand (`matrix::hidden`).

pub mod argv;
pub mod record;
pub mod relay;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Lines longer than this are not kept in the transcript (a note with their size is); they are
/// still forwarded whole.
pub const MAX_RECORDED_LINE_BYTES: usize = 1024 * 1024;
/// Per launch, the transcript stops keeping lines after this many bytes (a note says so); the
/// relay goes on.
pub const MAX_TRANSCRIPT_BYTES_PER_LAUNCH: u64 = 64 * 1024 * 1024;

/// What one cell's tap relays to, written by the harness and read by every launch of the tap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TapConfig {
    /// The real app-server program (the fake's binary, or the real Codex).
    pub program: PathBuf,
    /// Arguments before the driver's own (`["fake-app-server"]` for the embedded fake).
    pub prefix: Vec<String>,
    /// Arguments the cell adds after the driver's own when it launches the server
    /// (`app-server`, not `--version` or `app-server generate-json-schema`): the fake's scenario,
    /// or the real Codex's mock model provider.
    pub server_args: Vec<String>,
    /// The app-server's environment (its names are recorded). Nothing else of the driver's is
    /// passed on, except the variables named in `inherit_env`.
    pub env: Vec<(String, String)>,
    /// Variables the app-server inherits from the driver when the driver's environment has
    /// them, as the real `codex` would: the canary secrets the harness planted in the driver's
    /// environment, so what a driver hands its app-server is what the model's commands see.
    #[serde(default)]
    pub inherit_env: Vec<String>,
    /// The transcript every launch appends to.
    pub transcript: PathBuf,
    /// A folder where launches take their numbers (one empty file per launch).
    pub launches: PathBuf,
    #[serde(default = "default_line_cap")]
    pub max_line_bytes: usize,
    #[serde(default = "default_transcript_cap")]
    pub max_transcript_bytes: u64,
}

fn default_line_cap() -> usize {
    MAX_RECORDED_LINE_BYTES
}

fn default_transcript_cap() -> u64 {
    MAX_TRANSCRIPT_BYTES_PER_LAUNCH
}

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
    pub config: PathBuf,
    pub transcript: PathBuf,
}

/// Install a tap below `dir` (created): `dir/tap.json`, `dir/bin/codex`, `dir/launches/`. With
/// `owner`, the files a launch writes are handed to that uid/gid (the container's user).
pub fn install(
    dir: &Path,
    tap: &TapProgram,
    config: &TapConfig,
    owner: Option<(u32, u32)>,
) -> Result<InstalledTap> {
    let bin_dir = dir.join("bin");
    std::fs::create_dir_all(&bin_dir).with_context(|| format!("creating {}", bin_dir.display()))?;
    std::fs::create_dir_all(&config.launches)
        .with_context(|| format!("creating {}", config.launches.display()))?;
    let config_path = dir.join("tap.json");
    std::fs::write(&config_path, serde_json::to_vec_pretty(config)?)
        .with_context(|| format!("writing {}", config_path.display()))?;
    // Created now so a container user who cannot create files in the cell folder can append.
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&config.transcript)
        .with_context(|| format!("creating {}", config.transcript.display()))?;
    let quote = |s: &str| -> Result<String> {
        Ok(shlex::try_quote(s)
            .map_err(|e| anyhow::anyhow!("cannot quote `{s}` for the shim: {e}"))?
            .into_owned())
    };
    let mut words = vec![quote(&tap.program.to_string_lossy())?];
    for arg in &tap.leading_args {
        words.push(quote(arg)?);
    }
    words.push("--config".into());
    words.push(quote(&config_path.to_string_lossy())?);
    let shim = format!(
        "#!/bin/sh\n# The harness's wire tap standing in for codex (see harness/crates/tap).\nexec {} -- \"$@\"\n",
        words.join(" ")
    );
    let codex = bin_dir.join("codex");
    std::fs::write(&codex, shim).with_context(|| format!("writing {}", codex.display()))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&codex, std::fs::Permissions::from_mode(0o755))?;
    if let Some((uid, gid)) = owner {
        for path in [dir, &bin_dir, &config.launches, &config.transcript] {
            std::os::unix::fs::chown(path, Some(uid), Some(gid))
                .with_context(|| format!("handing {} to uid {uid}", path.display()))?;
        }
    }
    Ok(InstalledTap {
        bin_dir,
        codex,
        config: config_path,
        transcript: config.transcript.clone(),
    })
}
