//! Command-line flags, accepted the way a driver launches `codex app-server`.

use crate::sandbox::ModeChoice;
use clap::Parser;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "fake-app-server",
    about = "A scriptable stand-in for `codex app-server` (stdio JSON-RPC)."
)]
pub struct Args {
    /// Optional leading `app-server`, so the fake launches exactly like `codex app-server`.
    #[arg(value_parser = ["app-server"])]
    pub subcommand: Option<String>,
    /// `builtin:NAME` or a scenario TOML file.
    #[arg(
        long,
        env = "FAKE_APP_SERVER_SCENARIO",
        default_value = "builtin:healthy"
    )]
    pub scenario: String,
    /// Append every message in and out here (JSONL).
    #[arg(long, env = "FAKE_APP_SERVER_TRANSCRIPT")]
    pub transcript: Option<PathBuf>,
    /// Write what the scripted model called and got back here (ModelLogEntry JSONL).
    #[arg(long = "model-log", env = "FAKE_APP_SERVER_MODEL_LOG")]
    pub model_log: Option<PathBuf>,
    /// How sandboxed commands run: really under bubblewrap, or simulated from the scenario's
    /// environment facts (`auto`: real when bubblewrap is installed).
    #[arg(
        long,
        env = "FAKE_APP_SERVER_SANDBOX",
        value_enum,
        default_value = "auto"
    )]
    pub sandbox: ModeChoice,
    /// Config overrides, `key=value` with a TOML value, like Codex's `-c`.
    #[arg(short = 'c', long = "config", value_name = "key=value")]
    pub overrides: Vec<String>,
}
