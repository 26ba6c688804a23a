//! `harness launch`: print, as JSON, everything a driver would send for a launch — the
//! app-server argv, the profile definitions, the per-thread and per-turn parameters and the
//! launch identity. Target and network default to `PAPERCLIP_RUNNER_EXTERNAL_SANDBOX` and
//! `PAPERCLIP_RUNNER_NETWORK_ACCESS`, like a runner reads them.

use driver::launch::{self, profiles::HostPaths, LaunchRequest, Mode, PolicyGeneration, Target};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ModeArg {
    Planning,
    Standard,
    Ask,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum TargetArg {
    Local,
    Ssh,
    ExternalSandbox,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum NetworkArg {
    Enabled,
    Disabled,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, Default)]
pub enum PolicyArg {
    #[default]
    Current,
    Legacy,
}

#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(long, value_enum)]
    pub mode: ModeArg,
    /// Default: external-sandbox when `PAPERCLIP_RUNNER_EXTERNAL_SANDBOX=1`, else local.
    #[arg(long, value_enum)]
    pub target: Option<TargetArg>,
    /// Default: `PAPERCLIP_RUNNER_NETWORK_ACCESS` (off unless `enabled`).
    #[arg(long, value_enum)]
    pub network: Option<NetworkArg>,
    #[arg(long, value_enum, default_value = "current")]
    pub policy: PolicyArg,
    /// Default: the current directory.
    #[arg(long, value_parser = super::absolute_path)]
    pub workspace: Option<PathBuf>,
    /// The app-server program, so its install folder is named readable in restricted profiles.
    #[arg(long, value_parser = super::absolute_path)]
    pub app_server: Option<PathBuf>,
}

pub fn main(args: Args) -> ExitCode {
    match run(args) {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("harness launch: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(args: Args) -> anyhow::Result<String> {
    let target = match args.target {
        Some(TargetArg::Local) => Target::Local,
        Some(TargetArg::Ssh) => Target::Ssh,
        Some(TargetArg::ExternalSandbox) => Target::ExternalSandbox,
        None => launch::target_from(launch::process_env)?,
    };
    let network_enabled = match args.network {
        Some(NetworkArg::Enabled) => true,
        Some(NetworkArg::Disabled) => false,
        None => launch::network_from(launch::process_env)?,
    };
    let workspace = match args.workspace {
        Some(dir) => dir,
        None => std::env::current_dir()?,
    };
    let request = LaunchRequest {
        mode: match args.mode {
            ModeArg::Planning => Mode::Planning,
            ModeArg::Standard => Mode::Standard,
            ModeArg::Ask => Mode::Ask,
        },
        target,
        network_enabled,
        policy: match args.policy {
            PolicyArg::Current => PolicyGeneration::Current,
            PolicyArg::Legacy => PolicyGeneration::Legacy,
        },
        workspace,
    };
    let host = HostPaths::from_process_env(args.app_server.as_deref());
    let plan = launch::plan_with(&request, &host);
    Ok(serde_json::to_string_pretty(&plan)?)
}
