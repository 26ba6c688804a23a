//! Command-line flags, accepted the way a driver launches `codex app-server`.

use crate::sandbox::ModeChoice;
use clap::Parser;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "fake-app-server",
    about = "A scriptable stand-in for `codex app-server` (stdio JSON-RPC).",
    disable_version_flag = true
)]
pub struct Args {
    /// Optional leading `app-server`, so the fake launches exactly like `codex app-server`.
    #[arg(value_parser = ["app-server"])]
    pub subcommand: Option<String>,
    /// `generate-json-schema`: write the protocol schema of the Codex the fake serves (copied
    /// from `$FAKE_APP_SERVER_SCHEMA_DIR`, which the pinned Codex generated) into `--out`.
    #[arg(value_parser = ["generate-json-schema"], requires = "subcommand")]
    pub tool: Option<String>,
    /// With `generate-json-schema`: include experimental methods (the copied schema has them).
    #[arg(long, requires = "tool")]
    pub experimental: bool,
    /// With `generate-json-schema`: the folder to write.
    #[arg(long, requires = "tool")]
    pub out: Option<PathBuf>,
    /// Where to serve: only `stdio://` (the default), as drivers pass it to `codex app-server`.
    #[arg(long, value_name = "URL", value_parser = parse_listen)]
    pub listen: Option<String>,
    /// Print `codex-cli VERSION` (the Codex version the fake serves as) and exit.
    #[arg(short = 'V', long)]
    pub version: bool,
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
    /// The Codex release to play (see `fake_app_server::persona`).
    #[arg(
        long = "codex-version",
        value_name = "VERSION",
        env = "FAKE_APP_SERVER_CODEX_VERSION",
        default_value = crate::persona::DEFAULT_VERSION
    )]
    pub codex_version: String,
    /// Config overrides, `key=value` with a TOML value, like Codex's `-c`.
    #[arg(short = 'c', long = "config", value_name = "key=value")]
    pub overrides: Vec<String>,
}

/// Codex accepts `stdio://`, `unix://…`, `ws://…` and `off`; the fake serves only stdio and says
/// so with Codex's own wording for a URL it does not support.
fn parse_listen(url: &str) -> Result<String, String> {
    if url == "stdio://" {
        Ok(url.to_string())
    } else {
        Err(format!(
            "unsupported --listen URL `{url}`; fake-app-server serves only `stdio://`"
        ))
    }
}
