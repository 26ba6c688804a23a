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
    /// Measure which bugs of a driver the cells notice: run them once as they are, then once
    /// per mutation operator rewriting what the driver sends.
    Mutate(harness::cli::mutate::Args),
    /// Compare the fake app-server with the real Codex, scenario by scenario.
    Fidelity(harness::cli::fidelity::Args),
    /// Compare a published Codex with the pin: protocol schema, unknown-method list, matrix.
    Drift(harness::cli::drift::Args),
    /// Generate client sessions over the protocol, play each on the fake and the real Codex,
    /// and shrink every divergence to a regression scenario.
    Explore(harness::cli::explore::Args),
    /// Which protocol cases exercise each server request and notification of a release, and
    /// how the fake answers each client request.
    Coverage(harness::cli::coverage::Args),
    /// Install the pinned real Codex versions into the cache (as the real-Codex runners do).
    Provision(harness::cli::provision::Args),
}

fn main() -> ExitCode {
    harness::cli::notices::show_on_stderr();
    // The hidden subcommands (the fake app-server, the wire tap, the reference driver as a
    // process) are other programs this binary also serves: dispatched before the command line
    // is parsed, with signal handling of their own.
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if let Some(code) = matrix::hidden::dispatch(&args) {
        return code;
    }
    let cli = Cli::parse();
    // The process's one SIGINT/SIGTERM handler: it stops a running matrix, or tears down what
    // the sandbox lists and exits (`harness::dispatch`).
    harness::dispatch::install_signal_handler();
    match cli.command {
        Command::Grade(args) => harness::cli::grade::main(args),
        Command::Launch(args) => harness::cli::launch::main(args),
        Command::Run(args) => harness::cli::run::main(args),
        Command::Report(args) => harness::cli::report::main(args),
        Command::Env(cmd) => harness::cli::env::main(cmd),
        Command::Repro(args) => harness::cli::repro::main(args),
        Command::Bench(args) => harness::cli::bench::main(args),
        Command::Mutate(args) => harness::cli::mutate::main(args),
        Command::Fidelity(args) => harness::cli::fidelity::main(args),
        Command::Provision(args) => harness::cli::provision::main(args),
        Command::Drift(args) => harness::cli::drift::main(args),
        Command::Explore(args) => harness::cli::explore::main(args),
        Command::Coverage(args) => harness::cli::coverage::main(args),
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
