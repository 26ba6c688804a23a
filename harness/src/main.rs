//! The `harness` command line. Thin: each subcommand lives in `harness::cli::*`.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "harness",
    version,
    about = "Conformance harness for Codex app-server drivers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Grade one run's event stream.
    Grade(harness::cli::grade::Args),
    /// Print what a driver would send for a launch (argv, profiles, parameters, identity).
    Launch(harness::cli::launch::Args),
    /// Run the conformance matrix (or a filter of it), or one suite with an external driver.
    Run(harness::cli::run::Args),
    /// Restricted environments: list and probe.
    #[command(subcommand)]
    Env(harness::cli::env::Command),
    /// Reproduce a known sandbox failure with one command.
    Repro(harness::cli::repro::Args),
    /// Benchmarks (throughput, latency, matrix wall time), reported side by side.
    Bench(harness::cli::bench::Args),
    /// Compare the fake app-server with the real Codex, scenario by scenario.
    Fidelity(harness::cli::fidelity::Args),
    /// Install the pinned real Codex versions into the cache (as the real-Codex runners do).
    Provision(harness::cli::provision::Args),
    /// Serve as the fake app-server (same as the `fake-app-server` binary).
    #[command(hide = true, disable_help_flag = true)]
    FakeAppServer {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// The wire tap a driver runs as `codex` (behind the shim `harness::tap::install` writes).
    #[command(hide = true, disable_help_flag = true)]
    Tap {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::FakeAppServer { args } => fake_app_server::cli_main(args),
        Command::Tap { args } => harness::tap::relay::main(args),
        Command::Grade(args) => harness::cli::grade::main(args),
        Command::Launch(args) => harness::cli::launch::main(args),
        Command::Run(args) => harness::cli::run::main(args),
        Command::Env(cmd) => harness::cli::env::main(cmd),
        Command::Repro(args) => harness::cli::repro::main(args),
        Command::Bench(args) => harness::cli::bench::main(args),
        Command::Fidelity(args) => harness::cli::fidelity::main(args),
        Command::Provision(args) => harness::cli::provision::main(args),
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::CommandFactory;

    #[test]
    fn command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
