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
    /// Rebuild the reports (report.html, matrix.md, junit.xml, summary.json) from evidence
    /// folders, or merge several shards' folders into one report.
    Report(harness::cli::report::Args),
    /// Restricted environments: list and probe.
    #[command(subcommand)]
    Env(harness::cli::env::Command),
    /// Reproduce a known sandbox failure with one command.
    Repro(harness::cli::repro::Args),
    /// Benchmarks (throughput, latency, matrix wall time), reported side by side.
    Bench(harness::cli::bench::Args),
    /// Compare the fake app-server with the real Codex, scenario by scenario.
    Fidelity(harness::cli::fidelity::Args),
    /// Compare a published Codex with the pin: protocol schema, unknown-method list, matrix.
    Drift(harness::cli::drift::Args),
    /// Install the pinned real Codex versions into the cache (as the real-Codex runners do).
    Provision(harness::cli::provision::Args),
    /// Serve as the fake app-server (same as the `fake-app-server` binary).
    #[command(hide = true, disable_help_flag = true)]
    FakeAppServer {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
    /// The reference driver as a driver process (the task envelope and the events contract's
    /// environment; `codex` first on PATH).
    #[command(hide = true)]
    Drive,
    /// The wire tap a driver runs as `codex` (behind the shim `tap::install` writes).
    #[command(hide = true, disable_help_flag = true)]
    Tap {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<std::ffi::OsString>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The process's one SIGINT/SIGTERM handler (`harness::shutdown`) tears down what the
    // sandbox lists; the hidden subcommands are other programs (the fake, the tap, the driver)
    // with signal handling of their own.
    if !matches!(
        cli.command,
        Command::FakeAppServer { .. } | Command::Tap { .. } | Command::Drive
    ) {
        harness::shutdown::install_signal_handler();
    }
    match cli.command {
        Command::FakeAppServer { args } => fake_app_server::cli_main(args),
        Command::Tap { args } => tap::relay::main(args),
        Command::Drive => driver::reference::standalone::main(),
        Command::Grade(args) => harness::cli::grade::main(args),
        Command::Launch(args) => harness::cli::launch::main(args),
        Command::Run(args) => harness::cli::run::main(args),
        Command::Report(args) => harness::cli::report::main(args),
        Command::Env(cmd) => harness::cli::env::main(cmd),
        Command::Repro(args) => harness::cli::repro::main(args),
        Command::Bench(args) => harness::cli::bench::main(args),
        Command::Fidelity(args) => harness::cli::fidelity::main(args),
        Command::Provision(args) => harness::cli::provision::main(args),
        Command::Drift(args) => harness::cli::drift::main(args),
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
